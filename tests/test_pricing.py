"""Cost maths against hand-worked values: token pricing, GPU-hour allocation, the idle line, repricing."""
from datetime import datetime

import pandas as pd
import pytest

from finops import store
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.spend import pricing
from finops.spend import report as spend


def _frame(rows):
    return pd.DataFrame(rows, columns=["request_id", "ts", "tenant", "model", "input_tokens", "output_tokens",
                                       "cached_input_tokens", "service_ms", "cost_usd", "cache_hit", "status"])


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    book = pricing.price_book(c)
    own = pd.DataFrame([
        # self-hosted: 2 replicas x 1 GPU x $2/GPU-hour = $4 per hour; 1 slot per replica
        dict(model="gpu-model", provider="self", publisher="x", kind="self_hosted", size_class="large",
             gpu_hour_usd=2.0, gpus_per_replica=1, replicas=2, slots_per_replica=1),
        dict(model="api-model", provider="api", publisher="x", kind="api", size_class="small",
             input_usd_per_1m=1.0, output_usd_per_1m=4.0, cached_input_usd_per_1m=0.25, request_usd=0.001),
    ])
    pricing.save_price_book(c, pd.concat([book[~book.model.isin(own.model)], own], ignore_index=True))
    t = datetime(2026, 3, 2, 10, 0)
    ingest_frame(c, _frame([
        # hour 10: tenant a busy 1.8e6 ms, tenant b 0.9e6 ms on gpu-model
        ("g1", t.replace(minute=5), "a", "gpu-model", 100, 10, 0, 1.8e6, None, False, "ok"),
        ("g2", t.replace(minute=6), "b", "gpu-model", 100, 10, 0, 0.9e6, None, False, "ok"),
        # api-model: 1M input of which 200k cached, 500k output -> 0.8 + 0.05 + 2.0 + 0.001 = 2.851
        ("a1", t.replace(minute=7), "a", "api-model", 1_000_000, 500_000, 200_000, 50.0, None, False, "ok"),
        # a recorded cost wins over the book
        ("a2", t.replace(minute=8), "b", "api-model", 1_000_000, 0, 0, 50.0, 0.5, False, "error"),
        # a cache hit costs nothing but saves what it would have cost: 1000*1/1e6 + 100*4/1e6 + 0.001
        ("a3", t.replace(minute=9), "b", "api-model", 1000, 100, 0, None, None, True, "ok"),
        # hour 11: nothing; hour 12: one gpu request -> the fleet is paid for hours 10, 11 and 12
        ("g3", t.replace(hour=12), "a", "gpu-model", 1, 1, 0, 0.72e6, None, False, "ok"),
    ]))
    yield c
    c.close()


def test_token_cost_by_hand():
    assert pricing.token_cost_usd(1_000_000, 200_000, 500_000, input_usd_per_1m=1.0, output_usd_per_1m=4.0,
                                  cached_input_usd_per_1m=0.25, request_usd=0.001) == pytest.approx(2.851)


def test_gpu_hour_allocation_and_idle_line(con):
    f = Filters(models=("gpu-model",))
    rep = spend.report(con, f, by=["hour", "tenant"]).set_index(["hour", "tenant"])["cost_usd"]
    h10, h11, h12 = (pd.Timestamp(2026, 3, 2, h) for h in (10, 11, 12))
    # hour 10: capacity 2 x 3.6e6 ms; busy 2.7e6 -> utilisation 0.375 -> $1.50 allocated, $2.50 idle
    assert rep[(h10, "a")] == pytest.approx(1.0)       # 1.8 / 2.7 of $1.50
    assert rep[(h10, "b")] == pytest.approx(0.5)
    assert rep[(h10, spend.IDLE_TENANT)] == pytest.approx(2.5)
    assert rep[(h11, spend.IDLE_TENANT)] == pytest.approx(4.0)   # paid, unused
    assert rep[(h12, "a")] == pytest.approx(0.4)       # 0.72e6 / 7.2e6 = 0.1 of $4
    assert rep[(h12, spend.IDLE_TENANT)] == pytest.approx(3.6)
    assert rep.sum() == pytest.approx(12.0)            # 3 hours x $4: nothing lost, nothing doubled
    util = pricing.fleet_utilization(con).query("model == 'gpu-model'").set_index("hour")
    assert util.loc[h10, "utilization"] == pytest.approx(0.375)
    assert util.loc[h11, "utilization"] == 0.0
    assert util["idle_usd"].sum() == pytest.approx(2.5 + 4.0 + 3.6)


def test_tenant_filter_keeps_the_fleet_share_and_drops_idle(con):
    rep = spend.report(con, Filters(tenants=("b",), models=("gpu-model",)), by=["tenant"])
    assert list(rep.tenant) == ["b"] and rep.cost_usd.iloc[0] == pytest.approx(0.5)


