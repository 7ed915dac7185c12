"""The Latency page's tables written at load time (store.DERIVED: inservice_minute, decode_rate_minute,
length_latency_daily, segments_daily, and the hourly sketch for the queue histogram) against the raw-row
path on the same requests (``exact=True``): on the test sample store, on a store loaded in batches whose
requests are in service across each other's edges, and after a batch is deleted."""
import shutil
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.latency import stats as latency

ALPHA = store.SKETCH_ALPHA * (1 + 1e-9)
T0 = datetime(2026, 3, 2, 0, 0)
NEW_TABLES = ("inservice_minute", "decode_rate_minute", "length_latency_daily", "segments_daily", "coverage_hourly",
              "slowest_hourly")


@pytest.fixture(scope="module")
def sample(demo_db, tmp_path_factory):
    # a copy, read only: other tests of the session hold the shared sample store open read-write, and DuckDB
    # refuses a second connection of another configuration to one file in one process
    path = tmp_path_factory.mktemp("latency-derived") / "sample.duckdb"
    shutil.copy(demo_db, path)
    con = store.connect(str(path), read_only=True)
    yield con
    con.close()


def _decode_agrees(con, f: Filters) -> pd.DataFrame:
    derived = latency.decode_vs_concurrency(con, f)
    raw = latency.decode_vs_concurrency(con, f, exact=True)
    assert derived.attrs["max_rel_error"] == store.SKETCH_ALPHA and raw.attrs["max_rel_error"] == 0.0
    # the same levels and request counts, to the request
    assert derived[["grp", "concurrency", "requests"]].values.tolist() == \
        raw[["grp", "concurrency", "requests"]].values.tolist()
    cols = ["tokens_per_s_p10", "tokens_per_s_p50", "tokens_per_s_p90"]
    assert_allclose(derived[cols].to_numpy(), raw[cols].to_numpy(), rtol=ALPHA)
    return derived


def _lengths_agree(con, f: Filters, length: str) -> pd.DataFrame:
    derived = latency.length_buckets(con, f, length)
    raw = latency.length_buckets(con, f, length, exact=True)
    keys = ["grp", "bucket_lo", "bucket_hi", "bucket", "requests"]
    assert derived[keys].values.tolist() == raw[keys].values.tolist()
    cols = [c for c in raw.columns if c.startswith("total_ms_p")]
    assert_allclose(derived[cols].to_numpy(), raw[cols].to_numpy(), rtol=ALPHA)
    assert derived.attrs["max_rel_error"] == store.SKETCH_ALPHA
    return derived


def _segments_agree(con, f: Filters) -> pd.DataFrame:
    """The band from the buckets: as many requests as the exact band (ties at its edges apart), its mean
    total within 2 %, each segment's mean within the share of the band's requests near its edges (within a
    factor SKETCH_GAMMA: the only ones the edge buckets can swap for others) times the band's top total."""
    derived = latency.segments(con, f)
    raw = latency.segments(con, f, exact=True)
    assert derived.attrs["max_rel_error"] == store.SKETCH_GAMMA - 1
    on = ["grp", "requests", "percentile", "segment"]
    assert derived[on].values.tolist() == raw[on].values.tolist()
    m = derived.merge(raw, on=on, suffixes=("", "_raw"))
    assert (abs(m["requests_in_band"] - m["requests_in_band_raw"]) <= 0.01 * m["requests_in_band_raw"] + 1).all()
    assert_allclose(m["total_ms"], m["total_ms_raw"], rtol=store.SKETCH_GAMMA - 1)
    where, params = f.where()
    totals = con.execute(f"SELECT model, total_ms FROM requests WHERE {where} AND NOT coalesce(cache_hit, false) "
                         "AND total_ms IS NOT NULL", params).df()
    g = store.SKETCH_GAMMA
    for (grp, q), rows in m.groupby(["grp", "quantile"]):
        x = totals[totals["model"] == grp]["total_ms"].to_numpy()
        lo, hi = np.quantile(x, [q - 0.005, q + 0.005])
        band = x[(x >= lo) & (x <= hi)]
        near = ((band < lo * g) | (band > hi / g)).sum()
        assert (abs(rows["ms"] - rows["ms_raw"]) <= near / len(band) * hi * g).all(), (grp, q)
    return derived


