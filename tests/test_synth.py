"""finops.sample.synth: determinism, the canonical shape, the fleet's statistics, its queueing and its incidents."""
from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from finops import schema
from finops.capacity import queueing
from finops.cascade import sweep as cascade
from finops.sample import synth
from helpers import ROOT

LARGE = "llama-3.1-70b"
SMALL = "llama-3.1-8b"


def servers(model: str, site: str = synth.CLOUD) -> int:
    spec = synth.SELF_HOSTED[model]
    replicas = [r for r in range(spec.replicas) if (r in spec.edge_replicas) == (site == synth.EDGE)]
    return len(replicas) * spec.slots_per_replica


@pytest.fixture(scope="module")
def fleet() -> pd.DataFrame:
    t0 = time.perf_counter()
    frame = synth.generate()
    print(f"\ngenerate(): {len(frame):,} rows in {time.perf_counter() - t0:.1f} s")
    return frame


@pytest.fixture(scope="module")
def requests(fleet) -> pd.DataFrame:
    """Gateway requests: every row but the rejected cascade attempts."""
    return fleet[~fleet["request_id"].str.endswith("#attempt")]


def arrivals(frame: pd.DataFrame) -> pd.Series:
    """Rows whose ts is a gateway arrival: all but the large model's answers to escalations,
    which are called when the attempt is done (so they may fall just after the period)."""
    answers = frame.loc[frame["request_id"].str.endswith("#attempt"), "request_id"].str.removesuffix("#attempt")
    return frame.loc[~frame["request_id"].isin(answers), "ts"]


def in_window(frame: pd.DataFrame, incident: dict) -> pd.Series:
    return (frame["ts"] >= incident["start"]) & (frame["ts"] < incident["end"])


def incident(kind: str) -> dict:
    return next(i for i in synth.INCIDENTS if i["kind"] == kind)


# ---------------------------------------------------------------- determinism and shape

def test_same_seed_gives_identical_frames():
    a = synth.generate(days=2, seed=3, requests_per_day=4_000)
    b = synth.generate(days=2, seed=3, requests_per_day=4_000)
    pd.testing.assert_frame_equal(a, b)
    assert pd.util.hash_pandas_object(a, index=True).sum() == pd.util.hash_pandas_object(b, index=True).sum()


def test_different_seed_gives_different_frames():
    a = synth.generate(days=1, seed=3, requests_per_day=4_000)
    b = synth.generate(days=1, seed=4, requests_per_day=4_000)
    assert len(a) != len(b) or not a["input_tokens"].equals(b["input_tokens"])


def test_columns_and_dtypes_match_the_schema():
    frame = synth.generate(days=1, requests_per_day=3_000)
    assert tuple(frame.columns) == schema.NAMES
    assert str(frame["ts"].dtype).startswith("datetime64") and frame["ts"].dt.tz is None
    for col in schema.TOKEN_COLUMNS:
        assert str(frame[col].dtype) == "Int64"
    assert str(frame["prompt_chars"].dtype) == "Int32"
    for col in (*schema.MS_COLUMNS, "cost_usd", "confidence", "quality"):
        assert frame[col].dtype == np.float64, col
    assert frame["cache_hit"].dtype == bool
    assert str(frame["escalated"].dtype) == "boolean"
    for col in ("request_id", "tenant", "sla_tier", "model", "route", "strategy", "site", "status", "attrs"):
        assert frame[col].map(lambda v: isinstance(v, str) or v is None).all(), col
    assert frame[list(schema.REQUIRED)].notna().all().all()
    assert frame["request_id"].is_unique
    assert frame["request_id"].str.fullmatch(r"r\d{2}-\d{7}(#attempt)?").all()
    assert frame["ts"].is_monotonic_increasing
    assert (frame["ts"].dt.microsecond % 1000 == 0).all()          # millisecond resolution
    assert set(frame["status"]) <= set(schema.STATUSES)
    for text in frame["attrs"]:
        assert {"region", "client", "workload"} <= json.loads(text).keys()


def test_start_shifts_the_run_and_its_incidents():
    start = datetime(2026, 1, 5, 13, 30, tzinfo=timezone(timedelta(hours=1)))    # 12:30 UTC
    frame = synth.generate(days=1, requests_per_day=2_000, start=start)
    assert frame["ts"].min() >= pd.Timestamp("2026-01-05 12:30")
    assert arrivals(frame).max() < pd.Timestamp("2026-01-06 12:30")
    assert frame["ts"].max() < pd.Timestamp("2026-01-06 12:40")
    assert synth.incident_windows(datetime(2026, 1, 5), 3) == []          # all three incidents are later
    shifted = synth.incident_windows(synth.DEFAULT_START + timedelta(days=1), 14)
    assert [i["start"] - j["start"] for i, j in zip(shifted, synth.INCIDENTS, strict=True)] == [timedelta(days=1)] * 3


