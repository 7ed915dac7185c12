"""A store held by another process, used through it (finops.remote, the SQL sessions of finops.ingest.service).

Real processes on 127.0.0.1, no mocks: a ``serve-ingest`` process holds a store file; this test process
(or a CLI subprocess) opens it with ``store.connect``, which finds it locked and returns the holder's
connection. Values are checked against an in-memory DuckDB running the same SQL natively, and CLI output
against the same command on a copy of the store that no process holds.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from finops import remote, store
from finops.ingest import ingest_path
from helpers import ROOT, stop_process, wait_until

ENV = dict(os.environ, FINOPS_DEMO="0")


@contextlib.contextmanager
def holding(db: str, **env):
    """A ``serve-ingest`` process holding (and serving) ``db``; yields it once its sidecar names it."""
    proc = subprocess.Popen([sys.executable, "-m", "finops", "serve-ingest", "--db", db, "--tick", "0.3"],
                            cwd=ROOT, env=dict(ENV, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)

    def ready():
        if proc.poll() is not None:
            raise AssertionError("serve-ingest exited: " + proc.stdout.read())
        info = remote.holder_info(db)
        return info is not None and info["pid"] == proc.pid

    try:
        wait_until(ready, timeout=120, interval=0.1, message="serve-ingest's sidecar")
        yield proc
    finally:
        stop_process(proc)


def cli(*args: str, db: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finops", *args, "--db", db], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(a connection through the holder, the holder process) on a fresh store."""
    db = str(tmp_path_factory.mktemp("remote") / "held.duckdb")
    store.connect(db).close()
    with holding(db) as proc:
        con = store.connect(db)
        assert isinstance(con, remote.RemoteConnection) and con.holder_pid == proc.pid
        yield con, proc
        con.close()


# ---------------------------------------------------------------- types, both ways

VALUES = [
    ("int", 42, "BIGINT"), ("neg", -(2 ** 62), "BIGINT"), ("float", 1.25, "DOUBLE"), ("text", "o'brien; drop", "VARCHAR"),
    ("none", None, "VARCHAR"), ("yes", True, "BOOLEAN"), ("no", False, "BOOLEAN"),
    ("day", dt.date(2026, 11, 30), "DATE"), ("ts", dt.datetime(2026, 11, 30, 23, 59, 58, 123456), "TIMESTAMP"),
    ("tstz", dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))), "TIMESTAMPTZ"),
    ("time", dt.time(10, 11, 12, 5), "TIME"), ("money", decimal.Decimal("12345678.123456789012"), "DECIMAL(38,12)"),
    ("span", dt.timedelta(days=3, seconds=5, microseconds=7), "INTERVAL"), ("blob", b"\x00\xffab", "BLOB"),
    ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678"), "UUID"), ("list", [1, 2, 3], "BIGINT[]"),
]


def test_parameters_round_trip_as_native_duckdb_binds_them(served):
    con, _ = served
    native = duckdb.connect()
    native.execute("SET TimeZone = 'UTC'")
    query = "SELECT " + ", ".join(f"CAST(? AS {t}) AS {name}" for name, _, t in VALUES)
    params = [v for _, v, _ in VALUES]
    got = con.execute(query, params).fetchall()
    assert got == native.execute(query, params).fetchall()
    # and each value is itself again (a timestamp with zone: the same instant, in UTC)
    row = got[0]
    assert row[:9] == tuple(params[:9]) and row[9] == params[9] and row[9].utcoffset() == dt.timedelta(0)
    assert row[10:] == (dt.time(10, 11, 12, 5), decimal.Decimal("12345678.123456789012"),
                        dt.timedelta(days=3, seconds=5, microseconds=7), b"\x00\xffab",
                        uuid.UUID("12345678-1234-5678-1234-567812345678"), [1, 2, 3])
    assert [str(d[1]) for d in con.description] == [str(d[1]) for d in native.description]
    # a dict parameter (read_csv's types=) and named parameters
    assert con.execute("SELECT $a + $b", {"a": 2, "b": 3}).fetchall() == [(5,)]
    assert con.execute("SELECT ?::MAP(VARCHAR, VARCHAR)", [{"k": "v"}]).fetchall() == [({"k": "v"},)]
    assert con.execute("SELECT ?::DOUBLE", [float("nan")]).fetchone()[0] != con.execute("SELECT 1").fetchone()[0]
    assert np.isnan(con.execute("SELECT ?::DOUBLE", [float("nan")]).fetchone()[0])
    assert con.execute("SELECT ?, ?", [np.int64(7), np.float64(0.5)]).fetchall() == [(7, 0.5)]


