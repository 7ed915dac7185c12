"""finops.ops.alerts: every rule has a case where it fires and one where it does not."""
import re
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.ops import alerts

T0 = datetime(2026, 4, 6, 0, 0)
_ids = iter(range(10**9))


def _rows(n, start, minutes=60.0, **cols):
    """``n`` requests spread evenly over ``minutes`` from ``start``; other columns constant or arrays."""
    ts = [start + timedelta(minutes=minutes * i / n) for i in range(n)]
    base = {"request_id": [f"r{next(_ids)}" for _ in range(n)], "ts": ts, "model": "gpt-4o", "tenant": "acme",
            "sla_tier": "premium", "status": "ok", "total_ms": 500.0, "queue_ms": 0.0}
    base.update(cols)
    return pd.DataFrame(base)


def _store(*frames):
    con = store.connect(":memory:")
    ingest_frame(con, pd.concat(frames, ignore_index=True))
    return con


def _fired(con, rule, f=None):
    a = alerts.open_alerts(con, f)
    return a[a.rule == rule]


# ---------------------------------------------------------------- error rate

def test_error_rate_fires_above_one_percent():
    status = ["error"] * 8 + ["ok"] * 192
    con = _store(_rows(200, T0, status=status))
    a = _fired(con, "error_rate")
    assert len(a) == 1
    row = a.iloc[0]
    assert (row.model, row.tenant, row.severity) == ("gpt-4o", "acme", "critical")
    assert_allclose(row.value, 0.04)
    assert row.threshold == 0.01
    assert row.window_start == pd.Timestamp(T0) and row.window_end == pd.Timestamp(T0 + timedelta(hours=1))
    assert "8 of 200 requests failed" in row.message and "4.0%" in row.message


def test_error_rate_does_not_fire_at_one_percent_or_on_few_requests():
    con = _store(_rows(100, T0, status=["error"] + ["ok"] * 99),              # exactly 1 %: not above
                 _rows(10, T0 + timedelta(hours=1), status=["error"] * 5 + ["ok"] * 5))  # too few to judge
    assert _fired(con, "error_rate").empty


def test_error_rate_needs_evidence_beyond_two_failures_in_sixty():
    """3.3 % observed (2 of 60) is weak evidence of a rate above 1 %: its 99.9 % lower bound is 0.5 %."""
    con = _store(_rows(60, T0, status=["error"] * 2 + ["ok"] * 58))
    assert _fired(con, "error_rate").empty
    assert alerts.wilson_lower(2, 60) < 0.01 < alerts.wilson_lower(8, 200)


def test_error_rate_per_tenant_and_merged_over_adjacent_hours():
    bad = ["error"] * 10 + ["ok"] * 90
    con = _store(_rows(100, T0, status=bad), _rows(100, T0 + timedelta(hours=1), status=bad),
                 _rows(100, T0, tenant="quiet"))
    a = _fired(con, "error_rate")
    assert len(a) == 1 and a.iloc[0].tenant == "acme"
    assert a.iloc[0].window_end - a.iloc[0].window_start == pd.Timedelta(hours=2)


def test_logs_with_no_status_have_an_unknown_error_rate_not_zero():
    """A trace of tokens and times (the Azure trace: no status column) said "Error rate 0.00 %" on the Overview and
    counted the error rule as judged. Now: gpt-4o's 200 requests carry no status, so its error rate is unknown
    (null) and the rule names it as not judged; gpt-4o-mini's 100 (2 failed, the rest with no status: counted ok,
    as the schema says) have one: 2 / 100. The fleet's: 2 of 300 requests, the 200 without status counted ok."""
    from finops.spend import report as spend
    con = _store(_rows(200, T0, status=None),
                 _rows(100, T0, model="gpt-4o-mini", status=["error"] * 2 + [None] * 98))
    rep = spend.report(con, Filters(), by=["model"]).set_index("model")
    assert rep.loc["gpt-4o", ["requests", "errors", "status_requests"]].tolist() == [200, 0, 0]
    assert pd.isna(rep.loc["gpt-4o", "error_rate"])
    assert rep.loc["gpt-4o-mini", ["requests", "errors", "status_requests"]].tolist() == [100, 2, 2]
    assert rep.loc["gpt-4o-mini", "error_rate"] == 2 / 100
    assert spend.kpis(con, Filters()).error_rate == 2 / 300
    assert spend.kpis(con, Filters(models=("gpt-4o",))).error_rate is None
    blind = alerts.unjudged(con).query("rule == 'error_rate'")
    assert blind[["windows", "requests", "reason"]].values.tolist() == [[0, 200, "no_field"]]
    assert blind["why"].iloc[0] == ("the logs of gpt-4o carry no request status (200 requests): there is nothing "
                                    "to judge")
    assert alerts.not_carried(con).query("rule == 'error_rate'")["why"].tolist() == blind["why"].tolist()
    # the model with a status is judged (2 of 100 failed is too weak to fire) and no window of gpt-4o's is
    # counted among those with too few requests
    assert _fired(con, "error_rate").empty
    assert alerts.unjudged(con, Filters(models=("gpt-4o-mini",))).query("rule == 'error_rate'").empty


