"""finops.capacity.observed, .loadtest, .calculator, .plans and finops.ingest.loadtests: fill-from-logs
numbers on a hand-made store, load-test files and the fit by hand, the calculator, cost, forecast plan and
autoscaling wrappers."""
from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.capacity import autoscale, calculator, loadtest, observed, plans
from finops.capacity.queueing import ggc
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame, loadtests
from finops.spend import pricing
from helpers import fleet_day_store

DATA = loadtests.LOADTEST_EXAMPLE.parent
PEAK = datetime(2026, 1, 1, 10)


def _row(rid, ts, *, model="m-self", service_ms=None, queue_ms=None, replica=None, status="ok", input_tokens=0,
         output_tokens=0, cache_hit=False):
    return {"request_id": rid, "ts": ts, "model": model, "service_ms": service_ms, "queue_ms": queue_ms,
            "replica": replica, "status": status, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_hit": cache_hit, "tenant": "t", "route": "slow"}


def hand_rows() -> pd.DataFrame:
    """The busiest hour of m-self is 10:00 (5 served requests; the cache hit does not count)."""
    at = lambda m: PEAK + timedelta(minutes=m)        # noqa: E731
    rows = [
        _row("r1", at(0), service_ms=1000, queue_ms=0, replica="r0", input_tokens=100, output_tokens=50),
        _row("r2", at(1), service_ms=2000, queue_ms=100, replica="r1", input_tokens=200, output_tokens=100),
        _row("r3", at(3), service_ms=3000, queue_ms=200, replica="r0", input_tokens=300, output_tokens=150),
        _row("r4", at(5), service_ms=2000, queue_ms=300, replica="r1", input_tokens=400, output_tokens=200),
        _row("r5", at(6), service_ms=9000, queue_ms=400, replica="r0", status="error"),   # not a completed service
        _row("c1", at(2), cache_hit=True, input_tokens=1000, output_tokens=1000),          # never reached a replica
        _row("r6", PEAK - timedelta(minutes=30), service_ms=1000, queue_ms=0, replica="r0", input_tokens=100,
             output_tokens=100),                                                          # the quieter hour
        _row("a1", at(0), model="api-model", service_ms=500),                            # an API model: no fleet
        # the logs run on past the peak hour (another model's request): all 3,600 s of it are logged
        _row("a2", PEAK + timedelta(hours=2), model="api-model", service_ms=500),
    ]
    return pd.DataFrame(rows)


@pytest.fixture()
def hand_db(tmp_path):
    con = store.connect(str(tmp_path / "hand.duckdb"))
    book = pricing.price_book(con)
    extra = pd.DataFrame([{"model": "m-self", "provider": "self-hosted", "publisher": "x", "kind": "self_hosted",
                           "size_class": "small", "gpu_hour_usd": 1.5, "gpus_per_replica": 2, "replicas": 7,
                           "slots_per_replica": 2, "price_as_of": "2026-01-01", "source": "test"},
                          {"model": "api-model", "provider": "x", "publisher": "x", "kind": "api",
                           "size_class": "small", "input_usd_per_1m": 1.0, "output_usd_per_1m": 2.0,
                           "price_as_of": "2026-01-01", "source": "test"}])
    pricing.save_price_book(con, pd.concat([book, extra], ignore_index=True))
    ingest_frame(con, hand_rows(), name="hand")
    yield con
    con.close()


# ---------------------------------------------------------------- fill from my logs

def test_observed_load_matches_hand_computation(hand_db):
    obs = observed.observed_load(hand_db)
    assert obs["model"].tolist() == ["m-self"]                 # the API model has no fleet to size
    r = obs.iloc[0]
    assert r["peak_hour"] == pd.Timestamp(PEAK)
    assert r["requests_peak_hour"] == 5 and r["peak_hour_covered_s"] == 3600.0
    assert_allclose(r["arrival_rate_per_s"], 5 / 3600)
    # completed requests only: 1, 2, 3, 2 s -> mean 2 s, population std sqrt(0.5) s
    assert_allclose(r["mean_service_s"], 2.0)
    assert_allclose(r["cv_service"], math.sqrt(0.5) / 2)
    # arrivals at 0, 1, 3, 5, 6 min: gaps 60, 120, 120, 60 s -> mean 90, std 30
    assert_allclose(r["cv_arrival"], 30 / 90)
    assert r["replicas"] == 2 and r["replicas_source"].startswith("logs")
    assert r["slots_per_replica"] == 2 and r["slots_source"] == "price book"
    assert r["servers"] == 4 and r["fleet"] == "2 × 2"
    # queue_ms 0..400 of the five served requests (the error waited too): mean 200, P99 300 + 0.96 * 100
    assert_allclose(r["observed_queue_mean_ms"], 200.0)
    assert_allclose(r["observed_queue_p99_ms"], 396.0)
    q = ggc(5 / 3600, 0.5, 4, cv_arrival=30 / 90, cv_service=math.sqrt(0.5) / 2)
    assert_allclose(r["predicted_wq_ms"], q.wq_s * 1000)
    assert_allclose(r["predicted_wait_p99_ms"], q.wait_p99_s * 1000)
    assert_allclose(r["utilization"], (5 / 3600) / (4 * 0.5))
    assert r["state"] == "ok"
    # tokens of the six served requests over the period (the cache hit's 2,000 left out)
    assert_allclose(r["tokens_per_request"], (150 + 300 + 450 + 600 + 0 + 200) / 6)
    assert r["gpus_per_replica"] == 2 and r["gpu_hour_usd"] == 1.5


def test_observed_load_rates_a_partly_logged_hour_over_the_part_logged(tmp_path):
    """Logs that end inside the busiest hour (its last request at 10:06, as a trace cut at 18:15 starts inside
    one): its 5 requests arrived over 6 minutes, 5 / 360 s, where the hour's 3,600 s read a tenth of that rate."""
    con = store.connect(str(tmp_path / "cut.duckdb"))
    pricing.save_price_book(con, pd.concat([pricing.price_book(con), pd.DataFrame([{
        "model": "m-self", "provider": "self-hosted", "publisher": "x", "kind": "self_hosted", "size_class": "small",
        "gpu_hour_usd": 1.5, "gpus_per_replica": 2, "replicas": 7, "slots_per_replica": 2,
        "price_as_of": "2026-01-01", "source": "test"}])], ignore_index=True))
    rows = hand_rows()
    ingest_frame(con, rows[rows["request_id"] != "a2"], name="cut")
    r = observed.observed_load(con).iloc[0]
    assert r["requests_peak_hour"] == 5 and r["peak_hour_covered_s"] == 360.0
    assert_allclose(r["arrival_rate_per_s"], 5 / 360)
    assert_allclose(r["utilization"], (5 / 360) / (4 * 0.5))
    con.close()


def test_observed_load_takes_the_replicas_gpus_and_rate_of_the_schedule_in_force_at_the_peak(hand_db):
    """Logs that name no replica, on a fleet whose schedule is declared: the fill read the price book's 7 replicas
    of 2 GPUs at $1.50 while the Cost page billed the peak hour by the schedule (the Mooncake trace: 4 × 8 GPUs at
    $2.50 declared, 8 × 4 filled). The period covering most of the hour wins: 3 replicas from 10:15 (45 minutes
    of it), not the 5 until then."""
    from finops.spend import fleets
    hand_db.execute("UPDATE requests SET replica = NULL")
    fleets.save_schedule(hand_db, pd.DataFrame([
        {"model": "m-self", "starts_at": PEAK - timedelta(hours=2), "ends_at": PEAK + timedelta(minutes=15),
         "replicas": 5, "gpus_per_replica": 4, "gpu_hour_usd": 2.5},
        {"model": "m-self", "starts_at": PEAK + timedelta(minutes=15), "ends_at": None, "replicas": 3,
         "gpus_per_replica": 8, "gpu_hour_usd": 2.25}]))
    r = observed.observed_load(hand_db).iloc[0]
    assert (r["replicas"], r["replicas_source"]) == (3, "the declared fleet schedule")
    assert (r["gpus_per_replica"], r["gpu_hour_usd"], r["servers"]) == (8, 2.25, 6)     # slots: the book's 2
    # the hour before the peak, alone: the first period's
    r = observed.observed_load(hand_db, Filters(since=PEAK - timedelta(hours=1), until=PEAK)).iloc[0]
    assert (r["replicas"], r["gpus_per_replica"], r["gpu_hour_usd"]) == (5, 4, 2.5)
    # no schedule: the price book, as before
    fleets.save_schedule(hand_db, pd.DataFrame(columns=["model", "starts_at", "replicas"]))
    r = observed.observed_load(hand_db).iloc[0]
    assert (r["replicas"], r["replicas_source"], r["gpus_per_replica"], r["gpu_hour_usd"]) == (7, "price book", 2, 1.5)


def _fit_store(tmp_path, rows: list[dict], *, replicas: int = 7, slots: int = 2):
    """A store of ``rows`` with m-self in the price book (``replicas`` × ``slots``); an API model's request two hours
    after the peak so the logs cover all 3,600 s of it."""
    con = store.connect(str(tmp_path / "fit.duckdb"))
    pricing.save_price_book(con, pd.concat([pricing.price_book(con), pd.DataFrame([{
        "model": "m-self", "provider": "self-hosted", "publisher": "x", "kind": "self_hosted", "size_class": "small",
        "gpu_hour_usd": 1.5, "gpus_per_replica": 2, "replicas": replicas, "slots_per_replica": slots,
        "price_as_of": "2026-01-01", "source": "test"}])], ignore_index=True))
    ingest_frame(con, pd.DataFrame([*rows, _row("a2", PEAK + timedelta(hours=2), model="api-model", service_ms=500)]),
                 name="fit")
    return con


def _queued(n: int) -> list[dict]:
    """n requests of m-self 36 s apart from 10:00 on replicas r0 and r1, each 200 ms queued, 1 s and 3 s by turns."""
    return [_row(f"q{i}", PEAK + timedelta(seconds=36 * i), service_ms=1000 if i % 2 == 0 else 3000, queue_ms=200,
                 replica=f"r{i % 2}") for i in range(n)]


def test_observed_load_implied_servers_flags_a_wrong_slot_count(tmp_path):
    """100 requests (the fewest that judge the slots) 36 s apart, each queued 200 ms, on 2 replicas × 2 slots of a
    mean 2 s: at λ = 100 / 3,600 per s the 4 slots predict ~0 ms. One slot (M/G/1, ρ = 0.0556, arrivals regular:
    CV 0, service CV 0.5) predicts by Allen–Cunneen ρ / (μ − λ) · (0² + 0.5²) / 2 = 0.0556 / 0.4722 · 0.125 = 14.7 ms,
    the nearest of any c to the 200 ms logged (2 slots predict far less): 1 slot."""
    con = _fit_store(tmp_path, _queued(observed.FIT_MIN_REQUESTS))
    r = observed.observed_load(con).iloc[0]
    assert (r["requests_peak_hour"], r["queue_samples"], r["service_samples"]) == (100, 100, 100)
    assert_allclose((r["cv_service"], r["cv_arrival"]), (0.5, 0.0), atol=1e-12)
    assert_allclose(ggc(100 / 3600, 0.5, 1, cv_arrival=0.0, cv_service=0.5).wq_s, 0.0147, atol=1e-4)   # by hand, s
    assert r["implied_servers"] == 1
    assert r["note"].startswith("requests waited longer than 4 slots predict: the waits match about 1 slot "
                                "(0.5 per replica). Check the slots per replica in the price book")
    con.close()


def test_observed_load_from_fewer_requests_than_judge_the_slots_says_so(tmp_path, hand_db):
    """99 such requests, or the hand store's 5: the waits logged are shown with their count, but no slot count is
    implied and the note says why instead of a verdict."""
    con = _fit_store(tmp_path, _queued(observed.FIT_MIN_REQUESTS - 1))
    r = observed.observed_load(con).iloc[0]
    assert (r["queue_samples"], r["observed_queue_mean_ms"], r["observed_queue_p99_ms"]) == (99, 200.0, 200.0)
    assert r["implied_servers"] is None
    assert r["note"] == ("too few requests to judge the slots: 99 requests logged a queue wait in the busiest hour; "
                         "at least 100 needed")
    con.close()
    r = observed.observed_load(hand_db).iloc[0]
    assert r["queue_samples"] == 5 and r["implied_servers"] is None and "Check the slots" not in r["note"]
    assert "too few requests to judge the slots: 5 requests logged a queue wait" in r["note"]


def test_observed_load_from_one_request_judges_nothing_and_has_no_variability(tmp_path):
    """The explorer's store: llama-3.1-70b's busiest hour held 1 request (5.21 s on a slot, 812.3 ms queued) on the
    book's 3 × 2 slots, and read 'requests waited longer than 6 slots predict: the waits match about 1 slot' with a
    service variability of 0.00, a std over one request. Its figures stand; the CV is undefined (None, taken as
    1 in the prediction) and the fit says it cannot judge."""
    con = _fit_store(tmp_path, [_row("one", PEAK + timedelta(minutes=20), service_ms=5210, queue_ms=812.3)],
                     replicas=3, slots=2)
    r = observed.observed_load(con).iloc[0]
    assert (r["requests_peak_hour"], r["service_samples"], r["queue_samples"], r["servers"]) == (1, 1, 1, 6)
    assert r["mean_service_s"] == pytest.approx(5.21) and r["observed_queue_mean_ms"] == pytest.approx(812.3)
    assert r["cv_service"] is None and r["cv_arrival"] == 1.0          # no gap between arrivals either
    # M/M/6 at λ = 1 / 3,600 per s: the CVs taken as 1, not the 0 a std over one request gave (half the wait)
    q = ggc(1 / 3600, 1 / 5.21, 6, cv_arrival=1.0, cv_service=1.0)
    assert r["predicted_wq_ms"] == pytest.approx(q.wq_s * 1000)
    assert r["implied_servers"] is None and "waited longer" not in r["note"]
    assert r["note"] == ("service variability taken as 1 in the prediction: 1 completed request with a service "
                         "time, and a variability needs at least 2; too few requests to judge the slots: 1 request "
                         "logged a queue wait in the busiest hour; at least 100 needed")
    # the plan of that fleet sizes with the same variability of 1 (not 0, and no NaN)
    fp = plans.fleet_against_plan(con, Filters(), "m-self", wait_sla_s=2.0)
    ones = plans.fleet_against_plan(con, Filters(), "m-self", wait_sla_s=2.0, cv_service=1.0, cv_arrival=1.0)
    assert fp.state == "ok"
    pd.testing.assert_frame_equal(fp.past.hours, ones.past.hours)
    con.close()


def test_observed_load_variability_of_two_requests_is_measured_but_one_gap_is_not(tmp_path):
    # 1 s and 3 s: mean 2 s, population std 1 s, CV 0.5; their one gap has no spread to measure: taken as 1
    con = _fit_store(tmp_path, _queued(2))
    r = observed.observed_load(con).iloc[0]
    assert r["service_samples"] == 2 and r["cv_service"] == pytest.approx(0.5) and r["cv_arrival"] == 1.0
    assert r["note"].startswith("too few requests to judge the slots: 2 requests logged")
    con.close()


def test_observed_load_follows_the_date_range_and_ignores_tenants(hand_db):
    quiet = Filters(since=PEAK - timedelta(hours=1), until=PEAK)
    r = observed.observed_load(hand_db, quiet).iloc[0]
    assert r["requests_peak_hour"] == 1 and r["peak_hour"] == pd.Timestamp(PEAK - timedelta(hours=1))
    other_tenant = Filters(tenants=("nobody",))
    assert observed.observed_load(hand_db, other_tenant)["requests_peak_hour"].tolist() == [5]


def test_observed_load_on_an_empty_store(empty_db):
    con = store.connect(empty_db)
    try:
        obs = observed.observed_load(con)
        assert obs.empty and list(obs.columns) == list(observed.OBSERVED_COLUMNS)
        assert plans.hourly_qps(con).empty
        fp = plans.forecast_plan(con, None, None, mean_service_s=1.0)
        assert fp.state == "no_history" and fp.plan is None
    finally:
        con.close()


def test_hourly_qps_fills_quiet_hours_with_zero(hand_db):
    s = plans.hourly_qps(hand_db, None, "m-self")
    assert s.index.tolist() == [pd.Timestamp(PEAK - timedelta(hours=1)), pd.Timestamp(PEAK)]
    # the logs start at 09:30 (their first request): 1 request over the half hour of 09:00 they cover
    assert_allclose(s.to_numpy(), [1 / 1800, 5 / 3600])


def test_forecast_plan_too_short_is_an_answer(hand_db):
    fp = plans.forecast_plan(hand_db, None, "m-self", 2, mean_service_s=2.0, slots_per_replica=2)
    assert fp.state == "too_short" and "24 hours" in fp.message


def test_forecast_plan_sizes_each_hour(tmp_path):
    con = store.connect(str(tmp_path / "fc.duckdb"))
    start = datetime(2026, 1, 5)
    rows = [_row(f"h{h}-{i}", start + timedelta(hours=h, minutes=i), service_ms=1000, replica="r0")
            for h in range(72) for i in range(2 + 2 * (h % 24 >= 12))]
    ingest_frame(con, pd.DataFrame(rows), name="fc")
    fp = plans.forecast_plan(con, None, "m-self", 1, mean_service_s=1.0, slots_per_replica=2,
                             target_utilization=0.5, redundancy=0.25, gpus_per_replica=1, gpu_hour_usd=2.0)
    con.close()
    assert fp.state == "ok" and len(fp.plan) == 24
    assert "weekly" in fp.message                              # 72 h: daily seasonality only, and it says so
    assert list(fp.plan.columns) == ["qps", "qps_lo", "qps_hi", "replicas_needed", "replicas", "replicas_at_qps_hi",
                                     "cost_usd"]
    # one replica = 2 slots / 1 s = 2 req/s; at rho <= 0.5 one replica carries 1 req/s: ceil(qps) replicas
    assert (fp.plan["replicas_needed"] == np.maximum(1, np.ceil(fp.plan["qps"] - 1e-9))).all()
    assert (fp.plan["replicas"] >= 1).all()                    # never scaled to zero
    assert_allclose(fp.plan["cost_usd"], fp.plan["replicas"] * 2.0)
    assert_allclose(fp.cost_usd_total, fp.plan["cost_usd"].sum())


# ---------------------------------------------------------------- the calculator

def test_calculate_issue_sizing_example():
    r = calculator.calculate(50, 0.5, 36, 1, wait_sla_s=None, target_utilization=0.7, redundancy=0.0)
    assert r.required_replicas == 36 and r.binding_constraint == "utilization"
    assert_allclose(r.queue.utilization, 50 / 72)


def test_calculate_counts_slots_and_rounds_replicas_up():
    r = calculator.calculate(10, 2.0, 3, 8, wait_sla_s=None, target_utilization=0.7, redundancy=0.25)
    assert r.servers == 24 and r.capacity_per_s == 12.0
    # A = 20 erlangs, rho <= 0.7 needs 29 slots = 3.6 replicas of 8 -> 4, +25 % -> 5
    assert (r.required_replicas, r.required_replicas_with_redundancy) == (4, 5)


def test_calculate_unstable_is_a_state_not_nan():
    r = calculator.calculate(30, 0.5, 10, 1)
    assert r.state == "unstable" and not r.stable
    assert "unstable" in r.message
    for v in (r.queue.wq_s, r.queue.wait_p99_s):
        assert not math.isnan(v)
    assert calculator.format_seconds(r.queue.wait_p99_s) == "unbounded"
    assert r.wait_sla_met is False
    assert r.required_replicas_with_redundancy >= r.required_replicas > 15


def test_calculate_degenerate_inputs():
    assert calculator.calculate(0, 1.0, 2).state == "no_traffic"
    assert calculator.calculate(0, 1.0, 2).required_replicas == 0
    assert calculator.calculate(5, 1.0, 0).state == "no_servers"
    with pytest.raises(InputError):
        calculator.calculate(5, 0.0, 2)
    with pytest.raises(InputError):
        calculator.calculate(5, 1.0, 2, 0)


def test_more_replicas_never_wait_longer():
    curve = calculator.p99_wait_by_replicas(14, 0.5, 1, (10, 13))
    stable = curve[curve["stable"]]
    assert (np.diff(stable["wait_p99_s"]) <= 1e-12).all()
    assert not curve.loc[curve["replicas"] <= 7, "stable"].any()      # 14 req/s on 2 req/s replicas needs 8


def test_wait_by_utilization_blows_up_towards_one():
    w = calculator.wait_by_utilization(0.5, 10)
    assert (np.diff(w["wq_s"]) > 0).all()
    assert w["wq_s"].iloc[-1] > 50 * float(w.loc[w["utilization"] == 0.7, "wq_s"].iloc[0])
    assert w.loc[w["in_sweet_spot"], "utilization"].agg(["min", "max"]).tolist() == [0.6, 0.75]


# ---------------------------------------------------------------- cost

def test_fleet_cost_by_hand():
    c = calculator.fleet_cost(3, 4, 2.5, 0.25, 2000)
    assert c.gpus == 12 and c.cost_per_hour_usd == 30.0
    assert c.tokens_per_hour == 0.25 * 3600 * 2000
    assert_allclose(c.cost_per_1m_tokens, 30.0 / 1.8)
    assert calculator.fleet_cost(3, 4, None, 1, 100).cost_per_1m_tokens is None
    assert calculator.fleet_cost(3, 4, 1.0, 0, 100).note.startswith("no traffic")


def test_fleet_cost_of_no_fleet_or_an_overloaded_one():
    none = calculator.fleet_cost(0, 4, 2.5, 1.0, 1000)
    assert none.cost_per_hour_usd == 0 and none.cost_per_1m_tokens is None and none.note.startswith("no replicas")
    over = calculator.fleet_cost(2, 1, 1.0, 10.0, 1000, capacity_per_s=4.0)       # serves 4 of the 10 req/s offered
    assert over.tokens_per_hour == 4 * 3600 * 1000
    assert_allclose(over.cost_per_1m_tokens, 2.0 / (4 * 3600 * 1000) * 1e6)
    assert "serve at most 4" in over.note


@pytest.mark.parametrize("kwargs, field", [
    # $1e300 per GPU-hour showed a cost per hour of 300 digits; 1e300 tokens a request "< $0.000001"
    (dict(gpu_hour_usd=1e300), "gpu_hour_usd"), (dict(gpu_hour_usd=1_000.01), "gpu_hour_usd"),
    (dict(tokens_per_request=1e300), "tokens_per_request"),
])
def test_fleet_cost_refuses_figures_past_the_fields_bounds(kwargs, field):
    args = dict(replicas=2, gpus_per_replica=1, gpu_hour_usd=2.0, arrival_rate_per_s=1.0, tokens_per_request=1000)
    with pytest.raises(InputError, match=f"field {field}: must be at most"):
        calculator.fleet_cost(**{**args, **kwargs})
    assert calculator.fleet_cost(**{**args, "gpu_hour_usd": 1_000, "tokens_per_request": 10_000_000}).cost_per_hour_usd \
        == 2_000


# ---------------------------------------------------------------- load test -> instances

HAND_CSV = """# a hand-worked load test of one instance
qps,p50_ms,p99_ms
10,800,1000
20,1000,1500
30,1500,2500
"""


def test_fit_loadtest_hand_worked(tmp_path):
    path = tmp_path / "hand.csv"
    path.write_text(HAND_CSV)
    points = loadtests.read_loadtest(path)
    assert_allclose(points["p99_s"], [1.0, 1.5, 2.5])              # ms read as ms
    fit = loadtest.fit_loadtest(points, target_qps=50, p99_target_s=2.0, redundancy=0.25)
    # P99 crosses 2 s halfway between 20 and 30 req/s: 25 req/s; ceil(50 / 25) = 2; ceil(2 * 1.25) = 3
    assert fit.state == "ok"
    assert_allclose(fit.per_instance_qps, 25.0)
    assert (fit.instances, fit.instances_with_redundancy) == (2, 3)
    assert fit.points["meets_target"].tolist() == [True, True, False]


def test_fit_loadtest_on_the_shipped_example():
    points = loadtests.read_loadtest(loadtests.LOADTEST_EXAMPLE)
    text = loadtests.LOADTEST_EXAMPLE.read_text()
    assert "ILLUSTRATIVE EXAMPLE, NOT A MEASUREMENT" in text
    fit = loadtest.fit_loadtest(points, target_qps=50, p99_target_s=2.0, redundancy=0.25)
    # between (13.3 req/s, 1.8 s) and (16 req/s, 2.4 s): 13.3 + 0.2 / 0.6 * 2.7 = 14.2 req/s, 16 + 8/3 in flight
    assert_allclose(fit.per_instance_qps, 14.2)
    assert_allclose(fit.concurrency_at_target, 16 + 8 / 3)
    assert (fit.instances, fit.instances_with_redundancy) == (4, 5)


def test_fit_loadtest_states():
    pts = pd.DataFrame({"qps": [1.0, 2.0], "p99_s": [3.0, 4.0]})
    infeasible = loadtest.fit_loadtest(pts, target_qps=50, p99_target_s=2.0)
    assert infeasible.state == "infeasible" and infeasible.instances is None
    assert "no number of instances" in infeasible.message
    easy = loadtest.fit_loadtest(pts, target_qps=10, p99_target_s=5.0, redundancy=0.2)
    assert easy.state == "beyond_range" and easy.per_instance_qps == 2.0
    assert (easy.instances, easy.instances_with_redundancy) == (5, 6)
    empty = loadtest.fit_loadtest(pts.iloc[:0], target_qps=10, p99_target_s=5.0)
    assert empty.state == "no_points"


@pytest.mark.parametrize("kwargs, field", [
    # 1e300 req/s asked for 7e298 instances; 1e15 instances tested made one instance 1.4e-14 req/s
    (dict(target_qps=1e300), "target_qps"), (dict(p99_target_s=3_601), "p99_target_s"),
    (dict(instances_tested=100_001), "instances_tested"),
])
def test_fit_loadtest_refuses_figures_past_the_fields_bounds(kwargs, field):
    pts = pd.DataFrame({"qps": [1.0, 2.0], "p99_s": [1.0, 4.0]})
    with pytest.raises(InputError, match=f"field {field}: must be at most"):
        loadtest.fit_loadtest(pts, **{"target_qps": 10, "p99_target_s": 2.0, **kwargs})


def test_fit_loadtest_per_instance_when_several_were_tested():
    pts = pd.DataFrame({"qps": [20.0, 40.0, 60.0], "p99_s": [1.0, 1.5, 2.5]})
    fit = loadtest.fit_loadtest(pts, target_qps=50, p99_target_s=2.0, instances_tested=2)
    assert_allclose(fit.per_instance_qps, 25.0)


def test_csv_with_concurrency_only_uses_littles_law(tmp_path):
    path = tmp_path / "conc.csv"
    path.write_text("Concurrency,P50_s,P99_s\n4,0.5,0.9\n8,0.8,1.6\n")
    points = loadtests.read_loadtest(path)
    assert_allclose(points["qps"], [4 / 0.5, 8 / 0.8])
    assert points["qps_basis"].str.startswith("Little's law").all()


def test_bad_loadtest_files_are_input_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("qps,latency\n1,2\n")
    with pytest.raises(InputError, match="P99"):
        loadtests.read_loadtest(bad)
    words = tmp_path / "words.csv"
    words.write_text("qps,p99_s\n1,fast\n")
    with pytest.raises(InputError, match="row 1"):
        loadtests.read_loadtest(words)
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="not a load test"):
        loadtests.read_loadtest(other)