RESULT_SQL = """SELECT sum(x)::HUGEINT AS h, 2::UHUGEINT AS u, (x / 3)::DECIMAL(38,12) AS money, x::TINYINT AS small,
  'a' || x AS text, TIMESTAMP '2026-01-01 10:00:00.123456' + INTERVAL (x) HOUR AS ts, DATE '2026-11-30' AS d,
  '{"a": 1}'::JSON AS j, [x, x + 1] AS l, {'k': x} AS s, NULL::VARCHAR AS nothing, 'nan'::DOUBLE AS nn,
  TIMESTAMPTZ '2026-01-01 10:00:00+00' AS tz
FROM range(5) t(x) GROUP BY x ORDER BY x"""


def test_results_read_back_as_the_holders_own_connection_gives_them(served):
    con, _ = served
    native = duckdb.connect()
    native.execute("SET TimeZone = 'UTC'")
    want = native.execute(RESULT_SQL).fetchall()
    got = con.execute(RESULT_SQL).fetchall()
    assert len(got) == 5 and [r[:11] for r in got] == [r[:11] for r in want]
    assert all(np.isnan(r[11]) for r in got) and [r[12] for r in got] == [r[12] for r in want]
    assert type(got[0][0]) is int and got[4][2] == decimal.Decimal("1.333333333333")
    assert [(d[0], str(d[1])) for d in con.description] == [(d[0], str(d[1])) for d in native.description]
    # fetchone / fetchmany walk the rows, fetchall takes the rest, as DuckDB's do
    con.execute("SELECT * FROM range(5)")
    assert con.fetchone() == (0,) and con.fetchmany(2) == [(1,), (2,)] and con.fetchall() == [(3,), (4,)]
    assert con.fetchone() is None
    frame_sql = "SELECT x, x * 1.5 AS y, 'a' || x AS t, TIMESTAMP '2026-01-01' + INTERVAL (x) DAY AS ts FROM range(4) t(x)"
    pd.testing.assert_frame_equal(con.execute(frame_sql).df(), native.execute(frame_sql).df())
    pd.testing.assert_frame_equal(con.execute(frame_sql).fetchdf(), native.execute(frame_sql).df())
    got_np, want_np = con.execute(frame_sql).fetchnumpy(), native.execute(frame_sql).fetchnumpy()
    assert list(got_np) == list(want_np) and all(np.array_equal(got_np[k], want_np[k]) for k in got_np)
    assert con.execute(frame_sql).to_arrow_table().equals(native.sql(frame_sql).to_arrow_table())
    # numbers only (the latency sketch's fetch): arrays straight from Arrow, masked where DuckDB's are
    num_sql = "SELECT x::BIGINT AS a, CASE WHEN x > 1 THEN x END AS b, x * 1.5 AS f, x::INTEGER AS i FROM range(5) t(x)"
    got_np, want_np = con.execute(num_sql).fetchnumpy(), native.sql(num_sql).fetchnumpy()
    assert list(got_np) == list(want_np)
    for k in want_np:
        assert type(got_np[k]) is type(want_np[k]) and got_np[k].dtype == want_np[k].dtype, k
        assert np.array_equal(np.ma.getmaskarray(got_np[k]), np.ma.getmaskarray(want_np[k]))
        assert np.ma.allequal(got_np[k], want_np[k])
    assert con.sql("SELECT 42").fetchall() == [(42,)]
    # a statement without rows: DuckDB's own answer
    assert con.execute("BEGIN").fetchall() == native.execute("BEGIN").fetchall()
    con.execute("ROLLBACK")
    con.executemany("SELECT ?", [[1], [2]])
    assert con.fetchall() == native.executemany("SELECT ?", [[1], [2]]).fetchall()