def _histograms_agree(con, f: Filters, scale: str, bins: int = 40) -> None:
    """The same edges and totals; a bin's count off by no more than the raw values within a factor
    SKETCH_GAMMA of one of its edges."""
    derived = latency.histogram(con, f, "queue_ms", bins=bins, scale=scale)
    raw = latency.histogram(con, f, "queue_ms", bins=bins, scale=scale, exact=True)
    assert derived.attrs["edge_tolerance"] == store.SKETCH_GAMMA and raw.attrs["edge_tolerance"] == 0.0
    assert derived[["grp", "bin", "lo", "hi"]].values.tolist() == raw[["grp", "bin", "lo", "hi"]].values.tolist()
    where, params = f.where()
    values = con.execute(f"SELECT model, queue_ms FROM requests WHERE {where} AND NOT coalesce(cache_hit, false) "
                         "AND queue_ms IS NOT NULL", params).df()
    g = store.SKETCH_GAMMA
    for grp, d in derived.groupby("grp"):
        r = raw[raw["grp"] == grp]
        assert d["count"].sum() == r["count"].sum()
        x = values[values["model"] == grp]["queue_ms"].to_numpy()
        for lo, hi, mine, theirs in zip(d["lo"], d["hi"], d["count"], r["count"], strict=True):
            near = sum(int(((x > e / g) & (x < e * g)).sum()) for e in (lo, hi) if e > 0)
            assert abs(mine - theirs) <= near, (grp, lo, hi, mine, theirs, near)


def test_decode_speed_from_load_time_tables_equals_raw_rows(sample):
    out = _decode_agrees(sample, Filters())
    assert out["concurrency"].max() >= 3 and len(out["grp"].unique()) > 1
    model = out["grp"].iloc[0]
    _decode_agrees(sample, Filters(models=(model,)))


def test_length_buckets_from_load_time_tables_equal_raw_rows(sample):
    for length in ("input_tokens", "output_tokens", "prompt_chars"):
        _lengths_agree(sample, Filters(), length)


def test_segments_from_load_time_tables_within_their_bound(sample):
    out = _segments_agree(sample, Filters())
    assert set(out["percentile"]) == {"P50", "P95", "P99"}


@pytest.mark.parametrize("scale", ["log", "linear"])
def test_queue_histogram_from_the_sketch_within_its_bound(sample, scale):
    _histograms_agree(sample, Filters(), scale)


def test_a_period_of_whole_days_reads_the_tables_and_equals_raw_rows(sample):
    lo, hi = store.time_span(sample)
    day = datetime.combine(hi.date(), datetime.min.time())
    f = Filters(since=day - timedelta(days=2), until=day)
    _decode_agrees(sample, f)
    _lengths_agree(sample, f, "output_tokens")
    _segments_agree(sample, f)
    _histograms_agree(sample, f, "log")


def test_a_tenant_filter_or_a_partial_day_reads_raw_rows(sample):
    tenant = store.distinct_values(sample, "tenant")[0]
    for f in (Filters(tenants=(tenant,)), Filters(since=store.time_span(sample)[1] - timedelta(hours=5, minutes=30))):
        assert latency.segments(sample, f).attrs["max_rel_error"] == 0.0
        assert latency.length_buckets(sample, f, "output_tokens").attrs["max_rel_error"] == 0.0
        assert latency.decode_vs_concurrency(sample, f).attrs["max_rel_error"] == 0.0
        assert latency.histogram(sample, f, "queue_ms").attrs["edge_tolerance"] == 0.0


def _coverage_and_slowest_agree(con, f: Filters) -> None:
    assert latency.coverage(con, f) == latency.coverage(con, f, exact=True)
    for n in (5, store.SLOWEST_KEPT):
        derived, raw = latency.slowest(con, f, n), latency.slowest(con, f, n, exact=True)
        assert len(derived) == min(n, len(raw)) and derived.equals(raw)


def test_coverage_and_the_slowest_requests_from_load_time_tables_equal_raw_rows(sample):
    lo, hi = store.time_span(sample)
    day = datetime.combine(hi.date(), datetime.min.time())
    model = store.distinct_values(sample, "model")[0]
    for f in (Filters(), Filters(since=day - timedelta(days=1), until=day), Filters(models=(model,))):
        _coverage_and_slowest_agree(sample, f)
    # a tenant filter: the coverage table has tenants; the slowest of one tenant come from the raw rows
    tenant = store.distinct_values(sample, "tenant")[-1]
    assert latency.coverage(sample, Filters(tenants=(tenant,))) == \
        latency.coverage(sample, Filters(tenants=(tenant,)), exact=True)
    assert latency.slowest(sample, Filters(tenants=(tenant,)), 5)["tenant"].eq(tenant).all()


# ---------------------------------------------------------------- loads in batches

