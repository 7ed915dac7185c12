"""Spend views against hand-worked values: KPIs with change, spend over time, tenants, $ per 1M tokens,
token mix, per-request costs, the self-hosted fleet and the showback."""
from datetime import datetime, timedelta

import pandas as pd
import pytest

from finops import store
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.spend import costviews
from finops.spend import report as spend
from helpers import add_test_models, march, spend_frame


@pytest.fixture()
def con():
    """The hand-checked fleet of test_pricing (2 March, hours 10-12) plus a day before (1 March)."""
    c = store.connect(":memory:")
    add_test_models(c)
    ingest_frame(c, spend_frame([
        # 2 March, hour 10: tenant a busy 1.8e6 ms, tenant b 0.9e6 ms on gpu-model (utilisation 0.375)
        ("g1", march(2, 10, 5), "a", "premium", "gpu-model", 100, 10, 0, 1.8e6, 100.0, None, False, "ok", None, None),
        ("g2", march(2, 10, 6), "b", "batch", "gpu-model", 100, 10, 0, 0.9e6, 200.0, None, False, "ok", None, None),
        # 1M input of which 200k cached, 500k output: 0.8 + 0.05 + 2.0 + 0.001 = 2.851
        ("a1", march(2, 10, 7), "a", "premium", "api-model", 1_000_000, 500_000, 200_000, 50.0, 300.0, None, False,
         "ok", None, None),
        # a recorded cost wins over the book
        ("a2", march(2, 10, 8), "b", "batch", "api-model", 1_000_000, 0, 0, 50.0, 400.0, 0.5, False, "error",
         None, None),
        # a cache hit: free, saves 0.001 + 0.0004 + 0.001
        ("a3", march(2, 10, 9), "b", "batch", "api-model", 1000, 100, 0, None, 10.0, None, True, "ok", None, None),
        # hour 12: one gpu request -> with no schedule declared, the fleet is billed from its first to its
        # last hour of traffic: hours 10, 11 and 12 of 2 March, $12
        ("g3", march(2, 12), "a", "premium", "gpu-model", 1, 1, 0, 0.72e6, 500.0, None, False, "ok", None, None),
        # 1 March: one api request of tenant a, 1M uncached input -> $1.001
        ("p1", march(1, 9), "a", "premium", "api-model", 1_000_000, 0, 0, 10.0, 1000.0, None, False, "ok", None,
         None),
    ]))
    yield c
    c.close()


MARCH_2 = Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 3))


def test_kpis_with_change_against_the_previous_day(con):
    k = costviews.kpis_with_change(con, MARCH_2)
    # 2 March: the gpu fleet billed 10:00-13:00 (no schedule: while it served traffic), 3 h x $4, + api 2.851 + 0.5
    assert k.current.spend_usd == pytest.approx(3 * 4.0 + 2.851 + 0.5)
    # 1 March: before the fleet's first request, so no GPU cost; api 1.001
    assert k.previous_period == Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 2))
    assert k.previous.spend_usd == pytest.approx(1.001)
    items = {i.spec.field: i for i in k.items}
    assert items["spend_usd"].change == pytest.approx((12 + 2.851 + 0.5 - 1.001) / 1.001)
    assert items["requests"].change == pytest.approx(6 / 1 - 1)
    assert items["requests"].change_text == "+500.0 %"
    # rates change in percentage points: 1 error in 5 served rows... of 6 requests; 0 before
    assert items["error_rate"].change == pytest.approx(100 * (1 / 6 - 0))
    assert items["error_rate"].change_text.endswith(" pp")
    assert items["spend_usd"].text == "$15.35"
    assert k.idle_usd == pytest.approx(12.0 - (1.0 + 0.5 + 0.4))        # fleet minus allocated
    assert k.previous_coverage == pytest.approx(15 / 24)                 # the store starts at 1 March 09:00


