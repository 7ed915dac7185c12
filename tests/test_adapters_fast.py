"""The SQL readings of the Python-parsed formats store what the Python readings store.

Every variant is loaded twice into fresh stores: once as the loader reads it (the SQL reading where it
applies, which hands over to the Python reading on a line it would read another way) and once with the
SQL reading switched off. The stored rows (every column), the counts and the rejects (row, field, reason)
must be equal; each test also checks which reading ran, so a reading that silently fell back cannot pass
for the SQL one.
"""
import gzip
import json

import pytest

from finops import store
from finops.ingest import IngestOptions, ingest_path
from helpers import DATA


def _load(path, options):
    con = store.connect(":memory:")
    try:
        r = ingest_path(con, path, options)[0]
        cur = con.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        return (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped, r.rejects), rows
    finally:
        con.close()


def _counting(monkeypatch, module, name):
    """Wrap ``module.name`` to count its calls (the Python reading's row generator)."""
    calls = []
    real = getattr(module, name)

    def wrapped(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(module, name, wrapped)
    return calls


def both_ways(monkeypatch, path, options, module, switch, rows_fn):
    """(the loader's result, the Python reading's result, whether the first ran the Python reading)."""
    calls = _counting(monkeypatch, module, rows_fn)
    fast = _load(path, options)
    used_python = bool(calls)
    with monkeypatch.context() as m:
        m.setattr(module, switch, lambda *a, **k: False)
        slow = _load(path, options)
    assert calls, "the Python reading never ran"
    return fast, slow, used_python


# ---------------------------------------------------------------- gateway-log

GATEWAY_PLAIN = "\n".join([
    "INFO:     Started server process [4242]",
    "",
    "2026-11-29 10:00:00,123 [ROUTE] target=slow len=63 route_ms=0.01 queue_ms=812.3 service_ms=4000.5 "
    "total_ms=4812.812 cost=8.0 inject=True",
    "2026-11-29T10:00:01.5 [ROUTE] target=fast len=7 route_ms=0.00 queue_ms=0.0 service_ms=12.0 total_ms=12.0",
    "  2026-11-29 10:00:02.1234567\t[ROUTE]  target=fast len=9 total_ms=1000 note=\"a\\b\" x=a=b  ",
    "2026-11-29 10:00:03 [ROUTE] target=slow len=3 queue_ms=abc total_ms=-5.5 cost=1.0",
    "2026-11-29 10:00:04,000 [ROUTE] target=fast len=2",                      # no total_ms: logged time kept
    "garbage [ROUTE] target=fast",                                          # not a [ROUTE] line: ts missing
    "2026-11-29 10:00:05,999 [ROUTE] target=fast len=2 total_ms=0.001 word",
    "2026-11-29 10:00:06,000 [ROUTE] target=fast len=2 total_ms=2000",
    "2026-11-29 10:00:06,000 [ROUTE] target=fast len=2 total_ms=2000",      # the same line again: numbered
    "INFO:     Shutting down",
]) + "\n"

# each turns the SQL reading over to the Python one (a line it would read another way)
GATEWAY_HANDED_OVER = {
    "key twice": "2026-11-29 10:00:00,000 [ROUTE] target=fast target=slow total_ms=1.0\n",
    "total_ms Python reads another way": "2026-11-29 10:00:00,000 [ROUTE] target=fast total_ms=1e3\n",
    "total_ms no number": "2026-11-29 10:00:00,000 [ROUTE] target=fast total_ms=abc\n",
    "time no date": "2026-13-45 10:00:00,000 [ROUTE] target=fast total_ms=1.0\n",
    "pair inside a word": "2026-11-29 10:00:00,000 [ROUTE] target=fast a-b=c total_ms=1.0\n",
    "reserved key": "2026-11-29 10:00:00,000 [ROUTE] target=fast logged_at=x total_ms=1.0\n",
    "tab between pairs": "2026-11-29 10:00:00,000 [ROUTE] target=fast\ttotal_ms=1.0\n",
}
# files the SQL reading leaves to the Python one from the start (bytes Python reads another way)
GATEWAY_NOT_PLAIN = {
    "carriage returns": b"2026-11-29 10:00:00,000 [ROUTE] target=fast total_ms=1.0\r\n"
                        b"2026-11-29 10:00:01,000 [ROUTE] target=slow total_ms=2.0\r\n",
    "UTF-8 beyond ASCII": "2026-11-29 10:00:00,000 [ROUTE] target=fast note=caf\u00e9 total_ms=1.0\n".encode(),
}


def _gateway(monkeypatch, path):
    from finops.ingest import formats
    return both_ways(monkeypatch, path, IngestOptions(format="gateway-log"), formats, "_plain_text", "_gateway_rows")


@pytest.mark.parametrize("name", ["seed_gateway_injected.log", "seed_gateway_verbatim.log"])
def test_gateway_fixtures_read_in_sql_store_what_python_stores(monkeypatch, name):
    fast, slow, used_python = _gateway(monkeypatch, DATA / name)
    assert not used_python
    assert fast == slow
    assert fast[0][1] == 8


@pytest.mark.parametrize("compress", [False, True])
def test_gateway_variants_read_in_sql_store_what_python_stores(monkeypatch, tmp_path, compress):
    path = tmp_path / ("plain.log.gz" if compress else "plain.log")
    path.write_bytes(gzip.compress(GATEWAY_PLAIN.encode()) if compress else GATEWAY_PLAIN.encode())
    fast, slow, used_python = _gateway(monkeypatch, path)
    assert not used_python
    assert fast == slow
    (read, ingested, rejected, duplicates, rejects), rows = fast
    assert (read, ingested, rejected, duplicates) == (9, 7, 2, 0)
    assert [(r["row"], r["field"]) for r in rejects] == [(6, "queue_ms"), (8, "ts")]
    by_line = {json.loads(r["attrs"] or "{}").get("logged_at"): r for r in rows}
    # arrival = the logged time less total_ms (10:00:00.123 - 4812.812 ms)
    first = by_line["2026-11-29 10:00:00,123"]
    assert str(first["ts"]) == "2026-11-29 09:59:55.310188"
    assert json.loads(first["attrs"]) == {"relative_cost": "8.0", "slow_inject": "True",
                                          "logged_at": "2026-11-29 10:00:00,123"}
    assert str(by_line["2026-11-29 10:00:04,000"]["ts"]) == "2026-11-29 10:00:04"
    assert json.loads(by_line["2026-11-29 10:00:02.1234567"]["attrs"])["note"] == '"a\\b"'


@pytest.mark.parametrize("name", sorted(GATEWAY_HANDED_OVER))
def test_gateway_lines_the_sql_reading_hands_to_python(monkeypatch, tmp_path, name):
    path = tmp_path / "odd.log"
    path.write_text(GATEWAY_PLAIN + GATEWAY_HANDED_OVER[name])
    fast, slow, used_python = _gateway(monkeypatch, path)
    assert used_python
    assert fast == slow


@pytest.mark.parametrize("name", sorted(GATEWAY_NOT_PLAIN))
def test_gateway_files_left_to_python(monkeypatch, tmp_path, name):
    from finops.ingest import formats
    from finops.ingest.base import probe
    path = tmp_path / "odd.log"
    path.write_bytes(GATEWAY_NOT_PLAIN[name])
    assert not formats._plain_text(probe(path))
    fast, slow, used_python = _gateway(monkeypatch, path)
    assert used_python and fast == slow
