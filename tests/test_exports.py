"""Exports: formula-safe CSV, Parquet, and a FOCUS 1.2 CSV that passes the column check and adds up."""
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
    assert {"tenant": "@sum", "sla_tier": "premium"} in tags        # inside JSON, not at the start of a cell
    # every text cell is neutralised: nothing starts like a formula
    for col in back.columns:
        assert not back[col].str.match(r"^[=+\-@]").any(), col


def test_focus_totals_equal_the_cost_page(con):
    focus = exports.focus_frame(con, TWO_DAYS)
    sb = costviews.showback(con, TWO_DAYS)
    assert focus["BilledCost"].sum() == pytest.approx(sb["cost_usd"].sum())
    assert focus["EffectiveCost"].sum() == pytest.approx(spend.report(con, TWO_DAYS, by=[]).cost_usd.iloc[0])
    assert focus["x_Requests"].sum() == sb["requests"].sum()


def test_focus_rows_by_hand(con):
    focus = exports.focus_frame(con, TWO_DAYS)
    a1 = focus[focus["Tags"] == json.dumps({"sla_tier": "premium", "tenant": "@sum"}, sort_keys=True)].iloc[0]
    assert a1["SkuId"] == "api-model" and a1["ProviderName"] == "Acme AI" and a1["ServiceName"] == "Acme AI API"
    assert a1["BilledCost"] == pytest.approx(2.851)
    assert a1["ConsumedQuantity"] == 1_500_000 and a1["ConsumedUnit"] == "Tokens"
    assert a1["PricingUnit"] == "1M Tokens" and a1["PricingQuantity"] == pytest.approx(1.5)
    assert (a1["ChargePeriodStart"], a1["ChargePeriodEnd"]) == ("2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z")
    idle = focus[focus["Tags"].str.contains("idle capacity")]
    assert set(idle["ConsumedUnit"]) == {"GPU-Hours"} and set(idle["PricingUnit"]) == {"GPU-Hours"}
    # idle GPU-hours on 2 March: fleet 24 h x 2 GPUs = 48 GPU-hours less the busy share of hour 10 (0.75 GPU-h)
    day2 = idle[idle["ChargePeriodStart"] == "2026-03-02T00:00:00Z"].iloc[0]
    assert day2["ConsumedQuantity"] == pytest.approx(48 - 0.75)
    assert day2["PublisherName"] == "Meta" and day2["ServiceName"] == "Self-hosted LLM inference"
    plain = focus[focus["Tags"] == json.dumps({"tenant": "plain"})].iloc[0]   # no tier: no sla_tier tag
    assert plain["BilledCost"] == pytest.approx(0.5)


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
    assert exports.check_focus(good) == []
    assert any("missing mandatory" in p for p in exports.check_focus(good.drop(columns=["BilledCost", "ListCost"])))
    bad = good.assign(BilledCost="", EffectiveCost="abc", ChargePeriodStart="2026-03-01 00:00",
                      ChargeCategory="Fee", Tags="[1]", BillingCurrency="usd")
    problems = "\n".join(exports.check_focus(bad))
    for word in ("BilledCost: 1 null", "EffectiveCost: not a decimal", "ChargePeriodStart: not an ISO",
                 "ChargeCategory", "Tags: not a JSON object", "BillingCurrency"):
        assert word in problems


def test_focus_of_an_empty_selection_is_an_empty_valid_frame(con):
    focus = exports.focus_frame(con, Filters(tenants=("nobody",)))
    assert focus.empty and list(focus.columns) == [c for c, *_ in exports.FOCUS_COLUMNS]
    assert exports.check_focus(focus) == []