def test_no_change_when_the_previous_period_has_no_traffic(con):
    k = costviews.kpis_with_change(con, Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 2)))
    assert k.previous is None
    assert all(i.change is None and i.change_text is None for i in k.items)


def test_period_of_fills_open_ends_from_the_store(con):
    p = costviews.period_of(con, Filters())
    assert (p.since, p.until) == (datetime(2026, 3, 1, 9), datetime(2026, 3, 2, 13))


def test_spend_over_time_keeps_idle_as_its_own_series_and_adds_up(con):
    sot = costviews.spend_over_time(con, MARCH_2, grain_name="hour")
    idle = sot[sot.series == costviews.IDLE]
    assert idle.set_index("period").loc[pd.Timestamp(2026, 3, 2, 10), "cost_usd"] == pytest.approx(2.5)
    assert idle.set_index("period").loc[pd.Timestamp(2026, 3, 2, 11), "cost_usd"] == pytest.approx(4.0)
    assert sot.cost_usd.sum() == pytest.approx(spend.report(con, MARCH_2, by=[]).cost_usd.iloc[0])
    g10 = sot[(sot.series == "gpu-model") & (sot.period == pd.Timestamp(2026, 3, 2, 10))]
    assert g10.cost_usd.iloc[0] == pytest.approx(1.5) and g10.requests.iloc[0] == 2
    without = costviews.spend_over_time(con, MARCH_2, grain_name="hour", include_idle=False)
    assert costviews.IDLE not in set(without.series)
    assert without.cost_usd.sum() == pytest.approx(1.9 + 2.851 + 0.5)


def test_top_tenants_rank_share_and_change(con):
    top = costviews.top_tenants(con, MARCH_2, n=1)
    assert list(top.table.tenant) == ["a"]            # a: 1.0 + 0.4 + 2.851 = 4.251; b: 0.5 + 0.5 = 1.0
    row = top.table.iloc[0]
    assert row.cost_usd == pytest.approx(4.251)
    assert row.share == pytest.approx(4.251 / 5.251)
    assert row.previous_cost_usd == pytest.approx(1.001)
    assert row.change == pytest.approx(4.251 / 1.001 - 1)
    assert top.others == 1
    assert top.idle_usd == pytest.approx(12.0 - 1.9)
    assert set(top.trend.tenant) == {"a"} and top.trend.cost_usd.sum() == pytest.approx(4.251)


def test_cost_matrix_is_dollars_per_million_tokens(con):
    m = costviews.cost_matrix(con, MARCH_2).set_index(["model", "tenant"])
    assert m.loc[("api-model", "a"), "cost_per_1m_tokens"] == pytest.approx(2.851 / 1.5)
    assert m.loc[("gpu-model", "b"), "cost_per_1m_tokens"] == pytest.approx(0.5 / 110 * 1e6)
    assert costviews.IDLE not in set(m.index.get_level_values("tenant"))
    wide = costviews.cost_matrix_wide(costviews.cost_matrix(con, MARCH_2)).set_index("model")
    assert wide.loc["api-model", "a"] == pytest.approx(2.851 / 1.5)
    # api-model over all tenants: (2.851 + 0.5) / (1.5M + 1M tokens served): the cache hit's 1,100 tokens reached
    # no model, so they are not in the billed unit cost's denominator
    assert wide.loc["api-model", "all tenants"] == pytest.approx(3.351 / 2_500_000 * 1e6)


