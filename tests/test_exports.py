"""Exports: formula-safe CSV, Parquet, and a FOCUS 1.2 CSV that passes the column check and adds up.

The fixture's book (tests/test_costviews.add_test_models): api-model at $1 / $4 / $0.25 per 1M input / output / cached
input tokens plus $0.001 a request; gpu-model 2 replicas x 1 GPU at $2 per GPU-hour."""
import io
import json
from datetime import datetime

import pandas as pd
import pytest

from finops import store
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.spend import costviews, exports
from finops.spend import report as spend
from helpers import add_test_models, march, spend_frame

DECIMALS = 10      # the exports' costs are exact decimals; 1e-10 absorbs only float printing


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    add_test_models(c)
    ingest_frame(c, spend_frame([
        ("g1", march(2, 10, 5), "=HYPERLINK(\"x\")", "premium", "gpu-model", 100, 10, 0, 1.8e6, 100.0, None, False,
         "ok", None, None),
        ("g2", march(2, 10, 6), "-2+3", "batch", "gpu-model", 100, 10, 0, 0.9e6, 200.0, None, False, "ok", None, None),
        ("a1", march(2, 10, 7), "@sum", "premium", "api-model", 1_000_000, 500_000, 200_000, 50.0, 300.0, None, False,
         "ok", None, None),
        ("a2", march(2, 23, 59), "plain", "", "api-model", 1_000_000, 0, 0, 50.0, 400.0, 0.5, False, "ok", None,
         None),
        ("a3", march(3, 1), "+1", "batch", "api-model", 1000, 100, 0, None, 10.0, None, False, "ok", None, None),
    ]))
    yield c
    c.close()


TWO_DAYS = Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 4))


def test_csv_neutralises_formula_cells_and_keeps_numbers(con):
    sb = costviews.showback(con, TWO_DAYS)
    text = exports.safe_csv(sb)
    back = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    tenants = set(back["tenant"])
    assert {"'=HYPERLINK(\"x\")", "'-2+3", "'@sum", "'+1", "plain"} <= tenants
    assert not any(t.startswith(("=", "+", "-", "@")) for t in tenants)
    # numbers stay numbers
    assert pd.to_numeric(back["cost_usd"]).sum() == pytest.approx(sb["cost_usd"].sum())


def test_parquet_round_trip(con):
    sb = costviews.showback(con, TWO_DAYS)
    back = pd.read_parquet(io.BytesIO(exports.parquet_bytes(sb)))
    assert list(back.columns) == list(sb.columns)
    assert back["cost_usd"].sum() == pytest.approx(sb["cost_usd"].sum())
    assert set(back["tenant"]) == set(sb["tenant"])     # Parquet holds data, not formulas: no quoting


def test_focus_frame_passes_the_column_check(con):
    focus = exports.focus_frame(con, TWO_DAYS)
    assert exports.check_focus(focus) == []
    assert set(exports.FOCUS_MANDATORY) <= set(focus.columns)
    for col in ("BilledCost", "EffectiveCost", "ListCost", "ChargePeriodStart", "ChargePeriodEnd", "ServiceCategory",
                "ServiceName", "ProviderName", "PublisherName", "SkuId", "ConsumedQuantity", "ConsumedUnit",
                "PricingUnit", "Tags", "BillingCurrency", "ChargeCategory", "BillingPeriodStart", "BillingPeriodEnd"):
        assert col in focus.columns
    assert set(focus["ServiceCategory"]) == {"AI and Machine Learning"}
    assert set(focus["ChargeCategory"]) == {"Usage"} and set(focus["BillingCurrency"]) == {"USD"}
    assert set(focus["BillingPeriodStart"]) == {"2026-03-01T00:00:00Z"}
    assert set(focus["BillingPeriodEnd"]) == {"2026-04-01T00:00:00Z"}


def test_focus_csv_read_back_passes_the_check_with_types(con):
    text = exports.focus_csv(exports.focus_frame(con, TWO_DAYS))
    back = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    assert exports.check_focus(back) == []
    for col, ftype, _level, _nulls in exports.FOCUS_COLUMNS:
        if ftype == "Decimal":
            assert pd.to_numeric(back[col].replace("", None)).notna().sum() > 0, col
        if ftype == "DateTime":
            assert back[col].str.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z").all(), col
    tags = [json.loads(t) for t in back["Tags"]]
    assert all("tenant" in t for t in tags)
    assert {"tenant": "@sum", "sla_tier": "premium", "provider": "Acme AI"} in tags   # inside JSON: not at a cell's start
    # every text cell is neutralised: nothing starts like a formula
    for col in back.columns:
        assert not back[col].str.match(r"^[=+\-@]").any(), col


