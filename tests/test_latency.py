"""finops.latency.stats: percentiles and histograms pinned against numpy on the same data."""
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import sql, store
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import IngestOptions, ingest_frame, ingest_path
from finops.latency import stats as latency
from helpers import DATA

T0 = datetime(2026, 3, 2, 9, 0)


def _frame(n: int = 3000, seed: int = 3) -> pd.DataFrame:
    """Two models with full segments (big) and one with queue/service only (gw); one cache hit block."""
    rng = np.random.default_rng(seed)
    model = rng.choice(["big", "small", "gw"], size=n, p=[0.4, 0.4, 0.2])
    queue = np.where(rng.random(n) < 0.6, 0.0, rng.exponential(300.0, n))
    prefill = rng.gamma(2.0, 40.0, n)
    decode = rng.gamma(3.0, 150.0, n)
    route = rng.uniform(0.0, 2.0, n)
    total = route + queue + prefill + decode + rng.uniform(0, 5, n)
    inp = rng.integers(5, 6000, n)
    out = rng.integers(1, 900, n)
    gw = model == "gw"
    df = pd.DataFrame({
        "request_id": [f"r{i}" for i in range(n)],
        "ts": [T0 + timedelta(seconds=float(s)) for s in np.sort(rng.uniform(0, 7200, n))],
        "tenant": rng.choice(["acme", "o'brien; drop table requests"], size=n),
        "model": model,
        "input_tokens": np.where(gw, None, inp).astype(object),
        "output_tokens": np.where(gw, None, out).astype(object),
        "prompt_chars": inp * 4,
        "route_ms": route,
        "queue_ms": queue,
        "prefill_ms": np.where(gw, np.nan, prefill),
        "decode_ms": np.where(gw, np.nan, decode),
        "service_ms": prefill + decode,
        "ttft_ms": np.where(model == "big", route + queue + prefill, np.nan),
        "total_ms": total,
        "status": "ok",
        "cache_hit": False,
    })
    hits = df.sample(100, random_state=1).index
    df.loc[hits, "cache_hit"] = True
    df.loc[hits, "total_ms"] = 1.0
    return df


@pytest.fixture(scope="module")
def synthetic():
    con = store.connect(":memory:")
    df = _frame()
    ingest_frame(con, df, name="synthetic")
    served = df[~df["cache_hit"]].copy()
    return con, served


def _rtol(exact: bool) -> float:
    """Exact percentiles agree with numpy to rounding; sketched ones within the sketch's stated bound."""
    return 1e-12 if exact else store.SKETCH_ALPHA * (1 + 1e-9)


@pytest.mark.parametrize("exact", [True, False])
def test_percentiles_match_numpy(synthetic, exact):
    con, df = synthetic
    out = latency.percentiles(con, Filters(), exact=exact).set_index("model")
    assert out.attrs["max_rel_error"] == (0.0 if exact else store.SKETCH_ALPHA)
    rtol = _rtol(exact)
    for model, g in df.groupby("model"):
        row = out.loc[model]
        assert row["requests"] == len(g)
        for field in ("total_ms", "queue_ms", "service_ms"):
            for q in (50, 95, 99):
                assert_allclose(row[f"{field}_p{q}"], np.percentile(g[field], q), rtol=rtol)
    # TTFT only where present: big has it, the others are null (not 0)
    assert_allclose(out.loc["big", "ttft_ms_p99"], np.percentile(df[df.model == "big"].ttft_ms, 99), rtol=rtol)
    assert np.isnan(out.loc["small", "ttft_ms_p50"]) and np.isnan(out.loc["gw", "ttft_ms_p99"])


def test_percentiles_exclude_cache_hits_and_bind_tenant(synthetic):
    con, df = synthetic
    tenant = "o'brien; drop table requests"
    out = latency.percentiles(con, Filters(tenants=(tenant,)), by=("model", "tenant"))
    g = df[(df.tenant == tenant) & (df.model == "small")]
    row = out[out.model == "small"].iloc[0]
    assert row["requests"] == len(g)
    assert_allclose(row["total_ms_p95"], np.percentile(g.total_ms, 95), rtol=1e-12)
    assert store.row_count(con) == len(_frame())          # the tenant name did nothing to the table


