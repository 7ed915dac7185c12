"""Issue 18's Spark acceptance: on a 200k-row dataset in 3 date partitions, Spark (local[2]) writes every table
the embedded loader writes at load time (the rollup and each of store.DERIVED) exactly, every page renders on a
store of them alone, and a narrow slice of the dataset read on demand answers as the embedded store."""
from __future__ import annotations

import bisect
import dataclasses
import json
import math
import random
import re
import shutil
from datetime import datetime

import duckdb
import pandas as pd
import pytest

from finops import store
from finops.cli import main
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.scale import slices
from finops.scale import spark as scale_spark
from helpers import run_page, texts

pyspark = pytest.importorskip("pyspark")

ROWS = 200_000
ROLLUP_KEYS = ["hour", "model", "tenant", "route", "sla_tier", "status", "provider", "service_tier", "input_band",
               "batch_id"]
SKETCH_KEYS = ["hour", "model", "batch_id", "field", "k"]
#: the only columns compared with a tolerance (relative): sums of doubles, which DuckDB and Spark add in
#: an order of their own (each engine's threads), so the last bits differ. Every other column of every
#: derived table is compared exactly: counts, tokens, the recorded cost (an exact DECIMAL(38,12) sum), busy
#: time (whole microseconds), sketch buckets, min and max. A new table's double sum fails here until named
#: in finops.scale.spark.DOUBLE_SUMS (which bench/spark_rollup.py reads too).
APPROX_COLUMNS = scale_spark.DOUBLE_SUMS