def test_token_mix_splits_the_cost_by_where_it_comes_from(con):
    mix = costviews.token_mix(con, MARCH_2).set_index("model")
    api = mix.loc["api-model"]
    assert api.uncached_input_tokens == 800_000 + 1_000_000 + 1000
    assert api.cached_input_tokens == 200_000
    assert (api.input_cost_usd, api.cached_input_cost_usd, api.output_cost_usd, api.request_fee_usd) == \
        pytest.approx((0.8, 0.05, 2.0, 0.001))
    assert api.recorded_cost_usd == pytest.approx(0.5)
    assert api.gpu_time_usd == pytest.approx(0.0)
    assert api.prompt_cache_saving_usd == pytest.approx(200_000 * (1.0 - 0.25) / 1e6)
    gpu = mix.loc["gpu-model"]
    assert gpu.gpu_time_usd == pytest.approx(1.9) and gpu.cost_usd == pytest.approx(1.9)
    parts = ["input_cost_usd", "cached_input_cost_usd", "output_cost_usd", "request_fee_usd", "recorded_cost_usd",
             "gpu_time_usd"]
    assert mix[parts].sum(axis=1).to_numpy() == pytest.approx(mix.cost_usd.to_numpy())
    eff = costviews.token_effect(mix.reset_index())
    assert eff.output_cost_share == pytest.approx(2.0 / 2.85)
    tokens_long, cost_long = costviews.token_mix_long(mix.reset_index())
    assert tokens_long.groupby("model").share.sum().to_numpy() == pytest.approx([1.0, 1.0])
    assert cost_long.cost_usd.sum() == pytest.approx(mix.cost_usd.sum())


def test_request_costs_follow_the_pricing_rules(con):
    dist = costviews.cost_per_request(con, MARCH_2)
    s = dist.summary.set_index("model")
    assert not dist.sampled and dist.rows_read == 6
    # gpu-model: hour 10 allocates $1.50 by busy time (1.0, 0.5); hour 12 allocates 0.1 x $4 = 0.4
    assert s.loc["gpu-model", "max_usd"] == pytest.approx(1.0)
    assert s.loc["gpu-model", "mean_usd"] == pytest.approx((1.0 + 0.5 + 0.4) / 3)
    assert s.loc["gpu-model", "p50_usd"] == pytest.approx(0.5)
    # api-model: 2.851 (book), 0.5 (recorded), 0 (cache hit)
    assert s.loc["api-model", "mean_usd"] == pytest.approx((2.851 + 0.5) / 3)
    assert s.loc["api-model", "free_share"] == pytest.approx(1 / 3)
    assert dist.histogram.groupby("model").requests.sum().to_dict() == {"api-model": 2, "gpu-model": 3}


def test_request_costs_add_up_to_the_report(con):
    dist = costviews.cost_per_request(con, MARCH_2)
    by_model = spend.report(con, MARCH_2, by=["model"], include_idle=False).set_index("model")
    s = dist.summary.set_index("model")
    for model in by_model.index:
        assert s.loc[model, "mean_usd"] * s.loc[model, "requests"] == pytest.approx(by_model.loc[model, "cost_usd"])


def test_cost_per_request_samples_large_stores():
    from bench.fleet_store import generator_sql

    c = store.connect(":memory:")
    c.execute(f"CREATE TEMP TABLE gen AS {generator_sql(60_000, days=2, seed=3)}")
    ingest_frame(c, c.execute("SELECT * FROM gen").df(), name="gen")
    f = Filters()
    exact = costviews.cost_per_request(c, f).summary.set_index("model")
    est = costviews.cost_per_request(c, f, max_rows=15_000)
    assert est.sampled and 5_000 < est.rows_read < 30_000
    s = est.summary.set_index("model")
    for model in exact.index:
        assert s.loc[model, "p50_usd"] == pytest.approx(exact.loc[model, "p50_usd"], rel=0.15)


def test_gpu_fleet_allocated_idle_and_utilisation(con):
    gpu = costviews.gpu_fleet(con, Filters(since=datetime(2026, 3, 2, 10), until=datetime(2026, 3, 2, 13)))
    s = gpu.summary.set_index("model")
    assert list(s.index) == ["gpu-model"]
    assert s.loc["gpu-model", "fleet_cost_usd"] == pytest.approx(12.0)
    assert s.loc["gpu-model", "allocated_usd"] == pytest.approx(1.9)
    assert s.loc["gpu-model", "idle_usd"] == pytest.approx(10.1)
    assert s.loc["gpu-model", "utilization"] == pytest.approx(1.9 / 12)
    series = gpu.series.set_index("period")
    assert series.loc[pd.Timestamp(2026, 3, 2, 10), "utilization"] == pytest.approx(0.375)
    assert series.loc[pd.Timestamp(2026, 3, 2, 11), "utilization"] == 0.0
    assert gpu.grain == "hour"
    assert costviews.gpu_fleet(con, Filters(models=("api-model",))).summary.empty


