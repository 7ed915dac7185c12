"""A store held by another process, used through it (finops.remote), against the file opened natively.

    python bench/store_remote.py [--store /work/scale-data/pages_10000000.duckdb] [--workdir /tmp/finops-remote-bench]
                                 [--pages overview,cost,...] [--repeat 2] [--load-rows 500000] [--loads 3]

Targets (issue 16): the pages' render times through the remote connection within 1.3x of native at 10M
rows; a load within 1.5x. Prints times and ratios (remote / native) with the load average; asserts nothing.

* The store is copied twice into the work directory (the source file is never opened: copies only, kept
  for the next run) and each copy opened once by this tree (untimed). ``native`` is opened by each
  measuring process itself; ``held`` is held by a ``serve-ingest`` process (the code the dashboard runs),
  so each measuring process finds it locked and gets the holder's connection.
* Pages: ``bench/pages.py``'s fresh-process AppTest render (cold: first render with app.py's sidebar,
  a freshly opened store; warm: best of three re-renders, Streamlit's caches answering), best of
  ``--repeat``, native and remote alternately so other work on the machine slows both alike.
* Loads: ``--loads`` files of ``--load-rows`` new canonical rows (rows of the store's own Parquet source
  under new request ids, one file per round, the same file into both stores), each loaded by
  ``ingest_path`` in a fresh process: natively, and through the remote connection (the loader here,
  its SQL in the holder, which reads the file); alternately, the order swapped each round.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pages import PAGES, _best, _run  # noqa: E402

LOAD_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
from finops import store
from finops.ingest import ingest_path
t, c = time.perf_counter(), time.process_time()
con = store.connect({db!r})
[r] = ingest_path(con, {path!r})
print(json.dumps({{"s": time.perf_counter() - t, "cpu": time.process_time() - c, "rows": r.rows_ingested,
                  "remote": bool(getattr(con, "remote", False))}}))
"""


def _load_avg() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _copy(src: Path, dst: Path) -> Path:
    if not dst.exists():
        print(f"copying {src} -> {dst}", flush=True)
        shutil.copy(src, dst)
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); from finops import store; "
                    f"store.connect({str(dst)!r}).close()"], check=True)
    return dst


def _hold(db: Path) -> subprocess.Popen:
    from finops import remote
    proc = subprocess.Popen([sys.executable, "-m", "finops", "serve-ingest", "--db", str(db)], cwd=ROOT,
                            env=dict(os.environ, FINOPS_DEMO="0"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while (remote.holder_info(str(db)) or {}).get("pid") != proc.pid:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("serve-ingest did not start on the held copy")
        time.sleep(0.2)
    return proc


def _load_files(source_parquet: Path, workdir: Path, rows: int, n: int) -> list[Path]:
    import duckdb
    out = []
    for k in range(n):
        path = workdir / f"load_{rows}_{k}.parquet"
        if not path.exists():
            duckdb.execute(f"COPY (SELECT * REPLACE (request_id || '-bench{k}' AS request_id) FROM read_parquet(?) "
                           f"LIMIT {int(rows)} OFFSET {int(k * rows)}) TO '{path}' (FORMAT parquet)",
                           [str(source_parquet)])
        out.append(path)
    return out


def _load(db: Path, path: Path) -> dict:
    code = LOAD_CHILD.format(root=str(ROOT), db=str(db), path=str(path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, FINOPS_DEMO="0"))
    if done.returncode:
        raise SystemExit(f"a load failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="/work/scale-data/pages_10000000.duckdb")
    ap.add_argument("--parquet", default="/work/scale-data/fleet_10000000.parquet",
                    help="the store's source rows, for the load files")
    ap.add_argument("--workdir", default="/tmp/finops-remote-bench")
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--load-rows", type=int, default=500_000)
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--skip-pages", action="store_true")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    native = _copy(Path(args.store), work / "native.duckdb")
    held = _copy(Path(args.store), work / "held.duckdb")
    files = _load_files(Path(args.parquet), work, args.load_rows, args.loads) if args.loads else []
    holder = _hold(held)
    try:
        print(f"holder: serve-ingest pid {holder.pid} on {held}; load average {_load_avg()}", flush=True)
        worst = 0.0
        if not args.skip_pages:
            print(f"\n{'page':<12} {'native cold':>11} {'remote cold':>11} {'ratio':>7} {'native warm':>11} "
                  f"{'remote warm':>11} {'ratio':>7} {'cpu ratio':>9}   (seconds; best of {args.repeat}; target: "
                  "cold ratio <= 1.3)", flush=True)
            for page in [p.strip() for p in args.pages.split(",") if p.strip()]:
                mine, base = [], []
                for i in range(args.repeat):
                    pair = [(base, native), (mine, held)]
                    for runs, db in (pair if i % 2 == 0 else pair[::-1]):
                        runs.append(_run(db, page))
                m, b = _best(mine), _best(base)
                rc, rw, rcpu = m["cold"] / b["cold"], m["warm"] / b["warm"], m["cpu"] / b["cpu"]
                worst = max(worst, rc)
                err = "; ".join(f"{w} error: {r['error']}" for w, r in (("native", b), ("remote", m)) if r["error"])
                print(f"{page:<12} {b['cold']:>11.2f} {m['cold']:>11.2f} {rc:>6.2f}x {b['warm']:>11.3f} "
                      f"{m['warm']:>11.3f} {rw:>6.2f}x {rcpu:>8.2f}x   {err}", flush=True)
            print(f"worst cold page ratio: {worst:.2f}x; load average {_load_avg()}", flush=True)
        if files:
            print(f"\n{'load':<28} {'native s':>9} {'remote s':>9} {'ratio':>7} {'rows':>9}   (target: ratio <= 1.5)",
                  flush=True)
            ratios = []
            for k, path in enumerate(files):
                order = [("native", native), ("remote", held)]
                got = {}
                for name, db in (order if k % 2 == 0 else order[::-1]):
                    got[name] = _load(db, path)
                assert got["remote"]["remote"] and not got["native"]["remote"]
                assert got["remote"]["rows"] == got["native"]["rows"]
                ratios.append(got["remote"]["s"] / got["native"]["s"])
                print(f"{path.name:<28} {got['native']['s']:>9.2f} {got['remote']['s']:>9.2f} {ratios[-1]:>6.2f}x "
                      f"{got['native']['rows']:>9,}", flush=True)
            print(f"median load ratio: {sorted(ratios)[len(ratios) // 2]:.2f}x; load average {_load_avg()}")
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=120)


if __name__ == "__main__":
    main()