def test_a_store_younger_than_the_spend_baseline_names_the_spike_rule_as_not_judged():
    """The spend spike judges a tenant's day against the median of the 7 days before it: a store of 10 days from
    2026-04-01 judges 2026-04-08 on. A period of 04-06 to 04-09 has two days of acme it cannot judge (04-06, 04-07:
    one request each), and one of tenant 'new', whose first request is on 04-09 (a median of $0 before it); a
    period of 04-01 to 04-03, three, and no day it can: the rule judged nothing."""
    con = _store(*[_rows(1, datetime(2026, 4, 1, 12) + timedelta(days=d), input_tokens=1000, output_tokens=100)
                   for d in range(10)],
                 _rows(1, datetime(2026, 4, 9, 13), tenant="new", input_tokens=1000, output_tokens=100))
    f = Filters(since=datetime(2026, 4, 6), until=datetime(2026, 4, 10))
    [row] = alerts.unjudged(con, f).query("rule == 'spend_spike'").to_dict("records")
    assert (row["windows"], row["requests"], row["reason"]) == (3, 3, "no_history")
    assert row["why"] == ("3 days of a tenant's spend (3 requests) could not be judged against the 7 days before: 2 "
                          "with fewer than 7 days of logs before them (the logs start on 2026-04-01; the first day "
                          "that can be judged is 2026-04-08); 1 after 7 days with no spend of its tenant (a median of "
                          "$0 is no baseline)")
    assert alerts.not_carried(con, f).query("rule == 'spend_spike'").empty      # acme's 04-08 and 04-09 were judged
    early = Filters(since=datetime(2026, 4, 1), until=datetime(2026, 4, 4))
    assert alerts.not_carried(con, early).query("rule == 'spend_spike'")["windows"].tolist() == [3]
    assert alerts.unjudged(con, Filters(since=datetime(2026, 4, 8), tenants=("acme",))).query(
        "rule == 'spend_spike'").empty


# ---------------------------------------------------------------- P99 vs SLA

def test_p99_over_sla_fires_when_p99_exceeds_one_and_a_half_times_the_tier_sla():
    slow = np.r_[np.full(95, 800.0), np.full(5, 4000.0)]      # P99 4000 ms > 1.5 x 2000 ms
    con = _store(_rows(100, T0, total_ms=slow))
    a = _fired(con, "p99_over_sla")
    assert len(a) == 1
    assert_allclose(a.iloc[0].value, np.percentile(slow, 99) / 2000.0)
    # in plain words: the latency by name, seconds from 1,000 ms (P99 by numpy's linear interpolation: 4.00 s)
    assert "P99 total latency 4.00 s against the premium tier's SLA of 2.00 s, over 100 requests" in a.iloc[0].message
    assert "total_ms" not in a.iloc[0].message


def test_p99_over_sla_does_not_fire_within_the_band_or_for_a_looser_tier():
    ok = np.r_[np.full(95, 800.0), np.full(5, 2900.0)]         # P99 2900 ms < 3000 ms
    con = _store(_rows(100, T0, total_ms=ok),
                 _rows(100, T0, total_ms=np.full(100, 9000.0), sla_tier="batch", tenant="nightly"))  # SLA 60 s
    assert _fired(con, "p99_over_sla").empty