def dataset_sql() -> str:
    """200k canonical rows over 3 days, pseudo-random from hash(i): every column the rollups read, nulls,
    cache hits, recorded and unpriced costs (a JSON null among them), five service-tier spellings, prompts
    across the context bands, and 1 row in 50 with a latency on a sketch bucket edge (gamma^k, computed
    two ways, and the doubles either side of it)."""
    return f"""
WITH r AS (SELECT i, CAST(hash(i) >> 1 AS BIGINT) AS h, CAST(hash(i * 7 + 3) >> 1 AS BIGINT) AS h2 FROM range({ROWS}) t(i)),
e AS (SELECT *, (h2 % 600)::INT - 100 AS ek, CASE (h2 // 600) % 3 WHEN 0 THEN -1 WHEN 1 THEN 0 ELSE 1 END AS side FROM r),
edge AS (SELECT *, CASE WHEN (h2 // 1800) % 2 = 0 THEN exp(ek * ln(1.02)) ELSE pow(1.02, ek) END AS ev FROM e)
SELECT 'r' || i AS request_id,
       TIMESTAMP '2026-03-01' + to_microseconds(CAST(i * 259200000000 // {ROWS} AS BIGINT)) AS ts,
       CASE WHEN h % 17 = 0 THEN NULL ELSE 'tenant-' || (h % 5) END AS tenant,
       ['premium', 'standard', NULL][1 + (h % 5) % 3] AS sla_tier,
       ['gpt-4o', 'claude-3-5-sonnet', 'llama-70b', 'o''brien-model'][1 + (h // 7) % 4] AS model,
       ['fast', 'slow', NULL][1 + (h // 11) % 3] AS route, ['cost', 'cascade'][1 + (h // 13) % 2] AS strategy,
       CASE WHEN h % 23 = 0 THEN true WHEN h % 29 = 0 THEN NULL ELSE false END AS cache_hit,
       CASE WHEN (h // 13) % 2 = 1 THEN (h // 19) % 4 = 0 END AS escalated,
       ['edge', 'cloud'][1 + (h // 31) % 2] AS site, 'rep-' || (h // 37) % 3 AS replica,
       CASE WHEN h % 41 = 0 THEN NULL WHEN h % 20 = 0 THEN (h // 43) % 300000 + 1700
            ELSE (h // 43) % 30000 + 1700 END AS input_tokens,
       CASE WHEN h % 47 = 0 THEN NULL WHEN h % 11 = 0 THEN (h // 53) % 4000 + 300 ELSE (h // 53) % 4000 END AS output_tokens,
       CASE WHEN h % 3 = 0 THEN (h // 59) % 1000 END AS cached_input_tokens,
       CASE WHEN h % 5 = 0 THEN (h // 61) % 500 END AS cache_write_tokens,
       CASE WHEN h % 7 = 0 THEN (h // 67) % 200 END AS cache_write_1h_tokens,
       CASE WHEN h % 11 = 0 THEN (h // 71) % 300 END AS reasoning_tokens,
       CAST((h // 73) % 20000 AS INTEGER) AS prompt_chars,
       ((h // 79) % 1000) / 97.0 AS route_ms,
       CASE WHEN h % 13 = 0 THEN NULL WHEN h % 89 = 0 THEN 0.0 ELSE ((h // 83) % 100000) / 7.0 END AS queue_ms,
       CASE WHEN h % 19 = 0 THEN ((h // 97) % 50000) / 3.0 END AS prefill_ms,
       CASE WHEN h % 19 = 0 THEN ((h // 101) % 50000) / 11.0 END AS decode_ms,
       CASE WHEN h % 4 = 0 THEN ((h // 103) % 300000) / 13.0 END AS service_ms,
       CASE WHEN h % 31 = 0 THEN NULL ELSE ((h // 107) % 9000) / 3.0 + 1 END AS ttft_ms,
       CASE WHEN h % 37 = 0 THEN NULL WHEN h % 50 = 1 THEN
                 CASE side WHEN 0 THEN ev ELSE nextafter(ev, CASE side WHEN 1 THEN 1e300 ELSE 0.0 END) END
            ELSE ((h // 109) % 3000000) / 1.7 + 1 END AS total_ms,
       ['ok', 'ok', 'ok', 'error', 'timeout', NULL][1 + (h // 113) % 6] AS status,
       CASE WHEN (h // 113) % 6 IN (3, 4) THEN 'upstream' END AS error_type,
       CASE WHEN h % 3 = 1 THEN ((h // 127) % 10000000) / 3.0e7 END AS cost_usd,
       CASE WHEN h % 7 = 2 THEN ((h // 131) % 1000) / 1000.0 END AS confidence, NULL::DOUBLE AS quality,
       CASE WHEN h % 3 = 2 AND h % 9 = 2 THEN '{{"source_cost_usd": 0.0}}'::JSON
            WHEN h % 3 = 2 AND h % 9 = 5 THEN '{{"source_cost_usd": null, "x": 1}}'::JSON
            WHEN h % 10 = 3 THEN '{{"x": 2}}'::JSON END AS attrs,
       ['openai', 'anthropic', NULL, 'openai'][1 + (h // 7) % 4] AS provider,
       [NULL, 'standard', ' Batch ', 'flex', 'on_demand', 'priority'][1 + (h // 139) % 6] AS service_tier,
       CAST(ts AS DATE) AS date
FROM edge"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(embedded store, rollup-only store, Spark output dir, dataset dir, the Spark session, its path)."""
    tmp = tmp_path_factory.mktemp("scale")
    dataset, out = tmp / "dataset", tmp / "spark_out"
    gen = duckdb.connect()
    gen.execute("SET TimeZone = 'UTC'")
    gen.execute(f"COPY ({dataset_sql()}) TO ? (FORMAT parquet, PARTITION_BY (date))", [str(dataset)])
    embedded = store.connect(tmp / "embedded.duckdb")
    frame = gen.execute("SELECT * EXCLUDE (date) FROM read_parquet(?, hive_partitioning = true)",
                        [str(dataset / "*" / "*.parquet")]).df()
    result = ingest_frame(embedded, frame, "dataset")
    assert (result.rows_ingested, result.rows_rejected) == (ROWS, 0)
    spark = scale_spark.session("local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                  "spark.default.parallelism": "2"})
    assert main(["rollup", "--engine", "spark", "--master", "local[2]", "--input", str(dataset),
                 "--output", str(out)]) == 0
    attached_path = tmp / "attached.duckdb"
    assert main(["attach-rollups", str(out), "--dataset", str(dataset), "--db", str(attached_path)]) == 0
    attached = store.connect(attached_path)
    yield embedded, attached, out, dataset, spark, attached_path
    spark.stop()


def _columns(con, table: str) -> list[tuple[str, str]]:
    return [tuple(r) for r in con.execute("SELECT name, type FROM pragma_table_info(?) ORDER BY cid",
                                          [table]).fetchall()]


def _table(con, table: str, keys: list[str] | None = None) -> pd.DataFrame:
    keys = keys or [n for n, _ in _columns(con, table) if (table, n) not in APPROX_COLUMNS]
    return con.execute(f"SELECT * FROM {table}").df().sort_values(keys).reset_index(drop=True)


def test_the_dataset_is_three_date_partitions_of_200k_rows(built):
    _, _, _, dataset, _, _ = built
    assert sorted(p.name for p in dataset.iterdir()) == ["date=2026-03-01", "date=2026-03-02", "date=2026-03-03"]


def test_the_job_writes_the_rollup_and_every_derived_table():
    assert [t for t, _ in scale_spark.tables()] == ["rollup_hourly", *(t for t, *_ in store.DERIVED)]
    assert {"latency_hourly", "latency_sla_hourly", "queue_15min", "rollup_cascade_hourly", "slowest_hourly",
            "inservice_minute", "decode_rate_minute", "coverage_hourly"} <= {t for t, _ in scale_spark.tables()}


@pytest.mark.parametrize("table", [t for t, _ in scale_spark.tables()])
def test_each_table_sparks_equal_the_embedded_loaders(built, table):
    """Bucket for bucket, value for value: exact but for APPROX_COLUMNS (batch ids are each store's: 1 both)."""
    embedded, attached, *_ = built
    assert _columns(embedded, table) == _columns(attached, table)
    a, b = _table(embedded, table), _table(attached, table)
    assert len(a) > 1_000, table
    approx = {c: rtol for (t, c), rtol in APPROX_COLUMNS.items() if t == table}
    pd.testing.assert_frame_equal(a.drop(columns=list(approx)), b.drop(columns=list(approx)), check_exact=True)
    for column, rtol in approx.items():
        assert a[column].notna().sum() > 1_000
        pd.testing.assert_series_equal(a[column], b[column], check_exact=False, rtol=rtol, atol=0)


def test_spark_rollups_hold_the_datasets_requests(built):
    embedded, attached, *_ = built
    totals = attached.execute("SELECT sum(requests), sum(recorded_requests), sum(source_unpriced_requests), "
                              "count(DISTINCT service_tier) FROM rollup_hourly").fetchall()[0]
    # 200k requests; cost on h % 3 = 1; attrs with the key (0.0 and JSON null) on h % 9 in (2, 5);
    # tiers '', batch, flex, priority
    assert totals[0] == ROWS and 66_000 < totals[1] < 67_400 and 43_000 < totals[2] < 46_000 and totals[3] == 4
    assert attached.execute("SELECT sum(requests) FROM rollup_hourly WHERE tenant = 'default'").fetchall()[0][0] \
        == embedded.execute("SELECT count(*) FROM requests WHERE tenant = 'default'").fetchall()[0][0] > 10_000
    # the queue windows count the served requests with a queue_ms, in 15 minutes: 3 days x 96 windows
    assert attached.execute("SELECT sum(requests), count(DISTINCT window_start) FROM queue_15min").fetchall()[0] \
        == (embedded.execute("SELECT count(*) FROM requests WHERE NOT coalesce(cache_hit, false) AND queue_ms "
                             "IS NOT NULL").fetchall()[0][0], 3 * 96)


def test_what_reads_the_derived_tables_answers_on_the_rollup_only_store_as_on_the_embedded(built):
    """The readers of the derived tables (the P99-over-SLA alert's windows, the queue-length alert, the cascade
    summary, the Latency page's field coverage, slowest requests and decode speed) give the embedded store's
    answer on the attached store, which has no raw row to fall back on."""
    from finops.latency import stats
    from finops.ops import alerts
    from finops.spend import routing

    embedded, attached, *_ = built
    f = Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 4))
    for con in (embedded, attached):
        assert all(store.derived_ready(con, t) for t, *_ in store.DERIVED)
    for window in ("hour", "day"):
        want, got = (alerts.sla_windows(con, f, window, "total_ms") for con in (embedded, attached))
        assert len(want) == {"hour": 72, "day": 3}[window] * 32 and want.attrs["max_rel_error"] == store.SKETCH_ALPHA
        pd.testing.assert_frame_equal(want, got, check_exact=True)
    want, got = (alerts.queue_length(con, f, "hour") for con in (embedded, attached))
    assert len(want) == 4 * 72
    pd.testing.assert_frame_equal(want, got, check_exact=False, rtol=1e-12)
    want, got = (routing.cascade_summary(con, f) for con in (embedded, attached))
    assert want.escalations > 1_000 and want.rejected_attempts_usd > 0
    for name in ("cascade_rows", "escalations", "escalation_rate", "rejected_attempts_usd", "cascade_spend_usd"):
        assert getattr(want, name) == getattr(got, name), name
    for name in ("by_model", "over_time"):
        pd.testing.assert_frame_equal(getattr(want, name), getattr(got, name), check_exact=True)
    # the Latency page's field coverage, slowest requests and decode speed against concurrency
    want, got = (stats.coverage(con, f) for con in (embedded, attached))
    assert want == got and 0 < want["queue_ms"] < want["total_ms"] < ROWS
    want, got = (stats.slowest(con, f, n=store.SLOWEST_KEPT) for con in (embedded, attached))
    assert len(want) == store.SLOWEST_KEPT
    pd.testing.assert_frame_equal(want, got, check_exact=True)
    want, got = (stats.decode_vs_concurrency(con, f) for con in (embedded, attached))
    assert len(want) > 10 and want.attrs == got.attrs
    pd.testing.assert_frame_equal(want, got, check_exact=True)