def test_incidents_are_declared():
    kinds = {i["kind"]: i for i in synth.INCIDENTS}
    assert set(kinds) == {"saturation", "surge", "decode_tail"}
    assert kinds["saturation"]["model"] == LARGE and kinds["decode_tail"]["model"] == SMALL
    surge = kinds["surge"]
    tenant = next(t for t in synth.TENANTS if t.name == surge["tenant"])
    assert surge["model"] == LARGE == tenant.large and tenant.sla_tier == "premium" and surge["factor"] > 2
    assert surge["start"].weekday() < 5 and surge["start"].date() > kinds["saturation"]["start"].date()
    for i in synth.INCIDENTS:
        assert synth.DEFAULT_START <= i["start"] < i["end"] <= synth.DEFAULT_START + timedelta(days=synth.DEFAULT_DAYS)
    sat = kinds["saturation"]
    assert sat["start"].weekday() < 5 and (sat["start"] - synth.DEFAULT_START).days >= 7   # weekday of week two
    assert sat["end"] - sat["start"] == timedelta(hours=2)
    assert kinds["decode_tail"]["end"] - kinds["decode_tail"]["start"] == timedelta(minutes=90)
    assert kinds["decode_tail"]["start"].date() != sat["start"].date()


def test_replicas_match_the_price_book():
    book = pd.read_csv(ROOT / "data" / "prices.csv").set_index("model")
    for name, spec in synth.SELF_HOSTED.items():
        assert book.loc[name, "kind"] == "self_hosted"
        assert int(book.loc[name, "replicas"]) == spec.replicas
    for name in synth.API_MODELS:
        assert book.loc[name, "kind"] == "api"


# ---------------------------------------------------------------- the fleet at full size

def test_default_size(fleet):
    expected = synth.DEFAULT_REQUESTS_PER_DAY * synth.DEFAULT_DAYS
    assert abs(len(fleet) - expected) <= 0.15 * expected
    assert fleet["ts"].min() >= pd.Timestamp(synth.DEFAULT_START)
    assert arrivals(fleet).max() < pd.Timestamp(synth.DEFAULT_START + timedelta(days=synth.DEFAULT_DAYS))


def test_tenants_tiers_models_and_sites(fleet):
    tenants = fleet.groupby("tenant").size()
    assert len(tenants) >= 6 and tenants.max() > 2 * tenants.min()                 # different volumes
    tiers = fleet.groupby("tenant")["sla_tier"].agg(set)
    assert all(len(t) == 1 for t in tiers)
    assert {"premium", "standard", "batch"} == set(fleet["sla_tier"])
    strategy = {"premium": "latency", "standard": "cascade", "batch": "cost"}
    assert (fleet["strategy"] == fleet["sla_tier"].map(strategy)).all()
    assert {SMALL, LARGE, "gpt-4o-mini", "gpt-4o"} <= set(fleet["model"])
    served = fleet[~fleet["cache_hit"]]
    api = served["model"].isin(list(synth.API_MODELS))
    assert (served.loc[api, "route"] == "api").all() and served.loc[api, "queue_ms"].isna().all()
    assert served.loc[api, "replica"].isna().all()
    ok = served[~api & (served["status"] != "timeout")]
    for model, spec in synth.SELF_HOSTED.items():
        rows = ok[ok["model"] == model]
        assert set(rows["replica"]) == {f"{model}-r{r}" for r in range(spec.replicas)}
        edge = rows["site"] == synth.EDGE
        assert set(rows.loc[edge, "replica"]) == {f"{model}-r{r}" for r in spec.edge_replicas}
        assert (rows.loc[edge, "route"] == "edge").all()
    assert (ok.loc[ok["model"] == LARGE, "route"] == "slow").all()
    assert (ok.loc[(ok["model"] == SMALL) & (ok["site"] == synth.CLOUD), "route"] == "fast").all()