@pytest.mark.parametrize("exact", [True, False])
def test_percentiles_overall_and_time_grain(synthetic, exact):
    con, df = synthetic
    overall = latency.percentiles(con, Filters(), by=(), exact=exact)
    assert overall["requests"].iloc[0] == len(df)
    assert_allclose(overall["total_ms_p99"].iloc[0], np.percentile(df.total_ms, 99), rtol=_rtol(exact))
    hourly = latency.percentiles(con, Filters(), by=("hour",), exact=exact)
    assert hourly["requests"].sum() == len(df) and len(hourly) == 2
    for hour, g in df.groupby(df.ts.dt.floor("h")):
        row = hourly[hourly.hour == hour].iloc[0]
        assert_allclose(row.queue_ms_p95, np.percentile(g.queue_ms, 95), rtol=_rtol(exact))


def test_percentiles_unknown_group_is_an_input_error(synthetic):
    con, _ = synthetic
    with pytest.raises(InputError):
        latency.percentiles(con, Filters(), by=("model; drop table requests",))


@pytest.mark.parametrize("bins", [1, 7, 40])
def test_linear_histogram_matches_numpy(synthetic, bins):
    con, df = synthetic
    h = latency.histogram(con, Filters(), "queue_ms", bins=bins, scale="linear")
    for model, g in df.groupby("model"):
        mine = h[h.grp == model]
        counts, edges = np.histogram(g.queue_ms.to_numpy(), bins=bins)
        assert_allclose(np.r_[mine.lo.to_numpy(), mine.hi.iloc[-1]], edges, rtol=0, atol=0)
        assert mine["count"].tolist() == counts.tolist()


def test_log_histogram_matches_numpy_on_its_edges(synthetic):
    con, df = synthetic
    h = latency.histogram(con, Filters(), "total_ms", bins=25, scale="log")
    for model, g in df.groupby("model"):
        mine = h[h.grp == model]
        edges = np.r_[mine.lo.to_numpy(), mine.hi.iloc[-1]]
        x = g.total_ms.to_numpy()
        assert edges[0] == 0 and edges[1] == x[x > 0].min() and edges[-1] == x.max()
        assert_allclose(np.diff(np.log(edges[1:])), np.log(edges[-1] / edges[1]) / 25, rtol=1e-9)
        counts, _ = np.histogram(x, bins=edges)
        assert mine["count"].tolist() == counts.tolist()
    # the zeros of queue_ms land in the first bin [0, lowest positive)
    hq = latency.histogram(con, Filters(), "queue_ms", bins=10, scale="log")
    for model, g in df.groupby("model"):
        assert hq[(hq.grp == model) & (hq.bin == 0)]["count"].iloc[0] == (g.queue_ms == 0).sum()


def test_histogram_edges_on_exact_edge_values():
    """Values sitting exactly on edges: half-open bins, closed last bin, as numpy."""
    con = store.connect(":memory:")
    values = np.array([0.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 10.0, 0.1, 0.3, 0.7])
    ingest_frame(con, pd.DataFrame({"request_id": [f"e{i}" for i in range(len(values))],
                                    "ts": [T0] * len(values), "model": "m", "queue_ms": values}))
    for bins in (3, 10, 20):
        h = latency.histogram(con, Filters(), "queue_ms", bins=bins)
        counts, edges = np.histogram(values, bins=bins)
        assert h["count"].tolist() == counts.tolist()
        assert_allclose(np.r_[h.lo, h.hi.iloc[-1]], edges, rtol=0, atol=0)