def test_p99_sla_is_on_ttft_where_the_logs_carry_it():
    ttft = np.r_[np.full(95, 300.0), np.full(5, 3500.0)]            # TTFT P99 3500 > 3000
    con = _store(_rows(100, T0, total_ms=np.full(100, 40_000.0), ttft_ms=ttft))
    assert alerts.sla_metric(con) == "ttft_ms"
    a = _fired(con, "p99_over_sla")
    assert len(a) == 1 and "P99 time to first token 3.50 s" in a.iloc[0].message and "ttft_ms" not in a.iloc[0].message
    con = _store(_rows(100, T0, total_ms=np.full(100, 40_000.0), ttft_ms=np.full(100, 300.0)))
    assert _fired(con, "p99_over_sla").empty                        # total_ms is long, first token is fast
    alerts.save_sla_metric(con, "total_ms")
    assert len(_fired(con, "p99_over_sla")) == 1


def test_p99_sla_is_configurable_in_the_store():
    con = _store(_rows(100, T0, total_ms=np.full(100, 4000.0)))
    assert len(_fired(con, "p99_over_sla")) == 1
    alerts.save_sla_targets(con, {"premium": 5000})
    assert _fired(con, "p99_over_sla").empty
    assert alerts.sla_targets(con)["premium"] == 5000 and alerts.configured(con)
    with pytest.raises(InputError):
        alerts.save_sla_targets(con, {"premium": -1})
    # an SLA of inf (or 1e300 ms) was stored: every window within it
    for bad in (float("inf"), 1e300, None, "fast"):
        with pytest.raises(InputError, match="SLA of tier premium must be a number of ms above 0 and at most 3,600,000"):
            alerts.save_sla_targets(con, {"premium": bad})
    assert alerts.sla_targets(con)["premium"] == 5000


# ---------------------------------------------------------------- GPU utilisation
# llama-3.1-8b in the price book: replicas x slots_per_replica x 3.6e6 slot-ms per hour

def _capacity_ms() -> float:
    con = store.connect(":memory:")
    (replicas, slots), = con.execute("SELECT replicas, slots_per_replica FROM prices "
                                     "WHERE model = 'llama-3.1-8b'").fetchall()
    return replicas * slots * 3.6e6


def _gpu_hours(utils):
    cap = _capacity_ms()
    # enough requests that each is short (about a minute) and its busy time stays in its hour
    frames = [_rows(720, T0 + timedelta(hours=h), model="llama-3.1-8b", service_ms=u * cap / 720,
                    total_ms=1000.0) for h, u in enumerate(utils)]
    return _store(*frames)


def test_gpu_high_fires_when_sustained():
    con = _gpu_hours([0.5, 0.95, 0.97, 0.5])
    a = _fired(con, "gpu_util_high")
    assert len(a) == 1 and a.iloc[0].tenant == alerts.FLEET
    assert_allclose(a.iloc[0].value, 0.97)
    assert a.iloc[0].window_start == pd.Timestamp(T0 + timedelta(hours=1))
    assert a.iloc[0].window_end == pd.Timestamp(T0 + timedelta(hours=3))


def test_gpu_high_does_not_fire_for_one_hour():
    con = _gpu_hours([0.5, 0.95, 0.5, 0.95])
    assert _fired(con, "gpu_util_high").empty


def test_gpu_low_fires_after_six_quiet_hours_and_not_before():
    con = _gpu_hours([0.1] * 6 + [0.5])
    a = _fired(con, "gpu_util_low")
    assert len(a) == 1 and a.iloc[0].severity == "info"
    assert_allclose(a.iloc[0].value, 0.1)
    # one figure, the same places twice (was "10.0% ... worst: busy 10%")
    assert a.iloc[0].message.endswith("10.0% (threshold 20.0%) from 2026-04-06 00:00 to 2026-04-06 06:00 UTC, "
                                      "6 windows of an hour; worst: busy 10.0% of paid GPU capacity.")
    con = _gpu_hours([0.1] * 5 + [0.5, 0.1])
    assert _fired(con, "gpu_util_low").empty


# ---------------------------------------------------------------- queue length