def test_about_15_percent_cache_hits(fleet, requests):
    assert 0.12 <= requests["cache_hit"].mean() <= 0.18
    assert 0.12 <= fleet["cache_hit"].mean() <= 0.18
    hits = fleet[fleet["cache_hit"]]
    assert (hits["route"] == "cache").all() and (hits["cost_usd"] == 0.0).all()
    assert hits["total_ms"].between(5, 20).all()
    for col in ("queue_ms", "prefill_ms", "decode_ms", "service_ms", "replica"):
        assert hits[col].isna().all(), col
    assert hits["model"].isin([*synth.SELF_HOSTED, *synth.API_MODELS]).all()
    assert fleet.loc[~fleet["cache_hit"], "cost_usd"].isna().all()      # priced later from the book


def test_escalations_come_in_linked_pairs(fleet):
    attempts = fleet[fleet["escalated"].fillna(False)]
    assert attempts["request_id"].str.endswith("#attempt").all()
    assert fleet.loc[fleet["request_id"].str.endswith("#attempt"), "escalated"].fillna(False).all()
    parent_id = attempts["attrs"].map(lambda a: json.loads(a)["parent_id"])
    assert (parent_id == attempts["request_id"].str.removesuffix("#attempt")).all()
    parents = fleet.set_index("request_id").loc[parent_id.to_numpy()]
    assert (~parents["escalated"].astype(bool)).all() and parents["escalated"].notna().all()
    assert (parents["tenant"].to_numpy() == attempts["tenant"].to_numpy()).all()
    small = {t.small for t in synth.TENANTS if t.strategy == "cascade"}
    large = {t.large for t in synth.TENANTS if t.strategy == "cascade"}
    assert set(attempts["model"]) <= small and set(parents["model"]) <= large
    # the large model is called once the attempt has finished
    done = attempts["ts"].to_numpy() + pd.to_timedelta(attempts["total_ms"].to_numpy(), unit="ms")
    gap_ms = (parents["ts"].to_numpy() - done) / pd.Timedelta(milliseconds=1)
    assert gap_ms.min() >= -1 and gap_ms.max() <= 3
    # escalated is set on cascade rows only (null on cache hits and other strategies)
    cascade_rows = (fleet["strategy"] == "cascade") & ~fleet["cache_hit"]
    assert fleet.loc[cascade_rows, "escalated"].notna().all()
    assert fleet.loc[~cascade_rows, "escalated"].isna().all()
    rate = len(attempts) / (cascade_rows.sum() - len(attempts))
    assert 0.2 <= rate <= 0.35


def test_confidence_drives_the_cascade(fleet):
    first = fleet[(fleet["strategy"] == "cascade") & ~fleet["cache_hit"] & fleet["confidence"].notna()]
    escalated = first["escalated"].astype(bool)
    answered = first["status"] == "ok"
    assert (first.loc[escalated & answered, "confidence"] < synth.TAU).all()
    assert (first.loc[~escalated & answered, "confidence"] >= synth.TAU).all()
    # longer prompts: lower confidence
    rho = stats.spearmanr(first["input_tokens"].astype(float), first["confidence"]).statistic
    assert rho < -0.2
    assert first["confidence"].between(0, 1).all()


def cascade_labels(fleet: pd.DataFrame) -> pd.DataFrame:
    """Per graded cascade request: the small model's confidence and grade, the large model's grade."""
    rows = fleet[(fleet["strategy"] == "cascade") & ~fleet["cache_hit"]]
    attempts = rows[rows["escalated"].astype(bool) & rows["quality"].notna()]
    parent_q = rows.set_index("request_id")["quality"]
    esc = pd.DataFrame({"conf": attempts["confidence"].to_numpy(), "qs": attempts["quality"].to_numpy(),
                        "ql": parent_q.reindex(attempts["request_id"].str.removesuffix("#attempt")).to_numpy()})
    kept = rows[~rows["escalated"].astype(bool) & rows["confidence"].notna() & rows["quality"].notna()]
    ql = kept["attrs"].map(lambda a: json.loads(a).get("shadow_large_quality"))
    direct = pd.DataFrame({"conf": kept["confidence"].to_numpy(), "qs": kept["quality"].to_numpy(),
                           "ql": ql.to_numpy(dtype=float)})
    return pd.concat([esc, direct], ignore_index=True).dropna()