# ---------------------------------------------------------------- errors, sessions, transactions

def test_duckdb_errors_come_back_as_their_own_class(served):
    con, _ = served
    with pytest.raises(duckdb.CatalogException, match="nope"):
        con.execute("SELECT * FROM nope")
    with pytest.raises(duckdb.ParserException):
        con.execute("SELEC 1")
    with pytest.raises(duckdb.BinderException):
        con.execute("SELECT no_column FROM range(1)")
    cur = con.cursor()
    cur.execute("CREATE TEMP TABLE keyed (k INTEGER PRIMARY KEY)")
    cur.execute("INSERT INTO keyed VALUES (1)")
    with pytest.raises(duckdb.ConstraintException):
        cur.execute("INSERT INTO keyed VALUES (1)")
    with pytest.raises(duckdb.Error):             # what most callers catch
        con.execute("SELECT CAST('x' AS INTEGER)")
    assert con.execute("SELECT 1").fetchall() == [(1,)]      # the session goes on after an error
    with pytest.raises(duckdb.InvalidInputException):
        con.cursor().fetchall()                    # no statement yet: no result set
    cur.close()
    with pytest.raises(duckdb.ConnectionException):
        cur.execute("SELECT 1")


def test_each_cursor_is_a_session_of_its_own(served):
    con, _ = served
    a, b = con.cursor(), con.cursor()
    a.execute("CREATE TEMP TABLE mine AS SELECT 7 AS v")
    assert a.execute("SELECT v FROM mine").fetchall() == [(7,)]
    with pytest.raises(duckdb.CatalogException):
        b.execute("SELECT v FROM mine")
    frame = pd.DataFrame({"n": [1, 2, 3], "t": ["x", None, "o'brien"], "cost": [0.5, None, 1e-9],
                          "ts": pd.to_datetime(["2026-11-30 10:00", "2026-11-30 11:00", None])})
    a.register("frame_in", frame)
    assert a.execute("SELECT n, t, cost, ts FROM frame_in ORDER BY n").fetchall() == [
        (1, "x", 0.5, dt.datetime(2026, 11, 30, 10)), (2, None, None, dt.datetime(2026, 11, 30, 11)),
        (3, "o'brien", 1e-9, None)]
    native = duckdb.connect()
    native.register("frame_in", frame)          # the types DuckDB itself reads from the frame
    native.execute("SELECT n, t, cost, ts FROM frame_in ORDER BY n")
    assert [str(d[1]) for d in a.description] == [str(d[1]) for d in native.description]
    with pytest.raises(duckdb.CatalogException):
        b.execute("SELECT * FROM frame_in")
    a.unregister("frame_in")
    with pytest.raises(duckdb.CatalogException):
        a.execute("SELECT * FROM frame_in")
    a.close()
    b.close()


def test_transactions_are_per_session_and_serialised_with_the_holders_writes(served):
    con, _ = served
    writer, reader = con.cursor(), con.cursor()
    writer.execute("CREATE TABLE IF NOT EXISTS tx_probe (v INTEGER)")
    writer.execute("DELETE FROM tx_probe")
    with pytest.raises(RuntimeError):
        with store.transaction(writer):
            writer.execute("INSERT INTO tx_probe VALUES (1)")
            assert writer.execute("SELECT count(*) FROM tx_probe").fetchall() == [(1,)]
            assert reader.execute("SELECT count(*) FROM tx_probe").fetchall() == [(0,)]   # not committed
            raise RuntimeError("undo")
    assert reader.execute("SELECT count(*) FROM tx_probe").fetchall() == [(0,)]            # rolled back
    writer.begin()
    writer.execute("INSERT INTO tx_probe VALUES (2)")
    writer.commit()
    assert reader.execute("SELECT v FROM tx_probe").fetchall() == [(2,)]
    # a second session's BEGIN waits for the first's COMMIT (the holder's write lock), never interleaves
    writer.execute("BEGIN")
    order = []
    second = con.cursor()

    def other():
        second.execute("BEGIN")
        order.append("second began")
        second.execute("INSERT INTO tx_probe VALUES (4)")
        second.execute("COMMIT")

    t = threading.Thread(target=other)
    t.start()
    t.join(1.0)
    assert t.is_alive() and order == []                   # still waiting on the first transaction
    writer.execute("INSERT INTO tx_probe VALUES (3)")
    order.append("first committed")
    writer.execute("COMMIT")
    t.join(30)
    assert order == ["first committed", "second began"]
    assert reader.execute("SELECT v FROM tx_probe ORDER BY v").fetchall() == [(2,), (3,), (4,)]
    for c in (writer, reader, second):
        c.close()