def test_read_loadtest_benchmark_files():
    vllm = loadtests.read_loadtest(DATA.parent / "tests" / "data" / "vllm_bench_serve_detailed.json").iloc[0]
    assert vllm["concurrency"] == 8
    assert_allclose(vllm["qps"], 9 / 4.687398)                     # completed / duration
    summary = loadtests.read_loadtest(DATA.parent / "tests" / "data" / "llmperf" / "summary" / "fireworks_70b.json")
    assert summary.iloc[0]["concurrency"] == 5
    assert_allclose(summary.iloc[0]["p99_s"], 4.48644712269999)
    lone = DATA.parent / "tests" / "data" / "llmperf_individual_only" / "perplexity_70b.json"
    with pytest.raises(InputError, match="concurrency"):
        loadtests.read_loadtest(lone)
    point = loadtests.read_loadtest_bytes(lone.read_bytes(), lone.name, concurrency=5).iloc[0]
    assert_allclose(point["qps"], 5 / point["mean_s"])              # closed loop: lambda = N / W
    for clients in (10**12, 0, 2.5):                                # 10^12 clients tested 10^12 / W req/s
        with pytest.raises(InputError, match=r"clients of a run are a whole number from 1 to 100,000") as exc:
            loadtests.read_loadtest_bytes(lone.read_bytes(), lone.name, concurrency=clients)
        assert (exc.value.file, exc.value.field) == (lone.name, "concurrency")