def _queue_windows(mean_queue_ms):
    frames = [_rows(1000, T0 + timedelta(minutes=15 * i), minutes=15.0, queue_ms=q)
              for i, q in enumerate(mean_queue_ms)]
    return _store(*frames)


def test_queue_length_is_littles_law():
    con = _queue_windows([1000.0, 2000.0])
    q = alerts.queue_length(con, Filters())
    assert_allclose(q.queue_length, [1000 / 900 * 1.0, 1000 / 900 * 2.0])


def test_queue_growing_fires_after_three_rises():
    con = _queue_windows([500.0, 1000.0, 2000.0, 3000.0, 500.0])
    a = _fired(con, "queue_growing")
    assert len(a) == 1
    assert_allclose(a.iloc[0].value, 1000 / 900 * 3.0)
    assert a.iloc[0].window_start == pd.Timestamp(T0 + timedelta(minutes=45))
    assert "3 rises in a row" in a.iloc[0].message


def test_queue_does_not_fire_when_flat_falling_or_short():
    assert _fired(_queue_windows([3000.0] * 5), "queue_growing").empty
    assert _fired(_queue_windows([4000.0, 3000.0, 2000.0, 1000.0]), "queue_growing").empty
    assert _fired(_queue_windows([0.0, 100.0, 200.0, 300.0]), "queue_growing").empty   # rising but < 1 waiting


# ---------------------------------------------------------------- rules as data

def test_rules_are_configurable_and_can_be_disabled():
    con = _store(_rows(200, T0, status=["error"] * 8 + ["ok"] * 192))
    assert len(_fired(con, "error_rate")) == 1
    changed = [r if r.name != "error_rate" else alerts.AlertRule(**{**r.__dict__, "threshold": 0.05})
               for r in alerts.rules(con)]
    alerts.save_rules(con, changed)
    assert _fired(con, "error_rate").empty
    assert store.get_setting(con, "alerts.rules") == {"error_rate": {"threshold": 0.05}}
    frame = alerts.rules_frame(con)
    frame.loc[frame.name == "error_rate", ["threshold", "enabled"]] = [0.01, False]
    alerts.save_rules(con, frame)
    assert _fired(con, "error_rate").empty
    frame.loc[frame.name == "error_rate", "enabled"] = True
    alerts.save_rules(con, frame)
    assert len(_fired(con, "error_rate")) == 1
    frame.loc[frame.name == "error_rate", "window"] = "fortnight"
    with pytest.raises(InputError):
        alerts.save_rules(con, frame)
    frame.loc[frame.name == "error_rate", "window"] = "hour"
    # a cell emptied in the page's editor stopped the page with int()'s traceback; a threshold of inf was
    # stored as null; 1e300 windows sustained was stored
    for column, value, message in (("sustained", None, "sustained must be a whole number from 1 to 10,000, not empty"),
                                   ("sustained", 2.5, "not 2.5"), ("sustained", 1e300, "not 1e+300"),
                                   ("min_requests", float("nan"), "min_requests must be a whole number"),
                                   ("threshold", float("inf"), "threshold must be a number from 0 to 1 (a fraction: 0.05 is 5 %), not inf"),
                                   ("threshold", None, "not empty")):
        bad = frame.astype({column: object})
        bad.loc[bad.name == "error_rate", column] = value
        with pytest.raises(InputError, match=f"field {column}: error_rate: .*{re.escape(message)}"):
            alerts.save_rules(con, bad)
    assert store.get_setting(con, "alerts.rules") == {}          # each refusal left the rules as they were


