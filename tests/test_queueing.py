"""finops.capacity.queueing: pinned values, arbitrary-precision cross-checks, invariants, a seeded simulation."""
from __future__ import annotations

import heapq
import json
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy import stats

from finops.capacity.queueing import (
    MMCResult,
    erlang_b,
    erlang_c,
    ggc,
    halfin_whitt_p_wait,
    mmc,
    required_servers,
    service_level,
    sqrt_staffing,
    wait_quantile,
)
from finops.errors import InputError

# ----------------------------------------------------------------- pinned values


def test_erlang_c_pyworkforce_call_centre():
    # pyworkforce's tests: 100 transactions per 30 min, AHT 3 min -> A = 10 erlangs, 14 positions.
    lam_per_min, mu_per_min = 100 / 30, 1 / 3
    r = mmc(lam_per_min, mu_per_min, 14)
    assert r.state == "ok"
    assert round(r.p_wait, 3) == 0.174
    assert round(service_level(lam_per_min, mu_per_min, 14, 0.33), 3) == 0.888


def test_erlang_c_r_queueing_example():
    # R package `queueing`, M/M/c example: lambda = 5, mu = 10, c = 2.
    r = mmc(5, 10, 2)
    assert_allclose(r.p_wait, 0.1, rtol=1e-12)
    assert_allclose(r.wq_s, 0.006667, atol=5e-7)
    assert_allclose(r.w_s, 0.006667 + 0.1, atol=5e-7)
    assert_allclose(r.utilization, 0.25)


def test_erlang_c_matches_pyworkforce_directly():
    pyworkforce = pytest.importorskip("pyworkforce.queuing")
    for transactions, aht, c in [(100, 3, 14), (400, 2.5, 40), (60, 1, 61)]:
        ref = pyworkforce.ErlangC(transactions=transactions, aht=aht, asa=1, interval=30)
        ours = mmc(transactions / 30, 1 / aht, c)
        assert_allclose(ours.p_wait, ref.waiting_probability(c), rtol=1e-10)
        assert_allclose(service_level(transactions / 30, 1 / aht, c, 1.0), ref.service_level(c), rtol=1e-10)


def test_mmc_pollaczek_khinchine_single_server():
    # M/M/1: C = rho, Wq = rho / (mu - lambda); M/D/1 by Allen-Cunneen is exact (P-K formula).
    r = mmc(3, 4, 1)
    assert_allclose(r.p_wait, 0.75)
    assert_allclose(r.wq_s, 0.75 / 1)
    md1 = ggc(3, 4, 1, cv_service=0.0)
    assert_allclose(md1.wq_s, 0.75 * (1 + 0) / (2 * 4 * (1 - 0.75)))


def test_wait_percentile_formula():
    lam, mu, c = 10.0, 2.0, 8
    r = mmc(lam, mu, c)
    for field, p in [("wait_p90_s", 0.9), ("wait_p95_s", 0.95), ("wait_p99_s", 0.99)]:
        expected = max(0.0, math.log(r.p_wait / (1 - p)) / (c * mu - lam))
        assert_allclose(getattr(r, field), expected)
        assert_allclose(wait_quantile(lam, mu, c, p), expected)
        # P(W > t_p) = 1 - p
        assert_allclose(1 - service_level(lam, mu, c, expected), 1 - p)
    assert r.wait_p50_s == 0.0          # C < 0.5: more than half never wait


# ----------------------------------------------------------------- arbitrary precision

def _mp_erlang_b(c, a):
    with mpmath.workdps(60):
        c, a = mpmath.mpf(c), mpmath.mpf(a)
        log_pmf = c * mpmath.log(a) - a - mpmath.loggamma(c + 1)
        cdf = mpmath.gammainc(c + 1, a, mpmath.inf, regularized=True)
        return mpmath.exp(log_pmf) / cdf


def _mp_erlang_c(c, a):
    with mpmath.workdps(60):
        b = _mp_erlang_b(c, a)
        return b / (1 - mpmath.mpf(a) / c * (1 - b))


# The "A = 10^4, c = 10,100 and A = 10^5, c = 100,300" read as c = 10 100 and 100 300,
# i.e. just above the load (rho = 0.990 and 0.997), where Erlang C is hardest, plus c up to 10^6.
@pytest.mark.parametrize("a, c", [(1e4, 10_100), (1e5, 100_300), (1e4, 10_001), (1e6, 1_001_000),
                                  (9e5, 1_000_000), (3.0, 200), (0.3, 50)])