def test_shadow_quality_labels_make_a_meaningful_cascade_curve(fleet, requests):
    served = requests[~requests["cache_hit"]]
    assert 0.035 <= served["quality"].notna().mean() <= 0.065
    assert set(fleet["quality"].dropna().unique()) <= {0.0, 1.0}
    labels = cascade_labels(fleet)
    assert len(labels) > 3_000
    low, high = labels[labels["conf"] < 0.6], labels[labels["conf"] >= 0.9]
    assert high["qs"].mean() - low["qs"].mean() > 0.4                 # the small model errs when unsure
    assert labels["ql"].mean() > labels["qs"].mean() + 0.1
    curve = cascade.sweep(labels["conf"], labels["qs"], labels["ql"], 1.0, 10.0)
    at = curve.iloc[np.searchsorted(curve["threshold"].to_numpy(), [0.5, synth.TAU, 0.95])]
    assert at["avg_quality"].is_monotonic_increasing and at["escalation_rate"].is_monotonic_increasing
    # tau = 0.8 recovers most of the large model's edge over the small one for a quarter of the calls
    q08 = at["avg_quality"].iloc[1]
    gain = (q08 - labels["qs"].mean()) / (labels["ql"].mean() - labels["qs"].mean())
    assert gain > 0.5 and 0.2 <= at["escalation_rate"].iloc[1] <= 0.35


def test_latency_segments_add_up(fleet):
    served = fleet[~fleet["cache_hit"]]
    q = served["queue_ms"].fillna(0)
    np.testing.assert_allclose(served["total_ms"], served["route_ms"] + q + served["service_ms"].fillna(0), atol=2e-3)
    ok = served[served["service_ms"].notna()]
    np.testing.assert_allclose(ok["service_ms"], ok["prefill_ms"] + ok["decode_ms"], atol=2e-3)
    np.testing.assert_allclose(ok["ttft_ms"], ok["route_ms"] + ok["queue_ms"].fillna(0) + ok["prefill_ms"], atol=2e-3)
    route = served["route_ms"]
    cloud_hop = (served["tenant"] == "hooli-chat") & (served["site"] == synth.CLOUD)
    assert route[~cloud_hop].between(0.2, 2.0).all()
    assert route[cloud_hop].between(150, 233).all()                  # edge -> cloud network hop
    assert (served["cached_input_tokens"] <= served["input_tokens"]).all()
    assert (served["cached_input_tokens"] > 0).mean() > 0.2
    ratio = served["prompt_chars"].astype(float) / served["input_tokens"].astype(float)
    assert 3.3 <= ratio.median() <= 4.2


def test_errors_and_timeouts(fleet):
    bad = fleet["status"] != "ok"
    assert 0.003 <= bad.mean() <= 0.008
    assert fleet.loc[bad, "error_type"].notna().all() and fleet.loc[~bad, "error_type"].isna().all()
    sat = incident("saturation")
    inside = in_window(fleet, sat) & (fleet["model"] == LARGE)
    timeouts = fleet["error_type"] == "queue_timeout"
    assert timeouts[inside].mean() > 20 * max(timeouts[~inside].mean(), 1e-6)


# ---------------------------------------------------------------- seasonality and bursts

def test_daily_and_weekly_seasonality(fleet):
    per_day = fleet.groupby(fleet["ts"].dt.normalize()).size()
    weekend = per_day[per_day.index.day_of_week >= 5]
    weekday = per_day[per_day.index.day_of_week < 5]
    assert weekend.mean() < 0.75 * weekday.mean()
    wk = fleet[fleet["ts"].dt.day_of_week < 5]
    by_hour = wk.groupby(wk["ts"].dt.hour).size()
    assert by_hour.loc[14:20].mean() > 2.5 * by_hour.loc[6:9].mean()          # US business hours vs night


@pytest.mark.parametrize("burst", synth.BURSTS, ids=lambda b: b["tenant"])
def test_bursts_raise_the_tenant_rate(fleet, burst):
    at = pd.Timestamp(synth.DEFAULT_START) + pd.Timedelta(days=burst["day"]) + pd.Timedelta(f"{burst['at']}:00")
    rows = fleet[(fleet["tenant"] == burst["tenant"]) & ~fleet["request_id"].str.endswith("#attempt")]
    during = rows["ts"].between(at, at + pd.Timedelta(minutes=burst["minutes"]), inclusive="left").sum()
    around = rows["ts"].between(at - pd.Timedelta(minutes=60), at, inclusive="left").sum()
    assert during / burst["minutes"] > 2.0 * around / 60


# ---------------------------------------------------------------- queueing