def test_the_alerts_on_the_rollup_only_store_are_the_embedded_stores_and_what_it_cannot_judge_is_named(built,
                                                                                                       capsys):
    """The default rules read the rollups, the SLA sketch and the queue windows over whole hours: the attached
    store fires exactly the embedded store's alerts. A 15-minute P99 (single requests) or a period cut inside
    an hour is not judged there, and the store says so instead of "no alert"."""
    from finops.ops import alerts

    embedded, attached, *_, attached_path = built
    f = Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 4))
    now = datetime(2026, 3, 5)
    want, got = (alerts.open_alerts(con, f, now=now) for con in (embedded, attached))
    assert len(want) > 0 and {"error_rate", "p99_over_sla"} <= set(want["rule"]), want["rule"].value_counts()
    # the values in their last bits only: a sum of doubles in another order (scale_spark.DOUBLE_SUMS)
    pd.testing.assert_frame_equal(want, got, check_exact=False, rtol=1e-12)
    assert alerts.unjudged(attached, f).query("reason == 'raw_rows'").empty
    quarter = [dataclasses.replace(r, window="15min", min_requests=5) for r in alerts.DEFAULT_RULES
               if r.name == "p99_over_sla"]
    try:
        for con in (embedded, attached):
            alerts.save_rules(con, quarter)
        want, got = (alerts.open_alerts(con, f, now=now) for con in (embedded, attached))
        assert (want["rule"] == "p99_over_sla").any()
        kept = want[want["rule"] != "p99_over_sla"].reset_index(drop=True)
        pd.testing.assert_frame_equal(kept, got, check_exact=False, rtol=1e-12)
        blind = alerts.unjudged(attached, f).set_index("rule")
        assert blind.loc["p99_over_sla", "reason"] == "raw_rows"
        assert "15-minute P99 needs single requests" in blind.loc["p99_over_sla", "why"]
        assert alerts.unjudged(embedded, f).query("reason == 'raw_rows'").empty
        assert main(["alerts", "--db", str(attached_path), "--since", "2026-03-01", "--until", "2026-03-04"]) == 0
        assert "not judged: P99 latency above 1.5 x the tier's SLA: its 15-minute P99 needs single requests" \
            in capsys.readouterr().out
    finally:
        for con in (embedded, attached):
            alerts.save_rules(con, [])
    # a period that starts inside a quarter hour: no request rule can be judged from hourly tables
    half = Filters(since=datetime(2026, 3, 1, 0, 20), until=datetime(2026, 3, 4))
    assert set(alerts.open_alerts(attached, half, now=now)["rule"]) <= set(alerts.FLEET_RULES)
    blind = alerts.unjudged(attached, half)
    assert set(blind.query("reason == 'raw_rows'")["rule"]) == {r.name for r in alerts.DEFAULT_RULES
                                                                if r.name not in alerts.FLEET_RULES}
    assert blind["why"].str.contains("does not start and end on the").all()


