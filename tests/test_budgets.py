"""Budgets: storage and validation, burn so far, the month-end forecast and its interval, the flags."""
import math
from datetime import date, datetime

import pandas as pd
import pytest
from scipy import stats

from finops import store
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.spend import budgets
from helpers import SPEND_COLS, add_test_models

NOV = date(2026, 11, 1)


def _row(rid, ts, tenant, cost, model="api-model"):
    # a recorded cost makes each day's spend exact
    return (rid, ts, tenant, "standard", model, 10, 10, 0, 100.0, 100.0, cost, False, "ok", None, None)


@pytest.fixture()
def con():
    """Tenant a: $10 every day 1-10 Nov. Tenant b: 5, 15, 5, 15, ... Both: a partial day 11 Nov to 05:59."""
    c = store.connect(":memory:")
    add_test_models(c)
    rows = []
    for d in range(10):
        day = datetime(2026, 11, 1 + d, 12)
        rows.append(_row(f"a{d}", day, "a", 10.0))
        rows.append(_row(f"b{d}", day, "b", 5.0 if d % 2 == 0 else 15.0))
    rows.append(_row("a-partial", datetime(2026, 11, 11, 5, 30), "a", 3.0))
    rows.append(_row("b-partial", datetime(2026, 11, 11, 5, 0), "b", 1.0))
    ingest_frame(c, pd.DataFrame(rows, columns=SPEND_COLS))
    yield c
    c.close()


def test_forecast_by_hand():
    x = [10.0, 12.0, 8.0, 10.0]
    r = budgets.forecast_month_end(x, spent_usd=40.0, days_left=10.0)
    s = pd.Series(x).std(ddof=1)
    half = stats.t.ppf(0.95, 3) * s * math.sqrt(10 + 100 / 4)
    assert (r.forecast_usd, r.low_usd, r.high_usd) == pytest.approx((140.0, 140 - half, 140 + half))
    assert (r.mean_daily_usd, r.sd_daily_usd) == pytest.approx((10.0, s))


def test_forecast_degenerate_inputs():
    one = budgets.forecast_month_end([7.0], spent_usd=7.0, days_left=3.0)
    assert one.forecast_usd == 28.0 and math.isnan(one.low_usd) and math.isnan(one.high_usd)
    none = budgets.forecast_month_end([], spent_usd=2.0, days_left=10.0, elapsed_days=0.5)
    assert none.forecast_usd == pytest.approx(2.0 + 4.0 * 10)
    ended = budgets.forecast_month_end([1.0, 3.0], spent_usd=4.0, days_left=0.0)
    assert (ended.forecast_usd, ended.low_usd, ended.high_usd) == (4.0, 4.0, 4.0)
    wide = budgets.forecast_month_end([1.0, 100.0], spent_usd=101.0, days_left=20.0)
    assert wide.low_usd == 101.0                   # never below what is already spent


def test_budgets_are_stored_validated_and_replaced(con, tmp_path):
    assert budgets.save_budgets(con, NOV, pd.DataFrame({"tenant": ["a", "b"], "budget_usd": [250.0, 400.0]})) == 2
    table = budgets.budget_table(con, "2026-11").set_index("tenant")
    assert table.loc["a", "budget_usd"] == 250.0 and table.loc["b", "budget_usd"] == 400.0
    # a blank budget removes it; others are replaced
    budgets.save_budgets(con, NOV, pd.DataFrame({"tenant": ["a", "b"], "budget_usd": [300.0, None]}))
    table = budgets.budget_table(con, NOV).set_index("tenant")
    assert table.loc["a", "budget_usd"] == 300.0 and math.isnan(table.loc["b", "budget_usd"])
    assert budgets.budget_table(con, date(2026, 12, 1)).budget_usd.isna().all()     # per month
    for frame, where in (
            (pd.DataFrame({"tenant": ["a"], "budget_usd": [-1.0]}), "row 1, field budget_usd"),
            (pd.DataFrame({"tenant": ["a", "b"], "budget_usd": [1.0, "lots"]}), "row 2, field budget_usd"),
            (pd.DataFrame({"tenant": ["a", "a"], "budget_usd": [1.0, 2.0]}), "row 2, field tenant"),
            (pd.DataFrame({"tenant": [None], "budget_usd": [1.0]}), "row 1, field tenant"),
            # $1e300 was stored and shown on the Budgets page as 300 digits
            (pd.DataFrame({"tenant": ["a"], "budget_usd": [1e300]}),
             "row 1, field budget_usd: budget 1e[+]300 must be an amount in USD from 0 to 1,000,000,000,000")):
        with pytest.raises(InputError, match=where):
            budgets.save_budgets(con, NOV, frame)
    assert budgets.budget_table(con, NOV).set_index("tenant").loc["a", "budget_usd"] == 300.0   # kept


