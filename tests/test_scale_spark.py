"""Issue 18's Spark acceptance: on a 200k-row dataset in 3 date partitions, Spark (local[2]) writes the
embedded loader's rollups and latency sketch exactly, and every page renders on a store of them alone."""
from __future__ import annotations

import math

import duckdb
import pandas as pd
import pytest

from finops import store
from finops.cli import main
from finops.ingest import ingest_frame
from finops.scale import spark as scale_spark
from helpers import run_page, texts

pyspark = pytest.importorskip("pyspark")

ROWS = 200_000
ROLLUP_KEYS = ["hour", "model", "tenant", "route", "sla_tier", "status", "provider", "service_tier", "input_band",
               "batch_id"]
SKETCH_KEYS = ["hour", "model", "batch_id", "field", "k"]


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
    """(embedded store, rollup-only store, Spark output dir, dataset dir, the Spark session)."""
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
    assert main(["attach-rollups", str(out), "--db", str(attached_path)]) == 0
    attached = store.connect(attached_path)
    yield embedded, attached, out, dataset, spark, attached_path
    spark.stop()


def _table(con, table: str, keys: list[str]) -> pd.DataFrame:
    return con.execute(f"SELECT * FROM {table}").df().sort_values(keys).reset_index(drop=True)


def test_the_dataset_is_three_date_partitions_of_200k_rows(built):
    _, _, _, dataset, _, _ = built
    assert sorted(p.name for p in dataset.iterdir()) == ["date=2026-03-01", "date=2026-03-02", "date=2026-03-03"]


def test_spark_rollups_equal_the_embedded_loaders_exactly(built):
    embedded, attached, *_ = built
    a, b = _table(embedded, "rollup_hourly", ROLLUP_KEYS), _table(attached, "rollup_hourly", ROLLUP_KEYS)
    assert len(a) > 5_000
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    totals = attached.execute("SELECT sum(requests), sum(recorded_requests), sum(source_unpriced_requests), "
                              "count(DISTINCT service_tier) FROM rollup_hourly").fetchall()[0]
    # 200k requests; cost on h % 3 = 1; attrs with the key (0.0 and JSON null) on h % 9 in (2, 5);
    # tiers '', batch, flex, priority
    assert totals[0] == ROWS and 66_000 < totals[1] < 67_400 and 43_000 < totals[2] < 46_000 and totals[3] == 4
    assert attached.execute("SELECT sum(requests) FROM rollup_hourly WHERE tenant = 'default'").fetchall()[0][0] \
        == embedded.execute("SELECT count(*) FROM requests WHERE tenant = 'default'").fetchall()[0][0] > 10_000


def test_spark_sketch_buckets_and_counts_equal_the_embedded_loaders(built):
    embedded, attached, *_ = built
    a, b = _table(embedded, "latency_hourly", SKETCH_KEYS), _table(attached, "latency_hourly", SKETCH_KEYS)
    assert len(a) > 50_000
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_sparks_own_ln_moves_edge_values_to_another_bucket(built):
    """Why the job computes k near edges with the C library's log: Spark's ln alone would differ here."""
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


def test_every_rollup_measure_has_a_spark_expression(monkeypatch):
    assert [n for n, _, _ in scale_spark.spark_measures()] == [n for n, _, _ in store.ROLLUP_MEASURES]
    plain = scale_spark.spark_measures((("late_requests", "BIGINT", "count(*) FILTER (WHERE total_ms > 1000)"),))
    assert plain == (("late_requests", "BIGINT", "CAST(count(*) FILTER (WHERE total_ms > 1000) AS BIGINT)"),)
    monkeypatch.setattr(store, "ROLLUP_MEASURES",
                        (*store.ROLLUP_MEASURES, ("median_total_ms", "DOUBLE", "median(total_ms)")))
    with pytest.raises(NotImplementedError, match="median_total_ms calls median"):
        scale_spark.rollup_sql_spark()


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
    assert (str(batches.min_ts[0]), str(batches.max_ts[0])) == ("2026-03-01 00:00:00", "2026-03-03 23:59:59.999999")
    assert store.row_count(con) == 0 and store.rollup_only(con)


def test_the_duckdb_engine_writes_the_same_output_and_the_spend_report_agrees(built, tmp_path):
    embedded, attached, _, dataset, _, _ = built
    assert main(["rollup", "--input", str(dataset), "--output", str(tmp_path / "duck_out")]) == 0
    assert main(["attach-rollups", str(tmp_path / "duck_out"), "--db", str(tmp_path / "duck.duckdb")]) == 0
    duck = store.connect(tmp_path / "duck.duckdb")
    for table, keys in (("rollup_hourly", ROLLUP_KEYS), ("latency_hourly", SKETCH_KEYS)):
        pd.testing.assert_frame_equal(_table(duck, table, keys), _table(attached, table, keys), check_exact=True)
    duck.close()
    from finops.filters import Filters
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
        said[page.slug] = shown.count(store.RAW_ROWS_NEEDED)
    # the spend pages show figures; the sections that read raw rows say so, one sentence each
    assert said == {"overview": 1, "alerts": 1, "cost": 1, "budgets": 0, "routing": 1, "incidents": 1, "latency": 1,
                    "percentiles": 1, "capacity": 1, "cascade": 1, "readiness": 0, "data": 0}
    at = run_page(str(attached_path), "views/cost.py")
    assert "200,000 requests in attached rollups (no raw rows)" in "\n".join(c.value for c in at.sidebar.caption)