def test_api_pricing_recorded_cost_and_cache(con):
    rep = spend.report(con, Filters(models=("api-model",)), by=["tenant"]).set_index("tenant")
    assert rep.loc["a", "cost_usd"] == pytest.approx(2.851)
    assert rep.loc["b", "cost_usd"] == pytest.approx(0.5)          # recorded, plus the free cache hit
    assert rep.loc["b", "cache_saved_usd"] == pytest.approx(0.001 + 0.0004 + 0.001)
    assert rep.loc["b", "error_rate"] == pytest.approx(0.5)
    assert rep.loc["a", "cost_per_1m_tokens"] == pytest.approx(2.851 / 1.5)


def test_editing_the_book_reprices_without_reingesting(con):
    book = pricing.price_book(con)
    book.loc[book.model == "api-model", "output_usd_per_1m"] = 8.0
    pricing.save_price_book(con, book)
    rep = spend.report(con, Filters(models=("api-model",), tenants=("a",)), by=[])
    assert rep.cost_usd.iloc[0] == pytest.approx(2.851 + 2.0)


def test_bad_price_book_is_refused_and_kept(con):
    from finops.errors import InputError
    book = pricing.price_book(con)
    bad = book.copy()
    bad.loc[0, "kind"] = "free"
    with pytest.raises(InputError, match="kind"):
        pricing.save_price_book(con, bad)
    assert len(pricing.price_book(con)) == len(book)


def test_unpriced_models_are_listed(con):
    ingest_frame(con, _frame([("z1", datetime(2026, 3, 2, 10), "a", "mystery-model", 5, 5, 0, 1.0, None, False,
                               "ok")]))
    unpriced = pricing.unpriced_models(con)
    assert unpriced["model"].tolist() == ["mystery-model"]
    assert (int(unpriced["requests"].iloc[0]), int(unpriced["tokens"].iloc[0])) == (1, 10)


def test_a_period_that_starts_inside_an_hour_bills_the_part_of_it_and_loses_nothing(con):
    # from 10:05:30 (after g1 at 10:05, before g2 at 10:06) to 13:00: hour 10 is covered for 54.5 minutes
    f = Filters(since=datetime(2026, 3, 2, 10, 5, 30), until=datetime(2026, 3, 2, 13), models=("gpu-model",))
    rep = spend.report(con, f, by=["hour", "tenant"]).set_index(["hour", "tenant"])["cost_usd"]
    h10, h11, h12 = (pd.Timestamp(2026, 3, 2, h) for h in (10, 11, 12))
    part = 54.5 / 60                                   # of an hour at $4
    # g2's 0.9e6 ms of the part's capacity (2 slots x 3.6e6 ms x part): 0.9e6 / 7.2e6 of $4 = $0.50 whatever the part
    assert rep[(h10, "b")] == pytest.approx(0.5)
    assert rep[(h10, spend.IDLE_TENANT)] == pytest.approx(4 * part - 0.5)
    assert (h10, "a") not in rep.index                 # g1 is before the period
    assert rep[(h11, spend.IDLE_TENANT)] == pytest.approx(4.0)
    assert rep[(h12, "a")] == pytest.approx(0.4)
    # the period's GPU hours x $2: 2 GPUs x (54.5/60 + 2) hours = $11.633..., as the fleet's own figures say
    assert rep.sum() == pytest.approx(4 * part + 8.0)
    util = pricing.fleet_utilization(con, f.since, f.until).query("model == 'gpu-model'")
    assert util["fleet_cost_usd"].sum() == pytest.approx(4 * part + 8.0)
    assert util["idle_usd"].sum() + 0.5 + 0.4 == pytest.approx(rep.sum())


@pytest.fixture()
def recorded_fleet_store(tmp_path):
    """A self-hosted model whose log source recorded a cost (LiteLLM's spend for a model behind a local vLLM,
    OpenLIT's gen_ai.usage.cost) beside an API model: hour 10 of 2 March 2026 only, so gpu-model's fleet is
    billed for that one hour, 2 GPUs x $2 = $4."""
    from helpers import add_test_models, store_of_records
    t = "2026-03-02T10:{:02d}:00Z"
    rows = [
        # gpu-model: busy 1.8e6 + 0.9e6 of 2 x 3.6e6 ms -> $1.50 allocated ($1.00 a, $0.50 b), $2.50 idle;
        # g1's recorded $1 is not a cost: the fleet's GPU hours are, paid once
        dict(request_id="g1", ts=t.format(5), tenant="a", model="gpu-model", input_tokens=100, output_tokens=10,
             service_ms=1.8e6, cost_usd=1.0, status="ok"),
        dict(request_id="g2", ts=t.format(6), tenant="b", model="gpu-model", input_tokens=100, output_tokens=10,
             service_ms=0.9e6, status="ok"),
        # api-model: 1M input + 500k output at $1 / $4 + $0.001 a request = $3.001; a recorded $0.50 counts
        dict(request_id="a1", ts=t.format(7), tenant="a", model="api-model", input_tokens=1_000_000,
             output_tokens=500_000, service_ms=50.0, status="ok"),
        dict(request_id="a2", ts=t.format(8), tenant="b", model="api-model", input_tokens=1_000, output_tokens=0,
             service_ms=50.0, cost_usd=0.5, status="ok"),
    ]
    path = store_of_records(tmp_path, rows)
    c = store.connect(path)
    add_test_models(c)
    yield c
    c.close()