def test_histogram_degenerate_inputs():
    con = store.connect(":memory:")
    ingest_frame(con, pd.DataFrame({"request_id": ["a", "b"], "ts": [T0, T0], "model": "m",
                                    "queue_ms": [0.0, 0.0]}))
    lin = latency.histogram(con, Filters(), "queue_ms", bins=4)
    counts, edges = np.histogram([0.0, 0.0], bins=4)
    assert lin["count"].tolist() == counts.tolist()
    log = latency.histogram(con, Filters(), "queue_ms", bins=4, scale="log")
    assert log["count"].tolist() == [2] and log.lo.tolist() == [0.0]
    assert latency.histogram(con, Filters(models=("nobody",)), "queue_ms").empty
    with pytest.raises(InputError):
        latency.histogram(con, Filters(), "queue_ms", bins=0)


def test_segments_are_the_band_means_and_add_up(synthetic):
    con, df = synthetic
    seg = latency.segments(con, Filters())
    for (model, q), g in seg.groupby(["grp", "quantile"]):
        sub = df[df.model == model]
        lo, hi = np.quantile(sub.total_ms, [q - 0.005, q + 0.005])
        band = sub[(sub.total_ms >= lo) & (sub.total_ms <= hi)]
        assert g.requests_in_band.iloc[0] == len(band)
        assert_allclose(g.ms.sum(), band.total_ms.mean(), rtol=1e-9)
        parts = dict(zip(g.segment, g.ms, strict=True))
        assert_allclose(parts["queue"], band.queue_ms.mean(), rtol=1e-9)
        if model == "gw":
            assert "prefill" not in parts and "decode" not in parts
            assert_allclose(parts["service"], band.service_ms.mean(), rtol=1e-9)
        else:
            assert "service" not in parts
            assert_allclose(parts["decode"], band.decode_ms.mean(), rtol=1e-9)
    assert set(seg.percentile) == {"P50", "P95", "P99"}


def test_segments_on_the_injected_gateway_log():
    con = store.connect(":memory:")
    ingest_path(con, DATA / "seed_gateway_injected.log", IngestOptions(format="gateway-log"))
    seg = latency.segments(con, Filters())
    p99 = seg[seg.percentile == "P99"].set_index("segment")["ms"]
    assert_allclose(p99["queue"], 5411.8)
    assert_allclose(p99["service"], 2706.2)
    assert set(p99.index) == {"route", "queue", "service", "other"}


@pytest.mark.parametrize("exact", [True, False])
def test_over_time_matches_numpy(synthetic, exact):
    con, df = synthetic
    out = latency.over_time(con, Filters(), "total_ms", grain="hour", by="model", exact=exact)
    df = df.assign(hour=df.ts.dt.floor("h"))
    for (model, hour), g in df.groupby(["model", "hour"]):
        row = out[(out.grp == model) & (out.ts == hour)].iloc[0]
        assert row.requests == len(g)
        assert_allclose(row.p99, np.percentile(g.total_ms, 99), rtol=_rtol(exact))
        assert_allclose(row.p50, np.percentile(g.total_ms, 50), rtol=_rtol(exact))


def test_length_buckets_match_pandas(synthetic):
    con, df = synthetic
    out = latency.length_buckets(con, Filters(), "input_tokens", with_segment=True)
    sub = df[df.input_tokens.notna()].copy()
    x = sub.input_tokens.astype(int)
    sub["lo"] = np.where(x < 32, 0, 2 ** np.floor(np.log2(x)).astype(int))
    for (model, lo), g in sub.groupby(["model", "lo"]):
        row = out[(out.grp == model) & (out.bucket_lo == lo)].iloc[0]
        assert row.requests == len(g)
        assert_allclose(row.total_ms_p95, np.percentile(g.total_ms, 95), rtol=1e-12)
        assert_allclose(row.segment_ms_p50, np.percentile(g.prefill_ms, 50), rtol=1e-12)
    assert "gw" not in set(out.grp)        # no tokens in the gw rows
    assert set(latency.length_buckets(con, Filters(), "prompt_chars").grp) == {"big", "small", "gw"}