def test_a_read_snapshot_sees_one_state_and_takes_no_turn_at_the_write_lock(served):
    """A page's reads (store.snapshot): a load committed meanwhile is not half seen, and neither waits on the
    other (a read-only transaction takes no turn at the holder's write lock, where a BEGIN does)."""
    con, _ = served
    writer, reader = con.cursor(), con.cursor()
    writer.execute("CREATE TABLE IF NOT EXISTS snap_probe (v INTEGER)")
    writer.execute("DELETE FROM snap_probe")
    writer.execute("INSERT INTO snap_probe VALUES (1)")
    seen = []
    with store.snapshot(reader):
        seen.append(reader.execute("SELECT count(*) FROM snap_probe").fetchall())
        done = threading.Event()

        def load():
            with store.transaction(writer):
                writer.execute("INSERT INTO snap_probe VALUES (2)")
            done.set()

        t = threading.Thread(target=load)
        t.start()
        t.join(60)
        assert done.is_set(), "the load waited on the open snapshot"
        seen.append(reader.execute("SELECT count(*) FROM snap_probe").fetchall())
        with pytest.raises(duckdb.TransactionException, match="read-only"):
            reader.execute("INSERT INTO snap_probe VALUES (3)")
    assert seen == [[(1,)], [(1,)]]
    assert reader.execute("SELECT v FROM snap_probe ORDER BY v").fetchall() == [(1,), (2,)]
    # and a snapshot opens while a load's transaction is open (it does not wait for its COMMIT)
    writer.execute("BEGIN")
    writer.execute("INSERT INTO snap_probe VALUES (4)")
    opened = threading.Event()

    def read():
        with store.snapshot(reader):
            opened.set()

    t = threading.Thread(target=read)
    t.start()
    t.join(60)
    writer.execute("COMMIT")
    assert opened.is_set(), "the snapshot waited for the load's COMMIT"
    for c in (writer, reader):
        c.close()


def test_a_read_snapshot_counts_as_no_write_and_leaves_its_session_clean(served):
    """A page's snapshot is two statements more per query: they are no write (the dashboard's cached data version
    stands), and the session serves the next cursor after it (a kept temporary table still keeps it apart)."""
    con, _ = served
    writes = con.writes
    plain = con.cursor()
    with store.snapshot(plain):
        assert plain.execute("SELECT 41 + 1").fetchall() == [(42,)]
    assert con.writes == writes
    session = plain._session[0]
    plain.close()
    assert session in con._t.pool                           # clean: the next cursor takes it
    kept = con.cursor()
    with store.snapshot(kept):
        kept.execute("CREATE TEMP TABLE snap_kept AS SELECT 1 AS v")
    session = kept._session[0]
    kept.close()
    assert session not in con._t.pool                       # its temporary table is its own