def test_a_changed_threshold_is_the_one_the_alert_names():
    """An error rate rule set to 5 % said "Error rate above 1 %: ... 11.1% (threshold 5.0%)" in every alert, e-mail
    and page: the title kept the default's threshold."""
    con = _store(_rows(200, T0, status=["error"] * 30 + ["ok"] * 170))      # 15 % of 200 failed
    alerts.save_rules(con, [r if r.name != "error_rate" else alerts.AlertRule(**{**r.__dict__, "threshold": 0.05})
                            for r in alerts.rules(con)])
    [msg] = _fired(con, "error_rate")["message"]
    assert msg.startswith("Error rate above 5 %: gpt-4o for tenant acme, 15.0% (threshold 5.0%)")
    titles = {r.name: r.title for r in alerts.rules(con)}
    assert titles["error_rate"] == "Error rate above 5 %"
    assert titles["p99_over_sla"] == "P99 latency above 1.5 x the tier's SLA"          # at its default
    changed = {"p99_over_sla": 2.0, "gpu_util_high": 0.85, "gpu_util_low": 0.025, "spend_spike": 3.0,
               "budget_forecast": 0.9, "unpriced_share": 0.1, "kv_cache_saturated": 0.8}
    alerts.save_rules(con, [alerts.AlertRule(**{**r.__dict__, "threshold": changed.get(r.name, r.threshold)})
                            for r in alerts.rules(con)])
    titles = {r.name: r.title for r in alerts.rules(con)}
    assert [titles[n] for n in changed] == [
        "P99 latency above 2 x the tier's SLA", "GPU utilisation above 85 %, sustained",
        "GPU utilisation below 2.5 %, sustained", "Daily spend above 3 x its 7-day median",
        "Tenant forecast to pass 0.9 x its monthly budget", "Unpriced traffic above 10 % of requests",
        "KV cache over 80 % full for half a window or more"]
    # each default title is what its own threshold renders
    assert all(alerts.rule_title(r) == r.title for r in alerts.DEFAULT_RULES)


def test_a_percent_rule_refuses_a_threshold_above_one():
    """Typing 5 for an error rate of 5 % stored 500 %: the rule could never fire (and 20 for GPU utilisation
    below 20 % fired on every hour), with nothing said."""
    con = _store(_rows(200, T0))
    for name, value in (("error_rate", 5), ("gpu_util_low", 20), ("unpriced_share", 1.5)):
        bad = [r if r.name != name else alerts.AlertRule(**{**r.__dict__, "threshold": value})
               for r in alerts.rules(con)]
        with pytest.raises(InputError, match=re.escape(f"field threshold: {name}: threshold must be a number from 0 "
                                                       f"to 1 (a fraction: 0.05 is 5 %), not {value}")):
            alerts.save_rules(con, bad)
    assert not store.get_setting(con, "alerts.rules")
    # 100 % is still a threshold; a multiple of the SLA may be above 1
    ok = {"error_rate": 1.0, "p99_over_sla": 4.0, "queue_growing": 12.0}
    alerts.save_rules(con, [alerts.AlertRule(**{**r.__dict__, "threshold": ok.get(r.name, r.threshold)})
                            for r in alerts.rules(con)])
    assert store.get_setting(con, "alerts.rules") == {k: {"threshold": v} for k, v in ok.items()}


def test_every_rule_has_an_evaluator():
    assert {r.name for r in alerts.DEFAULT_RULES} == set(alerts.EVALUATORS)


def test_empty_store_has_no_alerts(empty_db):
    a = alerts.open_alerts(store.connect(empty_db), Filters())
    assert a.empty and list(a.columns) == alerts.ALERT_COLUMNS


# ---------------------------------------------------------------- windows too small to judge (issue 17)

def test_a_store_whose_requests_all_fail_in_small_hours_raises_a_critical_alert():
    """24 hours of 20 requests, every one failed: no hour reaches min_requests (50), so no hour alone is
    judged; pooled, 480 of 480 failed, Wilson's 99.9 % lower bound is 480 / (480 + 3.09²) = 98.05 % (98.0 % shown)."""
    con = _store(*[_rows(20, T0 + timedelta(hours=h), status="error") for h in range(24)])
    a = _fired(con, "error_rate")
    assert len(a) == 1
    row = a.iloc[0]
    assert (row.model, row.tenant, row.severity) == ("gpt-4o", "acme", "critical")
    assert row.value == 1.0
    assert row.window_start == pd.Timestamp(T0) and row.window_end == pd.Timestamp(T0 + timedelta(hours=24))
    assert_allclose(alerts.wilson_lower(480, 480), 480 / (480 + 3.09 ** 2))
    assert ("480 of 480 requests failed over 24 hours of fewer than 50 requests each, judged together "
            "(99.9% lower bound 98.0%)") in row.message
    assert "UTC, 24 windows of an hour; worst:" in row.message         # was "1 window of an hour" over 24 hours
    assert alerts.unjudged(con).query("rule == 'error_rate'").empty