# ---------------------------------------------------------------- autoscaling

def test_simulate_policies_reproduces_the_seed_table():
    run = plans.simulate_policies()
    s = run.summary.set_index("policy")
    assert s.loc["reactive HPA", "sla_violation_s"] > 60
    assert s.loc["predictive + warm pool", "sla_violation_s"] == 0
    direct = autoscale.compare_policies().summary.set_index("policy")
    assert_allclose(s["sla_violation_s"], direct["sla_violation_s"])
    assert len(run.timeline) == 6 * 900 and run.step_s == 1


def test_simulate_policies_in_slots_and_downsampled():
    hourly = tuple(np.linspace(1.0, 4.0, 8))
    run = plans.simulate_policies(traffic="forecast", forecast_qps_hourly=hourly, service_rate_per_replica=4.0,
                                     slots_per_replica=4, policy_names=("reactive HPA",), gpus_per_replica=2,
                                     gpu_hour_usd=1.0)
    assert run.step_s == math.ceil(6 * 3600 / 900)
    assert run.timeline["t_s"].nunique() <= 900
    # 4 slots of 1 req/s: ready capacity = ready replicas * 4 req/s
    assert_allclose(run.timeline["ready_capacity_per_s"], run.timeline["ready_replicas"] * 4.0)
    assert_allclose(run.summary["cost_usd"], run.summary["gpu_hours"] * 1.0)
    with pytest.raises(InputError):
        plans.simulate_policies(traffic="bogus")
    with pytest.raises(InputError):
        plans.policies_for(("no such policy",))