def test_budgets_live_in_the_store_file(tmp_path):
    path = str(tmp_path / "b.duckdb")
    c = store.connect(path)
    budgets.set_budget(c, "o'brien; drop table requests", NOV, 12.5)
    c.close()
    c = store.connect(path)
    assert budgets.budget_table(c, NOV).set_index("tenant").loc["o'brien; drop table requests", "budget_usd"] == 12.5
    assert c.execute("SELECT count(*) FROM requests").fetchall()[0][0] == 0
    c.close()


def test_burn_forecast_and_flags(con):
    budgets.save_budgets(con, NOV, pd.DataFrame({"tenant": ["a", "b"], "budget_usd": [250.0, 290.0]}))
    rep = budgets.status(con, NOV)
    assert rep.as_of == datetime(2026, 11, 11, 6)          # end of the last observed hour
    assert rep.complete_days == 10 and rep.first_day == date(2026, 11, 1)
    assert rep.days_left == pytest.approx(30 - 10.25)
    t = rep.table.set_index("tenant")
    # a: flat $10/day -> no spread; 103 + 10 x 19.75 = 300.5 > 250 while 103 spent < 250: forecast over budget
    assert t.loc["a", "spent_usd"] == pytest.approx(103.0)
    assert t.loc["a", "forecast_usd"] == pytest.approx(103 + 10 * 19.75)
    assert t.loc["a", "forecast_low_usd"] == pytest.approx(t.loc["a", "forecast_high_usd"])
    assert t.loc["a", "status"] == "forecast over budget"
    assert t.loc["a", "used_share"] == pytest.approx(103 / 250)
    # b: mean 10, sd of 5/15 alternating; 101 + 197.5 = 298.5 > 290 -> over; with 320 the interval crosses: at risk
    s = pd.Series([5.0, 15.0] * 5).std(ddof=1)
    half = stats.t.ppf(0.95, 9) * s * math.sqrt(19.75 + 19.75 ** 2 / 10)
    assert t.loc["b", "forecast_usd"] == pytest.approx(298.5)
    assert (t.loc["b", "forecast_low_usd"], t.loc["b", "forecast_high_usd"]) == pytest.approx(
        (298.5 - half, 298.5 + half))
    assert t.loc["b", "status"] == "forecast over budget"
    # spent already past the budget (101 > 100): over budget, not merely forecast to be
    budgets.set_budget(con, "b", NOV, 100.0)
    assert budgets.status(con, NOV).table.set_index("tenant").loc["b", "status"] == "over budget"
    assert list(budgets.status(con, NOV).table["tenant"])[0] == "b"          # the most urgent first
    # spent exactly the budget is not over it
    budgets.set_budget(con, "b", NOV, 101.0)
    assert budgets.status(con, NOV).table.set_index("tenant").loc["b", "status"] == "forecast over budget"
    budgets.set_budget(con, "b", NOV, 320.0)
    assert budgets.status(con, NOV).table.set_index("tenant").loc["b", "status"] == "at risk"
    budgets.set_budget(con, "b", NOV, 298.5 + half + 1)
    assert budgets.status(con, NOV).table.set_index("tenant").loc["b", "status"] == "on track"
    assert list(budgets.status(con, NOV).table["status"])[0] == "forecast over budget"     # most urgent first


def test_tenants_without_budget_and_the_tenant_filter(con):
    rep = budgets.status(con, NOV, Filters(tenants=("b",), models=("ignored",)))
    assert list(rep.table["tenant"]) == ["b"] and rep.table["status"].iloc[0] == "no budget"
    assert rep.table["spent_usd"].iloc[0] == pytest.approx(101.0)      # models of the filter do not apply


