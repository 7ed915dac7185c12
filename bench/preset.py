"""The sidebar's period preset on a page (AppTest): the rerun it causes, this tree against a baseline revision.

    python bench/preset.py [--page overview] [--preset "last 7 days"] [--days 9] [--repeat 4]
                           [--baseline REV] [--workdir bench/out]

The browser test (tests/e2e/test_interactions.py) times the same interaction from the click to the end of the
rerun, on the sample store it builds (9 days); this is that rerun without the browser, so that a change can be
measured against its baseline alternately, run by run, on a busy machine. Each run is a fresh process: the
page's first render (untimed), then the preset picked and the rerun timed, wall and CPU (all threads), with the
time of each ``query()`` call of the rerun (the cached functions of ``views._shared``). Prints the medians and
this tree over the baseline, with the load average; asserts nothing.

The sample store is built once in the work directory (``sample_<days>d.duckdb``) and copied for every run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from pages import baseline_store, baseline_tree  # noqa: E402

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
os.environ["FINOPS_DB"] = {db!r}
os.environ["FINOPS_DEMO"] = "0"
import altair, duckdb, pandas, scipy.stats, streamlit  # noqa
from streamlit.testing.v1 import AppTest
import views._shared as shared
calls = []
_call = shared._call
def timed(*args, **kwargs):
    t = time.perf_counter()
    out = _call(*args, **kwargs)
    calls.append((args[2], time.perf_counter() - t))
    return out
shared._call = timed
at = AppTest.from_file({app!r}, default_timeout=1800)
at.run()
if {page!r} != "overview":
    at.switch_page("views/{page}.py")
    at.run()
calls.clear()
next(s for s in at.sidebar.selectbox if s.label == "Period").set_value({preset!r})
t, c = time.perf_counter(), time.process_time()
at.run()
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({{"wall": wall, "cpu": cpu, "error": [e.message for e in at.exception][:1],
                  "calls": [[k, s] for k, s in calls if s >= 0.01]}}))
"""


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def run(root: Path, db: Path, page: str, preset: str) -> dict:
    """One fresh process on a copy of ``db`` with the code under ``root``."""
    copy = db.with_name(f"{db.stem}.run.duckdb")
    shutil.copy(db, copy)
    try:
        code = CHILD.format(root=str(root), db=str(copy), app=str(root / "app.py"), page=page, preset=preset)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
        if out.returncode != 0:
            raise SystemExit(f"{root}: exit code {out.returncode}: {out.stderr[-800:]}")
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if got["error"]:
            raise SystemExit(f"{root}: the page failed: {got['error'][0]}")
        return got
    finally:
        for p in (copy, Path(f"{copy}.wal")):
            p.unlink(missing_ok=True)


def sample_store(workdir: Path, days: int) -> Path:
    db = workdir / f"sample_{days}d.duckdb"
    if not db.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "finops", "demo", "--db", str(db), "--days", str(days)], cwd=ROOT,
                       check=True, capture_output=True)
    return db


def _calls(runs: list[dict]) -> dict[str, float]:
    """Per cached function, its median time over the runs (0 in a run that did not call it)."""
    names = {k for r in runs for k, _ in r["calls"]}
    return {k: statistics.median([sum(s for n, s in r["calls"] if n == k) for r in runs]) for k in sorted(names)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--page", default="overview")
    ap.add_argument("--preset", default="last 7 days")
    ap.add_argument("--days", type=int, default=9, help="days of the sample store (the browser test's: 9)")
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--baseline", metavar="REV", help="also measure this git revision, alternately")
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args()
    db = sample_store(args.workdir, args.days)
    trees = [("this tree", ROOT, db)]
    if args.baseline:
        tree = baseline_tree(args.workdir, args.baseline)
        trees.insert(0, (f"baseline {args.baseline}", tree, baseline_store(db, tree)))
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in trees}
    print(f"{args.page}: period preset {args.preset!r} on the {args.days}-day sample; load average {_load()}")
    for i in range(args.repeat):
        for name, root, store_db in trees:
            r = run(root, store_db, args.page, args.preset)
            runs[name].append(r)
            print(f"  run {i + 1} {name:<16} wall {r['wall']:6.3f} s  cpu {r['cpu']:6.3f} s  load {_load()}")
    med = {name: (statistics.median(r["wall"] for r in rs), statistics.median(r["cpu"] for r in rs))
           for name, rs in runs.items()}
    for name, rs in runs.items():
        print(f"\n{name}: median wall {med[name][0]:.3f} s, cpu {med[name][1]:.3f} s; per cached function:")
        for k, s in _calls(rs).items():
            print(f"  {k:<50} {s:6.3f} s")
    if args.baseline:
        (w0, c0), (w1, c1) = med[trees[0][0]], med["this tree"]
        print(f"\nthis tree / baseline: wall {w1 / w0:.2f}, cpu {c1 / c0:.2f}; load average {_load()}")


if __name__ == "__main__":
    main()