def test_autoscaling_without_a_wait_sla_counts_no_seconds_over_one():
    """No P99 wait SLA (``None``; the page's field at 0, as the calculator reads it) judges no second: the
    autoscaling table had "Seconds over the 2 s P99 SLA", an SLA nobody set. Hand count: 1 req/s for the 900 s run on
    replicas of 2 req/s, the HPA keeping ⌈1 / (2 × 0.7)⌉ = 1 replica: ρ = 0.5, Erlang C = ρ = 0.5, and the P99 wait
    ln(0.5 / 0.01) / (2 − 1) = ln 50 = 3.912 s every second; 900 replica-seconds = 0.25 GPU-hours."""
    kw = dict(base_qps=1.0, peak_qps=1.0, service_rate_per_replica=2.0, policy_names=("reactive HPA",),
              warm_pool_replicas=0, gpu_hour_usd=2.0)
    two = plans.simulate_policies(**kw, wait_sla_s=2.0)
    assert two.summary["sla_violation_s"].tolist() == [900]                  # 3.912 s > 2 s every second
    assert "misses the 2 s P99 wait SLA" in two.note
    assert plans.simulate_policies(**kw, wait_sla_s=4.0).summary["sla_violation_s"].tolist() == [0]
    none = plans.simulate_policies(**kw, wait_sla_s=None)
    s = none.summary.iloc[0]
    assert s["sla_violation_s"] is None                                      # not judged, as wait_sla_met
    assert s["peak_p99_wait_s"] == pytest.approx(math.log(50))
    assert (s["gpu_hours"], s["cost_usd"], s["peak_replicas"]) == pytest.approx((0.25, 0.5, 1))
    assert none.note == ""                                                   # no SLA to miss
    assert_allclose(none.timeline["p99_wait_s"], math.log(50))
    direct = autoscale.simulate(np.full(900, 1.0), 2.0, wait_sla_s=None)
    assert direct.summary["sla_violation_s"] is None and not direct.timeline["sla_violated"].any()