def test_idle_capacity_is_in_no_budget(con):
    ingest_frame(con, pd.DataFrame([_row("g", datetime(2026, 11, 5, 3), "a", None, model="gpu-model")], columns=SPEND_COLS))
    rep = budgets.status(con, NOV)
    assert "(idle capacity)" not in set(rep.table["tenant"])
    # the fleet ($4/hour, no schedule declared) is billed for its one hour of traffic
    assert rep.idle_usd + rep.table["spent_usd"].sum() == pytest.approx(103 + 101 + 4)
    assert rep.idle_usd > 0


def test_idle_charged_out_counts_in_the_tenants_spend(con):
    from finops.spend import fleets
    ingest_frame(con, pd.DataFrame([_row("g", datetime(2026, 11, 5, 3), "a", None, model="gpu-model")], columns=SPEND_COLS))
    fleets.set_default_policy(con, "usage")
    rep = budgets.status(con, NOV)
    # a used the fleet alone: its whole hour ($4) is a's, on top of its $103
    assert rep.idle_usd == 0 and rep.table.set_index("tenant").loc["a", "spent_usd"] == pytest.approx(107.0)


def test_a_month_without_traffic_and_an_empty_store(con):
    rep = budgets.status(con, date(2026, 12, 1))
    assert rep.as_of is None and rep.table.empty          # nobody has traffic or a budget in December
    budgets.set_budget(con, "b", date(2026, 12, 1), 10.0)  # a budget set ahead lists its tenant
    rep = budgets.status(con, date(2026, 12, 1))
    assert list(rep.table["tenant"]) == ["b"] and set(rep.table["status"]) == {"on track"}
    assert rep.table["spent_usd"].sum() == 0
    empty = store.connect(":memory:")
    assert budgets.months(empty) == [] and budgets.status(empty, NOV).table.empty


def test_burn_curve_ends_at_the_forecast(con):
    budgets.set_budget(con, "a", NOV, 250.0)
    rep = budgets.status(con, NOV)
    curve = budgets.burn_curve(rep, "a")
    actual, forecast = curve[curve.kind == "actual"], curve[curve.kind == "forecast"]
    assert actual["cumulative_usd"].iloc[-1] == pytest.approx(103.0)
    assert forecast["day"].iloc[0] == rep.as_of and forecast["day"].iloc[-1] == datetime(2026, 12, 1)
    assert forecast["cumulative_usd"].iloc[-1] == pytest.approx(rep.table.set_index("tenant").loc["a", "forecast_usd"])
    assert (curve["budget_usd"] == 250.0).all()
    assert budgets.burn_curve(rep, "nobody").empty


def test_months_and_month_parsing(con):
    assert budgets.months(con) == [NOV]
    assert budgets.month_start("2026-11") == NOV and budgets.month_start(datetime(2026, 11, 30, 5)) == NOV
    assert budgets.next_month(date(2026, 12, 1)) == date(2027, 1, 1)
    with pytest.raises(InputError, match="month"):
        budgets.month_start("November")
    assert budgets.status(con, NOV, as_of=datetime(2026, 11, 6)).days_left == pytest.approx(25.0)


def test_the_editor_lists_the_months_tenants_and_its_key_follows_them(con):
    nov = budgets.budget_table(con, NOV)
    assert list(nov["tenant"]) == sorted(nov["tenant"]) and len(nov) > 0
    key = budgets.editor_key(nov, NOV)
    assert budgets.editor_key(budgets.budget_table(con, NOV), NOV) == key      # same tenants, same key
    ingest_frame(con, pd.DataFrame([_row("n1", datetime(2026, 11, 9, 3), "aa-new", 1.0)], columns=SPEND_COLS))
    grown = budgets.budget_table(con, NOV)
    assert "aa-new" in set(grown["tenant"]) and budgets.editor_key(grown, NOV) != key
    assert budgets.budget_table(con, date(2026, 12, 1)).empty