def test_focus_totals_equal_the_cost_page_to_the_cent(con):
    focus = exports.focus_frame(con, TWO_DAYS)
    sb = costviews.showback(con, TWO_DAYS)
    total = spend.report(con, TWO_DAYS, by=[]).cost_usd.iloc[0]
    # by hand: api-model 2.851 + 0.5 (recorded) + 0.0024; gpu-model fleet, billed for its one hour of traffic
    # (no schedule declared), 1 h x $4
    assert total == pytest.approx(7.3534)
    assert round(focus["BilledCost"].sum(), 2) == round(total, 2) == round(sb["cost_usd"].sum(), 2)
    assert focus["EffectiveCost"].sum() == pytest.approx(total, abs=1e-9)
    # the list cost differs only where a cost was recorded: a2 paid 0.5 for 1M input tokens listed at 1.001
    assert focus["ListCost"].sum() - focus["BilledCost"].sum() == pytest.approx(1.001 - 0.5)


def test_focus_list_cost_is_unit_price_times_quantity_exactly(con):
    focus = exports.focus_frame(con, TWO_DAYS)
    product = focus["ListUnitPrice"] * focus["PricingQuantity"]
    assert (product - focus["ListCost"]).abs().max() <= 1e-12
    back = pd.read_csv(io.StringIO(exports.focus_csv(focus)))     # and as the validator reads the file
    assert ((back["ListUnitPrice"] * back["PricingQuantity"] - back["ListCost"]).abs() <= 1e-9).all()


def _meters(focus, tenant: str) -> pd.DataFrame:
    return focus[focus["Tags"].map(lambda t: json.loads(t)["tenant"]) == tenant].set_index("SkuMeter")


def test_focus_one_row_per_token_class_by_hand(con):
    focus = exports.focus_frame(con, TWO_DAYS)
    # a1: 1M input of which 200k cached, 500k output, one request, no recorded cost
    a1 = _meters(focus, "@sum")
    assert list(a1.index) == ["Input Tokens", "Cached Input Tokens", "Output Tokens", "Requests"]
    assert a1["ConsumedQuantity"].tolist() == [800_000, 200_000, 500_000, 1]
    assert a1["ConsumedUnit"].tolist() == ["Tokens", "Tokens", "Tokens", "Requests"]
    assert a1["PricingUnit"].tolist() == ["1000000 Tokens"] * 3 + ["Requests"]
    assert a1["PricingQuantity"].tolist() == [0.8, 0.2, 0.5, 1.0]
    assert a1["ListUnitPrice"].tolist() == [1.0, 0.25, 4.0, 0.001]
    # 0.8 x $1 + 0.2 x $0.25 + 0.5 x $4 + 1 x $0.001 = 0.8 + 0.05 + 2.0 + 0.001 = 2.851
    assert a1["BilledCost"].round(DECIMALS).tolist() == [0.8, 0.05, 2.0, 0.001]
    assert (a1["ListCost"] == a1["BilledCost"]).all() and (a1["EffectiveCost"] == a1["BilledCost"]).all()
    assert a1["SkuPriceId"].tolist() == ["api-model/input", "api-model/cached_input", "api-model/output",
                                         "api-model/request"]
    first = a1.iloc[0]
    assert first["SkuId"] == "api-model" and first["ProviderName"] == "Acme AI" and first["ServiceName"] == "Acme AI API"
    assert first["InvoiceId"] == "finops-llm-fleet-acme-ai-2026-03"
    assert first["ChargeDescription"] == "api-model Input Tokens for tenant @sum (premium tier)"
    assert (first["ChargePeriodStart"], first["ChargePeriodEnd"]) == ("2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z")
    # a3 (3 March): 1,000 input and 100 output tokens, no cached ones: no Cached Input row
    a3 = _meters(focus, "+1")
    assert list(a3.index) == ["Input Tokens", "Output Tokens", "Requests"]
    assert a3["BilledCost"].round(DECIMALS).tolist() == [0.001, 0.0004, 0.001]