# ---------------------------------------------------------------- capacity meets cost

def test_compare_plan_by_hand():
    # a flat 4-replica schedule against a plan of 2 off-peak (16 h) and 4 at peak (8 h), $2 a replica-hour
    r = plans.compare_plan([4.0] * 24, [2.0] * 16 + [4.0] * 8, [2.0] * 24)
    assert (r.replica_hours_billed, r.replica_hours_planned, r.surplus_replica_hours) == (96.0, 64.0, 32.0)
    assert (r.saving_usd, r.surplus_usd, r.short_hours, r.short_replica_hours) == (64.0, 64.0, 0, 0.0)
    assert r.sentence() == ("scaling to the plan would have saved $64.00 over the period at the same SLA "
                            "(32 of 96 replica-hours)")
    short = plans.compare_plan([2.0] * 24, [2.0] * 16 + [4.0] * 8, [2.0] * 24)
    assert (short.saving_usd, short.short_hours, short.short_replica_hours) == (-32.0, 8, 16.0)
    assert short.sentence().startswith("meeting the SLA in every hour would have cost $32.00 more")
    with pytest.raises(InputError, match="same hours"):
        plans.compare_plan([1.0], [1.0, 2.0], [1.0])


def test_a_plan_sentence_reads_replica_hours_with_separators_never_an_exponent():
    """A month of a 20-replica fleet is 14,400 replica-hours: the sentence read "(4.32e+03 of 1.44e+04
    replica-hours)" (``,.4g``), on the page and on the command line."""
    r = plans.compare_plan([20.0] * 720, [14.0] * 720, [2.0] * 720)
    assert r.sentence() == ("scaling to the plan would have saved $8,640.00 over the period at the same SLA "
                            "(4,320 of 14,400 replica-hours)")
    short = plans.compare_plan([10.0] * 720, [24.5] * 720, [2.0] * 720)
    assert short.sentence() == ("meeting the SLA in every hour would have cost $20,880.00 more over the period "
                                "(10,440 replica-hours); the fleet was short in 720 hours (10,440 replica-hours "
                                "under the plan)")
    assert "e+" not in plans.compare_plan([1.5] * 3, [1.0] * 3, [1.0] * 3).sentence()
    assert "(1.50 of 4.50 replica-hours)" in plans.compare_plan([1.5] * 3, [1.0] * 3, [1.0] * 3).sentence()