def test_an_hour_of_requests_without_timing_has_no_utilisation_and_is_left_out_of_the_periods():
    """gpu-model: 2 replicas × 1 slot × 1 GPU at $2 = $4 an hour, 7,200,000 slot-ms an hour. At 10:00 two requests
    of 360,000 ms each: busy 10 %, $0.40 allocated, $3.60 idle. At 11:00 three requests with no time at all (a trace
    of arrivals and tokens): the hour's $4 goes to them by count and its busy share is unknown. The period's
    utilisation is the timed hour's 10 %, not 1 − idle share (55 %), and the untimed hour is counted apart."""
    c = store.connect(":memory:")
    add_test_models(c)
    rows = [dict(request_id="t1", ts=march(2, 10, 5), service_ms=360_000.0),
            dict(request_id="t2", ts=march(2, 10, 35), service_ms=360_000.0),
            *(dict(request_id=f"u{i}", ts=march(2, 11, 10 * i)) for i in range(3))]
    ingest_frame(c, pd.DataFrame(rows).assign(model="gpu-model", tenant="acme", status="ok", input_tokens=100,
                                              output_tokens=10))
    gpu = costviews.gpu_fleet(c, Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 2, 23)))
    s = gpu.summary.set_index("model").loc["gpu-model"]
    assert (s.fleet_cost_usd, s.allocated_usd, s.idle_usd) == pytest.approx((8.0, 4.4, 3.6))
    assert s.idle_share == pytest.approx(0.45) and s.utilization == pytest.approx(0.1)
    assert (s.hours_billed, s.untimed_hours, s.untimed_fleet_usd) == (2, 1, pytest.approx(4.0))
    series = gpu.series.set_index("period")["utilization"]
    assert series.loc[pd.Timestamp(2026, 3, 2, 10)] == pytest.approx(0.1)
    assert pd.isna(series.loc[pd.Timestamp(2026, 3, 2, 11)])
    # nothing timed at all: no utilisation, not 100 %
    only = costviews.gpu_fleet(c, Filters(since=datetime(2026, 3, 2, 11), until=datetime(2026, 3, 2, 12))).summary
    assert only.untimed_hours.tolist() == [1] and pd.isna(only.utilization.iloc[0])
    assert only.allocated_usd.tolist() == pytest.approx([4.0]) and only.idle_usd.tolist() == [0.0]


def test_gpu_utilisation_of_untimed_traffic_is_not_that_of_the_idle_hours_beside_it():
    """A declared fleet of $4 an hour from 11:00 to 13:00 whose logs carry no time (a trace of arrivals): the 11:00
    hour's three requests take its $4 by count, the 12:00 hour served nothing and is $4 idle. The only timed hour is
    the idle one, so its 0 % is not the fleet's utilisation: unknown, for the period and for the day."""
    from finops.spend import fleets
    c = store.connect(":memory:")
    add_test_models(c)
    fleets.save_schedule(c, pd.DataFrame([{"model": "gpu-model", "starts_at": "2026-03-02 11:00",
                                           "ends_at": "2026-03-02 13:00", "replicas": 2}]))
    ingest_frame(c, pd.DataFrame([dict(request_id=f"u{i}", ts=march(2, 11, 10 * i)) for i in range(3)]).assign(
        model="gpu-model", tenant="acme", status="ok", input_tokens=100, output_tokens=10))
    gpu = costviews.gpu_fleet(c, Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 2, 23)))
    s = gpu.summary.set_index("model").loc["gpu-model"]
    assert (s.fleet_cost_usd, s.allocated_usd, s.idle_usd, s.untimed_hours) == pytest.approx((8.0, 4.0, 4.0, 1))
    assert pd.isna(s.utilization)
    hourly = gpu.series.set_index("period")["utilization"]
    assert pd.isna(hourly.loc[pd.Timestamp(2026, 3, 2, 11)]) and hourly.loc[pd.Timestamp(2026, 3, 2, 12)] == 0.0
    # the idle hour alone is judged: 0 %, as it was
    alone = costviews.gpu_fleet(c, Filters(since=datetime(2026, 3, 2, 12), until=datetime(2026, 3, 2, 13))).summary
    assert alone.utilization.tolist() == [0.0]