@pytest.mark.parametrize("exact", [True, False])
def test_ttft_and_tpot(synthetic, exact):
    con, df = synthetic
    out = latency.ttft_tpot(con, Filters(), exact=exact).set_index("grp")
    rtol = _rtol(exact)
    big = df[df.model == "big"]
    assert out.loc["big", "requests"] == len(big) and out.loc["big", "with_ttft"] == len(big)
    assert_allclose(out.loc["big", "ttft_ms_p50"], np.percentile(big.ttft_ms, 50), rtol=rtol)
    tp = big[big.output_tokens > 1]
    tpot = (tp.total_ms - tp.ttft_ms) / (tp.output_tokens.astype(float) - 1)
    assert out.loc["big", "with_tpot"] == len(tp)
    assert_allclose(out.loc["big", "tpot_ms_p99"], np.percentile(tpot, 99), rtol=rtol)
    sm = df[(df.model == "small") & (df.output_tokens > 1)]
    assert_allclose(out.loc["small", "tpot_ms_p50"],
                    np.percentile(sm.decode_ms / (sm.output_tokens.astype(float) - 1), 50), rtol=rtol)
    assert np.isnan(out.loc["gw", "ttft_ms_p50"]) and np.isnan(out.loc["gw", "tpot_ms_p50"])


def test_decode_rate_against_concurrency_by_hand():
    """Three overlapping requests and one alone: concurrency at each start is counted by hand."""
    con = store.connect(":memory:")
    ms = timedelta(milliseconds=1)
    rows = pd.DataFrame({
        "request_id": ["a", "b", "c", "d"],
        "ts": [T0, T0 + 100 * ms, T0 + 200 * ms, T0 + 5000 * ms],
        "model": "m",
        "queue_ms": [0.0, 0.0, 50.0, 0.0],
        "decode_ms": [1000.0, 1000.0, 1000.0, 500.0],
        "total_ms": [1000.0, 1000.0, 1050.0, 1000.0],   # d ends at 6000, b at 1100 (a at 1000)
        "output_tokens": [100, 50, 20, 10],
    })
    ingest_frame(con, rows)
    out = latency.decode_vs_concurrency(con, Filters()).set_index("concurrency")
    # a starts alone (1); b starts while a runs (2); c starts service at 250 with a, b running (3); d alone (1)
    assert out["requests"].to_dict() == {1: 2, 2: 1, 3: 1}
    assert_allclose(out.loc[3, "tokens_per_s_p50"], 20.0)
    assert_allclose(out.loc[1, "tokens_per_s_p50"], np.percentile([100.0, 20.0], 50))


def test_back_to_back_requests_do_not_overlap():
    con = store.connect(":memory:")
    ms = timedelta(milliseconds=1)
    ingest_frame(con, pd.DataFrame({"request_id": ["a", "b"], "ts": [T0, T0 + 1000 * ms], "model": "m",
                                    "decode_ms": [1000.0, 1000.0], "total_ms": [1000.0, 1000.0],
                                    "output_tokens": [10, 10]}))
    assert latency.decode_vs_concurrency(con, Filters())["concurrency"].tolist() == [1]


def test_slowest_requests_carry_their_segments(synthetic):
    con, df = synthetic
    top = latency.slowest(con, Filters(), n=5)
    assert_allclose(top.total_ms.to_numpy(), np.sort(df.total_ms.to_numpy())[::-1][:5])
    seg = top.route_ms + top.queue_ms + top.prefill_ms.fillna(0) + top.decode_ms.fillna(0) + top.other_ms
    gw = top.prefill_ms.isna()
    seg[gw] += top.service_ms[gw]
    assert_allclose(seg, top.total_ms, rtol=1e-9)


def test_coverage_names_the_missing_fields():
    con = store.connect(":memory:")
    ingest_path(con, DATA / "seed_gateway_verbatim.log", IngestOptions(format="gateway-log"))
    cov = latency.coverage(con, Filters())
    assert latency.lacking(cov, sql.LATENCY_FIELDS) == ["ttft_ms"]
    out = latency.percentiles(con, Filters())
    assert out["queue_ms_p99"].iloc[0] == 0.0 and np.isnan(out["ttft_ms_p99"].iloc[0])


