"""A small load into a large store (issue 18: loads at the limit; the live ingester's every tick). Prints ratios
against baselines measured in the same run.

A file of --rows rows (half of them ids the store holds already, half new: an export that overlaps the last
one) is loaded into a copy of a large store (bench/pages.py's pages_<N>.duckdb, or any store with --db), three
ways, each in a fresh process on its own copy:

  * ``finops``: ``finops ingest`` as it is: the stored ids among the file's are found first (the stored ids probe
    a hash table of the file's), the insert skips those;
  * ``previous``: the same load with the insert as it was before (2026-12-04): INSERT ... WHERE NOT EXISTS
    (SELECT 1 FROM requests r WHERE r.request_id = v.request_id) over every stored id, whose hash table DuckDB
    built on the stored side (the loader's ``_insert`` called without the file's ids);
  * ``bare``: a bare CREATE TABLE AS SELECT * of the file into the same store (what reading it costs).

Usage: python bench/incremental.py --db /work/bench-data/pages_100000000.duckdb [--rows 10000] [--repeat 2]
                                   [--workdir /tmp/finops-bench-incremental]
Times are printed, never asserted.
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from _runner import ROOT  # noqa: E402  (bench/ is on sys.path when run as a script)

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import duckdb
mode, src, db = sys.argv[1], sys.argv[2], sys.argv[3]
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
if mode in ("finops", "previous"):
    from finops import store
    from finops.ingest import ingest_path, loader
    if mode == "previous":
        insert = loader._insert
        loader._insert = lambda con, valid, batch, has_rows, **_: insert(con, valid, batch, has_rows)
    con = store.connect(db)
    t, c = time.perf_counter(), cpu()
    r = ingest_path(con, src)[0]
    n = r.rows_ingested
else:
    con = duckdb.connect(db)
    con.execute("SET memory_limit = '768MB'")      # the loader's own limit (finops.ingest.loader)
    t, c = time.perf_counter(), cpu()
    con.execute("CREATE TABLE bare_copy AS SELECT * FROM read_parquet(?)", [src])
    n = con.execute("SELECT count(*) FROM bare_copy").fetchall()[0][0]
con.close()
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"s": time.perf_counter() - t, "cpu_s": cpu() - c, "rows": n, "peak_mb": u.ru_maxrss / 1024}}))
"""


SAMPLE = r'''
import sys
import duckdb
db, out, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = duckdb.connect(db, read_only=True)
con.execute("SET enable_progress_bar = false")
half = rows // 2
# half stored rows as they are (an export overlapping the last), half new ids, in the store's own columns
con.execute(f"""COPY (
    SELECT * EXCLUDE (batch_id) FROM requests USING SAMPLE {half} ROWS (reservoir, 7)
    UNION ALL
    SELECT * EXCLUDE (batch_id) REPLACE ('incremental-' || CAST(uuid() AS VARCHAR) AS request_id)
    FROM requests USING SAMPLE {rows - half} ROWS (reservoir, 11)
) TO '{out}' (FORMAT parquet)""")
print(con.execute("SELECT count(*) FROM requests").fetchall()[0][0])
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True, help="a large store to load into (copied for each run, never written)")
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp/finops-bench-incremental")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"overlap_{a.rows}.parquet"
    # written by a child process: a forked child starts with its parent's peak RSS, so the driver reads no store
    import subprocess
    import sys
    half = a.rows // 2
    stored = int(subprocess.run([sys.executable, "-c", SAMPLE, a.db, str(src), str(a.rows)], capture_output=True,
                                text=True, check=True).stdout.strip().splitlines()[-1])
    print(f"== {a.rows:,} rows ({half:,} stored already, {a.rows - half:,} new) into a store of {stored:,} rows "
          f"({Path(a.db).name})")
    runs: dict[str, list[dict]] = {"finops": [], "previous": [], "bare": []}
    for _ in range(a.repeat):           # alternating, so that all see the same load on a shared machine
        for mode in runs:
            copy = work / f"{mode}.duckdb"
            shutil.copyfile(a.db, copy)
            runs[mode].append(_run(mode, src, copy))
    best = {m: min(rs, key=lambda r: r["s"]) for m, rs in runs.items()}
    for m, r in best.items():
        print(f"{m:10s} {r['s']:7.2f} s  CPU {r['cpu_s']:7.2f} s  peak {r['peak_mb']:6,.0f} MB  rows added {r['rows']:,}")
    f, prev, bare = best["finops"], best["previous"], best["bare"]
    print(f"ratio finops / previous = {f['s'] / prev['s']:.2f}x wall, {f['cpu_s'] / prev['cpu_s']:.2f}x CPU")
    print(f"ratio finops / bare read = {f['s'] / bare['s']:.2f}x wall, {f['cpu_s'] / bare['cpu_s']:.2f}x CPU")
    print(f"load average (1, 5, 15 min) after the runs: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for mode in runs:
        for p in (work / f"{mode}.duckdb", work / f"{mode}.duckdb.wal"):
            p.unlink(missing_ok=True)


def _run(mode: str, src: Path, copy: Path) -> dict:
    """One load in a fresh process on the store copy ``copy`` (``_runner.run_child`` would remove it first)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), mode, str(src), str(copy)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