def test_showback_adds_up_to_the_bill(con):
    sb = costviews.showback(con, MARCH_2)
    assert list(sb.columns) == list(costviews.SHOWBACK_COLUMNS)
    assert sb.cost_usd.sum() == pytest.approx(spend.report(con, MARCH_2, by=[]).cost_usd.iloc[0])
    assert sb.share.sum() == pytest.approx(1.0)
    assert sb.tenant.iloc[-1] == costviews.IDLE            # the idle line comes last
    narrowed = costviews.showback(con, Filters(since=MARCH_2.since, until=MARCH_2.until, tenants=("b",)))
    assert set(narrowed.tenant) == {"b"} and narrowed.cost_usd.sum() == pytest.approx(1.0)


def test_views_of_filters_matching_nothing_are_empty_not_errors(con):
    f = Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 3), tenants=("nobody",))
    assert costviews.showback(con, f).empty
    assert costviews.cost_matrix(con, f).empty
    assert costviews.cost_per_request(con, f).summary.empty
    assert costviews.top_tenants(con, f).table.empty
    assert costviews.kpis_with_change(con, f).current.requests == 0
    assert costviews.token_mix(con, f).empty


def test_empty_store():
    c = store.connect(":memory:")
    f = Filters()
    assert costviews.showback(c, f).empty
    assert costviews.kpis_with_change(c, f).current.requests == 0
    assert costviews.spend_over_time(c, f).empty
    assert costviews.gpu_fleet(c, f).summary.empty
    assert costviews.cost_per_request(c, f).summary.empty
    assert costviews.grain(c, f) == "day"


def test_period_label():
    f = Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 1) + timedelta(days=14))
    assert costviews.period_label(f) == "2026-03-01 to 2026-03-14"


def test_showback_by_tenant_sums_the_pairs(con):
    sb = costviews.showback(con, MARCH_2)
    t = costviews.showback_by_tenant(sb).set_index("tenant")
    assert list(t.index) == ["a", "b", costviews.IDLE]
    assert t.loc["a", "cost_usd"] == pytest.approx(4.251) and t.loc["a", "models"] == 2
    assert t.loc["b", "requests"] == 3
    assert t.cost_usd.sum() == pytest.approx(sb.cost_usd.sum()) and t.share.sum() == pytest.approx(1.0)
    assert costviews.showback_by_tenant(sb.iloc[0:0]).empty


def test_p99_kpi_and_its_trend_leave_cache_hits_out(con):
    """2 March served total_ms: 100, 200, 300, 400, 500 (a3, a cache hit at 10 ms, is not served)."""
    k = costviews.kpis_with_change(con, MARCH_2)
    served = [100.0, 200.0, 300.0, 400.0, 500.0]
    p99 = float(pd.Series(served).quantile(0.99))                        # 496.0
    assert k.current.p99_total_ms == pytest.approx(p99, rel=store.SKETCH_ALPHA)
    assert k.previous.p99_total_ms == pytest.approx(1000.0, rel=store.SKETCH_ALPHA)
    trend = costviews.kpi_trends(con, MARCH_2).set_index("period")
    hours = {datetime(2026, 3, 2, 10): [100.0, 200.0, 300.0, 400.0], datetime(2026, 3, 2, 12): [500.0]}
    for hour, values in hours.items():
        assert trend.loc[hour, "p99_total_ms"] == pytest.approx(pd.Series(values).quantile(0.99),
                                                                rel=store.SKETCH_ALPHA)
    # a tenant filter: exact, and no P99 trend (it would need the raw rows)
    a = Filters(since=MARCH_2.since, until=MARCH_2.until, tenants=("a",))
    assert costviews.kpis_with_change(con, a).current.p99_total_ms == pytest.approx(
        float(pd.Series([100.0, 300.0, 500.0]).quantile(0.99)), rel=1e-12)
    assert "p99_total_ms" not in costviews.kpi_trends(con, a)