def test_windows_too_small_even_pooled_are_reported_as_unjudged_not_as_fine():
    """3 requests, all failed: 3 < 50 even together, so no alert, and the window is listed as unjudged."""
    con = _store(_rows(3, T0, status="error", total_ms=100.0))
    assert _fired(con, "error_rate").empty
    blind = alerts.unjudged(con).set_index("rule")
    assert blind.loc["error_rate", ["windows", "requests", "min_requests"]].tolist() == [1, 3, 50]
    assert blind.loc["p99_over_sla", ["windows", "requests", "min_requests"]].tolist() == [1, 3, 100]


def test_pooling_keeps_the_few_requests_rule():
    """Small hours pooled still need min_requests together: 5 of 10 failed is not judged."""
    con = _store(_rows(10, T0, status=["error"] * 5 + ["ok"] * 5))
    assert _fired(con, "error_rate").empty


# ---------------------------------------------------------------- spend rules

def _spend_rows(tenant, costs, start=datetime(2026, 4, 1, 12, 0), model="gpt-4o"):
    """One request a day at noon from ``start`` with a recorded cost each."""
    return pd.DataFrame({"request_id": [f"s-{tenant}-{i}" for i in range(len(costs))],
                         "ts": [start + timedelta(days=i) for i in range(len(costs))], "model": model,
                         "tenant": tenant, "status": "ok", "input_tokens": 100, "output_tokens": 10,
                         "cost_usd": costs})


def test_spend_spike_fires_above_twice_the_median_of_the_seven_days_before():
    """acme, 1-10 April: $1 $1 $2 $1 $3 $1 $1, then $2.50, $1.90, $5.
    8 Apr: median($1 $1 $2 $1 $3 $1 $1) = $1, 2.5 x: fires.
    9 Apr: median($1 $2 $1 $3 $1 $1 $2.50) = $1, 1.9 x: not above 2.
    10 Apr: median($2 $1 $3 $1 $1 $2.50 $1.90) = $1.90, 5 / 1.9 = 2.63 x: fires (a new alert: 9 Apr apart).
    The first seven days have no full baseline and are not judged; beta at $1 a day never fires."""
    con = _store(_spend_rows("acme", [1, 1, 2, 1, 3, 1, 1, 2.5, 1.9, 5.0]), _spend_rows("beta", [1.0] * 10))
    a = _fired(con, "spend_spike").sort_values("window_start")
    assert a["tenant"].tolist() == ["acme", "acme"] and set(a["model"]) == {alerts.ALL_MODELS}
    assert a["window_start"].tolist() == [pd.Timestamp(2026, 4, 8), pd.Timestamp(2026, 4, 10)]
    assert_allclose(a["value"].to_numpy(), [2.5, 5 / 1.9])
    assert ("Daily spend above 2 x its 7-day median: spend for tenant acme, 2.50 x baseline (threshold 2.00 x "
            "baseline) from 2026-04-08 00:00 to 2026-04-09 00:00 UTC, 1 window of a day; worst: $2.50 spent on "
            "2026-04-08 against a 7-day median of $1.00 a day.") in a["message"].tolist()
    # a period from 9 April still takes its baseline from the days before it
    later = _fired(con, "spend_spike", Filters(since=datetime(2026, 4, 9)))
    assert later["window_start"].tolist() == [pd.Timestamp(2026, 4, 10)]


def test_spend_spike_needs_a_baseline_above_zero():
    con = _store(_spend_rows("acme", [0, 0, 0, 0, 0, 0, 0, 5.0]))
    assert _fired(con, "spend_spike").empty