def hourly(fleet: pd.DataFrame, model: str, site: str = synth.CLOUD) -> pd.DataFrame:
    rows = fleet[(fleet["model"] == model) & (fleet["site"] == site) & ~fleet["cache_hit"]]
    hours = rows.groupby(rows["ts"].dt.floor("h"))
    return pd.DataFrame({"util": hours["service_ms"].sum() / (servers(model, site) * 3.6e6),
                         "queue_ms": hours["queue_ms"].mean(),
                         "queue_p95": hours["queue_ms"].quantile(0.95)})


def outside_incidents(h: pd.DataFrame) -> pd.DataFrame:
    keep = np.ones(len(h), dtype=bool)
    for i in synth.INCIDENTS:
        keep &= ~((h.index >= pd.Timestamp(i["start"]).floor("h")) & (h.index < pd.Timestamp(i["end"])))
    return h[keep]


def test_queue_rises_with_utilisation(fleet):
    h = hourly(fleet, LARGE)
    # the pool queues only in its busiest hours (the fifth of the hours with the highest utilisation)
    assert stats.spearmanr(h["util"], h["queue_ms"]).statistic > 0.3
    buckets = h.groupby(pd.qcut(h["util"], 5), observed=True)["queue_ms"].mean()
    assert buckets.iloc[0] <= buckets.iloc[2] <= buckets.iloc[4]
    assert buckets.iloc[4] > 100 * max(buckets.iloc[0], 0.1)


@pytest.mark.parametrize("model, site, p95_range, queues", [(LARGE, synth.CLOUD, (0.10, 0.20), True),
                                                           (SMALL, synth.CLOUD, (0.04, 0.09), False)])
def test_peak_hours_run_at_a_believable_utilisation(fleet, model, site, p95_range, queues):
    """Measured on the fleet at the seed (H100 speeds, 36k requests a day): the 70b's busiest hours use about
    15 % of its slot time and queue a little; the 8b is over-provisioned (about 6 %, no queue)."""
    h = outside_incidents(hourly(fleet, model, site))
    assert p95_range[0] <= h["util"].quantile(0.95) <= p95_range[1]
    assert h["util"].max() < 2 * p95_range[1]
    assert (h["util"].quantile(0.05) > 0) and h["util"].min() < 0.25 * h["util"].quantile(0.95)   # idle at night
    busy = h[h["util"] >= h["util"].quantile(0.9)]
    assert (busy["queue_ms"].mean() > 0) == queues                 # small but not zero at the 70b's peaks
    assert busy["queue_p95"].median() < 2_000


def test_nothing_severe_outside_the_incidents(fleet):
    """Outside the incidents no hour's P95 wait reaches the model's median service time, and no
    request gives up waiting."""
    for model, site in ((LARGE, synth.CLOUD), (SMALL, synth.CLOUD), (SMALL, synth.EDGE)):
        h = outside_incidents(hourly(fleet, model, site))
        median_service = fleet.loc[(fleet["model"] == model) & (fleet["site"] == site), "service_ms"].median()
        assert h["queue_p95"].max() < median_service, (model, site)
    timeouts = fleet[fleet["error_type"] == "queue_timeout"]
    assert len(timeouts) > 50 and in_window(timeouts, incident("saturation")).all()


def test_saturation_incident(fleet):
    sat = incident("saturation")
    rows = fleet[(fleet["model"] == LARGE) & ~fleet["cache_hit"]]
    inside = in_window(rows, sat)
    q_in, q_out = rows.loc[inside, "queue_ms"].quantile(0.95), rows.loc[~inside, "queue_ms"].quantile(0.95)
    assert q_in > 10_000 and q_in > 20 * max(q_out, 100.0)
    second = inside & (rows["ts"] >= sat["start"] + timedelta(hours=1))    # the backlog built in the first hour
    assert rows.loc[second, "queue_ms"].median() > 500
    started = rows["ts"] + pd.to_timedelta(rows["route_ms"] + rows["queue_ms"], unit="ms")
    down = (started >= sat["start"]) & (started < sat["end"])
    assert down.sum() > 500 and not rows.loc[down, "replica"].isin(sat["replicas_down"]).any()
    # the other pools carry on as usual
    for model, site in ((SMALL, synth.CLOUD), (SMALL, synth.EDGE)):
        h = hourly(fleet, model, site)
        span = (h.index >= pd.Timestamp(sat["start"])) & (h.index < pd.Timestamp(sat["end"]))
        assert h.loc[span, "queue_p95"].max() < 5_000


