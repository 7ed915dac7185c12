"""Screenshots of every page of the dashboard on the sample fleet, for docs/.

    python tests/tools/screenshots.py [--db PATH] [--out docs]

Builds the 14-day sample store (unless --db names one), starts ``streamlit run app.py`` on a free port of
127.0.0.1 with it, and saves ``<out>/<page>.png`` of each page in ``views.PAGES`` with Debian's chromium.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from browser import exceptions_on, wait_ready  # noqa: E402

from helpers import free_port  # noqa: E402
from views import PAGES  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db")
    ap.add_argument("--out", default=str(ROOT / "docs"))
    a = ap.parse_args()
    db = a.db
    if db is None:
        db = str(Path(tempfile.mkdtemp()) / "sample.duckdb")
        subprocess.run([sys.executable, "-m", "finops", "demo", "--db", db, "--days", "14"], cwd=ROOT, check=True)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless",
                             "true", "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--server.fileWatcherType", "none"],
                            cwd=ROOT, env=dict(os.environ, FINOPS_DB=db, FINOPS_DEMO="0"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        from playwright.sync_api import sync_playwright
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS, headless=True)
            pg = b.new_context(viewport={"width": 1440, "height": 1000}).new_page()
            for spec in PAGES:
                pg.goto(f"{url}/{'' if spec.slug == 'overview' else spec.slug}", wait_until="domcontentloaded")
                wait_ready(pg, timeout_ms=180_000)
                errors = exceptions_on(pg)
                out = Path(a.out) / f"{spec.slug}.png"
                pg.screenshot(path=str(out), full_page=True)
                print(f"{spec.slug}: {out}" + (f" EXCEPTIONS: {errors}" if errors else ""))
            b.close()
    finally:
        proc.terminate()
        proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