def test_a_page_query_reads_one_state_of_the_store_while_a_load_commits(tmp_path, monkeypatch):
    """views._shared.query runs a function on one snapshot: a load committed between two of its reads (the
    models, then their rows) is seen by neither, so the two never disagree (a dashboard under live loads
    raised KeyError on a model one read had and the other had not)."""
    from finops import access
    from views import _shared

    db = str(tmp_path / "page.duckdb")
    monkeypatch.setenv("FINOPS_DB", db)
    first, later = _jsonl(tmp_path / "a.jsonl", range(0, 20), "m-a"), _jsonl(tmp_path / "b.jsonl", range(20, 30), "m-b")
    with access.acting(access.LOCAL):
        ingest_path(_shared.connection().cursor(), first)

    def two_reads(con):
        models = [m for (m,) in con.execute("SELECT DISTINCT model FROM requests ORDER BY 1").fetchall()]
        with access.acting(access.LOCAL):           # another tab's load, committed between the two reads
            ingest_path(_shared.connection().cursor(), later)
        rows = dict(con.execute("SELECT model, count(*) FROM requests GROUP BY 1").fetchall())
        return {m: rows[m] for m in models} | {"unlisted": sorted(set(rows) - set(models))}

    assert _shared.query(two_reads) == {"m-a": 20, "unlisted": []}
    assert _shared.connection().execute("SELECT count(*) FROM requests").fetchall() == [(30,)]


def test_a_session_idle_past_the_timeout_is_closed_and_says_so(tmp_path):
    db = str(tmp_path / "idle.duckdb")
    store.connect(db).close()
    with holding(db, FINOPS_SQL_IDLE_S="1"):
        con = store.connect(db)
        stateless, in_tx = con.cursor(), con.cursor()
        assert stateless.execute("SELECT 1").fetchall() == [(1,)]
        in_tx.execute("BEGIN")
        in_tx.execute("CREATE TABLE half_done (v INTEGER)")
        wait_until(lambda: json.loads(con._t.request("GET", "/sql/ping")[1])["sessions"] <= 1, timeout=30,
                   interval=0.2, message="the idle sessions closed")
        assert stateless.execute("SELECT 2").fetchall() == [(2,)]      # nothing to lose: opened again
        with pytest.raises(store.StoreError, match="rolled back"):
            in_tx.execute("INSERT INTO half_done VALUES (1)")
        with pytest.raises(duckdb.CatalogException):                   # the transaction never committed
            con.execute("SELECT * FROM half_done")
        # the holder's own writes are not blocked by the abandoned transaction
        assert cli("ingest", str(ROOT / "tests" / "data" / "canonical_sample.csv"), db=db).returncode == 0


def test_the_holder_gone_is_a_sentence_and_the_store_opens_directly_again(tmp_path):
    db = str(tmp_path / "gone.duckdb")
    store.connect(db).close()
    with holding(db) as proc:
        con = store.connect(db)
        assert con.execute("SELECT count(*) FROM requests").fetchall() == [(0,)]
        proc.kill()                     # kill -9: no clean exit, the sidecar stays behind
        proc.wait()
    with pytest.raises(store.StoreError) as err:
        con.execute("SELECT count(*) FROM requests")
    text = str(err.value)
    assert f"The process {proc.pid} that served the store gone.duckdb has stopped" in text and "run the command" in text
    assert "Traceback" not in text and str(tmp_path) not in text
    assert con.lost == text and not con.ping()
    with pytest.raises(store.StoreError, match="has stopped"):
        con.cursor().execute("SELECT 1")
    direct = store.connect(db)          # the stale sidecar is ignored: the file is free
    assert not getattr(direct, "remote", False) and store.row_count(direct) == 0
    direct.close()


def test_a_lock_held_by_a_process_that_serves_nothing_is_the_sentence_as_before(tmp_path):
    db = str(tmp_path / "plain.duckdb")
    store.connect(db).close()
    code = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-c", code, db], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(store.StoreError, match=f"in use by process {proc.pid}"):
            store.connect(db)
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- loads from two processes at once

def _jsonl(path: Path, ids: range, model: str) -> Path:
    path.write_text("".join(json.dumps({"request_id": f"r{i}", "ts": f"2026-11-29T10:{i // 60 % 60:02d}:{i % 60:02d}Z",
                                        "model": model, "tenant": "lab", "input_tokens": 100 + i,
                                        "output_tokens": 10, "total_ms": 500.0, "status": "ok"}) + "\n"
                            for i in ids))
    return path