def test_the_readiness_checklist_reads_the_attached_rollups_as_the_loaded_rows(built):
    """The checks count what the load writes (rollups, field counts): the same evidence on both stores, not
    "the store holds no requests" on the attached one."""
    from finops.ops import readiness

    embedded, attached, *_ = built
    want, got = (readiness.checklist(con).set_index("id")[["status", "evidence"]] for con in (embedded, attached))
    pd.testing.assert_frame_equal(want, got)
    assert not want["evidence"].str.contains("holds no requests").any()
    assert want["evidence"].str.contains("from the logs: ").any()


def test_capacity_sizes_from_the_attached_rollups_busy_time_and_forecasts_as_the_embedded_store(built):
    """With no raw row, a self-hosted model's mean service time is its busiest hour's busy time over the requests
    served (said in the note); the forecast reads the rollups' hourly QPS, the same on both stores."""
    from finops.capacity import observed, plans

    embedded, attached, *_ = built
    f = Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 4))
    # gpt-4o as a self-hosted model of the price book for this test (the rollups carry no replica column: the
    # attached store sizes self-hosted models only)
    cols = "kind, replicas, slots_per_replica, gpus_per_replica, gpu_hour_usd"
    before = [con.execute(f"SELECT {cols} FROM prices WHERE model = 'gpt-4o'").fetchall() for con in (embedded, attached)]
    assert len(before[0]) == 1 and before[0] == before[1]
    try:
        for con in (embedded, attached):
            con.execute("UPDATE prices SET kind = 'self_hosted', replicas = 2, slots_per_replica = 4, "
                        "gpus_per_replica = 1, gpu_hour_usd = 2.5 WHERE model = 'gpt-4o'")
        want, got = (observed.observed_load(con, f).set_index("model") for con in (embedded, attached))
    finally:
        for con in (embedded, attached):
            con.execute(f"UPDATE prices SET ({cols}) = (?, ?, ?, ?, ?) WHERE model = 'gpt-4o'", list(before[0][0]))
    assert list(got.index) == ["gpt-4o"] and "gpt-4o" in want.index
    for model, row in got.iterrows():
        peak = row["peak_hour"]
        assert peak == want.loc[model, "peak_hour"]
        busy_ms, served = embedded.execute(
            f"SELECT sum({store.sql.BUSY_MS}), count(*) FROM requests WHERE model = ? AND ts >= ? "
            f"AND ts < ? + INTERVAL 1 HOUR AND {store.sql.SERVED}", [model, peak, peak]).fetchall()[0]
        assert row["mean_service_s"] == pytest.approx(busy_ms / served / 1000, rel=1e-9)
        assert row["note"].startswith(observed.ROLLUP_SERVICE_NOTE)
        assert not want.loc[model, "note"].startswith(observed.ROLLUP_SERVICE_NOTE)
    model = got.index[0]
    want_fp, got_fp = (plans.forecast_plan(con, f, model, 2, mean_service_s=0.8, slots_per_replica=4)
                       for con in (embedded, attached))
    assert got_fp.state == want_fp.state == "ok" and len(want_fp.history) == 72
    pd.testing.assert_series_equal(want_fp.history, got_fp.history)
    pd.testing.assert_frame_equal(want_fp.plan, got_fp.plan)