def test_empty_store_gives_empty_frames(empty_db):
    con = store.connect(empty_db)
    f = Filters()
    assert latency.percentiles(con, f).empty and latency.percentiles(con, f, by=()).empty
    assert latency.histogram(con, f).empty and latency.segments(con, f).empty
    assert latency.over_time(con, f).empty and latency.slowest(con, f).empty
    assert latency.decode_vs_concurrency(con, f).empty and latency.length_buckets(con, f).empty


def _sql_sweep(con, per: str) -> pd.DataFrame:
    """decode_vs_concurrency computed the other way: the SQL window over start and end events."""
    rate = f"output_tokens / nullif({sql.DECODE_MS}, 0) * 1000"
    inner = latency.concurrency_sql(sql.SERVED, per, extra_cols=f"{rate} AS rate")
    return con.execute(f"SELECT grp, concurrency, count(*) AS requests, quantile_cont(rate, 0.1) AS p10, "
                       f"quantile_cont(rate, 0.5) AS p50, quantile_cont(rate, 0.9) AS p90 FROM ({inner}) "
                       "WHERE rate > 0 GROUP BY 1, 2 ORDER BY 1, 2").df()


@pytest.mark.parametrize("per", ["model", "replica"])
def test_numpy_concurrency_sweep_equals_the_sql_window(per):
    """Millisecond-rounded times (many ties, hand-overs at one instant), two replicas per model, some rows
    without a decode rate: the numpy sweep gives the SQL window's levels, counts and percentiles."""
    rng = np.random.default_rng(11)
    n = 4000
    start = np.sort(rng.integers(0, 600_000, n))
    df = pd.DataFrame({
        "request_id": [f"c{i}" for i in range(n)],
        "ts": [T0 + timedelta(milliseconds=int(s)) for s in start],
        "model": rng.choice(["a", "b"], n), "replica": rng.choice(["r1", "r2"], n),
        "queue_ms": np.where(rng.random(n) < 0.5, 0.0, rng.integers(0, 400, n)).astype(float),
        "decode_ms": np.where(rng.random(n) < 0.1, np.nan, rng.integers(100, 3000, n)).astype(float),
        "output_tokens": rng.integers(1, 500, n),
    })
    df["total_ms"] = df["queue_ms"] + df["decode_ms"].fillna(700.0)
    con = store.connect(":memory:")
    ingest_frame(con, df)
    mine = latency.decode_vs_concurrency(con, Filters(), per=per)
    theirs = _sql_sweep(con, per)
    assert mine["concurrency"].max() > 3
    assert mine[["grp", "concurrency", "requests"]].values.tolist() == theirs[["grp", "concurrency", "requests"]].values.tolist()
    assert_allclose(mine[["tokens_per_s_p10", "tokens_per_s_p50", "tokens_per_s_p90"]].to_numpy(),
                    theirs[["p10", "p50", "p90"]].to_numpy(), rtol=1e-12)


def test_log_histogram_values_on_its_edges():
    """Values exactly on geometric edges (1, 10, 100, 1000 ms): each lands where numpy puts it."""
    con = store.connect(":memory:")
    values = np.array([0.0, 0.0, 1.0, 1.0, 3.0, 10.0, 10.0, 99.99, 100.0, 500.0, 1000.0, 1000.0])
    ingest_frame(con, pd.DataFrame({"request_id": [f"g{i}" for i in range(len(values))],
                                    "ts": [T0] * len(values), "model": "m", "queue_ms": values}))
    h = latency.histogram(con, Filters(), "queue_ms", bins=3, scale="log")
    edges = np.r_[h.lo, h.hi.iloc[-1]]
    assert_allclose(edges, [0.0, 1.0, 10.0, 100.0, 1000.0], rtol=1e-12)
    assert h["count"].tolist() == np.histogram(values, bins=edges)[0].tolist() == [2, 3, 3, 4]