def test_without_p99_every_other_kpi_and_trend_is_the_same(con):
    # the Overview's call (it shows P99 per model instead): only the fleet-wide P99 is left out
    full, lean = costviews.kpis_with_change(con, MARCH_2), costviews.kpis_with_change(con, MARCH_2, p99=False)
    assert full.current.p99_total_ms is not None and lean.current.p99_total_ms is None
    assert lean.previous.p99_total_ms is None and full.previous.p99_total_ms == pytest.approx(1000.0, rel=0.01)
    assert lean.current.spend_usd == pytest.approx(3 * 4.0 + 2.851 + 0.5)
    shown = [(i.spec.field, i.value, i.previous, i.change, i.change_text, i.text)
             for i in full.items if i.spec.field != "p99_total_ms"]
    assert [(i.spec.field, i.value, i.previous, i.change, i.change_text, i.text)
            for i in lean.items if i.spec.field != "p99_total_ms"] == shown and len(shown) == len(full.items) - 1
    assert (lean.idle_usd, lean.previous_coverage) == (full.idle_usd, full.previous_coverage)
    trend = costviews.kpi_trends(con, MARCH_2)
    pd.testing.assert_frame_equal(costviews.kpi_trends(con, MARCH_2, p99=False), trend.drop(columns="p99_total_ms"))


def test_unpriced_tokens_are_left_out_of_every_dollar_per_1m_rather_than_counted_free():
    # tenant t: api-model 1M input ($1 + $0.001 a request = $1.001); mystery-model, which nothing prices, 1M in +
    # 1M out at $0 and one more request whose source recorded $0.50 for 1M input tokens (recorded: priced)
    c = store.connect(":memory:")
    add_test_models(c)
    ingest_frame(c, spend_frame([
        ("k1", march(2, 10, 1), "t", "premium", "api-model", 1_000_000, 0, 0, 10.0, 100.0, None, False, "ok",
         None, None),
        ("u1", march(2, 10, 2), "t", "premium", "mystery-model-x9", 1_000_000, 1_000_000, 0, 10.0, 100.0, None,
         False, "ok", None, None),
        ("u2", march(2, 10, 3), "u", "premium", "mystery-model-x9", 1_000_000, 0, 0, 10.0, 100.0, 0.5, False, "ok",
         None, None),
    ]))
    rep = spend.report(c, MARCH_2, by=["tenant", "model"]).set_index(["tenant", "model"])
    assert rep.loc[("t", "mystery-model-x9"), "unpriced_tokens"] == 2_000_000
    assert pd.isna(rep.loc[("t", "mystery-model-x9"), "cost_per_1m_tokens"])      # none, not $0.000
    assert rep.loc[("u", "mystery-model-x9"), "cost_per_1m_tokens"] == pytest.approx(0.5)
    by_tenant = spend.report(c, MARCH_2, by=["tenant"]).set_index("tenant")
    assert by_tenant.loc["t", "cost_per_1m_tokens"] == pytest.approx(1.001)     # not 1.001 / 3M x 1M = 0.334
    units = spend.unit_costs(c, MARCH_2).set_index("model")
    assert units.loc["mystery-model-x9", "usd_per_1m"] == pytest.approx(0.5)    # its recorded request's
    assert units.loc["api-model", "usd_per_1m"] == pytest.approx(1.001)
    sb = costviews.showback(c, MARCH_2)
    pair = sb.set_index(["tenant", "model"])
    assert pair.loc[("t", "mystery-model-x9"), "priced_tokens"] == 0
    assert pd.isna(pair.loc[("t", "mystery-model-x9"), "cost_per_1m_tokens"])
    wide = costviews.cost_matrix_wide(costviews.cost_matrix(c, MARCH_2)).set_index("model")
    assert wide.loc["mystery-model-x9", "all tenants"] == pytest.approx(0.5)    # u's $0.50 / 1M, not / 3M
    assert pd.isna(wide.loc["mystery-model-x9", "t"])
    tenants = costviews.showback_by_tenant(sb).set_index("tenant")
    assert tenants.loc["t", "priced_tokens"] == 1_000_000 and tenants.loc["t", "tokens"] == 3_000_000
    assert tenants.loc["t", "cost_per_1m_tokens"] == pytest.approx(1.001)
    assert tenants.loc["u", "cost_per_1m_tokens"] == pytest.approx(0.5)
    c.close()


