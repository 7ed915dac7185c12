"""Run one measured load in a fresh Python process, so that its peak RSS can be read."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_child(script: str, mode: str, src: Path, db: Path) -> dict:
    """``script`` is Python source with a ``{root}`` placeholder, reading argv mode, src, db and
    printing one JSON line last; the store file ``db`` is removed first."""
    for p in (db, Path(str(db) + ".wal")):
        p.unlink(missing_ok=True)
    out = subprocess.run([sys.executable, "-c", script.format(root=str(ROOT)), mode, str(src), str(db)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best_of(k: int, script: str, mode: str, src: Path, db: Path) -> dict:
    runs = [run_child(script, mode, src, db) for _ in range(k)]
    return min(runs, key=lambda r: r["s"])
