"""The ingester's costs (issue 16 item 2), as ratios against a direct load measured in the same run.

  * ``ingest`` through the control endpoint of a ``serve-ingest`` process holding the store (the file streamed
    over HTTP on 127.0.0.1, then the same loader) against ``ingest_path`` on a store of this process;
  * a followed log caught up by one ingester tick (complete lines in chunks of at most 64 MiB, the offset
    stored after each batch) against ``ingest_path`` of the same file;
  * the time from a line appended to a followed log to its row being counted by a report (``serve-ingest`` at
    its default 2 s tick), against the 5 s in which a page must see it (the sidebar reruns a page every 3 s).

Each pair runs alternately on fresh stores (the machine is shared: the median ratio of the pairs is printed,
with the load average). Usage: python bench/ingester.py [--rows 200000] [--pairs 3] [--workdir /tmp/finops-bench-ing]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GEN_SQL = """COPY (SELECT 'r' || i AS request_id, TIMESTAMP '2026-11-01' + to_milliseconds(i * 120) AS ts,
  'tenant-' || (i % 12) AS tenant, ['llama-3.1-8b', 'gpt-4o-mini'][1 + (i % 2)::INT] AS model,
  (50 + i % 3000)::BIGINT AS input_tokens, (10 + i % 600)::BIGINT AS output_tokens, (i % 6000)::DOUBLE AS total_ms,
  'ok' AS status FROM range(?) t(i)) TO '{path}' (FORMAT json)"""


def _fresh(path: Path) -> str:
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    return str(path)


def _direct(src: Path, db: Path) -> float:
    from finops import store
    from finops.ingest import ingest_path
    con = store.connect(_fresh(db))
    t = time.perf_counter()
    ingest_path(con, src)
    s = time.perf_counter() - t
    con.close()
    return s


def _through_control(src: Path, db: Path) -> float:
    from finops.ingest import IngestOptions, service
    proc = subprocess.Popen([sys.executable, "-m", "finops", "serve-ingest", "--db", _fresh(db)], cwd=ROOT,
                            env=dict(os.environ, FINOPS_DEMO="0"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        while (client := service.control_for(db)) is None or client.pid != proc.pid:
            time.sleep(0.05)
        t = time.perf_counter()
        client.ingest(src, IngestOptions())
        return time.perf_counter() - t
    finally:
        proc.terminate()
        proc.wait()


def _followed(src: Path, db: Path) -> float:
    from finops import store
    from finops.ingest import service
    con = store.connect(_fresh(db))
    service.add_source(con, "follow", str(src))
    ing = service.Ingester(con, str(db), control=False)
    t = time.perf_counter()
    result = ing.tick()
    s = time.perf_counter() - t
    assert not result.errors, result.errors
    con.close()
    return s


def _append_to_visible(work: Path, samples: int) -> list[float]:
    import json

    from finops.ingest import service
    db, log = work / "live.duckdb", work / "live.jsonl"
    _fresh(db)
    log.write_text("")
    env = dict(os.environ, FINOPS_DEMO="0")
    subprocess.run([sys.executable, "-m", "finops", "serve-ingest", "--db", str(db), "--add-follow", str(log)],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    proc = subprocess.Popen([sys.executable, "-m", "finops", "serve-ingest", "--db", str(db)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lags = []
    try:
        while (client := service.control_for(db)) is None or client.pid != proc.pid:
            time.sleep(0.05)
        for i in range(samples):
            line = {"request_id": f"live{i}", "ts": "2026-11-29T10:00:00Z", "model": "m", "total_ms": 1.0}
            t = time.perf_counter()
            with open(log, "a") as fh:
                fh.write(json.dumps(line) + "\n")
            while sum(r["requests"] for r in json.loads(client.command("report", ["--json", "--by", "tenant"])[0])) \
                    <= i:
                time.sleep(0.05)
            lags.append(time.perf_counter() - t)
            time.sleep(0.37 * (i % 5))        # appends at different points of the tick
    finally:
        proc.terminate()
        proc.wait()
    return lags


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--workdir", default="/tmp/finops-bench-ing")
    a = ap.parse_args()
    import duckdb
    work = Path(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    src = work / "requests.jsonl"
    duckdb.sql(GEN_SQL.format(path=src), params=[a.rows])
    print(f"{a.rows:,} rows, {src.stat().st_size / 1e6:,.1f} MB of JSON Lines; load average "
          f"{os.getloadavg()[0]:.2f}")
    for name, fn in (("ingest through serve-ingest's control endpoint", _through_control),
                     ("a followed log caught up in one tick", _followed)):
        ratios = []
        for i in range(a.pairs):
            order = [("direct", _direct), (name, fn)] if i % 2 == 0 else [(name, fn), ("direct", _direct)]
            times = {label: f(src, work / f"{label[:6].replace(' ', '_')}.duckdb") for label, f in order}
            ratios.append(times[name] / times["direct"])
            print(f"  pair {i + 1}: direct {times['direct']:.2f} s, {name} {times[name]:.2f} s "
                  f"(x{ratios[-1]:.2f})", flush=True)
        print(f"{name}: median x{statistics.median(ratios):.2f} of a direct load; load average "
              f"{os.getloadavg()[0]:.2f}")
    lags = _append_to_visible(work, 10)
    print(f"append to visible (tick 2 s): median {statistics.median(lags):.2f} s, max {max(lags):.2f} s = "
          f"x{max(lags) / 5.0:.2f} of the 5 s a page may take; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