def test_plan_hours_print_with_separators_and_cents_never_an_exponent(capsys, tmp_path):
    """`plan --hours` printed its table with ``,.4g``: a fleet of 10,000 replicas read "1e+04" an hour and its $2 a
    replica-hour "2"."""
    from finops.cli import main
    con = fleet_day_store(10_000)
    db = tmp_path / "big.duckdb"
    con.execute(f"ATTACH '{db}' AS out")
    con.execute("COPY FROM DATABASE memory TO out")
    con.execute("DETACH out")
    assert main(["plan", "--model", "m-self", "--db", str(db), "--hours"]) == 0
    out = capsys.readouterr().out
    assert "e+" not in out
    line = next(x for x in out.splitlines() if x.startswith("2026-03-01 12:00"))
    # evenly spaced arrivals of 10 s each (both CVs 0: no wait): ⌈0.175 × 10 / 0.7⌉ = 3 replicas, ⌈3 × 1.25⌉ = 4
    assert line.split()[2:5] == ["0.175", "10,000", "4"] and line.split()[5] == "$2.00"


SIZING = dict(mean_service_s=10.0, target_utilization=0.5, wait_sla_s=None, redundancy=0.0, cv_service=1.0,
              cv_arrival=1.0)


def test_a_flat_schedule_against_the_hourly_plan_saves_the_hand_count_of_replica_hours():
    # at ρ <= 0.5: ⌈0.75 / 0.5⌉ = 2 replicas off-peak, ⌈1.75 / 0.5⌉ = 4 at peak
    con = fleet_day_store(4)
    fp = plans.fleet_against_plan(con, Filters(), "m-self", **SIZING)
    assert fp.state == "ok" and fp.billed_by.startswith("billed by its declared schedule")
    hours = fp.past.hours
    assert len(hours) == 24 and hours["replicas_billed"].eq(4).all()
    assert hours["replicas_planned"].tolist() == [2.0] * 10 + [4.0] * 8 + [2.0] * 6
    assert fp.past.surplus_replica_hours == 32.0 and fp.past.saving_usd == pytest.approx(64.0)
    assert fp.past.short_hours == 0
    # the same day on 2 replicas: 8 peak hours short by 2, the plan costs 16 replica-hours ($32) more
    short = plans.fleet_against_plan(fleet_day_store(2), Filters(), "m-self", **SIZING).past
    assert (short.short_hours, short.short_replica_hours, short.saving_usd) == (8, 16.0, pytest.approx(-32.0))
    assert set(short.hours.index[short.hours["short"]].hour) == set(range(10, 18))


