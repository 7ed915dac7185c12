"""finops.capacity.autoscale: the seed's elasticity paradox, pinned, and the HPA's Kubernetes defaults."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finops.capacity.autoscale import (
    DEFAULT_POLICIES,
    Policy,
    compare_policies,
    policy_from_dict,
    ramp_traffic,
    simulate,
    traffic_from_hourly,
)
from finops.errors import InputError

MU = 2.0                        # req/s per replica; base 14 req/s on 10 replicas = rho 0.7
RAMP_START_S = 120


@pytest.fixture(scope="module")
def seed_run():
    """The seed's worked problem 3: load doubles within 30 s, cold start 90 s."""
    return compare_policies(ramp_traffic(), MU, cold_start_s=90, wait_sla_s=2.0, usd_per_gpu_hour=2.5)


def summary_of(comparison, name):
    return comparison.summary.set_index("policy").loc[name]


def test_seed_ramp_shape():
    lam = ramp_traffic()
    assert lam[RAMP_START_S] == 14.0 and lam[RAMP_START_S + 30] == 28.0 and lam[-1] == 28.0
    assert len(lam) == 900


def test_elasticity_paradox_pin(seed_run):
    """Acceptance: the reactive HPA breaks the SLA; warm pool + predictive does not."""
    reactive = summary_of(seed_run, "reactive HPA")
    defended = summary_of(seed_run, "predictive + warm pool")
    assert reactive["sla_violation_s"] == 157
    assert reactive["peak_queue_len"] > 500              # the avalanche
    assert defended["sla_violation_s"] == 0
    assert defended["peak_queue_len"] == 0


def test_reactive_timeline_reproduces_the_seed_table(seed_run):
    tl = seed_run.timeline[seed_run.timeline["policy"] == "reactive HPA"].set_index("t_s")
    rho = tl["arrival_rate_per_s"] / (tl["ready_replicas"] * MU)
    # t = 0 of the table is the ramp start: rho < 1, fine.
    assert rho[RAMP_START_S] == pytest.approx(0.7) and not tl.loc[RAMP_START_S, "sla_violated"]
    # by the end of the ramp rho is past 1 and no new replica is ready yet
    assert rho[RAMP_START_S + 30] > 1 and tl.loc[RAMP_START_S + 30, "ready_replicas"] == 10
    # the HPA asked for replicas within its first sync periods of the ramp ...
    assert tl.loc[RAMP_START_S + 30, "provisioned_replicas"] > 10
    # ... but none is ready before a full cold start has passed
    first_new = tl.index[tl["ready_replicas"] > 10][0]
    assert first_new >= RAMP_START_S + 90
    assert tl.loc[first_new - 1, "queue_len"] > 500 and tl.loc[first_new - 1, "sla_violated"]


def test_each_layer_helps(seed_run):
    v = seed_run.summary.set_index("policy")["sla_violation_s"]
    assert v["reactive + warm pool"] < v["reactive HPA"] / 5
    assert v["predictive"] == 0
    assert v["reactive + shed"] < v["reactive HPA"]
    shed = summary_of(seed_run, "reactive + shed")
    assert shed["shed_requests"] > 0 and shed["peak_queue_len"] == 0     # no avalanche


def test_imperfect_forecast_warm_pool_still_far_fewer():
    lam = ramp_traffic()
    c = compare_policies(lam, MU, forecast_per_s=0.7 * lam)           # peak under-forecast by 30 %
    v = c.summary.set_index("policy")["sla_violation_s"]
    assert v["predictive"] > 0
    assert v["predictive + warm pool"] <= 0.1 * v["reactive HPA"]


def test_cost_accounting(seed_run):
    s = seed_run.summary.set_index("policy")
    assert s.loc["reactive HPA", "cost_usd"] == pytest.approx(s.loc["reactive HPA", "gpu_hours"] * 2.5)
    # the warm pool's ten standby replicas are paid for all 900 s
    extra = s.loc["reactive + warm pool", "gpu_hours"] - s.loc["reactive HPA", "gpu_hours"]
    assert extra == pytest.approx(10 * 900 / 3600)


def test_static_fleet_gpu_hours():
    r = simulate(np.full(3600, 5.0), MU, Policy("static", scaler="static"), initial_replicas=4,
                 usd_per_gpu_hour=3.0, gpus_per_replica=2)
    assert r.summary["gpu_hours"] == pytest.approx(8.0)
    assert r.summary["cost_usd"] == pytest.approx(24.0)
    assert (r.timeline["ready_replicas"] == 4).all()