def test_sample_budgets_put_one_tenant_over_and_one_at_risk():
    from finops.sample import demo
    con = store.connect(":memory:")
    demo.build_demo(con, days=3)
    (month,) = budgets.months(con)
    table = budgets.status(con, month).table.set_index("tenant")
    assert table["status"].isin(budgets.FORECAST_OVER).sum() == 1 and (table["status"] == "at risk").sum() == 1
    assert table["budget_usd"].notna().all()
    top = table["forecast_usd"].idxmax()
    assert table.loc[top, "status"] in budgets.FORECAST_OVER
    assert table.loc[top, "budget_usd"] % 100 == 0 and table.loc[top, "budget_usd"] < table.loc[top, "forecast_usd"]
    assert budgets.sample_months(con) == [month.strftime("%Y-%m")]
    assert demo.sample_budgets(con) == {}                        # built once: a month with budgets is left alone
    budgets.save_budgets(con, month, pd.DataFrame({"tenant": [top], "budget_usd": [5.0]}))
    assert budgets.sample_months(con) == []                      # a person's save makes them theirs


def test_a_first_day_that_starts_late_runs_its_rate_over_the_time_the_logs_cover():
    """The Azure trace starts at 18:15 and ends at 19:14: its run rate was taken over the 20 hours from midnight to
    the end of its last hour, a month-end forecast 20 times too low. Two $1 requests at 18:15 and 20:15 on 16 Nov:
    $2 over 2 hours is $1 an hour, so 2 + 24 x 14.125 days left (from 21:00, the end of the last hour) = $341
    (the rate from midnight said 2 + 2 / 21 x 24 x 14.125 = $34.29)."""
    c = store.connect(":memory:")
    add_test_models(c)
    ingest_frame(c, pd.DataFrame([_row("x", datetime(2026, 11, 16, 18, 15), "a", 1.0),
                                  _row("y", datetime(2026, 11, 16, 20, 15), "a", 1.0)], columns=SPEND_COLS))
    rep = budgets.status(c, NOV)
    assert rep.complete_days == 0 and rep.as_of == datetime(2026, 11, 16, 21)
    assert (rep.observed_from, rep.observed_to) == (datetime(2026, 11, 16, 18, 15), datetime(2026, 11, 16, 20, 15))
    assert rep.observed_hours == 2.0 and rep.days_left == pytest.approx(14.125)
    assert rep.table.set_index("tenant").loc["a", "forecast_usd"] == pytest.approx(2 + 24 * 14.125)
    # a given "as of" measures to it; a single request is counted over an hour, not a rate per second
    assert budgets.status(c, NOV, as_of=datetime(2026, 11, 16, 22, 15)).observed_hours == 4.0
    one = store.connect(":memory:")
    add_test_models(one)
    ingest_frame(one, pd.DataFrame([_row("z", datetime(2026, 11, 16, 18, 15), "a", 1.0)], columns=SPEND_COLS))
    rep = budgets.status(one, NOV)
    assert rep.observed_hours == 0.0
    assert rep.table.set_index("tenant").loc["a", "forecast_usd"] == pytest.approx(1 + 24 * rep.days_left)


def test_a_feed_switched_on_late_in_its_first_day_does_not_average_that_day_as_whole():
    """A $1 request every hour at :15 from 16 Nov 18:15 to 19 Nov 05:15: 16 Nov logged 6 hours ($6), 17 and 18 Nov
    $24 each, 19 Nov $6 so far. The days after the first have traffic before 18:00, so 16 Nov is a part day: the
    mean is over 17 and 18 Nov, $24, and the forecast 60 + 24 x 11.75 days left = $342 (as a whole day it made the
    mean $18: $271.50). The noon-a-day fixture keeps its first day (no later day has traffic before noon)."""
    from datetime import timedelta
    c = store.connect(":memory:")
    add_test_models(c)
    t0 = datetime(2026, 11, 16, 18, 15)
    ingest_frame(c, pd.DataFrame([_row(f"h{h}", t0 + timedelta(hours=h), "a", 1.0) for h in range(60)],
                                 columns=SPEND_COLS))
    rep = budgets.status(c, NOV)
    assert rep.first_day_partial and rep.complete_days == 2
    assert rep.days_left == pytest.approx(11.75)
    row = rep.table.set_index("tenant").loc["a"]
    assert row["spent_usd"] == pytest.approx(60.0) and row["mean_daily_usd"] == pytest.approx(24.0)
    assert row["forecast_usd"] == pytest.approx(60 + 24 * 11.75)
    # before the second whole day ends there is no complete day: the run rate over the hours the logs cover
    early = budgets.status(c, NOV, as_of=datetime(2026, 11, 17, 12))
    assert early.complete_days == 0 and early.observed_from == t0
    assert early.observed_hours == pytest.approx(17.75)
    assert early.table.set_index("tenant").loc["a", "forecast_usd"] == pytest.approx(
        18 + 18 / 17.75 * 24 * (30 - 16.5))