def _fleet(n: int = 6000, seed: int = 5) -> pd.DataFrame:
    """Two models over two days; requests up to ~2 minutes long, so many are in service across minute,
    hour and day edges, and across the edge between two loads."""
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(0, 2 * 86400, n))
    model = rng.choice(["big", "small"], n)
    queue = np.where(rng.random(n) < 0.5, 0.0, rng.exponential(2000.0, n))
    prefill = rng.gamma(2.0, 50.0, n)
    decode = rng.gamma(2.0, 20000.0, n)
    out = rng.integers(1, 3000, n)
    return pd.DataFrame({
        "request_id": [f"q{i}" for i in range(n)], "ts": [T0 + timedelta(seconds=float(s)) for s in ts],
        "model": model, "tenant": rng.choice(["acme", "o'brien"], n), "route_ms": rng.uniform(0, 3, n),
        "queue_ms": queue, "prefill_ms": prefill, "decode_ms": decode,
        "total_ms": queue + prefill + decode + 5.0, "input_tokens": rng.integers(10, 9000, n), "output_tokens": out,
        "status": "ok", "cache_hit": False,
    })


def test_loads_in_batches_add_up_to_the_raw_rows():
    """Three loads cut mid-minute (requests of one load still in service in the next one's minutes) and one
    load of a tenant's requests interleaved with the others: the tables are written per load and summed
    when read, so they give the raw rows' figures; deleting a load takes its rows out of every table."""
    df = _fleet()
    con = store.connect(":memory:")
    late = df[(df["tenant"] == "o'brien") & (df.index % 3 == 0)]        # a load interleaved in time
    rest = df.drop(late.index)
    for part in np.array_split(rest.index.to_numpy(), 3):
        ingest_frame(con, rest.loc[part], name=f"part{part[0]}")
    ingest_frame(con, late, name="late")
    assert con.execute("SELECT count(DISTINCT batch_id) FROM inservice_minute").fetchall()[0][0] == 4
    f = Filters()
    dec = _decode_agrees(con, f)
    assert dec["requests"].sum() == len(df)
    # mean in service per minute, by hand from the raw requests (numpy), for the busiest minute of big
    big = df[df["model"] == "big"]
    start = (big["ts"].astype("datetime64[us]").astype("int64") + np.round((big["route_ms"] + big["queue_ms"]) * 1000)
             ).to_numpy()
    end = (big["ts"].astype("datetime64[us]").astype("int64") + np.round(big["total_ms"] * 1000)).to_numpy()
    busy = con.execute("SELECT window_start, sum(busy_us) FROM inservice_minute WHERE model = 'big' GROUP BY 1 "
                       "ORDER BY 2 DESC LIMIT 1").fetchall()[0]
    w0 = int(pd.Timestamp(busy[0]).value // 1000)
    by_hand = np.clip(np.minimum(end, w0 + 60_000_000) - np.maximum(start, w0), 0, None).sum()
    assert busy[1] == by_hand
    _lengths_agree(con, f, "input_tokens")
    _segments_agree(con, f)
    _histograms_agree(con, f, "log")
    _coverage_and_slowest_agree(con, f)
    # a load deleted: every table loses its rows, and the tables still equal the raw rows left
    batch = con.execute("SELECT batch_id FROM batches WHERE file_name = 'late'").fetchall()[0][0]
    store.delete_batch(con, batch)
    for table in NEW_TABLES:
        assert con.execute(f"SELECT count(*) FROM {table} WHERE batch_id = ?", [batch]).fetchall()[0][0] == 0
    assert _decode_agrees(con, f)["requests"].sum() == len(rest)
    _lengths_agree(con, f, "output_tokens")
    _coverage_and_slowest_agree(con, f)


def test_a_store_made_before_the_tables_builds_them_on_opening(tmp_path):
    """A store whose version settings predate the tables (dropped here) gets them when opened read-write;
    opened read-only it is read from raw rows."""
    path = str(tmp_path / "old.duckdb")
    con = store.connect(path)
    ingest_frame(con, _fleet(800))
    for table in NEW_TABLES:
        con.execute(f"DROP TABLE {table}")
    con.execute("DELETE FROM settings WHERE key IN (SELECT unnest(?))",
                [[key for table, _, key, _ in store.DERIVED if table in NEW_TABLES]])
    con.close()
    ro = store.connect(path, read_only=True)
    assert latency.decode_vs_concurrency(ro, Filters()).attrs["max_rel_error"] == 0.0
    assert latency.segments(ro, Filters()).attrs["max_rel_error"] == 0.0
    assert latency.slowest(ro, Filters(), 5).equals(latency.slowest(ro, Filters(), 5, exact=True))
    ro.close()
    con = store.connect(path)
    assert all(store.derived_ready(con, t) for t in NEW_TABLES)
    _decode_agrees(con, Filters())
    _segments_agree(con, Filters())
    _coverage_and_slowest_agree(con, Filters())