FLEET_BILL_USD = 2 * 1 * 2.0 * 1        # replicas x GPUs a replica x $ per GPU-hour x hours
API_USD = 3.001 + 0.5


def test_a_self_hosted_request_s_recorded_cost_is_not_added_to_its_fleet_s_gpu_hours(recorded_fleet_store):
    from finops.spend import costviews, exports, routing
    con, f = recorded_fleet_store, Filters()
    total = spend.report(con, f, by=[])["cost_usd"].iloc[0]
    assert total == pytest.approx(FLEET_BILL_USD + API_USD, abs=1e-9)         # $7.501, not $8.501
    tenants = spend.report(con, f, by=["tenant"]).set_index("tenant")["cost_usd"]
    assert tenants["a"] == pytest.approx(1.0 + 3.001, abs=1e-9)
    assert tenants["b"] == pytest.approx(0.5 + 0.5, abs=1e-9)
    assert tenants[spend.IDLE_TENANT] == pytest.approx(2.5, abs=1e-9)
    sb = costviews.showback_by_tenant(costviews.showback(con, f)).set_index("tenant")["cost_usd"]
    assert sb["a"] == pytest.approx(4.001, abs=1e-9) and sb.sum() == pytest.approx(7.501, abs=1e-9)
    # the FOCUS file bills the fleet's GPU hours once: 0.5 h of busy share for a, 0.25 h for b, 1.25 h idle
    focus = exports.focus_frame(con, f)
    assert focus["BilledCost"].sum() == pytest.approx(FLEET_BILL_USD + API_USD, abs=1e-9)
    gpu = focus[focus["SkuId"] == "gpu-model"]
    assert gpu["BilledCost"].sum() == pytest.approx(FLEET_BILL_USD, abs=1e-9)
    assert (gpu["SkuMeter"] == "GPU-Hours").all() and gpu["PricingQuantity"].sum() == pytest.approx(2.0, abs=1e-9)
    # the token mix: gpu-model's $1.50 of busy share is all GPU time, nothing "recorded by the logs"
    mix = costviews.token_mix(con, f).set_index("model")
    assert mix.loc["gpu-model", "recorded_cost_usd"] == 0
    assert mix.loc["gpu-model", "gpu_time_usd"] == pytest.approx(1.5, abs=1e-9)
    assert mix.loc["gpu-model", "cost_usd"] == pytest.approx(1.5, abs=1e-9)
    assert mix.loc["api-model", "recorded_cost_usd"] == pytest.approx(0.5, abs=1e-9)
    assert mix.loc["api-model", "gpu_time_usd"] == 0
    # the routing what-if as logged: gpu-model's 220 tokens at its effective $4 / 220 tokens, the API as billed
    w = routing.whatif(con, f, "as-logged")
    assert w.actual_usd == pytest.approx(FLEET_BILL_USD + API_USD, abs=1e-9)
    assert w.billed_usd == pytest.approx(FLEET_BILL_USD + API_USD, abs=1e-9)
    unit = spend.unit_costs(con, f).set_index("model")
    assert unit.loc["gpu-model", "fully_loaded_usd_per_1m"] == pytest.approx(FLEET_BILL_USD / 220 * 1e6)


def test_reconcile_still_shows_a_self_hosted_model_s_recorded_cost_and_says_its_gpu_hours_count(
        recorded_fleet_store):
    rec = spend.reconcile(recorded_fleet_store, Filters()).set_index("model")
    gpu, api = rec.loc["gpu-model"], rec.loc["api-model"]
    assert (gpu["recorded_requests"], gpu["recorded_cost_usd"]) == (1, pytest.approx(1.0))
    assert gpu["priced_by"] == pricing.RECORDED_NOT_COUNTED
    # no token list price to set it against: no list cost and no difference, never a $1 "markup" over $0
    assert pd.isna(gpu["list_cost_usd"]) and pd.isna(gpu["difference_usd"]) and pd.isna(gpu["difference_pct"])
    # what is counted for its requests: their $1.50 of busy GPU time (idle left out), as on every page
    assert gpu["priced_cost_usd"] == pytest.approx(1.5) and gpu["logs_cost_usd"] == pytest.approx(1.5)
    # an API model's recorded cost is its cost, against $0.001 list for 1,000 input tokens + $0.001 a request
    assert api["recorded_cost_usd"] == pytest.approx(0.5) and api["list_cost_usd"] == pytest.approx(0.002)
    assert api["priced_by"] == "price book" and api["logs_cost_usd"] == pytest.approx(3.501)