def test_the_hourly_plan_is_the_calculators_rule_at_each_hour():
    con = fleet_day_store(4)
    fp = plans.fleet_against_plan(con, Filters(), "m-self", wait_sla_s=2.0, cv_service=1.0, cv_arrival=1.0)
    assert fp.mean_service_s == pytest.approx(10.0)                  # measured in the busiest hour
    peak = fp.past.hours.loc[pd.Timestamp(2026, 3, 1, 12)]
    calc = calculator.calculate(peak["qps"], 10.0, 4, 1, wait_sla_s=2.0)
    assert peak["replicas_planned"] == calc.required_replicas_with_redundancy == 8


@pytest.mark.parametrize("later, silent", [(datetime(2026, 3, 20, 10), None), (datetime(2026, 3, 2, 20), 20)])
def test_a_long_silence_with_no_fleet_and_no_request_is_no_short_hour(later, silent):
    """The declared day of 1 March and one more request later, outside the schedule. Eighteen days apart (logs of
    two periods side by side), the 442 hours between (nothing billed, nothing served) were each "short" of the
    plan's floor of 1 replica: $884 more "to meet the SLA" that no request waited for. A silence of up to
    TRAFFIC_GAP_HOURS (here 20 hours) is still compared hour by hour."""
    con = fleet_day_store(4)
    ingest_frame(con, pd.DataFrame([{"request_id": "late", "ts": later, "model": "m-self", "service_ms": 10_000.0,
                                     "tenant": "t", "status": "ok"}]))
    past = plans.fleet_against_plan(con, Filters(), "m-self", **SIZING).past
    hours = past.hours
    assert hours.index[0] == pd.Timestamp(2026, 3, 1) and hours.index[-1] == pd.Timestamp(later)
    assert len(hours) == 24 + (silent or 0) + 1
    assert hours.loc[pd.Timestamp(later), ["replicas_billed", "replicas_planned"]].tolist() == [0.0, 1.0]
    # short: the late request's hour, and each silent hour kept (the plan's floor of 1 against nothing billed)
    assert past.short_hours == 1 + (silent or 0)


def test_fleet_against_plan_degenerate_cases():
    con = fleet_day_store(4)
    assert plans.fleet_against_plan(con, Filters(), "gpt-4o", **SIZING).state == "not_self_hosted"
    none = plans.fleet_against_plan(con, Filters(since=datetime(2025, 1, 1), until=datetime(2025, 1, 2)), "m-self",
                                    **SIZING)
    assert none.state == "no_hours" and "neither billed" in none.message


def test_the_forecast_ahead_is_set_against_the_schedule_still_in_force():
    from finops.spend import fleets
    con = fleet_day_store(4)
    fleets.save_schedule(con, pd.DataFrame([{"model": "m-self", "starts_at": "2026-03-01", "ends_at": None,
                                             "replicas": 4}]))
    fp = plans.fleet_against_plan(con, Filters(), "m-self", days_ahead=1, **SIZING)
    assert fp.ahead_message is None
    ahead = fp.ahead.hours
    assert ahead.index[0] == pd.Timestamp(2026, 3, 2) and len(ahead) == 24
    assert ahead["replicas_billed"].eq(4).all()                      # the open-ended period runs on
    assert ahead["replicas_planned"].between(1, 4).all()
    assert fp.ahead.saving_usd == pytest.approx(2.0 * (96 - ahead["replicas_planned"].sum()))


def test_a_forecast_ahead_from_one_day_of_history_says_what_it_cannot_know(capsys, tmp_path):
    """One day of logs (24 hours) and `plan --days 1`: the forecast is a damped trend with no daily pattern and no
    backtest, yet the plan ahead read "scaling to the plan would have saved $X over the next 1 day" with no word of
    it, on the page and on the command line, while the Forecast section of the same page warned."""
    from finops.cli import main
    from finops.spend import fleets
    con = fleet_day_store(4)
    fleets.save_schedule(con, pd.DataFrame([{"model": "m-self", "starts_at": "2026-03-01", "ends_at": None,
                                             "replicas": 4}]))
    fp = plans.fleet_against_plan(con, Filters(), "m-self", days_ahead=1, **SIZING)
    assert fp.ahead is not None
    assert fp.ahead_warning is not None
    assert "history is 24 hours (1.0 days)" in fp.ahead_warning and "damped trend only" in fp.ahead_warning
    assert "no backtest" in fp.ahead_warning
    # the past alone forecasts nothing and warns of nothing
    assert plans.fleet_against_plan(con, Filters(), "m-self", **SIZING).ahead_warning is None
    db = tmp_path / "day.duckdb"
    con.execute(f"ATTACH '{db}' AS out")
    con.execute("COPY FROM DATABASE memory TO out")
    con.execute("DETACH out")
    assert main(["plan", "--model", "m-self", "--db", str(db), "--days", "1", "--target-utilization", "0.5",
                 "--wait-sla-s", "0", "--redundancy", "0"]) == 0
    out = capsys.readouterr().out
    assert "ahead: what the forecast cannot know: history is 24 hours (1.0 days)" in out
    assert "over the next 1 day at" in out and "1 days" not in out.replace("(1.0 days)", "")