def test_a_tenants_dollar_per_1m_is_its_pairs_blend_with_cache_hits_left_out(con):
    # tenant b on 2 March: g2 (gpu) and a2 (recorded $0.50, 1M input) served; a3 a cache hit (1,100 tokens, no model)
    sb = costviews.showback(con, MARCH_2)
    t = costviews.showback_by_tenant(sb).set_index("tenant")
    pairs = sb[sb.tenant == "b"]
    assert t.loc["b", "priced_tokens"] == pairs.priced_tokens.sum() == 1_000_000 + 110
    assert t.loc["b", "cost_per_1m_tokens"] == pytest.approx(t.loc["b", "cost_usd"] / (1_000_110 / 1e6))
    assert t.loc["b", "cost_per_1m_tokens"] == pytest.approx(
        spend.report(con, MARCH_2, by=["tenant"]).set_index("tenant").loc["b", "cost_per_1m_tokens"])


def test_priced_as_groups_one_models_logged_names_and_adds_up_to_the_logged_groups():
    # LiteLLM (provider prefix dropped), OpenRouter (openai/gpt-4o-mini as logged) and Langfuse v2 (dated names):
    # one model under several names, which the resolution step maps to one price model
    from finops.ingest import ingest_path
    from helpers import DATA
    c = store.connect(":memory:")
    for path in ("litellm/spendlogs_v1_74.csv", "providers/openrouter_generations.jsonl",
                 "langfuse/api_v2_observations.json"):
        ingest_path(c, DATA / path)
    by_model = spend.report(c, Filters(), by=["model"]).set_index("model")
    by_priced = spend.report(c, Filters(), by=["priced_as"]).set_index("priced_as")
    mini = ["gpt-4o-mini", "openai/gpt-4o-mini"]
    sonnet = ["claude-3-5-sonnet", "claude-3-5-sonnet-20241022"]
    for priced, logged in (("gpt-4o-mini", mini), ("claude-3-5-sonnet", sonnet), ("gpt-4o", ["gpt-4o", "openai/gpt-4o"])):
        for col in ("requests", "input_tokens", "output_tokens", "served_tokens"):
            assert by_priced.loc[priced, col] == by_model.loc[logged, col].sum(), (priced, col)
        assert float(by_priced.loc[priced, "cost_usd"]) == pytest.approx(float(by_model.loc[logged, "cost_usd"].sum()),
                                                                         abs=1e-12)
    assert by_priced.loc["gpt-4o-mini", "requests"] == 5
    # an unpriced name stays itself; every request and dollar is in exactly one group
    assert by_priced.loc["acme-llama-70b", "requests"] == 1
    assert by_priced["requests"].sum() == by_model["requests"].sum() == 16
    assert float(by_priced["cost_usd"].sum()) == pytest.approx(float(by_model["cost_usd"].sum()), abs=1e-12)
    c.close()