def test_a_store_whose_every_day_starts_at_noon_keeps_its_first_day(con):
    rep = budgets.status(con, NOV)
    assert not rep.first_day_partial and rep.complete_days == 10


@pytest.mark.parametrize("times, said", [
    ([datetime(2026, 11, 16, 18, 15), datetime(2026, 11, 16, 20, 15)],
     "over the 2 hours the logs cover (2026-11-16 18:15 to 20:15 UTC)"),
    ([datetime(2026, 11, 16, 18, 15), datetime(2026, 11, 16, 18, 29)],
     "over an hour (the logs cover 14 minutes, 2026-11-16 18:15 to 18:29 UTC, counted as an hour)"),
    ([datetime(2026, 11, 16, 18, 15)], "over an hour (the logs hold one moment, 2026-11-16 18:15 UTC, counted as an hour)"),
])
def test_the_budgets_page_says_what_a_first_days_run_rate_was_measured_over(tmp_path, times, said):
    # a single request read "the 1 minute the logs cover (10:52 to 10:52 UTC)"; the spend column read $0.00
    from helpers import run_page
    path = str(tmp_path / "b.duckdb")
    c = store.connect(path)
    add_test_models(c)
    ingest_frame(c, pd.DataFrame([_row(f"r{i}", t, "a", 0.00023) for i, t in enumerate(times)], columns=SPEND_COLS))
    c.close()
    at = run_page(path, "views/budgets.py", query_params={"month": "2026-11"})
    assert not at.exception, [e.value for e in at.exception]
    caption = next(x.value for x in at.caption if x.value.startswith("Data through"))
    assert f"No complete day observed yet: the forecast runs each tenant's spend rate {said} to the month end" in caption
    import json
    status = next(d for d in at.dataframe if "forecast_usd" in d.value.columns)
    assert json.loads(status.proto.columns)["spent_usd"]["type_config"]["format"] == "$%,.5f"     # $0.00023 each


@pytest.mark.parametrize("times, costs, complete_days, caveat", [
    # one request at 18:15: no complete day, the run rate of a moment counted as an hour
    ([datetime(2026, 11, 16, 18, 15)], [1.0], 0, "a rough guide with no interval until a day has passed"),
    # midnight 1 and 2 November: 1 November is complete, one day's spend a day and no spread to measure
    ([datetime(2026, 11, 1), datetime(2026, 11, 2)], [50.0, 1.0], 1,
     "with no interval: one day has no spread to measure"),
])
def test_the_page_and_the_alert_say_one_caveat_for_a_forecast_from_under_two_complete_days(
        tmp_path, times, costs, complete_days, caveat):
    """The Budgets page's caption and the budget alert wrote the caveat of a forecast from fewer than two complete
    days as two strings of their own; both now take it from ``budgets.forecast_caveat``, pinned here in each."""
    from finops.ops import alerts
    from helpers import run_page
    assert budgets.forecast_caveat(complete_days) == caveat
    assert budgets.forecast_caveat(2) == "" and budgets.forecast_caveat(10) == ""
    path = str(tmp_path / "b.duckdb")
    c = store.connect(path)
    add_test_models(c)
    ingest_frame(c, pd.DataFrame([_row(f"r{i}", t, "a", x) for i, (t, x) in enumerate(zip(times, costs, strict=True))],
                                 columns=SPEND_COLS))
    budgets.save_budgets(c, "2026-11", pd.DataFrame({"tenant": ["a"], "budget_usd": [10.0]}))
    assert budgets.status(c, NOV).complete_days == complete_days
    fired = alerts.open_alerts(c)
    message = fired[fired.rule == "budget_forecast"].iloc[0].message
    c.close()
    assert caveat in message
    at = run_page(path, "views/budgets.py", query_params={"month": "2026-11"})
    assert not at.exception, [e.value for e in at.exception]
    caption = next(x.value for x in at.caption if x.value.startswith("Data through"))
    assert caveat in caption
