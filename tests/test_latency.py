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
    h = latency.histogram(con, Filters(), "queue_ms", bins=bins, scale="linear", exact=True)
    for model, g in df.groupby("model"):
        mine = h[h.grp == model]
        counts, edges = np.histogram(g.queue_ms.to_numpy(), bins=bins)
        assert_allclose(np.r_[mine.lo.to_numpy(), mine.hi.iloc[-1]], edges, rtol=0, atol=0)
        assert mine["count"].tolist() == counts.tolist()


def test_log_histogram_matches_numpy_on_its_edges(synthetic):
    con, df = synthetic
    h = latency.histogram(con, Filters(), "total_ms", bins=25, scale="log", exact=True)
    for model, g in df.groupby("model"):
        mine = h[h.grp == model]
        edges = np.r_[mine.lo.to_numpy(), mine.hi.iloc[-1]]
        x = g.total_ms.to_numpy()
        assert edges[0] == 0 and edges[1] == x[x > 0].min() and edges[-1] == x.max()
        assert_allclose(np.diff(np.log(edges[1:])), np.log(edges[-1] / edges[1]) / 25, rtol=1e-9)
        counts, _ = np.histogram(x, bins=edges)
        assert mine["count"].tolist() == counts.tolist()
    # the zeros of queue_ms land in the first bin [0, lowest positive)
    hq = latency.histogram(con, Filters(), "queue_ms", bins=10, scale="log", exact=True)
    for model, g in df.groupby("model"):
        assert hq[(hq.grp == model) & (hq.bin == 0)]["count"].iloc[0] == (g.queue_ms == 0).sum()


def test_histogram_edges_on_exact_edge_values():
    """Values sitting exactly on edges: half-open bins, closed last bin, as numpy."""
    con = store.connect(":memory:")
    values = np.array([0.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 10.0, 0.1, 0.3, 0.7])
    ingest_frame(con, pd.DataFrame({"request_id": [f"e{i}" for i in range(len(values))],
                                    "ts": [T0] * len(values), "model": "m", "queue_ms": values}))
    for bins in (3, 10, 20):
        h = latency.histogram(con, Filters(), "queue_ms", bins=bins, exact=True)
        counts, edges = np.histogram(values, bins=bins)
        assert h["count"].tolist() == counts.tolist()
        assert_allclose(np.r_[h.lo, h.hi.iloc[-1]], edges, rtol=0, atol=0)


def test_histogram_degenerate_inputs():
    con = store.connect(":memory:")
    ingest_frame(con, pd.DataFrame({"request_id": ["a", "b"], "ts": [T0, T0], "model": "m",
                                    "queue_ms": [0.0, 0.0]}))
    lin = latency.histogram(con, Filters(), "queue_ms", bins=4, exact=True)
    counts, edges = np.histogram([0.0, 0.0], bins=4)
    assert lin["count"].tolist() == counts.tolist()
    log = latency.histogram(con, Filters(), "queue_ms", bins=4, scale="log", exact=True)
    assert log["count"].tolist() == [2] and log.lo.tolist() == [0.0]
    assert latency.histogram(con, Filters(models=("nobody",)), "queue_ms").empty
    with pytest.raises(InputError):
        latency.histogram(con, Filters(), "queue_ms", bins=0, exact=True)


def test_segments_are_the_band_means_and_add_up(synthetic):
    con, df = synthetic
    seg = latency.segments(con, Filters(), exact=True)
    for (model, q), g in seg.groupby(["grp", "quantile"]):
        sub = df[df.model == model]
        lo, hi = np.quantile(sub.total_ms, [q - 0.005, q + 0.005])
        band = sub[(sub.total_ms >= lo) & (sub.total_ms <= hi)]
        assert g.requests_in_band.iloc[0] == len(band)
        assert (g.requests == len(sub)).all()              # the model's requests, those the percentiles are of
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


def _minute_load() -> pd.DataFrame:
    """Five requests over three minutes from 09:00, in service across minute edges (worked by hand below)."""
    s = timedelta(seconds=1)
    return pd.DataFrame({
        "request_id": ["a", "b", "c", "d", "e"],
        "ts": [T0, T0 + 30 * s, T0 + 60 * s, T0 + 120 * s, T0 + 60 * s],
        "model": "m", "tenant": ["t1", "t1", "t1", "t1", "t2"],
        "queue_ms": [0.0, 10_000.0, 0.0, 0.0, 0.0],
        "total_ms": [90_000.0, 100_000.0, 60_000.0, 30_000.0, 60_000.0],
        "decode_ms": [50_000.0, 80_000.0, 60_000.0, 30_000.0, 60_000.0],
        "output_tokens": [500, 400, 1200, 60, 600],
    })