def test_sparks_own_ln_moves_edge_values_to_another_bucket(built):
    """Why the job corrects k across the C library's edges: Spark's ln alone would differ here."""
    embedded, _, _, _, spark, _ = built
    edges = embedded.execute("SELECT DISTINCT total_ms AS v FROM requests WHERE (hash(CAST(substr(request_id, 2) "
                             "AS BIGINT)) >> 1) % 50 = 1 AND total_ms > 0").df()
    inv = 1.0 / math.log(store.SKETCH_GAMMA)
    duck_k = embedded.execute(f"SELECT v, CAST(floor(ln(v) * {inv!r}) AS INTEGER) AS k FROM edges").df()
    spark_k = spark.createDataFrame(edges).selectExpr("v", f"CAST(floor(ln(v) * {inv!r}) AS INT) AS k").toPandas()
    both = duck_k.merge(spark_k, on="v", suffixes=("_duck", "_spark"))
    assert len(both) == len(edges) > 1_000
    assert (both.k_duck != both.k_spark).sum() > 0
    assert [scale_spark.sketch_ln_k(v) for v in both.v] == both.k_duck.tolist()


def test_the_bucket_edges_give_the_c_librarys_bucket():
    """bucket_edges: k(v) = kmin + i for edges[i] <= v < edges[i + 1], on values across the whole double range,
    at the edges and either side of them."""
    kmin, edges = scale_spark.bucket_edges(scale_spark.SKETCH_INV)
    assert (kmin, len(edges)) == (scale_spark.SKETCH_KMIN, scale_spark.SKETCH_KMAX - kmin + 2)
    assert edges[0] == math.ulp(0.0) and edges[-1] == math.inf and list(edges) == sorted(edges)
    rng = random.Random(18)
    values = [math.ldexp(rng.random() + 0.5, rng.randint(-1070, 1020)) for _ in range(3_000)]
    values += [w for e in rng.sample(edges[1:-1], 2_000) for w in (math.nextafter(e, 0), e, math.nextafter(e, 1e308))]
    for v in values:
        assert kmin + bisect.bisect_right(edges, v) - 1 == scale_spark.sketch_ln_k(v), v