def test_focus_recorded_cost_is_split_over_the_meters_by_list_cost(con):
    # a2 recorded $0.5 for 1M input tokens and one request, listed at $1 + $0.001
    a2 = _meters(exports.focus_frame(con, TWO_DAYS), "plain")
    assert list(a2.index) == ["Input Tokens", "Requests"]
    assert a2["ListCost"].round(DECIMALS).tolist() == [1.0, 0.001]
    assert a2.loc["Input Tokens", "BilledCost"] == pytest.approx(0.5 * 1.0 / 1.001, abs=1e-12)
    assert a2.loc["Requests", "BilledCost"] == pytest.approx(0.5 * 0.001 / 1.001, abs=1e-12)
    assert a2["BilledCost"].sum() == pytest.approx(0.5, abs=1e-15)
    assert json.loads(a2.iloc[0]["Tags"]) == {"tenant": "plain", "provider": "Acme AI"}  # no tier: no sla_tier tag


def test_focus_gpu_hours_of_tenants_and_idle_by_hand(con):
    focus = exports.focus_frame(con, TWO_DAYS)
    gpu = focus[focus["SkuId"] == "gpu-model"]
    assert set(gpu["SkuMeter"]) == {"GPU-Hours"} and set(gpu["PricingUnit"]) == {"GPU-Hours"}
    assert set(gpu["ConsumedUnit"]) == {"GPU-Hours"} and set(gpu["ListUnitPrice"]) == {2.0}
    # hour 10 of 2 March: utilisation 2.7e6 / 7.2e6 = 0.375 of $4 = $1.5, split 1.8 : 0.9 between a and b
    a = _meters(gpu, "=HYPERLINK(\"x\")").iloc[0]
    b = _meters(gpu, "-2+3").iloc[0]
    assert (a["PricingQuantity"], a["BilledCost"]) == (pytest.approx(0.5), pytest.approx(1.0))
    assert (b["PricingQuantity"], b["BilledCost"]) == (pytest.approx(0.25), pytest.approx(0.5))
    idle = _meters(gpu, spend.IDLE_TENANT)
    assert idle["ChargeDescription"].iloc[0] == "Idle GPU capacity of gpu-model (paid for, used by no request)"
    # idle: the fleet ran (no schedule: while it served traffic) in hour 10 of 2 March only, 1 h x 2 GPUs = 2
    # GPU-hours less the 0.75 busy; nothing on 3 March
    by_day = idle.set_index("ChargePeriodStart")
    assert list(by_day.index) == ["2026-03-02T00:00:00Z"]
    assert by_day.loc["2026-03-02T00:00:00Z", "PricingQuantity"] == pytest.approx(1.25)
    assert by_day.loc["2026-03-02T00:00:00Z", "BilledCost"] == pytest.approx(2.5)
    assert a["PublisherName"] == "Meta" and a["ServiceName"] == "Self-hosted LLM inference"
    assert set(gpu["InvoiceId"]) == {"finops-llm-fleet-self-hosted-2026-03"}


def _store(rows, book=None):
    c = store.connect(":memory:")
    if book is not None:
        book(c)
    ingest_frame(c, spend_frame(rows))
    return c


def test_focus_two_requests_at_list_price():
    # gpt-4o in the bundled book: $2.50 / $10 per 1M input / output tokens; 1,000 input and 200 output in all
    c = _store([("r1", march(2, 10, 1), "t", "", "gpt-4o", 600, 150, 0, 50.0, 60.0, None, False, "ok", None, None),
                ("r2", march(2, 11, 1), "t", "", "gpt-4o", 400, 50, 0, 50.0, 60.0, None, False, "ok", None, None)])
    focus = exports.focus_frame(c, TWO_DAYS).set_index("SkuMeter")
    assert list(focus.index) == ["Input Tokens", "Output Tokens"]        # no cached tokens, no request fee
    assert focus["ConsumedQuantity"].tolist() == [1000, 200]
    assert focus["PricingQuantity"].tolist() == [0.001, 0.0002]
    assert focus["ListUnitPrice"].tolist() == [2.5, 10.0]
    assert focus["BilledCost"].round(DECIMALS).tolist() == [0.0025, 0.002]
    assert set(focus["InvoiceId"]) == {"finops-llm-fleet-openai-2026-03"}
    assert exports.check_focus(focus.reset_index()) == []