@pytest.mark.parametrize("exact", [True, False])
def test_decode_rate_against_concurrency_by_hand(exact):
    """In service: a 09:00:00-09:01:30, b (10 s queued) 09:00:40-09:02:10, c and e 09:01-09:02, d 09:02:00-30.
    Minute 09:00: 60 + 20 = 80 s, 1.33 in service -> level 1; 09:01: 30 + 60 + 60 + 60 = 210 s, 3.5 -> 4;
    09:02: 10 + 30 = 40 s, 0.67 -> 1 (at least the request itself). Rates (tokens/s): a 10, b 5, c 20, d 2,
    e 10."""
    con = store.connect(":memory:")
    ingest_frame(con, _minute_load())
    out = latency.decode_vs_concurrency(con, Filters(), exact=exact).set_index("concurrency")
    assert out.attrs["max_rel_error"] == (0.0 if exact else store.SKETCH_ALPHA)
    assert out["requests"].to_dict() == {1: 3, 4: 2}
    # level 1: a, b, d = 10, 5, 2 (numpy's interpolation); level 4: c and e = 20, 10
    assert_allclose(out.loc[1, ["tokens_per_s_p10", "tokens_per_s_p50", "tokens_per_s_p90"]].tolist(),
                    np.percentile([10.0, 5.0, 2.0], [10, 50, 90]), rtol=_rtol(exact))
    assert_allclose(out.loc[4, "tokens_per_s_p50"], 15.0, rtol=_rtol(exact))


def test_decode_rate_counts_every_tenant_in_service():
    """A tenant filter picks whose decode speed is shown, not who was in service: e (tenant t2) still counts
    in c's minute (the raw-row path, as a tenant filter always is)."""
    con = store.connect(":memory:")
    ingest_frame(con, _minute_load())
    out = latency.decode_vs_concurrency(con, Filters(tenants=("t1",)))
    assert out[["concurrency", "requests"]].values.tolist() == [[1, 3], [4, 1]]
    assert_allclose(out.set_index("concurrency").loc[4, "tokens_per_s_p50"], 20.0)
    # a period of the last minute alone still counts b, which arrived before it, in service in it
    last = latency.decode_vs_concurrency(con, Filters(since=T0 + timedelta(minutes=2)), exact=True)
    assert last[["concurrency", "requests"]].values.tolist() == [[1, 1]]
    one = latency.decode_vs_concurrency(con, Filters(since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=2)))
    assert one[["concurrency", "requests"]].values.tolist() == [[4, 2]]


def test_slowest_requests_carry_their_segments(synthetic):
    con, df = synthetic
    top = latency.slowest(con, Filters(), n=5)
    assert_allclose(top.total_ms.to_numpy(), np.sort(df.total_ms.to_numpy())[::-1][:5])
    seg = top.route_ms + top.queue_ms + top.prefill_ms.fillna(0) + top.decode_ms.fillna(0) + top.other_ms
    gw = top.prefill_ms.isna()
    seg[gw] += top.service_ms[gw]
    assert_allclose(seg, top.total_ms, rtol=1e-9)