def test_duckdb_only_sql_is_rewritten_or_refused(monkeypatch):
    assert scale_spark.spark_sql("SELECT count(*) FILTER (WHERE total_ms > 1000) FROM requests GROUP BY ALL") == \
        "SELECT count(*) FILTER (WHERE total_ms > 1000) FROM requests GROUP BY ALL"
    assert "json_object_keys(attrs), 'source_cost_usd'" in scale_spark.table_spark_sql("rollup_hourly")
    assert "time_bucket" not in scale_spark.table_spark_sql("queue_15min")
    with pytest.raises(NotImplementedError, match="calls time_bucket"):
        scale_spark.spark_sql("SELECT time_bucket(INTERVAL 7 MINUTE, ts) FROM requests")
    inservice = scale_spark.table_spark_sql("inservice_minute")
    assert not {"epoch_us", "unnest", "range", "make_timestamp", "//"} & set(re.findall(r"[a-z_]+(?=\()|//", inservice))
    assert "finops_sketch_edges" in scale_spark.table_spark_sql("decode_rate_minute")
    # a table with a Spark SQL of its own is refused once the store's DuckDB SQL of it is not the one checked
    for table, checked in scale_spark.OWN_SPARK_SQL.items():
        assert scale_spark.fingerprint(scale_spark.table_sql(table)) == checked
        assert scale_spark.table_spark_sql(table) == scale_spark.own_spark_sql(table)
    changed = store.derived_select_sql("slowest_hourly").replace("request_id) AS _rank", "request_id DESC) AS _rank")
    assert changed != store.derived_select_sql("slowest_hourly")
    # a new derived table is written too, and one whose SQL calls a DuckDB-only function stops the job
    derived_sql = store.derived_select_sql
    monkeypatch.setattr(store, "DERIVED", (*store.DERIVED, ("late_15min", "window_start TIMESTAMP", "late_version", 1)))
    monkeypatch.setattr(store, "derived_select_sql", lambda table, where="TRUE": (
        "SELECT median(total_ms) FROM requests" if table == "late_15min" else derived_sql(table, where)))
    assert scale_spark.tables()[-1] == ("late_15min", 1)
    with pytest.raises(NotImplementedError, match="late_15min calls median"):
        scale_spark.table_spark_sql("late_15min")
    monkeypatch.setattr(store, "derived_select_sql", lambda table, where="TRUE": (
        changed if table == "slowest_hourly" else derived_sql(table, where)))
    with pytest.raises(NotImplementedError, match="SQL of slowest_hourly .* is not the one its Spark SQL of its own .*own_spark_sql"):
        scale_spark.table_spark_sql("slowest_hourly")


def test_attaching_the_same_output_twice_adds_nothing(built, capsys):
    _, attached, out, _, _, attached_path = built
    before = attached.execute("SELECT count(*), sum(requests) FROM rollup_hourly").fetchall()
    assert main(["attach-rollups", str(out), "--db", str(attached_path)]) == 0
    assert "already attached as batch 1" in capsys.readouterr().out
    con = store.connect(attached_path)
    assert con.execute("SELECT count(*), sum(requests) FROM rollup_hourly").fetchall() == before
    batches = store.batches(con)
    assert batches[["batch_id", "format", "rows_read", "rows_ingested"]].values.tolist() == [
        [1, "spark-rollup", ROWS, 0]]
    # the span is the dataset's first and last request (row 199,999 of 200k over 259,200 s: 1.296 s before the
    # end of the third day), as the embedded store's batch records it, not the rollups' whole hours
    assert (str(batches.min_ts[0]), str(batches.max_ts[0])) == ("2026-03-01 00:00:00", "2026-03-03 23:59:58.704000")
    assert store.time_span(con) == store.time_span(store.connect(attached_path)) == store.time_span(built[0])
    assert store.row_count(con) == 0 and store.rollup_only(con)


