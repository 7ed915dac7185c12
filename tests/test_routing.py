"""finops.spend.routing: shares, cache savings, cascade costs, misrouting and what-if replay, by hand."""
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import IngestOptions, ingest_frame, ingest_path
from finops.spend import report as spend
from finops.spend import routing
from helpers import DATA

T0 = datetime(2026, 3, 2, 10, 0)
SMALL, LARGE, SELF = "gpt-4o-mini", "gpt-4o", "llama-3.1-8b"
PRICE = {SMALL: (0.15, 0.075, 0.60), LARGE: (2.50, 1.25, 10.0)}   # in, cached in, out per 1M


def _frame(seed: int = 5) -> pd.DataFrame:
    """Two hours of traffic: small/large API models, a small self-hosted model, a cascade with
    escalations (two rows each), cache hits and quality labels, three SLA tiers."""
    rng = np.random.default_rng(seed)
    rows = []
    n = 600
    for i in range(n):
        tier = ["premium", "standard", "batch"][i % 3]
        ts = T0 + timedelta(seconds=float(rng.uniform(0, 7200)))
        inp = int(rng.integers(10, 3000))
        out = int(rng.integers(5, 600))
        cached = int(inp // 4) if i % 5 == 0 else 0
        base = {"ts": ts, "tenant": f"t{i % 4}", "sla_tier": tier, "input_tokens": inp, "output_tokens": out,
                "cached_input_tokens": cached, "prompt_chars": inp * 4, "status": "ok", "queue_ms": 0.0,
                "route_ms": 1.0}
        if i % 10 == 0:        # semantic cache hit named after the model that would have served
            rows.append({**base, "request_id": f"c{i}", "model": LARGE, "route": "cache", "cache_hit": True,
                         "total_ms": 5.0})
            continue
        if tier == "standard":  # cost-first cascade: small first, escalate some
            esc = i % 4 == 1
            small = {**base, "request_id": f"s{i}", "model": SMALL, "route": "cascade", "strategy": "cascade",
                     "escalated": esc, "total_ms": 50 + 0.1 * inp + 20 * out, "quality": 0.0 if esc else 1.0}
            rows.append(small)
            if esc:
                rows.append({**base, "request_id": f"l{i}", "model": LARGE, "route": "cascade",
                             "strategy": "cascade", "escalated": False, "total_ms": 100 + 0.2 * inp + 40 * out,
                             "quality": 1.0, "attrs": f'{{"parent_id": "s{i}"}}'})
        elif tier == "premium":
            rows.append({**base, "request_id": f"p{i}", "model": LARGE, "route": "slow", "strategy": "latency",
                         "total_ms": 100 + 0.2 * inp + 40 * out})
        else:
            rows.append({**base, "request_id": f"b{i}", "model": SELF, "route": "fast", "strategy": "cost",
                         "service_ms": 30 + 0.05 * inp + 10 * out, "total_ms": 31 + 0.05 * inp + 10 * out})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def fleet():
    con = store.connect(":memory:")
    df = _frame()
    ingest_frame(con, df, name="routing fixture")
    return con, df


def _book_cost(df: pd.DataFrame, model: str) -> pd.Series:
    pin, pcached, pout = PRICE[model]
    return ((df.input_tokens - df.cached_input_tokens) * pin + df.cached_input_tokens * pcached
            + df.output_tokens * pout) / 1e6


def _fleet_price(con, df) -> float:
    """llama-3.1-8b: 4 replicas x 1 GPU x $2.50 every hour of the store's span, over its served tokens."""
    hours = 2
    served = df[(df.model == SELF) & ~df.cache_hit.fillna(False).astype(bool)]
    return 4 * 1 * 2.50 * hours / (served.input_tokens + served.output_tokens).sum() * 1e6


def test_mix_shares_add_up_and_match_counts(fleet):
    con, df = fleet
    m = routing.mix(con, Filters(), dim="route")
    assert_allclose(m.request_share.sum(), 1.0)
    assert_allclose(m.spend_share.sum(), 1.0)
    counts = df.groupby("route").size()
    assert m.set_index("series")["requests"].to_dict() == counts.to_dict()
    per_tier = routing.mix(con, Filters(), dim="model", grain="hour", split="sla_tier")
    sums = per_tier.groupby(["period", "sla_tier"])["request_share"].sum()
    assert_allclose(sums.to_numpy(), 1.0)
    with pytest.raises(InputError):
        routing.mix(con, Filters(), dim="tenant; drop table requests")


def test_effective_price_of_a_self_hosted_model_is_fleet_cost_over_served_tokens(fleet):
    con, df = fleet
    p = routing.effective_prices(con, Filters()).set_index("model")
    assert_allclose(p.loc[SELF, "input_usd_per_1m"], _fleet_price(con, df), rtol=1e-9)
    assert p.loc[SELF, "output_usd_per_1m"] == p.loc[SELF, "input_usd_per_1m"]
    assert p.loc[LARGE, "output_usd_per_1m"] == 10.0 and p.loc[LARGE, "basis"] == "price book"


def test_cache_savings_priced_on_the_model_that_would_have_served(fleet):
    con, df = fleet
    c = routing.cache_savings(con, Filters()).set_index("model")
    hits = df[df.cache_hit.fillna(False).astype(bool)]
    assert c.loc[LARGE, "cache_hits"] == len(hits)
    assert_allclose(c.loc[LARGE, "saved_usd"], _book_cost(hits, LARGE).sum(), rtol=1e-9)
    assert_allclose(c.loc[LARGE, "hit_rate"], len(hits) / (df.model == LARGE).sum())
    assert c.loc[SMALL, "cache_hits"] == 0 and c.loc[SMALL, "saved_usd"] == 0
    assert np.isnan(c.loc[LARGE, "saved_if_fleet_scaled_usd"]) and c.loc[SELF, "kind"] == "self_hosted"


def test_cache_hits_on_a_self_hosted_model_save_dollars_only_if_the_fleet_scales():
    con = store.connect(":memory:")
    df = _frame()
    hit = pd.DataFrame([{"request_id": "selfhit", "ts": T0, "model": SELF, "cache_hit": True, "input_tokens": 1000,
                         "output_tokens": 200, "cached_input_tokens": 0, "total_ms": 5.0, "sla_tier": "batch"}])
    ingest_frame(con, pd.concat([df, hit], ignore_index=True))
    c = routing.cache_savings(con, Filters()).set_index("model")
    eff = routing.effective_prices(con, Filters()).set_index("model").loc[SELF, "input_usd_per_1m"]
    assert c.loc[SELF, "saved_usd"] == 0
    assert_allclose(c.loc[SELF, "saved_if_fleet_scaled_usd"], 1200 * eff / 1e6)


def test_cascade_escalation_rate_and_rejected_attempt_cost(fleet):
    con, df = fleet
    s = routing.cascade_summary(con, Filters())
    casc = df[df.strategy == "cascade"]
    attempts = casc[casc.escalated == True]  # noqa: E712
    assert s.escalations == len(attempts)
    assert_allclose(s.escalation_rate, len(attempts) / (len(casc) - len(attempts)))
    assert_allclose(s.rejected_attempts_usd, _book_cost(attempts, SMALL).sum(), rtol=1e-9)
    assert_allclose(s.cascade_spend_usd, _book_cost(casc[casc.model == SMALL], SMALL).sum()
                    + _book_cost(casc[casc.model == LARGE], LARGE).sum(), rtol=1e-9)
    q = s.quality.set_index(["model", "escalated"])
    assert q.loc[(SMALL, True), "mean_quality"] == 0.0 and q.loc[(SMALL, False), "labelled"] > 0
    assert_allclose(s.over_time.escalation_rate.dropna().iloc[0], s.escalation_rate)


def test_one_model_on_both_sides_is_refused_by_every_policy_that_moves_traffic(fleet):
    # the sample with only llama-3.1-8b in the model filter: the page offered it as small and large, and "all-large"
    # showed a saving ($3,360.00 -> $2,596.42) that was only the cascade attempts the replay leaves out
    con, _ = fleet
    for policy in routing.POLICIES:
        if policy == "as-logged":
            assert routing.whatif(con, Filters(), policy, small_model=SMALL, large_model=SMALL) is not None
            continue
        with pytest.raises(InputError, match=f"the small and the large model are both {SMALL}"):
            routing.whatif(con, Filters(), policy, small_model=SMALL, large_model=SMALL)


def test_whatif_all_small_and_all_large_by_hand(fleet):
    con, df = fleet
    served = df[~df.cache_hit.fillna(False).astype(bool)]
    requests = served[served.escalated.fillna(False) == False]  # noqa: E712  attempts fold into their request
    eff = _fleet_price(con, df)
    actual = (_book_cost(served[served.model == SMALL], SMALL).sum()
              + _book_cost(served[served.model == LARGE], LARGE).sum()
              + (served[served.model == SELF].input_tokens + served[served.model == SELF].output_tokens).sum()
              * eff / 1e6)
    w = routing.whatif(con, Filters(), "all-small", small_model=SMALL, large_model=LARGE)
    assert_allclose(w.actual_usd, actual, rtol=1e-9)
    assert_allclose(w.counterfactual_usd, _book_cost(requests, SMALL).sum(), rtol=1e-9)
    assert w.requests == len(requests)
    w = routing.whatif(con, Filters(), "all-large", small_model=SMALL, large_model=LARGE)
    assert_allclose(w.counterfactual_usd, _book_cost(requests, LARGE).sum(), rtol=1e-9)
    assert_allclose(w.delta_pct, (w.counterfactual_usd / w.actual_usd - 1) * 100)
    # the bill for the same filters, idle GPU time included: unfiltered, the effective price makes the
    # repriced actual equal to the bill (no recorded costs, cache hits priced at 0 on both sides)
    billed = spend.report(con, Filters(), by=())["cost_usd"].iloc[0]
    assert_allclose(w.billed_usd, billed)
    assert_allclose(w.actual_usd, billed, rtol=1e-9)
    assert any("effective $ per 1M tokens" in a for a in w.assumptions)


def test_whatif_threshold_is_the_seed_rule(fleet):
    con, df = fleet
    served = df[~df.cache_hit.fillna(False).astype(bool)]
    requests = served[served.escalated.fillna(False) == False]  # noqa: E712
    w = routing.whatif(con, Filters(), "threshold", small_model=SMALL, large_model=LARGE,
                       threshold=1000, length="input_tokens")
    long_ = requests[requests.input_tokens > 1000]
    short = requests[requests.input_tokens <= 1000]
    assert_allclose(w.counterfactual_usd, _book_cost(long_, LARGE).sum() + _book_cost(short, SMALL).sum(), rtol=1e-9)
    bm = w.by_model.set_index("model")
    assert bm.loc[LARGE, "counterfactual_calls"] == len(long_)


def test_whatif_per_tier_actual_changes_nothing_and_cascade_is_expected_cost(fleet):
    con, df = fleet
    same = routing.whatif(con, Filters(), "per-tier", small_model=SMALL, large_model=LARGE,
                          tier_strategies={"premium": "actual", "standard": "actual", "batch": "actual"})
    assert_allclose(same.counterfactual_usd, same.actual_usd, rtol=1e-12)
    served = df[~df.cache_hit.fillna(False).astype(bool)]
    batch = served[served.sla_tier == "batch"]
    w = routing.whatif(con, Filters(), "per-tier", small_model=SMALL, large_model=LARGE,
                       tier_strategies=(("batch", "cascade"),), escalation_rate=0.25)
    tiers = w.by_tier.set_index("sla_tier")
    expected = _book_cost(batch, SMALL).sum() + 0.25 * _book_cost(batch, LARGE).sum()
    assert_allclose(tiers.loc["batch", "counterfactual_usd"], expected, rtol=1e-9)
    assert_allclose(tiers.loc["premium", "counterfactual_usd"], tiers.loc["premium", "actual_usd"])
    assert w.escalation_rate == 0.25


def test_whatif_latency_first_picks_the_faster_model(fleet):
    con, _ = fleet
    w = routing.whatif(con, Filters(), "per-tier", small_model=SMALL, large_model=LARGE,
                       tier_strategies={"premium": "latency-first"})
    # the small model is faster per token in this fixture (20 vs 40 ms per output token)
    bm = w.by_model.set_index("model")
    assert bm.loc[SMALL, "counterfactual_calls"] > bm.loc[SMALL, "actual_calls"]
    assert w.counterfactual_mean_ms < w.actual_mean_ms


def test_whatif_mean_latency_is_per_answer_and_as_logged_is_today(fleet):
    """A caller of an escalated cascade request waits for the small attempt and the large answer. Today's mean
    divided the latencies by the logged rows (so by attempts too) while the policies' divided by answers: "as
    logged", which moves nothing, read 11 % slower than today on the sample fleet."""
    con, df = fleet
    served = df[~df.cache_hit.fillna(False).astype(bool)]
    answers = served[served.escalated.fillna(False) == False]  # noqa: E712
    expected = served["total_ms"].sum() / len(answers)        # every row's latency, over the answers
    w = routing.whatif(con, Filters(), "as-logged", small_model=SMALL, large_model=LARGE)
    assert_allclose([w.actual_mean_ms, w.counterfactual_mean_ms], [expected, expected], rtol=1e-12)
    same = routing.whatif(con, Filters(), "per-tier", small_model=SMALL, large_model=LARGE,
                          tier_strategies={"premium": "actual", "standard": "actual", "batch": "actual"})
    assert_allclose(same.counterfactual_mean_ms, same.actual_mean_ms, rtol=1e-12)


def test_as_logged_mean_latency_is_today_beside_a_model_that_logs_none(tmp_path):
    """A trace with no latency (an Azure trace's gpt-4o) beside timed requests: today's mean counted the timed ones
    (1.18 s on a store of real-tool files) and "as logged" read "—", unknown, though it moves nothing. Both are now
    over the same requests: (100 + 300) / 2 = 200 ms."""
    from helpers import store_of_records
    rows = [{"request_id": f"t{i}", "ts": f"2026-03-02T10:0{i}:00", "model": "gpt-4o-mini", "input_tokens": 10 + i,
             "output_tokens": 5 + i, "total_ms": ms} for i, ms in enumerate([100.0, 300.0])]
    rows += [{"request_id": f"u{i}", "ts": f"2026-03-02T11:0{i}:00", "model": "gpt-4o", "input_tokens": 10,
              "output_tokens": 5} for i in range(3)]
    con = store.connect(store_of_records(tmp_path, rows))
    w = routing.whatif(con, Filters(), "as-logged", small_model="gpt-4o-mini", large_model="gpt-4o")
    assert_allclose([w.actual_mean_ms, w.counterfactual_mean_ms], [200.0, 200.0], rtol=1e-12)
    # moving the timed requests onto a model with no latency to estimate from: unknown, not a partial mean
    assert routing.whatif(con, Filters(), "all-large", small_model="gpt-4o-mini",
                          large_model="gpt-4o").counterfactual_mean_ms is None


def test_latency_rates_recover_a_linear_model(fleet):
    con, _ = fleet
    r = routing.latency_rates(con, Filters()).set_index("model")
    # premium rows on the large model: total = 100 + 0.2 in + 40 out, route 1 ms
    assert_allclose(r.loc[LARGE, ["ms_per_input_token", "ms_per_output_token"]].to_numpy(float),
                    [0.2, 40.0], rtol=1e-6)
    assert_allclose(r.loc[SELF, "ms_per_output_token"], 10.0, rtol=1e-6)


def test_misrouting_by_threshold(fleet):
    con, df = fleet
    m = routing.misrouting(con, Filters(), threshold=500, length="input_tokens", small_model=SMALL,
                           large_model=LARGE)
    served = df[~df.cache_hit.fillna(False).astype(bool) & (df.escalated.fillna(False) == False)]  # noqa: E712
    short_large = served[(served.model == LARGE) & (served.input_tokens <= 500)]
    long_small = served[(served.model.isin([SMALL, SELF])) & (served.input_tokens > 500)]
    s = m.summary.set_index(["kind", "model"])
    assert s.loc[("short prompt on a large model", LARGE), "requests"] == len(short_large)
    assert s["requests"].xs("long prompt on a small model").sum() == len(long_small)
    assert_allclose(s.loc[("short prompt on a large model", LARGE), "on_right_size_usd"],
                    _book_cost(short_large, SMALL).sum(), rtol=1e-9)
    assert m.by_length["requests"].sum() == len(served)


def test_gateway_log_routing_uses_characters_and_request_prices():
    """The seed's log has no tokens: its threshold is LEN_THRESHOLD characters, priced per request."""
    con = store.connect(":memory:")
    for name in ("seed_gateway_injected.log", "seed_gateway_verbatim.log"):
        ingest_path(con, DATA / name, IngestOptions(format="gateway-log"))
    assert routing.length_field(con, Filters()) == "prompt_chars"
    w = routing.whatif(con, Filters(), "threshold")
    assert (w.small_model, w.large_model) == ("fast", "slow")
    assert_allclose([w.actual_usd, w.counterfactual_usd], [8 * 0.001 + 8 * 0.008] * 2)  # the rule as logged
    w = routing.whatif(con, Filters(), "all-small")
    assert_allclose(w.counterfactual_usd, 16 * 0.001)
    assert w.counterfactual_mean_ms is None
    assert routing.misrouting(con, Filters()).candidates == 0


def test_empty_store(empty_db):
    con = store.connect(empty_db)
    assert routing.mix(con, Filters()).empty
    assert routing.cache_savings(con, Filters()).empty
    assert routing.cascade_summary(con, Filters()).escalation_rate is None
    with pytest.raises(InputError):
        routing.whatif(con, Filters(), "all-small")
    assert routing.whatif(con, Filters(), "all-small", small_model=SMALL, large_model=LARGE) is None
    assert routing.misrouting(con, Filters()).candidates == 0


def test_whatif_defaults_to_todays_routing_and_weighs_quality(fleet):
    con, df = fleet
    base = routing.whatif(con, Filters(), small_model=SMALL, large_model=LARGE)
    assert base.policy == "as-logged" and list(routing.POLICIES)[0] == "as-logged"
    assert_allclose(base.counterfactual_usd, base.actual_usd, rtol=1e-12)
    assert base.delta_usd == pytest.approx(0.0, abs=1e-12)
    graded = df[df.quality.notna() & ~df.cache_hit.fillna(False).astype(bool)]
    small_share = (graded[graded.model == SMALL].quality >= 0.5).mean()      # rejected attempts graded 0 count
    large_share = (graded[graded.model == LARGE].quality >= 0.5).mean()
    assert 0 < small_share < 1 and large_share == 1.0
    # the self-hosted model has no graded answer: today's quality, and a policy keeping it, are unknown
    assert base.actual_quality is None and base.counterfactual_quality is None
    assert SELF in base.quality_note and "unknown" in base.quality_note
    w = routing.whatif(con, Filters(), "all-small", small_model=SMALL, large_model=LARGE)
    assert_allclose(w.counterfactual_quality, small_share)
    assert "gpt-4o-mini" in w.quality_note
    w = routing.whatif(con, Filters(), "all-large", small_model=SMALL, large_model=LARGE)
    assert w.counterfactual_quality == 1.0
    # the standard tier only: today a kept small answer or an escalated large one, by hand
    std = Filters(sla_tiers=("standard",))
    served = df[(df.sla_tier == "standard") & ~df.cache_hit.fillna(False).astype(bool)]
    kept = int(((served.model == SMALL) & ~served.escalated.fillna(False).astype(bool)).sum())
    escalated = int(((served.model == LARGE)).sum())
    w = routing.whatif(con, std, "all-small", small_model=SMALL, large_model=LARGE)
    assert_allclose(w.actual_quality, (kept * small_share + escalated * large_share) / (kept + escalated))
    assert_allclose(w.counterfactual_quality, small_share)
    # a cascade at 25 %: three answers in four from the small model
    w = routing.whatif(con, std, "per-tier", small_model=SMALL, large_model=LARGE,
                       tier_strategies={"standard": "cascade"}, escalation_rate=0.25)
    assert_allclose(w.counterfactual_quality, 0.75 * small_share + 0.25 * large_share)


def test_share_over_time_draws_a_quiet_hour_at_zero():
    """Traffic at 10:00 and 13:00 and none between: the area chart has the two quiet hours at 0 % for every
    route (an area over the periods alone bridged 10:00 to 13:00 as if traffic had run all along), and the
    hours with traffic at 100 %, each hour a step from its start to the next hour's."""
    from finops import charts
    con = store.connect(":memory:")
    rows = [{"request_id": f"r{i}", "ts": T0 + timedelta(hours=h, minutes=i), "model": SMALL, "route": route,
             "input_tokens": 1000, "output_tokens": 100, "status": "ok"}
            for i, (h, route) in enumerate([(0, "fast"), (0, "slow"), (3, "fast")])]
    ingest_frame(con, pd.DataFrame(rows), name="sparse")
    over = routing.mix(con, Filters(), "route", grain="hour")
    assert sorted(over["period"].unique()) == [pd.Timestamp(T0), pd.Timestamp(T0 + timedelta(hours=3))]
    spec = charts.share_over_time(over, "hour", "request_share").to_dict()
    data = pd.DataFrame(next(iter(spec["datasets"].values())))
    per_hour = data.groupby(pd.to_datetime(data["period"]).dt.hour)["share_pct"].sum().to_dict()
    assert per_hour == {10: 100.0, 11: 0.0, 12: 0.0, 13: 100.0, 14: 100.0}     # 14:00: where 13:00's step ends
    assert set(data.loc[pd.to_datetime(data["period"]).dt.hour == 11, "series"]) == {"fast", "slow"}
    assert spec["encoding"]["y"]["stack"] == "zero" and spec["mark"]["interpolate"] == "step-after"


def test_a_model_with_no_price_stays_as_logged_and_only_moving_onto_it_is_refused():
    # a store with one unpriced model (a real user's most often has some): every policy refused to replay
    # ("model acme-7b is not in the price book"), the as-logged baseline too
    con = store.connect(":memory:")
    df = _frame().head(200)
    extra = pd.DataFrame([{"request_id": f"u{i}", "ts": T0 + timedelta(minutes=i), "tenant": "t0",
                           "sla_tier": "standard", "model": "acme-7b", "input_tokens": 1000, "output_tokens": 100,
                           "status": "ok", "total_ms": 500.0, "cost_usd": 0.25 if i == 0 else None}
                          for i in range(3)])
    ingest_frame(con, pd.concat([df, extra], ignore_index=True), name="with an unpriced model")
    base = routing.whatif(con, Filters(), "as-logged", small_model=SMALL, large_model=LARGE)
    w = routing.whatif(con, Filters(), "all-small", small_model=SMALL, large_model=LARGE)
    # as logged, acme-7b costs what its rows recorded: $0.25 once, $0 twice (the banner's $0)
    acme = w.by_model.set_index("model").loc["acme-7b"]
    assert acme.actual_calls == 3 and acme.actual_usd == pytest.approx(0.25)
    assert base.counterfactual_usd == pytest.approx(base.actual_usd)
    # moved to the small model, its 3 requests cost the small model's price: 3 x (1000 x 0.15 + 100 x 0.60) / 1e6 = 3 x 210e-6
    assert acme.counterfactual_calls == 0
    moved_small = w.by_model.set_index("model").loc[SMALL]
    served = df[~df.cache_hit.fillna(False).astype(bool) & (df.escalated.fillna(False) == False)]  # noqa: E712
    assert moved_small.counterfactual_usd == pytest.approx(_book_cost(served, SMALL).sum() + 3 * 210 / 1e6)
    # the bill prices none of the two without a recorded cost (the unpriced banner's count)
    assert any("No price for acme-7b (2 requests without a recorded cost)" in a for a in w.assumptions)
    with pytest.raises(InputError, match="acme-7b is not in the price book"):
        routing.whatif(con, Filters(), "all-large", small_model="acme-7b", large_model=LARGE)


def test_todays_routing_is_priced_as_the_bill_prices_it():
    """The what-if priced a request only from a price book row of its own name: a provider-prefixed name the
    catalogue prices (anthropic/claude-sonnet-4) counted $0 as logged and was listed as having no price, a dated
    book row was the one of the period's last day. Today's routing repriced now equals the bill."""
    con = store.connect(":memory:")
    con.execute("INSERT INTO prices (model, kind, size_class, input_usd_per_1m, output_usd_per_1m, effective_from, "
                "effective_to) VALUES ('acme-large', 'api', 'large', 4.0, 8.0, NULL, DATE '2026-03-03'), "
                "('acme-large', 'api', 'large', 2.0, 4.0, DATE '2026-03-03', NULL)")
    store.refresh_resolution(con)

    def rows(model, day, n, tokens_in, tokens_out, **more):
        return [{"request_id": f"{model}-{day}-{i}", "ts": datetime(2026, 3, day, 10, i), "tenant": "t0",
                 "model": model, "input_tokens": tokens_in, "output_tokens": tokens_out, "status": "ok", **more}
                for i in range(n)]
    df = pd.DataFrame(rows(SMALL, 2, 4, 20_000, 5_000)                     # 4 x (20,000 x 0.15 + 5,000 x 0.60) / 1e6
                      + rows("anthropic/claude-sonnet-4", 2, 3, 20_000, 4_000)  # 3 x (20,000 x 3 + 4,000 x 15) / 1e6
                      + rows("acme-large", 2, 2, 10_000, 1_000)             # before the cut: 2 x (10,000 x 4 + 1,000 x 8) / 1e6
                      + rows("acme-large", 3, 1, 10_000, 1_000)             # after it: 10,000 x 2 + 1,000 x 4, / 1e6
                      + rows("acme-7b", 3, 2, 1_000, 100)                   # no price anywhere: $0
                      + rows("acme-7b", 3, 1, 1_000, 100, cost_usd=0.25, request_id="recorded"))
    ingest_frame(con, df, name="catalogue and dated prices")
    hand = 4 * 0.006 + 3 * 0.12 + 2 * 0.048 + 0.024 + 0.25      # $0.754
    w = routing.whatif(con, Filters(), "as-logged", small_model=SMALL, large_model="acme-large")
    assert_allclose([w.actual_usd, w.counterfactual_usd, w.billed_usd], hand, rtol=1e-12)
    assert float(spend.report(con, Filters(), by=())["cost_usd"].iloc[0]) == pytest.approx(hand, rel=1e-12)
    by_model = w.by_model.set_index("model")["actual_usd"]
    assert by_model["anthropic/claude-sonnet-4"] == pytest.approx(0.36)
    assert by_model["acme-large"] == pytest.approx(0.12)
    unpriced = [a for a in w.assumptions if a.startswith("No price for")]
    assert unpriced and unpriced[0].startswith("No price for acme-7b (2 requests without a recorded cost)")