def test_timeline_columns_and_no_nan(seed_run):
    tl = seed_run.timeline
    for col in ("t_s", "arrival_rate_per_s", "ready_replicas", "queue_len", "p99_wait_s", "shed_per_s",
                "policy"):
        assert col in tl
    assert not tl.isna().any().any()
    assert np.isfinite(tl["p99_wait_s"]).all()
    assert len(tl) == 900 * len(DEFAULT_POLICIES)


def test_hpa_scale_up_limit_is_max_4_pods_or_100_percent():
    lam = np.full(40, 100.0)                  # wants 72 replicas at once
    r = simulate(lam, MU, Policy("hpa"), initial_replicas=3, cold_start_s=90)
    prov = r.timeline["provisioned_replicas"].to_numpy()
    assert prov[0] == 7                       # 3 + max(4, 3)
    assert prov[15] == 14                     # doubled
    assert prov[30] == 28


def test_hpa_tolerance_ignores_small_changes():
    lam = np.full(60, 14.0 * 1.08)            # 8 % over target: inside the 10 % tolerance
    r = simulate(lam, MU, Policy("hpa"), initial_replicas=10)
    assert (r.timeline["provisioned_replicas"] == 10).all()


def test_hpa_scale_down_waits_for_stabilisation_window():
    lam = np.r_[np.full(30, 28.0), np.full(600, 7.0)]
    r = simulate(lam, MU, Policy("hpa"), initial_replicas=20, cold_start_s=0)
    prov = r.timeline.set_index("t_s")["provisioned_replicas"]
    assert prov[30 + 280] == 20               # still inside the 300 s window
    assert prov[629] == 5                     # then down to ceil(7 / 1.4)


def test_warm_pool_joins_in_seconds_and_refills_over_a_cold_start():
    lam = np.r_[np.full(15, 14.0), np.full(300, 21.0)]
    r = simulate(lam, MU, Policy("pool", warm_pool_replicas=3, warm_start_s=5), initial_replicas=10,
                 cold_start_s=90)
    tl = r.timeline.set_index("t_s")
    assert tl.loc[19, "ready_replicas"] == 10 and tl.loc[20, "ready_replicas"] == 13   # 3 warm
    assert tl.loc[104, "ready_replicas"] == 13 and tl.loc[105, "ready_replicas"] == 15  # 2 cold
    assert tl.loc[20, "warm_pool_ready"] == 0 and tl.loc[105, "warm_pool_ready"] == 3


def test_shedding_caps_utilisation_at_one_and_respects_the_tier_share():
    lam = np.full(100, 28.0)                  # 10 replicas serve 20 req/s: 8 over, under 30 %
    r = simulate(lam, MU, Policy("shed", scaler="static", shed_lowest_tier=True), initial_replicas=10,
                 sheddable_share=0.3)
    tl = r.timeline
    assert (tl["admitted_rate_per_s"] <= 20.0 + 1e-9).all()
    assert (tl["shed_per_s"] <= 0.3 * tl["arrival_rate_per_s"] + 1e-9).all()
    assert r.summary["shed_requests"] == pytest.approx(800.0)
    assert r.summary["peak_queue_len"] == 0
    tight = simulate(lam, MU, Policy("shed", scaler="static", shed_lowest_tier=True), initial_replicas=10,
                     sheddable_share=0.1)
    assert tight.summary["peak_queue_len"] > 0                  # the tier is too small to hold rho <= 1


def test_forecast_traffic_runs():
    hourly = pd.Series([10.0, 14.0, 30.0, 12.0])
    lam = traffic_from_hourly(hourly)
    assert len(lam) == 4 * 3600
    r = simulate(lam, MU, Policy("p", scaler="predictive"))
    assert r.summary["sla_violation_s"] == 0


def test_policy_from_dict_and_bad_specs():
    assert policy_from_dict({"name": "x", "scaler": "predictive"}).scaler == "predictive"
    with pytest.raises(InputError, match="unknown policy fields"):
        policy_from_dict({"name": "x", "colour": "red"})
    with pytest.raises(InputError, match="unknown scaler"):
        simulate(ramp_traffic(), MU, Policy("x", scaler="psychic"))
    with pytest.raises(InputError):
        simulate(np.array([1.0, -1.0]), MU)
    with pytest.raises(InputError):
        simulate(ramp_traffic(), 0.0)
    with pytest.raises(InputError, match="unique"):
        compare_policies(ramp_traffic(), MU, policies=[Policy("a"), Policy("a")])