def _span_store(first: datetime, last: datetime):
    """A store of two requests, at ``first`` and ``last``."""
    c = store.connect(":memory:")
    ingest_frame(c, pd.DataFrame({"request_id": ["x", "y"], "ts": [first, last], "model": "gpt-4o-mini",
                                  "input_tokens": 100, "output_tokens": 10}))
    return c


def test_the_spend_chart_says_when_the_logs_start_or_end_inside_its_first_or_last_bucket():
    """The Azure trace runs from 18:15:46 to 19:14:08: its spend per hour drew a fall from $80 to $20 that was only
    the last hour's 14 minutes. The sentence says so; a period cut inside the logs, a whole hour or one bucket
    say nothing."""
    c = _span_store(datetime(2023, 11, 16, 18, 15, 46), datetime(2023, 11, 16, 19, 14, 8))
    day = Filters(since=datetime(2023, 11, 16), until=datetime(2023, 11, 17))
    assert costviews.partly_covered(c, day, "hour") == (
        "The logs start at 2023-11-16 18:15 and end at 19:14 UTC, inside the first and the last hour shown: those "
        "hours are partly covered, so their spend reads low beside whole ones.")
    assert costviews.partly_covered(c, Filters(), "hour") == costviews.partly_covered(c, day, "hour")
    # from 19:00 on: one hour shown, nothing to compare it with
    assert costviews.partly_covered(c, Filters(since=datetime(2023, 11, 16, 19)), "hour") == ""
    assert costviews.partly_covered(c, day, "week") == ""
    # the logs end inside the last day (a live feed): said of that day alone; a start 2 minutes past the hour
    # (under a twentieth of it) is whole
    c = _span_store(datetime(2026, 3, 1, 0, 2), datetime(2026, 3, 3, 14, 30))
    assert costviews.partly_covered(c, Filters(), "day") == (
        "The logs end at 2026-03-03 14:30 UTC, inside the last day shown: it is partly covered, so its spend reads "
        "low beside whole ones.")
    assert costviews.partly_covered(c, Filters(until=datetime(2026, 3, 3)), "day") == ""
    c = _span_store(datetime(2026, 3, 1, 0, 0), datetime(2026, 3, 1, 23, 59, 59))
    assert costviews.partly_covered(c, Filters(), "hour") == ""


@pytest.mark.parametrize("by, usage_key", [("sla_tier", ""), ("route", ""), ("status", "ok")])
def test_a_report_by_a_request_field_names_the_idle_capacity_row(by, usage_key):
    """m-self declared at 4 replicas for a day ($2 a replica-hour: $192) serves 9,360 requests of 10 s (26 GPU-hours
    busy: $52), so $140 is idle. `report --by sla_tier` printed that $140 in a row whose tier was blank, or, where
    the requests carry no tier, folded into their blank row ($192 for 9,360 requests): the idle rows have no tier,
    route or status. By tenant it is "(idle capacity)"; by any request field it is now too."""
    from helpers import fleet_day_store
    con = fleet_day_store(4)
    rows = spend.report(con, Filters(), by=[by]).set_index(by)
    assert rows.loc[spend.IDLE_TENANT, "cost_usd"] == pytest.approx(140.0)
    assert rows.loc[spend.IDLE_TENANT, "requests"] == 0
    assert rows.loc[usage_key, "cost_usd"] == pytest.approx(52.0) and rows.loc[usage_key, "requests"] == 9360
    assert rows["cost_usd"].sum() == pytest.approx(192.0)
    # the model the idle GPU time belongs to stays named, and a time grain stays a time
    by_model = spend.report(con, Filters(), by=["model", by]).set_index(["model", by])
    assert by_model.loc[("m-self", spend.IDLE_TENANT), "cost_usd"] == pytest.approx(140.0)
