"""Loads started together in one process (two browser tabs of one dashboard are two threads on one store
connection) never duplicate a row or a batch id (issue 16). Each thread uses its own cursor, as a page does."""
from __future__ import annotations

import threading

import pandas as pd

from finops import store
from finops.ingest import ingest_path

N = 20_000


def _file(path, prefix: str):
    ts = pd.date_range("2026-11-02", periods=N, freq="s")
    pd.DataFrame({"request_id": [f"{prefix}{i}" for i in range(N)], "ts": ts, "model": "gpt-4o-mini",
                  "tenant": "t", "input_tokens": 100, "output_tokens": 10}).to_csv(path, index=False)
    return path


def _together(con, paths) -> list:
    barrier = threading.Barrier(len(paths))
    results, errors = [None] * len(paths), []

    def run(i, p):
        cur = con.cursor()
        barrier.wait()
        try:
            (results[i],) = ingest_path(cur, p)      # one result per file (a zip gives one per member)
        except Exception as exc:   # noqa: BLE001  reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(paths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_the_same_file_loaded_twice_at_once_is_stored_once(tmp_path):
    con = store.connect(str(tmp_path / "s.duckdb"))
    a = _file(tmp_path / "a.csv", "a")
    results = _together(con, [a, a])
    assert sorted(r.rows_ingested for r in results) == [0, N]
    assert con.execute("SELECT count(*), count(DISTINCT request_id) FROM requests").fetchone() == (N, N)
    assert con.execute("SELECT count(*) FROM batches").fetchone()[0] == 1
    assert con.execute("SELECT sum(requests) FROM rollup_hourly").fetchone()[0] == N


def test_two_files_loaded_at_once_get_their_own_batches(tmp_path):
    con = store.connect(str(tmp_path / "s.duckdb"))
    results = _together(con, [_file(tmp_path / "a.csv", "a"), _file(tmp_path / "b.csv", "b")])
    assert sorted(r.batch_id for r in results) == [1, 2]
    assert con.execute("SELECT count(*), count(DISTINCT request_id) FROM requests").fetchone() == (2 * N, 2 * N)
    per = dict(con.execute("SELECT batch_id, count(*) FROM requests GROUP BY 1").fetchall())
    assert per == {1: N, 2: N}
    assert con.execute("SELECT sum(requests) FROM rollup_hourly").fetchone()[0] == 2 * N