def test_budget_forecast_fires_for_a_tenant_forecast_over_its_budget():
    """acme and beta spend $10, $12, $8 on 1-3 April and $10 at noon on the 4th: spent $40, the data run to 13:00
    on 4 April, so 26 days and 11 hours are left; the mean of the three complete days is $10, the forecast
    $40 + $10 x (26 + 11/24) = $304.58. acme's budget is $300 (over: 1.0153 x), beta's $310 (not over)."""
    from finops.spend import budgets

    con = _store(_spend_rows("acme", [10.0, 12.0, 8.0, 10.0]), _spend_rows("beta", [10.0, 12.0, 8.0, 10.0]))
    budgets.save_budgets(con, "2026-04", pd.DataFrame({"tenant": ["acme", "beta"], "budget_usd": [300.0, 310.0]}))
    a = _fired(con, "budget_forecast")
    assert len(a) == 1
    row = a.iloc[0]
    forecast = 40 + 10 * (26 + 11 / 24)
    assert (row.tenant, row.model, row.severity) == ("acme", alerts.ALL_MODELS, "warning")
    assert_allclose(row.value, forecast / 300)
    assert row.window_start == pd.Timestamp(2026, 4, 1) and row.window_end == pd.Timestamp(2026, 4, 4, 13)
    assert "forecast $304.58 for April 2026 against a budget of $300.00 ($40.00 spent so far)" in row.message
    # a period in another month judges no April budget
    assert _fired(con, "budget_forecast", Filters(since=datetime(2026, 5, 1), until=datetime(2026, 6, 1))).empty


def test_a_budget_forecast_from_less_than_a_day_of_logs_says_it_is_a_rough_guide():
    """One request of $1 at noon on 1 April, the store's first: no complete day, so the month-end forecast is the
    run rate of one moment counted as an hour ($1 an hour) over the 707 hours left: $708 against a $100 budget. The
    alert said "forecast $708.00 for April 2026" as if measured, where the Budgets page calls it a rough guide with
    no interval; one complete day has no interval either."""
    from finops.spend import budgets

    con = _store(_spend_rows("acme", [1.0]))
    budgets.save_budgets(con, "2026-04", pd.DataFrame({"tenant": ["acme"], "budget_usd": [100.0]}))
    row = _fired(con, "budget_forecast").iloc[0]
    assert "forecast $708.00 for April 2026 against a budget of $100.00 ($1.00 spent so far" in row.message
    assert "no complete day yet: the run rate of an hour of logs, a rough guide with no interval" in row.message
    # two days, the first one complete: one day's spend a day, no spread to measure
    con = _store(_spend_rows("acme", [50.0, 1.0], start=datetime(2026, 4, 1, 0, 0)))
    budgets.save_budgets(con, "2026-04", pd.DataFrame({"tenant": ["acme"], "budget_usd": [100.0]}))
    row = _fired(con, "budget_forecast").iloc[0]
    assert "one complete day: its spend a day, with no interval" in row.message
    # three complete days or more: as the test above, no caveat
    con = _store(_spend_rows("acme", [10.0, 12.0, 8.0, 10.0]))
    budgets.save_budgets(con, "2026-04", pd.DataFrame({"tenant": ["acme"], "budget_usd": [300.0]}))
    assert "rough guide" not in _fired(con, "budget_forecast").iloc[0].message


def test_unpriced_share_fires_above_five_percent_of_a_day_s_requests():
    """6 Apr: 6 of 100 requests on a model nothing prices (6 % > 5 %): fires. 7 Apr: 5 of 100 (5 %, not above)."""
    def day(d, unpriced):
        start = datetime(2026, 4, d, 8, 0)
        return _rows(100, start, model=["mystery-model-x"] * unpriced + ["gpt-4o"] * (100 - unpriced),
                     input_tokens=100, output_tokens=10)
    con = _store(day(6, 6), day(7, 5))
    a = _fired(con, "unpriced_share")
    assert len(a) == 1
    row = a.iloc[0]
    assert row.window_start == pd.Timestamp(2026, 4, 6) and row.window_end == pd.Timestamp(2026, 4, 7)
    assert_allclose(row.value, 0.06)
    assert "6 of 100 requests unpriced, counted at $0.00 (mystery-model-x)" in row.message
    assert "6.0% (threshold 5.0%)" in row.message
    assert row.message.startswith("Unpriced traffic above 5 % of requests: all traffic, 6.0%")   # was ": spend,"