def test_an_output_without_a_table_or_of_another_version_is_refused_and_nothing_attached(built, tmp_path):
    _, _, out, dataset, _, _ = built
    con = store.connect(tmp_path / "fresh.duckdb")
    for change, said in ((lambda m: m["tables"].pop("queue_15min"), "holds no queue_15min"),
                         (lambda m: m["tables"].pop("slowest_hourly"), "holds no slowest_hourly"),
                         (lambda m: m["tables"]["latency_sla_hourly"].update(version=0),
                          "latency_sla_hourly version 0"),
                         (lambda m: m.pop("output_version"), "older `finops rollup`"),
                         (lambda m: m.update(last_ts="2026-03-04T00:00:00"), "lie outside the rollups' first and last"),
                         (lambda m: m.update(first_ts="2026-02-28T23:59:59"), "lie outside the rollups' first and last"),
                         (lambda m: m.update(first_ts="yesterday"), "'yesterday' .* is not a time")):
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(out, copy)
        [manifest_file] = (copy / "manifest").glob("*.txt")
        manifest = json.loads(manifest_file.read_text())
        change(manifest)
        manifest_file.write_text(json.dumps(manifest))
        with pytest.raises(InputError, match=said):
            scale_attach(con, copy)
    # a partial copy (one table's files gone missing) is refused by its counts, inside the transaction
    copy = tmp_path / "partial"
    shutil.copytree(out, copy)
    parts = sorted((copy / "latency_sla_hourly").glob("*.parquet"))
    for extra in parts[1:]:
        extra.unlink()
    if len(parts) > 1:
        with pytest.raises(InputError, match="partial copy"):
            scale_attach(con, copy)
    with pytest.raises(InputError, match="not a URL"):
        scale_attach(con, out, "s3a://bucket/ds")
    assert con.execute("SELECT count(*) FROM rollup_hourly").fetchall()[0][0] == 0
    assert con.execute("SELECT count(*) FROM latency_hourly").fetchall()[0][0] == 0
    assert store.batches(con).empty and slices.dataset_of(con) is None


def test_an_output_whose_manifest_has_no_first_and_last_request_spans_its_rollups_whole_hours(built, tmp_path):
    """An output written before the manifest held the first and last request's time still attaches: its batch
    spans the rollups' hours, first to the end of the last."""
    _, _, out, _, _, _ = built
    copy = tmp_path / "older"
    shutil.copytree(out, copy)
    [manifest_file] = (copy / "manifest").glob("*.txt")
    manifest = json.loads(manifest_file.read_text())
    assert (manifest["first_ts"], manifest["last_ts"]) == ("2026-03-01T00:00:00", "2026-03-03T23:59:58.704000")
    for key in ("first_ts", "last_ts"):
        manifest.pop(key)
    manifest["run_id"] = "older-run"
    manifest_file.write_text(json.dumps(manifest))
    con = store.connect(tmp_path / "older.duckdb")
    scale_attach(con, copy)
    assert [str(t) for t in store.time_span(con)] == ["2026-03-01 00:00:00", "2026-03-03 23:59:59.999999"]


def scale_attach(con, directory, dataset=None):
    from finops.scale import attach_rollups
    return attach_rollups(con, directory, dataset)


def test_the_duckdb_engine_writes_the_same_output_and_the_spend_report_agrees(built, tmp_path):
    embedded, attached, _, dataset, _, _ = built
    assert main(["rollup", "--input", str(dataset), "--output", str(tmp_path / "duck_out")]) == 0
    assert main(["attach-rollups", str(tmp_path / "duck_out"), "--db", str(tmp_path / "duck.duckdb")]) == 0
    duck = store.connect(tmp_path / "duck.duckdb")
    assert store.time_span(duck) == store.time_span(attached) == store.time_span(embedded)
    for table, _ in scale_spark.tables():
        a, b = _table(duck, table), _table(attached, table)
        approx = [c for (t, c) in APPROX_COLUMNS if t == table]
        pd.testing.assert_frame_equal(a.drop(columns=approx), b.drop(columns=approx), check_exact=True)
    duck.close()
    from finops.spend import report

    by_model = [report.report(con, Filters(), ["model", "tenant"]) for con in (embedded, attached)]
    pd.testing.assert_frame_equal(*by_model, check_exact=True)
    assert by_model[0].requests.sum() == ROWS