def test_decode_tail_incident(fleet):
    tail = incident("decode_tail")
    rows = fleet[(fleet["model"] == tail["model"]) & (fleet["status"] == "ok") & ~fleet["cache_hit"]]
    short = rows[rows["output_tokens"] <= 32]
    inside = in_window(short, tail)
    p99_in, p99_out = short.loc[inside, "decode_ms"].quantile(0.99), short.loc[~inside, "decode_ms"].quantile(0.99)
    assert 1_400 <= p99_in - p99_out <= 2_600                      # about +2000 ms
    assert abs(short.loc[inside, "decode_ms"].median() - short.loc[~inside, "decode_ms"].median()) < 500
    # the large model's decode is untouched then
    large = fleet[(fleet["model"] == LARGE) & (fleet["status"] == "ok")]
    tpot = large["decode_ms"] / large["output_tokens"].astype(float)
    assert abs(tpot[in_window(large, tail)].median() / tpot.median() - 1) < 0.1


# ---------------------------------------------------------------- token lengths

@pytest.mark.parametrize("key", list(synth.TRACE_MEDIANS), ids=lambda k: "-".join(k))
def test_fitted_mixture_medians_match_the_traces(key):
    draws = synth.TOKEN_MIXTURES[key].sample(np.random.default_rng(0), 200_000)
    assert abs(np.median(draws) / synth.TRACE_MEDIANS[key] - 1) < 0.05


def test_fleet_token_medians_match_the_traces(requests):
    workload = requests["attrs"].map(lambda a: json.loads(a)["workload"])
    for w in ("conv", "code"):
        rows = requests[workload == w]
        assert abs(rows["input_tokens"].median() / synth.TRACE_MEDIANS[(w, "input")] - 1) < 0.1
        ok = rows[rows["status"] == "ok"]
        assert abs(ok["output_tokens"].median() / synth.TRACE_MEDIANS[(w, "output")] - 1) < 0.1


# ---------------------------------------------------------------- the FIFO simulation

def test_fifo_servers_hand_worked():
    # two servers; arrivals 0, 1, 2, 3 ms with services 10, 10, 10, 1 ms
    r = synth.fifo_servers(np.array([0.0, 1.0, 2.0, 3.0]), np.array([10.0, 10.0, 10.0, 1.0]), 2)
    assert r.queue_ms.tolist() == [0.0, 0.0, 8.0, 8.0] and r.server.tolist() == [0, 1, 0, 1]


def test_fifo_servers_patience_and_outage():
    r = synth.fifo_servers(np.array([0.0, 1.0, 2.0]), np.array([10.0, 10.0, 10.0]), 1,
                           patience_ms=np.array([5.0, 5.0, 20.0]))
    assert r.served.tolist() == [True, False, True]
    assert r.queue_ms.tolist() == [0.0, 5.0, 8.0]             # the second left at its patience
    # server 0 is down from 5 to 50 ms: the request at 6 ms waits for server 1
    r = synth.fifo_servers(np.array([0.0, 1.0, 6.0]), np.array([3.0, 20.0, 1.0]), 2, outages=[([0], 5.0, 50.0)])
    assert r.server.tolist() == [0, 1, 1] and r.queue_ms.tolist() == [0.0, 0.0, 15.0]


def test_fifo_servers_matches_erlang_c():
    rng = np.random.default_rng(1)
    lam, mu, c, n = 2.0, 0.4, 6, 400_000                      # per second; rho = 0.833
    arrivals = np.cumsum(rng.exponential(1 / lam, n)) * 1000
    r = synth.fifo_servers(arrivals, rng.exponential(1 / mu, n) * 1000, c)
    expected = queueing.mmc(lam, mu, c)
    wait_s = r.queue_ms[n // 10:] / 1000
    assert abs(wait_s.mean() / expected.wq_s - 1) < 0.1
    assert abs((wait_s > 0).mean() - expected.p_wait) < 0.02


def test_simulated_pools_never_exceed_their_servers(fleet):
    served = fleet[fleet["queue_ms"].notna() & fleet["service_ms"].notna()]
    for (model, site), rows in served.groupby(["model", "site"]):
        start = rows["ts"].astype("int64").to_numpy() / 1e3 + rows["route_ms"].to_numpy() + rows["queue_ms"].to_numpy()
        end = start + rows["service_ms"].to_numpy() - 0.01          # rounding to the microsecond
        events = np.concatenate([start, end])
        step = np.concatenate([np.ones(len(start)), -np.ones(len(end))])
        order = np.lexsort((step, events))
        assert np.cumsum(step[order]).max() <= servers(model, site), (model, site)