def test_each_alert_names_the_worst_window_of_its_own_run():
    """Two days apart, each all unpriced (100 %), on two models: the second day's alert named the first day's
    model (the worst window was looked up by value among every run's windows, and both were 100 %)."""
    con = _store(_rows(100, datetime(2026, 4, 6, 8, 0), model="mystery-model-x", input_tokens=100, output_tokens=10),
                 _rows(100, datetime(2026, 4, 9, 8, 0), model="mystery-model-y", input_tokens=100, output_tokens=10))
    a = _fired(con, "unpriced_share").sort_values("window_start")
    assert a["window_start"].tolist() == [pd.Timestamp(2026, 4, 6), pd.Timestamp(2026, 4, 9)]
    assert "(mystery-model-x)" in a.iloc[0].message and "(mystery-model-y)" in a.iloc[1].message


def _queue_growing_by_filling_gaps(q, rule):
    """The former evaluator, kept as the reference: each model's gaps filled with zero windows, walked in Python."""
    import pandas as pd
    out = []
    for model, g in q.groupby("model"):
        s = g.set_index("window_start")["queue_length"]
        s = s.reindex(pd.date_range(s.index.min(), s.index.max(), freq=alerts.WINDOWS[rule.window]), fill_value=0.0)
        rising = (s.diff() > 0).astype(int)
        run = rising.groupby((rising == 0).cumsum()).cumsum()
        out += [(model, ts, float(v), int(r)) for ts, v, r in zip(s.index, s.to_numpy(), run.to_numpy(), strict=True)
                if r >= rule.sustained and v >= rule.threshold]
    return sorted(out)


def test_queue_growing_over_a_long_span_of_many_models_is_vectorised_and_the_same(monkeypatch):
    """The queue rule filled every model's span with 15-minute zero windows and walked them in Python: a
    3-year store of 1,000 models took 230 s on the Overview page. The windows that hold requests are now
    judged at once, with the same verdicts (gaps break a run; the window after one rises from 0)."""
    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(7)
    start = pd.Timestamp("2026-01-01")
    rows = []
    for m in range(6):
        idx = np.sort(rng.choice(400, size=160, replace=False))
        for i in idx:
            rows.append((f"m{m}", start + pd.Timedelta(minutes=15 * int(i)), float(rng.choice([0, 0.5, 1, 2, 3, 5]))))
    q = pd.DataFrame(rows, columns=["model", "window_start", "queue_length"])
    monkeypatch.setattr(alerts, "queue_length", lambda con, f, window: q)
    rule = next(r for r in alerts.DEFAULT_RULES if r.name == "queue_growing")
    got = alerts._queue_growing(None, None, rule, {})
    mine = sorted((m, ts, v, int(d.split()[0])) for m, ts, v, d in
                  zip(got["model"], got["window_start"], got["value"], got["detail"], strict=True))
    expected = _queue_growing_by_filling_gaps(q, rule)
    assert expected and mine == expected


def test_judged_rules_are_those_open_alerts_evaluates():
    con = _store(_rows(200, T0))
    every = [alerts.rule_name(r.name) for r in alerts.DEFAULT_RULES]
    engine_rules = [alerts.rule_name(r) for r in alerts.ENGINE_RULES]
    judged, off = alerts.judged_rules(con)
    assert judged == [r for r in every if r not in engine_rules] and off == []      # no scrape: no engine rule
    con.execute("INSERT INTO engine_metrics VALUES (?, 'gpu-a', 'llama-3.1-8b', 'vllm:num_requests_waiting', '', 0)",
                [T0])
    assert alerts.judged_rules(con)[0] == every
    # a tenant's login sees no fleet rule; leave_out leaves rules out; a rule turned off is named as off
    scoped = alerts.judged_rules(con, Filters(tenants=("acme",), scoped=True))[0]
    assert scoped == ["error rate", "P99 over the tier's SLA", "queue growing", "daily spend spike",
                      "budget forecast passed", "unpriced traffic"]
    frame = alerts.rules_frame(con)
    frame.loc[frame.name == "error_rate", "enabled"] = False
    alerts.save_rules(con, frame)
    judged, off = alerts.judged_rules(con, leave_out=("spend_spike", "budget_forecast", "unpriced_share"))
    assert off == ["error rate"] and judged == ["P99 over the tier's SLA", "GPU utilisation high",
                                                "GPU utilisation low", "queue growing", "KV cache full",
                                                "engine queue saturated"]