def test_erlang_c_against_mpmath(a, c):
    assert_allclose(erlang_c(a, c), float(_mp_erlang_c(c, a)), rtol=1e-12)


# Read the other way, c = 10 and 100 (A = 10^4), 100 and 300 (A = 10^5) are overloaded: Erlang C is
# 1 by definition there, and Erlang B (the loss probability) must still be exact.
@pytest.mark.parametrize("a, c", [(1e4, 10), (1e4, 100), (1e5, 100), (1e5, 300), (1e6, 999_000)])
def test_erlang_b_overloaded_against_mpmath(a, c):
    assert_allclose(erlang_b(a, c), float(_mp_erlang_b(c, a)), rtol=1e-12)
    assert erlang_c(a, c) == 1.0
    assert mmc(a, 1.0, c).state == "unstable"


def test_no_overflow_at_a_million_servers():
    r = mmc(999_000.0, 1.0, 1_000_000)
    assert r.state == "ok"
    assert 0 < r.p_wait < 1 and math.isfinite(r.wait_p99_s)
    assert erlang_c(1.0, 1_000_000) == 0.0          # underflows to an exact 0, not NaN


# ----------------------------------------------------------------- vectorisation

def test_vectorised_matches_scalar_and_keeps_types():
    lam = np.array([5.0, 10.0, 30.0, 0.0])
    r = mmc(lam, 2.0, 8)
    assert isinstance(r.p_wait, np.ndarray) and r.p_wait.shape == (4,)
    assert r.state.tolist() == ["ok", "ok", "unstable", "no_traffic"]
    for i, x in enumerate(lam):
        s = mmc(float(x), 2.0, 8)
        assert isinstance(s.p_wait, float) and isinstance(s.state, str) and isinstance(s.stable, bool)
        assert_allclose(r.wq_s[i], s.wq_s)


def test_hundred_thousand_scenarios_no_nan():
    rng = np.random.default_rng(7)
    n = 100_000
    c = np.round(10 ** rng.uniform(0, 5, n))
    mu = rng.lognormal(0, 1, n)
    lam = rng.uniform(0, 1.2, n) * c * mu
    r = mmc(lam, mu, c)
    for name in ("utilization", "p_wait", "wq_s", "w_s", "lq", "l", "wait_p99_s"):
        assert not np.isnan(getattr(r, name)).any(), name
    ok = r.state == "ok"
    assert ok.sum() > 50_000
    assert np.isfinite(r.wait_p99_s[ok]).all()
    assert (r.p_wait[~ok & (lam > 0)] == 1).all()


# ----------------------------------------------------------------- degenerate inputs

def test_mmc_zero_traffic():
    r = mmc(0, 2, 4)
    assert (r.state, r.stable, r.utilization, r.p_wait, r.wq_s, r.lq, r.l) == \
        ("no_traffic", True, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert r.w_s == 0.5                # a lone request's stay: 1/mu


def test_mmc_zero_servers():
    r = mmc(5, 2, 0)
    assert r.state == "no_servers" and not r.stable
    assert r.p_wait == 1.0 and math.isinf(r.wq_s) and math.isinf(r.utilization)


def test_mmc_zero_service_rate():
    r = mmc(5, 0, 3)
    assert r.state == "no_service" and not r.stable and math.isinf(r.w_s)


@pytest.mark.parametrize("lam", [8.0, 9.0, 100.0])
def test_mmc_unstable(lam):
    r = mmc(lam, 2, 4)                  # rho = lam / 8 >= 1
    assert r.state == "unstable" and not r.stable
    assert r.message.startswith("unstable: the queue grows without bound")
    assert_allclose(r.utilization, lam / 8)
    assert math.isinf(r.wq_s) and math.isinf(r.wait_p99_s) and r.p_wait == 1.0


def test_to_dict_is_strict_json():
    for r in (mmc(30, 2, 8), mmc(0, 0, 0), mmc(5, 0, 1), mmc(1, 1, 0), mmc(np.array([1.0, 30.0]), 2, 8)):
        text = json.dumps(r.to_dict(), allow_nan=False)
        assert "state" in json.loads(text)
    d = mmc(30, 2, 8).to_dict()
    assert d["wq_s"] is None and d["state"] == "unstable" and d["utilization"] == 1.875


@pytest.mark.parametrize("kwargs", [dict(arrival_rate=-1, service_rate=1, servers=1),
                                    dict(arrival_rate=1, service_rate=-2, servers=1),
                                    dict(arrival_rate=1, service_rate=1, servers=-3),
                                    dict(arrival_rate=float("nan"), service_rate=1, servers=1),
                                    dict(arrival_rate=float("inf"), service_rate=1, servers=1),
                                    dict(arrival_rate="many", service_rate=1, servers=1)])
def test_mmc_bad_input_raises_input_error(kwargs):
    with pytest.raises(InputError):
        mmc(**kwargs)


# ----------------------------------------------------------------- invariants (Hypothesis)

# 0, or normal floats: subnormal loads lose relative precision in lambda / mu itself
loads = st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=5_000.0))
rates = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)
servers_st = st.integers(min_value=1, max_value=20_000)