def _chart_layers(chart):
    spec = chart.to_dict()
    return spec["layer"], spec.get("datasets", {})


def test_the_wait_charts_read_in_the_unit_their_top_needs_never_in_exponents():
    from finops import charts
    # 16,384 slots of 0.5 s service: the mean wait at ρ = 0.95 is far under a microsecond
    curve = calculator.wait_by_utilization(0.5, 16_384)
    top_s = float(np.interp(0.95, curve["utilization"], curve["wq_s"]))
    assert top_s < 1e-6
    layers, data = _chart_layers(charts.wait_vs_utilization(curve, current_rho=0.5, current_wq_s=0.0))
    line = next(layer for layer in layers if layer["mark"]["type"] == "line")
    assert line["encoding"]["y"]["title"] == "Mean queue wait (µs)"
    assert line["encoding"]["y"]["axis"]["format"] == ",.3~r"            # d3: decimal, never 9e-7
    assert line["encoding"]["y"]["scale"]["domain"] == [0, 1.0]          # the 1 µs floor, in µs
    rows = data[line["data"]["name"]]
    by_rho = {round(r["utilization"], 3): r for r in rows}
    assert by_rho[0.99]["wq"] == pytest.approx(by_rho[0.99]["wq_s"] * 1e6)
    # a small fleet near saturation waits seconds: the axis stays in s
    curve = calculator.wait_by_utilization(2.0, 2)
    layers, _ = _chart_layers(charts.wait_vs_utilization(curve))
    assert next(la for la in layers if la["mark"]["type"] == "line")["encoding"]["y"]["title"] == "Mean queue wait (s)"
    # the replicas chart with a 50 ms SLA: ms, the SLA rule at 50 and named "50 ms"
    curve = calculator.p99_wait_by_replicas(100.0, 0.2, 8, (4,))
    layers, data = _chart_layers(charts.p99_wait_vs_replicas(curve, slots_per_replica=8, chosen_replicas=4,
                                                             wait_sla_s=0.05))
    line = next(la for la in layers if la["mark"]["type"] == "line")
    assert line["encoding"]["y"]["title"] == "P99 queue wait (ms)"
    assert line["encoding"]["y"]["scale"]["domain"] == [0, pytest.approx(150.0)]
    labels = [r["label"] for la in layers if "data" in la for r in data.get(la["data"]["name"], [])
              if "label" in r]
    assert "P99 wait SLA 50 ms" in labels


def test_the_current_point_of_a_nearly_idle_fleet_reads_under_one_percent_beside_the_axis():
    from finops import charts
    curve = calculator.wait_by_utilization(0.5, 20_000)
    layers, data = _chart_layers(charts.wait_vs_utilization(curve, current_rho=0.00025, current_wq_s=0.0))
    text = next(la for la in layers if la["mark"]["type"] == "text" and la["encoding"]["text"]["field"] == "label"
                and data[la["data"]["name"]][0]["label"].startswith("you"))
    assert data[text["data"]["name"]][0]["label"] == "you: ρ < 1%"
    assert text["mark"]["align"] == "left"                  # right of the point: at ρ ≈ 0 the left is off the plot


@pytest.mark.parametrize("kwargs, message", [
    # a cold start of 1e12 s asked numpy for 7.28 TiB and showed its exception on the page
    ({"cold_start_s": 10**12}, "field cold_start_s: must be at most 3,600, got 1,000,000,000,000"),
    ({"warm_pool_replicas": 10**12}, "field warm_pool_replicas: must be at most 100,000"),
    ({"base_qps": 1e300}, "field base_qps: must be at most 1,000,000"),
    ({"peak_qps": float("nan")}, "field peak_qps"),
    ({"ramp_s": 781}, "field ramp_s: must be at most 780, got 781"),
    ({"service_rate_per_replica": 1e300}, "field service_rate_per_replica: must be at most 1,000,000, got 1e+300"),
    ({"base_qps": 1_000_001}, "field base_qps: must be at most 1,000,000, got 1,000,001"),
])
def test_the_autoscaling_what_if_refuses_inputs_past_what_they_can_mean(kwargs, message):
    with pytest.raises(InputError) as exc:
        plans.simulate_policies(**kwargs)
    assert message in str(exc.value) and "e+06" not in str(exc.value)
    assert plans.simulate_policies(ramp_s=780, cold_start_s=3_600, warm_pool_replicas=0).summary["policy"].size


def test_the_forecast_plan_refuses_a_service_time_or_slots_past_the_calculators(demo_db):
    """The Forecast section's service time of 1e12 s planned 155 billion replicas ($98 trillion); 1e300 s overflowed
    to a rate of 0 and planned 1 replica."""
    con = store.connect(demo_db)       # read-write, as a page test in this process may hold it open already
    try:
        for kwargs, field in (({"mean_service_s": 1e12}, "mean_service_s"), ({"mean_service_s": 1e300}, "mean_service_s"),
                              ({"mean_service_s": 1.0, "slots_per_replica": 10**12}, "slots_per_replica")):
            with pytest.raises(InputError) as exc:
                plans.forecast_plan(con, Filters(), "llama-3.1-70b", 7, **kwargs)
            assert exc.value.field == field
        assert plans.forecast_plan(con, Filters(), "llama-3.1-70b", 7, mean_service_s=3_600.0,
                                   slots_per_replica=10_000).state == "ok"
    finally:
        con.close()