def test_a_request_logging_only_its_time_to_first_token_splits_at_it():
    """LLMPerf's requests (real rows, tests/data) log ttft_s and end_to_end_latency_s, no segment: 'Where the time
    goes' and the slowest requests were one grey 'other'. Split at the first token: to it, and after it; with a
    queue logged, the wait for the first token less the queue; a logged prefill or decode keeps the request's own
    segments, and a TTFT past the total (bad data) splits nothing."""
    con = store.connect(":memory:")
    path = DATA / "llmperf" / "individual" / "fireworks_70b.json"
    ingest_path(con, path, IngestOptions())
    import json
    raw = pd.DataFrame(json.loads(path.read_text()))
    ok = raw[raw["error_code"].isna() & raw["ttft_s"].notna()]
    ttft, total = ok["ttft_s"] * 1000, ok["end_to_end_latency_s"] * 1000
    for exact in (True, False):
        seg = latency.segments(con, Filters(), exact=exact, band=1.0)           # the band: every request
        parts = seg[seg.percentile == "P50"].set_index("segment")["ms"]
        assert set(parts.index) == {"first_token", "after_first_token", "other"}
        assert_allclose(parts["first_token"], ttft.mean(), rtol=1e-9)
        assert_allclose(parts["after_first_token"], (total - ttft).mean(), rtol=1e-9)
        assert abs(parts["other"]) < 1e-6
    top = latency.slowest(con, Filters(), n=3)
    slowest = ok.assign(total=total, ttft=ttft).sort_values("total", ascending=False).head(3)
    assert_allclose(top.first_token_ms, slowest.ttft, rtol=1e-9)
    assert_allclose(top.after_first_token_ms, slowest.total - slowest.ttft, rtol=1e-9)
    assert_allclose(top.other_ms, 0.0, atol=1e-6)
    # the same as SQL over hand-made rows: queue logged; prefill logged; TTFT past the total; service alone
    c = store.connect(":memory:")
    rows = [dict(request_id="q", queue_ms=300.0, ttft_ms=1000.0, total_ms=4000.0, service_ms=3700.0),
            dict(request_id="p", prefill_ms=500.0, ttft_ms=900.0, total_ms=2000.0),
            dict(request_id="bad", ttft_ms=5000.0, total_ms=4000.0),
            dict(request_id="s", service_ms=1500.0, total_ms=2000.0)]
    ingest_frame(c, pd.DataFrame(rows).assign(ts=datetime(2026, 3, 2, 10), model="m", status="ok"))
    got = c.execute("SELECT request_id, " + ", ".join(f"{e} AS {n}" for n, e in latency.SEGMENTS)
                    + " FROM requests ORDER BY request_id").df().set_index("request_id")
    assert (got.loc["q", "first_token"], got.loc["q", "after_first_token"], got.loc["q", "queue"]) == (700.0, 3000.0,
                                                                                                      300.0)
    assert pd.isna(got.loc["q", "service"])                       # within the split: not counted twice
    assert got.loc["p", "prefill"] == 500.0 and got.loc[["p", "bad", "s"], "first_token"].isna().all()
    assert got.loc["s", "service"] == 1500.0


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


@pytest.mark.parametrize("per", ["model", "replica"])
def test_numpy_concurrency_sweep_equals_the_sql_window(per):
    """Millisecond-rounded times (many ties, hand-overs at one instant), two replicas per model: the numpy
    sweep (concurrency_at_starts, which the diagnosis uses) gives the SQL window's level for every request."""
    rng = np.random.default_rng(11)
    n = 4000
    start = np.sort(rng.integers(0, 600_000, n))
    df = pd.DataFrame({
        "request_id": [f"c{i}" for i in range(n)],
        "ts": [T0 + timedelta(milliseconds=int(s)) for s in start],
        "model": rng.choice(["a", "b"], n), "replica": rng.choice(["r1", "r2"], n),
        "queue_ms": np.where(rng.random(n) < 0.5, 0.0, rng.integers(0, 400, n)).astype(float),
        "decode_ms": rng.integers(100, 3000, n).astype(float),
    })
    df["total_ms"] = df["queue_ms"] + df["decode_ms"]
    con = store.connect(":memory:")
    ingest_frame(con, df)
    theirs = con.execute(f"SELECT request_id, concurrency FROM ({latency.concurrency_sql(sql.SERVED, per, 'request_id')})"
                         ).df().set_index("request_id")["concurrency"]
    key = df["model"] + (df["replica"] if per == "replica" else "")
    epoch_ms = df["ts"].astype("datetime64[us]").astype("int64") / 1e3     # as SQL: epoch_us(ts) / 1e3
    st, en = epoch_ms + df["queue_ms"], epoch_ms + df["total_ms"]
    for _, idx in df.groupby(key).groups.items():
        order, conc = latency.concurrency_at_starts(st[idx].to_numpy(), en[idx].to_numpy())
        ids = df.loc[idx, "request_id"].to_numpy()[order]
        assert conc.tolist() == theirs.loc[ids].tolist()
    assert theirs.max() > 3


def test_log_histogram_values_on_its_edges():
    """Values exactly on geometric edges (1, 10, 100, 1000 ms): each lands where numpy puts it."""
    con = store.connect(":memory:")
    values = np.array([0.0, 0.0, 1.0, 1.0, 3.0, 10.0, 10.0, 99.99, 100.0, 500.0, 1000.0, 1000.0])
    ingest_frame(con, pd.DataFrame({"request_id": [f"g{i}" for i in range(len(values))],
                                    "ts": [T0] * len(values), "model": "m", "queue_ms": values}))
    h = latency.histogram(con, Filters(), "queue_ms", bins=3, scale="log", exact=True)
    edges = np.r_[h.lo, h.hi.iloc[-1]]
    assert_allclose(edges, [0.0, 1.0, 10.0, 100.0, 1000.0], rtol=1e-12)
    assert h["count"].tolist() == np.histogram(values, bins=edges)[0].tolist() == [2, 3, 3, 4]