@settings(max_examples=120, deadline=None)
@given(a=loads, mu=rates, c=servers_st)
def test_p_wait_is_a_probability_and_little_holds(a, mu, c):
    lam = a * mu
    r = mmc(lam, mu, c)
    assert 0.0 <= r.p_wait <= 1.0
    assert erlang_b(lam / mu, c) <= r.p_wait or r.state != "ok"
    if r.state == "ok":
        assert_allclose(r.l, lam * r.w_s, rtol=1e-12)
        assert_allclose(r.lq, lam * r.wq_s, rtol=1e-12)
        assert_allclose(r.l - r.lq, a, rtol=1e-9)          # mean busy servers = A
        assert r.wait_p50_s <= r.wait_p90_s <= r.wait_p95_s <= r.wait_p99_s


@settings(max_examples=120, deadline=None)
@given(a=st.floats(min_value=0.01, max_value=2_000.0), mu=rates, extra=st.integers(0, 200))
def test_waits_fall_as_servers_rise(a, mu, extra):
    c = np.arange(math.floor(a) + 1 + extra, math.floor(a) + 40 + extra)
    r = mmc(a * mu, mu, c)
    assert (np.diff(r.p_wait) <= 1e-15).all()
    assert (np.diff(r.wq_s) <= 1e-15).all()
    assert (np.diff(r.wait_p99_s) <= 1e-12).all()


@settings(max_examples=100, deadline=None)
@given(a=st.floats(min_value=0.01, max_value=1_000.0), mu=rates,
       target=st.floats(min_value=0.3, max_value=0.95), sla=st.floats(min_value=0.0, max_value=10.0))
def test_required_servers_is_the_smallest(a, mu, target, sla):
    lam = a * mu
    sla_s = sla / mu
    r = required_servers(lam, mu, target_utilization=target, wait_sla_s=sla_s, wait_percentile=0.95)

    def meets(c):
        q = mmc(lam, mu, c)
        return q.state == "ok" and q.utilization <= target * (1 + 1e-12) and q.wait_p95_s <= sla_s

    assert meets(r.servers)
    assert not meets(r.servers - 1)


# ----------------------------------------------------------------- seeded discrete-event simulation

def _simulate_mmc_waits(lam, mu, c, n, rng):
    """FCFS M/M/c: each arrival takes the server that frees first; returns queue waits."""
    arrivals = np.cumsum(rng.exponential(1 / lam, n)).tolist()
    services = rng.exponential(1 / mu, n).tolist()
    free = [0.0] * c
    waits = [0.0] * n
    for i, (t, s) in enumerate(zip(arrivals, services, strict=True)):
        start = free[0] if free[0] > t else t
        waits[i] = start - t
        heapq.heapreplace(free, start + s)
    return np.asarray(waits)


