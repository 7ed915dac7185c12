"""The rollups a load writes in one scan (store.insert_rollups: the finest rollup, then each table summed
from it) are the rows of each table's own definition over the stored raw rows, to the last digit."""
import duckdb
import pytest

from bench.fleet_store import generator_sql
from finops import store
from finops.ingest import ingest_path

N = 30_000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """30,000 generated requests over 2 days, with recorded costs on some, costs the source could not
    price on others (attrs.source_cost_usd), no prefill/decode timing on a third and no prompt_chars on a
    quarter (length_latency_daily's fused scan leaves them out of that length only)."""
    path = tmp_path_factory.mktemp("fused") / "fleet.parquet"
    gen = duckdb.connect()
    gen.execute(f"""COPY (SELECT * REPLACE (
            CASE WHEN hash(request_id) % 5 = 0 THEN round(input_tokens * 1e-6 + 0.000123, 9) END AS cost_usd,
            CASE WHEN hash(request_id) % 3 = 0 THEN NULL ELSE prefill_ms END AS prefill_ms,
            CASE WHEN hash(request_id) % 3 = 0 THEN NULL ELSE decode_ms END AS decode_ms,
            CASE WHEN hash(request_id) % 4 = 2 THEN NULL ELSE prompt_chars END AS prompt_chars),
          CASE WHEN hash(request_id) % 7 = 1 THEN '{{"source_cost_usd": 0}}' END AS attrs
        FROM ({generator_sql(N, days=2, seed=11)})) TO '{path}' (FORMAT parquet)""")
    gen.close()
    return path


def _same(con, table: str, definition: str) -> None:
    got = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
    want = con.execute(f"SELECT count(*) FROM ({definition})").fetchall()[0][0]
    assert got == want > 0
    for a, b in ((table, f"({definition})"), (f"({definition})", table)):
        assert con.execute(f"SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b})").fetchall() \
            == [(0,)]


def _load(fleet):
    con = store.connect(":memory:")
    [r] = ingest_path(con, fleet)
    assert (r.rows_ingested, r.rows_rejected) == (N, 0)
    return con


def test_one_scan_rollups_equal_each_tables_definition(fleet):
    con = _load(fleet)
    _same(con, "rollup_hourly", store.rollup_select_sql("requests"))
    _same(con, "rollup_cascade_hourly", store.derived_select_sql("rollup_cascade_hourly"))
    # and numbers counted straight from the raw rows
    raw = con.execute("SELECT count(*), sum(input_tokens), count(cost_usd), "
                      "sum(CAST(cost_usd AS DECIMAL(38,12))), count(*) FILTER (WHERE escalated), "
                      "count(*) FILTER (WHERE strategy = 'cascade' AND escalated IS NOT NULL) FROM requests").fetchall()
    rolled = con.execute("SELECT sum(requests), sum(input_tokens), sum(recorded_requests), sum(recorded_cost_usd), "
                         "sum(escalations), sum(cascade_requests) FROM rollup_hourly").fetchall()
    assert rolled == raw and raw[0][0] == N and raw[0][4] > 0 and raw[0][2] > 0
    subsets = con.execute("SELECT sum(requests) FILTER (WHERE is_escalated), sum(requests) FILTER (WHERE in_cascade) "
                          "FROM rollup_cascade_hourly").fetchall()
    assert subsets == [(raw[0][4], raw[0][5])]
    # busy time summed as whole microseconds: the same double as the measure over the raw rows
    busy = con.execute(f"SELECT {dict((n, e) for n, _, e in store.ROLLUP_MEASURES)['busy_ms']} FROM requests").fetchall()
    assert con.execute("SELECT sum(CAST(round(busy_ms * 1000) AS BIGINT)) / 1000.0 FROM rollup_hourly").fetchall() \
        == busy
    con.close()


def test_a_measure_with_no_exact_partial_takes_the_per_table_path(fleet, monkeypatch):
    """A measure :func:`store.measure_parts_sql` cannot split (say a max) makes the load write each rollup
    from the raw rows on its own: the same rows."""
    with pytest.raises(ValueError, match="no exact partial"):
        store.measure_parts_sql("max(total_ms)")
    assert store.measure_parts_sql("count(*)") == ("count(*)", "coalesce(sum(PARTIAL), 0)")
    assert store.measure_parts_sql("coalesce(sum(x), 0) / 1000.0") == ("coalesce(sum(x), 0)", "sum(PARTIAL) / 1000.0")

    def refuse(expr):
        raise ValueError("no exact partial")
    monkeypatch.setattr(store, "measure_parts_sql", refuse)
    con = _load(fleet)
    _same(con, "rollup_hourly", store.rollup_select_sql("requests"))
    _same(con, "rollup_cascade_hourly", store.derived_select_sql("rollup_cascade_hourly"))
    con.close()


def test_every_derived_table_is_its_definition(fleet):
    """The sketches and queue windows (written one table at a time) too, after the one-scan rollups; and
    length_latency_daily, written from one scan for its three length fields."""
    con = _load(fleet)
    for table, *_ in store.DERIVED:
        _same(con, table, store.derived_select_sql(table))
    # a length field some rows lack counts only the rows that carry it
    counts = dict(con.execute("SELECT length, sum(n) FROM length_latency_daily GROUP BY 1").fetchall())
    served = con.execute("SELECT count(total_ms), count(prompt_chars) FILTER (WHERE total_ms IS NOT NULL) "
                         "FROM requests WHERE NOT coalesce(cache_hit, false)").fetchall()[0]
    assert counts["input_tokens"] == served[0] > counts["prompt_chars"] == served[1] > 0
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_finops_fine%'").fetchall()[0][0]
    con.close()