def test_focus_recorded_cost_with_nothing_at_list_price_rides_on_the_requests_meter():
    # a model missing from the price book: its tokens list at $0, so the recorded $0.3 cannot be split by them
    c = _store([("m1", march(2, 10, 1), "t", "", "mystery", 10, 5, 0, 50.0, 60.0, 0.3, False, "ok", None, None)])
    focus = exports.focus_frame(c, TWO_DAYS).set_index("SkuMeter")
    assert list(focus.index) == ["Input Tokens", "Output Tokens", "Requests"]
    assert focus["BilledCost"].tolist() == [0.0, 0.0, 0.3]
    assert focus["ListCost"].tolist() == [0.0, 0.0, 0.0]
    assert focus.loc["Requests", "ConsumedQuantity"] == 1
    assert focus.loc["Requests", "ProviderName"] == "unknown (not in price book)"
    assert exports.check_focus(focus.reset_index()) == []


def test_focus_semantic_cache_hits_are_on_no_row():
    # a cache hit (recorded $0) of 500 input tokens next to a served request of 1,000: only the 1,000 are charged
    c = _store([("h1", march(2, 10, 1), "t", "", "gpt-4o", 500, 20, 0, 5.0, 10.0, 0.0, True, "ok", None, None),
                ("s1", march(2, 10, 2), "t", "", "gpt-4o", 1000, 0, 0, 50.0, 60.0, None, False, "ok", None, None)])
    focus = exports.focus_frame(c, TWO_DAYS).set_index("SkuMeter")
    assert list(focus.index) == ["Input Tokens"]
    assert focus.loc["Input Tokens", "ConsumedQuantity"] == 1000
    assert focus.loc["Input Tokens", "BilledCost"] == pytest.approx(0.0025)


def test_focus_charge_period_is_clipped_to_the_filter(con):
    f = Filters(since=datetime(2026, 3, 2, 10), until=datetime(2026, 3, 2, 11))
    focus = exports.focus_frame(con, f)
    assert set(focus["ChargePeriodStart"]) == {"2026-03-02T10:00:00Z"}
    assert set(focus["ChargePeriodEnd"]) == {"2026-03-02T11:00:00Z"}
    assert exports.check_focus(focus) == []


def test_check_focus_finds_problems():
    good = pd.DataFrame([{c: ("1" if t == "Decimal" else "2026-03-01T00:00:00Z" if t == "DateTime" else
                              "{}" if t == "JSON" else "x") for c, t, _, _ in exports.FOCUS_COLUMNS}])
    good["ChargeCategory"], good["ServiceCategory"], good["BillingCurrency"] = "Usage", "Compute", "USD"
    good["ChargeClass"], good["ChargeFrequency"] = "", "Usage-Based"
    good["ChargePeriodEnd"] = "2026-03-02T00:00:00Z"
    good["PricingUnit"], good["ConsumedUnit"] = "1000000 Tokens", "GPU-Hours"
    assert exports.check_focus(good) == []
    assert any("missing mandatory" in p for p in exports.check_focus(good.drop(columns=["BilledCost", "ListCost"])))
    bad = good.assign(BilledCost="", EffectiveCost="abc", ChargePeriodStart="2026-03-01 00:00",
                      ChargeCategory="Fee", Tags="[1]", BillingCurrency="usd")
    problems = "\n".join(exports.check_focus(bad))
    for word in ("BilledCost: 1 null", "EffectiveCost: not a decimal", "ChargePeriodStart: not an ISO",
                 "ChargeCategory", "Tags: not a JSON object", "BillingCurrency"):
        assert word in problems
    # the two faults focus-validator found in the old export: "1M Tokens" and a cost that is not price x quantity
    off = "\n".join(exports.check_focus(good.assign(PricingUnit="1M Tokens", ListUnitPrice="2.5",
                                                     PricingQuantity="0.001", ListCost="0.0026")))
    assert "PricingUnit: '1M Tokens' is not in FOCUS UnitFormat" in off
    assert "ListCost is not ListUnitPrice x PricingQuantity on 1 rows" in off
    assert exports.check_focus(good.assign(ListUnitPrice="2.5", PricingQuantity="0.001", ListCost="0.0025")) == []


def test_focus_of_an_empty_selection_is_an_empty_valid_frame(con):
    focus = exports.focus_frame(con, Filters(tenants=("nobody",)))
    assert focus.empty and list(focus.columns) == [c for c, *_ in exports.FOCUS_COLUMNS]
    assert exports.check_focus(focus) == []