@pytest.mark.parametrize("rho, n", [(0.5, 60_000), (0.7, 100_000), (0.9, 300_000)])
def test_simulation_agrees_with_erlang_c(rho, n):
    c, mu = 3, 1.0
    lam = rho * c * mu
    waits = _simulate_mmc_waits(lam, mu, c, n, np.random.default_rng(20260101 + int(rho * 10)))
    waits = waits[n // 10:]                                   # warm-up
    batches = np.array_split(waits, 20)                       # batch means for autocorrelation
    means = np.array([b.mean() for b in batches])
    half = stats.t.ppf(0.995, len(means) - 1) * means.std(ddof=1) / math.sqrt(len(means))
    r = mmc(lam, mu, c)
    assert abs(means.mean() - r.wq_s) <= half, (means.mean(), r.wq_s, half)
    assert abs(np.mean(waits > 0) - r.p_wait) < 0.03           # P(wait) too, loosely


# ----------------------------------------------------------------- sizing

def test_size_acceptance_36():
    r = required_servers(50, 1 / 0.5, target_utilization=0.7)
    assert r.servers == 36
    assert r.binding_constraint == "utilization"
    assert r.mmc.utilization <= 0.7


def test_size_redundancy_and_cold_start_buffer():
    r = required_servers(50, 2, target_utilization=0.7, redundancy=0.25, cold_start_buffer=3)
    assert r.servers == 36
    assert r.servers_with_redundancy == math.ceil(36 * 1.25) + 3 == 48
    assert required_servers(50, 2, target_utilization=0.7, redundancy=0.2).servers_with_redundancy == 44


def test_size_wait_sla_and_p_wait():
    r = required_servers(50, 2, wait_sla_s=0.5, wait_percentile=0.99)
    assert r.binding_constraint == "wait_sla"
    assert r.mmc.wait_p99_s <= 0.5 < mmc(50, 2, r.servers - 1).wait_p99_s
    p = required_servers(50, 2, max_p_wait=0.1)
    assert p.binding_constraint == "p_wait"
    assert p.mmc.p_wait <= 0.1 < mmc(50, 2, p.servers - 1).p_wait
    both = required_servers(50, 2, max_p_wait=0.1, wait_sla_s=0.5, target_utilization=0.7)
    assert both.servers == max(36, r.servers, p.servers)


def test_size_default_percentile_is_p99():
    assert required_servers(50, 2, wait_sla_s=0.5).servers == \
        required_servers(50, 2, wait_sla_s=0.5, wait_percentile=0.99).servers


def test_size_only_stability():
    r = required_servers(50, 2)
    assert r.servers == 26 and r.binding_constraint == "stability"


def test_size_allen_cunneen_needs_fewer_for_deterministic_service():
    mm = required_servers(50, 2, wait_sla_s=0.2)
    md = required_servers(50, 2, wait_sla_s=0.2, cv_service=0.0)
    assert md.servers < mm.servers


def test_size_vectorised_matches_scalar():
    lam = np.array([0.0, 1.0, 50.0, 1234.5])
    r = required_servers(lam, 2.0, target_utilization=0.7, wait_sla_s=0.3, redundancy=0.25)
    for i, x in enumerate(lam):
        s = required_servers(float(x), 2.0, target_utilization=0.7, wait_sla_s=0.3, redundancy=0.25)
        assert r.servers[i] == s.servers and r.servers_with_redundancy[i] == s.servers_with_redundancy
    assert r.binding_constraint[0] == "no_traffic" and r.servers[0] == 0


@pytest.mark.parametrize("a", [1e3, 1e4, 1e5])
def test_size_large_fleets_and_sqrt_staffing_cross_check(a):
    r = required_servers(a, 1.0, max_p_wait=0.2)
    assert r.binding_constraint == "p_wait"
    assert abs(r.sqrt_staffing_servers - r.servers) <= 2
    assert abs(sqrt_staffing(a, 1.0, 0.2) - r.servers) <= max(2, 0.002 * a ** 0.5 * 10)


def test_halfin_whitt_limit():
    assert_allclose(halfin_whitt_p_wait(0.0), 1.0)
    assert halfin_whitt_p_wait(50.0) < 1e-300 or halfin_whitt_p_wait(50.0) == 0.0
    a = 1e5
    beta = 1.0
    exact = erlang_c(a, a + beta * math.sqrt(a))
    assert_allclose(exact, halfin_whitt_p_wait(beta), rtol=0.02)


@pytest.mark.parametrize("kwargs, field", [
    (dict(service_rate=0), "service_rate"),
    (dict(target_utilization=0), "target_utilization"),
    (dict(target_utilization=1.5), "target_utilization"),
    (dict(max_p_wait=0), "max_p_wait"),
    (dict(wait_percentile=0.99), "wait_percentile"),
    (dict(wait_sla_s=1, wait_percentile=1.0), "wait_percentile"),
    (dict(redundancy=-0.1), "redundancy"),
    (dict(cold_start_buffer=1.5), "cold_start_buffer"),
    (dict(arrival_rate=-5), "arrival_rate"),
])
def test_size_bad_input(kwargs, field):
    args = dict(arrival_rate=50, service_rate=2) | kwargs
    with pytest.raises(InputError) as exc:
        required_servers(args.pop("arrival_rate"), args.pop("service_rate"), **args)
    assert exc.value.field == field


def test_results_are_frozen_dataclasses():
    r = mmc(1, 1, 2)
    assert isinstance(r, MMCResult)
    with pytest.raises(AttributeError):
        r.p_wait = 0.0