def test_every_page_renders_on_the_rollup_only_store(built):
    *_, attached_path = built
    from views import PAGES

    said = {}
    for page in PAGES:
        at = run_page(str(attached_path), page.file)
        assert not at.exception, (page.file, [e.value for e in at.exception])
        shown = texts(at)
        assert "holds no requests yet" not in shown, page.file
        said[page.slug] = shown.count(store.RAW_ROWS_NEEDED) + shown.count(slices.SLICE_NEEDED)
        # a dataset is recorded: the sections a slice can answer say what to pick to read it (all models here)
        assert (slices.SLICE_NEEDED in shown) == (page.slug in {"overview", "cost", "routing", "incidents", "latency",
                                                                "percentiles", "capacity"}), page.file
    # the spend pages show figures; the sections that read raw rows say so, one sentence each
    assert said == {"overview": 1, "alerts": 0, "cost": 1, "budgets": 0, "routing": 1, "incidents": 1, "latency": 1,
                    "percentiles": 1, "capacity": 1, "cascade": 1, "readiness": 0, "data": 0}
    # the Alerts page judges its rules on the rollups: the alerts that fired, in groups
    at = run_page(str(attached_path), "views/alerts.py")
    assert len(at.expander) > 0 and "Error rate above 1 %" in texts(at)
    at = run_page(str(attached_path), "views/cost.py")
    assert "200,000 requests in attached rollups (no raw rows)" in "\n".join(c.value for c in at.sidebar.caption)


NARROW = Filters(since=datetime(2026, 3, 2, 9), until=datetime(2026, 3, 2, 13), models=("gpt-4o",))


def test_a_narrow_latency_slice_of_the_dataset_equals_the_embedded_stores(built):
    """On the attached store, one model's 4 hours read from the recorded dataset answer exactly as the
    embedded store that loaded every row: exact percentiles, histogram, segments, slowest, the diagnosis."""
    from finops.latency import diagnose, stats

    embedded, attached, _, dataset, _, _ = built
    assert slices.dataset_of(attached) == str(dataset.resolve())
    with slices.open_slice(attached, NARROW) as part:
        assert [p.split("/")[-2] for p in part.files] == ["date=2026-03-02"] * len(part.files)
        n = embedded.execute("SELECT count(*) FROM requests WHERE model = 'gpt-4o' AND ts >= ? AND ts < ?",
                             [NARROW.since, NARROW.until]).fetchall()[0][0]
        assert part.requests == n > 1_000 and not part.scope.narrowed
        for fn, kwargs in ((stats.percentiles, {"exact": True}), (stats.percentiles, {"by": ("tenant", "route")}),
                           (stats.histogram, {}), (stats.segments, {}), (stats.slowest, {})):
            want, got = fn(embedded, NARROW, **kwargs), fn(part.con, NARROW, **kwargs)
            assert len(want) > 0, fn.__name__
            pd.testing.assert_frame_equal(want, got, check_exact=True)
        assert diagnose.diagnose(part.con, NARROW) == diagnose.diagnose(embedded, NARROW)
    # the store itself still holds no raw rows; other cursors never saw the slice
    assert store.row_count(attached) == 0 and store.rollup_only(attached)


def test_a_slice_is_bounded_and_says_why_not(built):
    embedded, attached, *_ = built
    with pytest.raises(InputError, match="pick one model"):
        slices.open_slice(attached, Filters(since=NARROW.since, until=NARROW.until))
    with pytest.raises(InputError, match="at most 24 hours"):
        slices.open_slice(attached, Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 3), models=("gpt-4o",)))
    with pytest.raises(InputError, match="no dataset folder is recorded"):
        slices.open_slice(embedded, NARROW)
    # the raw-row budget narrows the period to its latest whole hours, as store.raw_scope does everywhere
    with slices.open_slice(attached, NARROW, budget=2_000) as part:
        assert part.scope.narrowed and part.filters.since > NARROW.since and 0 < part.requests <= 2_000
        assert part.requests == embedded.execute(
            "SELECT count(*) FROM requests WHERE model = 'gpt-4o' AND ts >= ? AND ts < ?",
            [part.filters.since, NARROW.until]).fetchall()[0][0]


def test_an_attached_store_is_never_emptied_by_a_rebuild_on_opening(tmp_path):
    """A store of attached rollups has no raw rows: a table of another version cannot be rebuilt from them, so
    opening it says so and changes nothing (a table with no row is built as usual)."""
    path = str(tmp_path / "attached.duckdb")
    con = store.connect(path)
    con.execute("INSERT INTO queue_15min VALUES (TIMESTAMP '2026-03-01 10:00', 'm', 't', 'standard', 1, 5, 50.0)")
    store.set_setting(con, 'queue_windows_version', 0)
    con.close()
    with pytest.raises(store.StoreError, match="cannot be rebuilt here"):
        store.connect(path)
    con = store.connect(path, read_only=True)
    assert con.execute("SELECT count(*), sum(requests) FROM queue_15min").fetchall() == [(1, 5)]
    con.close()