def test_two_loads_at_once_never_duplicate_a_row_or_a_batch_id(tmp_path):
    """One load in the holder (``finops ingest`` streams the file to it), one through this process's remote
    session (the loader here, its SQL there), started together, on overlapping request ids, five times."""
    db = str(tmp_path / "loads.duckdb")
    store.connect(db).close()
    with holding(db):
        con = store.connect(db)
        sent = set()
        for k in range(5):
            a = _jsonl(tmp_path / f"a{k}.jsonl", range(k * 300, k * 300 + 400), "m-a")
            b = _jsonl(tmp_path / f"b{k}.jsonl", range(k * 300 + 200, k * 300 + 600), "m-b")
            sent |= {f"r{i}" for i in range(k * 300, k * 300 + 600)}
            out = {}
            go = threading.Barrier(2)

            def in_holder(path=a, go=go, out=out):
                go.wait()
                out["holder"] = cli("ingest", str(path), "--json", db=db)

            t = threading.Thread(target=in_holder)
            t.start()
            go.wait()
            [mine] = ingest_path(con.cursor(), b)
            t.join(120)
            held = json.loads(out["holder"].stdout)
            assert out["holder"].returncode == 0 and held["rows_read"] == mine.rows_read == 400
            # between them every id of the two files once: the overlap went to whichever committed first
            assert held["rows_ingested"] + mine.rows_ingested + held["duplicates_skipped"] + \
                mine.duplicates_skipped == 800
        ids = con.execute("SELECT count(*), count(DISTINCT request_id) FROM requests").fetchall()[0]
        assert ids == (len(sent), len(sent))
        batches = [r[0] for r in con.execute("SELECT batch_id FROM batches ORDER BY batch_id").fetchall()]
        assert batches == list(range(1, len(batches) + 1)) and len(batches) == 10
        per_batch = con.execute("SELECT b.batch_id, b.rows_ingested, count(r.request_id) FROM batches b "
                                "LEFT JOIN requests r USING (batch_id) GROUP BY ALL ORDER BY 1").fetchall()
        assert all(n == stored for _, n, stored in per_batch)
        # the rollups agree with the rows: each batch written once
        assert con.execute("SELECT sum(requests) FROM rollup_hourly").fetchall() == [(len(sent),)]


def test_a_load_seen_across_processes_bumps_the_data_version(served, tmp_path):
    con, _ = served
    before = store.data_version(con)
    done = cli("ingest", str(_jsonl(tmp_path / "v.jsonl", range(5000, 5010), "m-v")), db=con._t.db_path)
    assert done.returncode == 0, done.stderr
    assert store.data_version(con) > before            # the dashboard's cache key moves: a page reads afresh
    assert con.execute("SELECT count(*) FROM requests WHERE model = 'm-v'").fetchall() == [(10,)]


def test_no_ingester_starts_in_a_process_whose_store_is_served(served):
    con, proc = served
    done = cli("serve-ingest", db=con._t.db_path)
    assert done.returncode == 1
    assert f"held by process {proc.pid}, which runs its own ingester" in done.stderr


# ---------------------------------------------------------------- the command line on a held store

COMMANDS = (
    ("report", "--by", "model,tenant", "--json"), ("report", "--reconcile"), ("alerts", "--json"), ("alerts",),
    ("diagnose", "--json"), ("latency", "--by", "model"), ("incidents",), ("prices", "list"),
    ("prices", "show", "gpt-4o-mini"), ("fleet", "show"),
)


def test_cli_commands_on_a_held_store_print_what_they_print_on_a_free_one(demo_db, tmp_path):
    free, held = tmp_path / "free.duckdb", tmp_path / "held.duckdb"
    shutil.copy(demo_db, free)          # the shared sample store is never touched: copies
    shutil.copy(demo_db, held)
    direct = {args: cli(*args, db=str(free)) for args in COMMANDS}
    with holding(str(held)):
        for args in COMMANDS:
            got = cli(*args, db=str(held))
            assert (got.returncode, got.stdout, got.stderr) == \
                (direct[args].returncode, direct[args].stdout, direct[args].stderr), args
            assert got.returncode == 0 and got.stdout.strip(), (args, got.stderr)
