"""finops.capacity.forecast: a synthetic seasonal series with a known pattern, short histories, the replica plan."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops.capacity.forecast import ForecastResult, forecast_qps, hourly_history, replica_plan
from finops.capacity.queueing import required_servers
from finops.errors import InputError

START = "2026-01-05"        # a Monday


def pattern(hours: np.ndarray) -> np.ndarray:
    """Known truth: daily sine (peak mid-afternoon), weekends at 60 %, a slow upward trend."""
    daily = 1 + 0.5 * np.sin(2 * np.pi * (hours % 24) / 24 - 1)
    weekly = np.where((hours // 24) % 7 >= 5, 0.6, 1.0)
    return 100 * daily * weekly * (1 + 0.001 * hours / 24)


def synthetic(hours: int, *, noise: float = 0.05, seed: int = 1) -> pd.Series:
    h = np.arange(hours)
    rng = np.random.default_rng(seed)
    idx = pd.date_range(START, periods=hours, freq="h", tz="UTC")
    return pd.Series(pattern(h) * rng.lognormal(0, noise, hours), index=idx)


@pytest.fixture(scope="module")
def six_weeks() -> tuple[pd.Series, ForecastResult]:
    history = synthetic(6 * 168)
    return history, forecast_qps(history, days=7)


def test_forecast_recovers_known_pattern(six_weeks):
    history, f = six_weeks
    assert f.seasonal_periods_h == (24, 168)
    assert f.warning is None
    assert list(f.frame.columns) == ["qps", "qps_lo", "qps_hi"]
    assert len(f.frame) == 168
    assert f.frame.index[0] == history.index[-1] + pd.Timedelta(hours=1)
    assert str(f.frame.index.tz) == "UTC" and f.frame.index.freqstr == "h"
    truth = pattern(np.arange(6 * 168, 7 * 168))
    forward_mape = np.mean(np.abs(f.frame["qps"].to_numpy() - truth) / truth) * 100
    assert forward_mape < 8                      # noise is 5 % lognormal
    assert (f.frame["qps_lo"] <= f.frame["qps"]).all() and (f.frame["qps"] <= f.frame["qps_hi"]).all()


def test_backtest_mape_on_held_out_week(six_weeks):
    _, f = six_weeks
    assert f.backtest_mape_pct is not None and f.backtest_mape_pct < 10
    assert 0 <= f.backtest_coverage <= 1
    assert "held out" in f.backtest_note and "weekly" in f.backtest_note


def test_interval_is_calibrated_on_fresh_data():
    history = synthetic(5 * 168, seed=11)
    f = forecast_qps(history.iloc[:-168], days=7, interval=0.9)
    actual = history.iloc[-168:].to_numpy()
    inside = np.mean((actual >= f.frame["qps_lo"].to_numpy()) & (actual <= f.frame["qps_hi"].to_numpy()))
    assert inside > 0.75
    assert f.backtest_coverage < 0.6         # the raw ETS interval alone is far too narrow


def test_short_history_warns_and_falls_back_to_daily():
    f = forecast_qps(synthetic(10 * 24), days=3)
    assert f.seasonal_periods_h == (24,)
    assert f.warning is not None and "weekly seasonality" in f.warning and "daily pattern only" in f.warning
    assert len(f.frame) == 72 and (f.frame["qps"] >= 0).all()
    assert f.backtest_mape_pct is not None and "daily seasonality" in f.backtest_note


def test_very_short_history_has_no_backtest():
    f = forecast_qps(synthetic(30), days=1)
    assert f.seasonal_periods_h == ()
    assert f.backtest_mape_pct is None and f.backtest_note.startswith("no backtest")
    assert "damped trend only" in f.warning


def test_too_little_history_is_an_input_error():
    with pytest.raises(InputError, match="at least 24 hours"):
        forecast_qps(synthetic(10))


def test_gaps_and_naive_timestamps():
    s = synthetic(20 * 24)
    s.index = s.index.tz_localize(None)
    s = s.drop(s.index[100:110])
    hourly, notes = hourly_history(s)
    assert len(hourly) == 20 * 24 and not hourly.isna().any() and str(hourly.index.tz) == "UTC"
    assert notes == []                            # 2 % missing: below the warning threshold
    f = forecast_qps(s, days=1)
    assert f.history_hours == 20 * 24


def test_sub_hourly_input_is_averaged():
    idx = pd.date_range(START, periods=4, freq="15min", tz="UTC")
    hourly, _ = hourly_history(pd.Series([1.0, 2.0, 3.0, 6.0], index=idx))
    assert hourly.tolist() == [3.0]


def test_constant_series_gives_flat_forecast():
    idx = pd.date_range(START, periods=72, freq="h", tz="UTC")
    f = forecast_qps(pd.Series(5.0, index=idx), days=1)
    assert_allclose(f.frame["qps"], 5.0, rtol=1e-6)


@pytest.mark.parametrize("bad, match", [
    (pd.Series([1.0, -2.0], index=pd.date_range(START, periods=2, freq="h")), "negative"),
    (pd.Series([1.0, 2.0]), "DatetimeIndex"),
    ([1.0, 2.0], "pandas Series"),
])
def test_bad_history(bad, match):
    with pytest.raises(InputError, match=match):
        forecast_qps(bad)


def test_bad_days():
    with pytest.raises(InputError):
        forecast_qps(synthetic(100), days=0)
    # a season away is no forecast (`plan --days 100000` ran 45 s and 1.2 GB before this bound)
    with pytest.raises(InputError, match="field days: must be a whole number from 1 to 14, got 15"):
        forecast_qps(synthetic(100), days=15)
    assert len(forecast_qps(synthetic(100), days=14).frame) == 14 * 24


def test_plan_refuses_a_forecast_beyond_its_bound_and_prints_replica_hours_whole(demo_db, tmp_path, capsys):
    """``plan --days 100000`` printed "9.6e+06 replica-hours" after 45 s; now it is refused at once, and
    replica-hours print with separators."""
    import shutil

    from finops.cli import main
    db = str(shutil.copy(demo_db, tmp_path / "demo.duckdb"))
    assert main(["plan", "--model", "llama-3.1-8b", "--days", "100000", "--db", db]) == 1
    assert capsys.readouterr().err == "error: field days: must be a whole number from 0 to 14, got 100000\n"
    assert main(["plan", "--model", "llama-3.1-8b", "--db", db]) == 0
    past = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("past: "))
    assert re.match(r"past: [\d,]+(\.\d\d)? replica-hours billed \(\$[\d,]+\.\d\d\), [\d,]+(\.\d\d)? planned", past), past


def test_replica_plan_matches_required_servers(six_weeks):
    _, f = six_weeks
    plan = replica_plan(f, service_rate=2.0, target_utilization=0.7, redundancy=0.25)
    assert list(plan.columns) == ["qps", "qps_hi", "servers", "replicas", "replicas_at_qps_hi"]
    assert plan.index.equals(f.frame.index)
    for _, row in plan.iloc[::37].iterrows():
        r = required_servers(row["qps"], 2.0, target_utilization=0.7, redundancy=0.25)
        assert (row["servers"], row["replicas"]) == (r.servers, r.servers_with_redundancy)
    assert (plan["replicas_at_qps_hi"] >= plan["replicas"]).all()


def test_replica_plan_acceptance_numbers():
    plan = replica_plan(pd.DataFrame({"qps": [50.0]}), service_rate=2.0)
    assert plan.loc[0, ["servers", "replicas", "replicas_at_qps_hi"]].tolist() == [36, 45, 45]


def test_a_forecast_with_no_daily_pattern_says_it_does_not_carry_the_daily_peak():
    """Two days of traffic at 1 req/s all day and 10 req/s from 14:00 to 21:59 (the sample fleet's large model's
    shape): with no daily pattern the forecast is a damped trend near the mean, 4 req/s, and the Capacity page's
    "Peak forecast" read about that, under half the 10 req/s of every afternoon in the history. The warning said
    "a damped trend only"; it now says the history's busiest hour is above every forecast hour."""
    ts = pd.date_range("2026-01-05", periods=48, freq="h", tz="UTC")
    qps = pd.Series(np.where((ts.hour >= 14) & (ts.hour < 22), 10.0, 1.0), index=ts)
    f = forecast_qps(qps, days=1)
    assert f.seasonal_periods_h == ()
    assert f.frame["qps"].max() < 10.0
    assert ("the history's busiest hour (10 req/s) is above every forecast hour: plan on the upper end of the "
            "interval or that peak") in f.warning
    # a flat history has no peak to lose
    flat = forecast_qps(pd.Series(3.0, index=ts), days=1)
    assert "busiest hour" not in flat.warning
