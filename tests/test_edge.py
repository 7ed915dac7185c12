"""finops.cascade.edge: the seed's escalate-or-not inequality, break-even RTT, jitter and policies."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from finops.cascade import edge
from finops.errors import InputError

SEED = edge.EdgeInputs()


def test_seed_worked_example_escalates():
    # Seed: dQ = 0.15 at 0.5 $ -> 0.075; inference diff + traffic ~ 0.01; 80 ms + 300 ms ~ 0.03.
    d = edge.decide(SEED)
    assert d.escalate
    assert_allclose([d.benefit_usd, d.money_cost_usd, d.latency_cost_usd, d.cost_usd, d.net_benefit_usd],
                    [0.075, 0.01, 0.03, 0.04, 0.035], atol=1e-12)
    assert d.extra_latency_ms == 380


def test_seed_at_1_5_s_rtt_no_longer_pays():
    # Seed: at RTT >= 1.5 s the latency term is ">= 0.12 $" and the cost side "> 0.13 $" > 0.075.
    d = edge.decide(edge.EdgeInputs(rtt_ms=1500))
    assert not d.escalate
    assert d.latency_cost_usd == pytest.approx(0.03 / 0.38 * 1.8)        # 0.142
    assert d.latency_cost_usd >= 0.12 and d.cost_usd > 0.13 > d.benefit_usd


def test_break_even_rtt_is_523_ms_with_the_seed_numbers():
    # (0.075 - 0.01) / (0.03 / 0.38) - 0.3 s = 0.5233 s: the flip happens between 80 ms and 1.5 s,
    # at about 520 ms (the seed's text only claims it has flipped by 1.5 s; see finops.cascade.edge).
    be = edge.break_even_rtt(SEED)
    assert be.rtt_ms == pytest.approx((0.065 / (0.03 / 0.38) - 0.3) * 1000)
    assert be.rtt_ms == pytest.approx(523.33, abs=0.01)
    assert 80 < be.rtt_ms < 1500
    assert edge.net_benefit_usd(SEED, be.rtt_ms) == pytest.approx(0, abs=1e-15)
    assert edge.decide(edge.EdgeInputs(rtt_ms=be.rtt_ms - 1)).escalate
    assert not edge.decide(edge.EdgeInputs(rtt_ms=be.rtt_ms + 1)).escalate


def test_latency_value_that_would_flip_at_1_5_s():
    v = edge.latency_value_for_break_even(SEED, 1500)
    assert v == pytest.approx(0.065 / 1.8)
    moved = edge.EdgeInputs(latency_value_usd_per_s=v)
    assert edge.break_even_rtt(moved).rtt_ms == pytest.approx(1500)
    assert edge.decide(moved).latency_cost_usd == pytest.approx(0.0137, abs=1e-4)  # not the seed's 0.03


def test_net_benefit_curve_flips_once_at_the_break_even():
    curve = edge.net_benefit_curve(SEED, max_rtt_ms=3000, step_ms=10)
    assert curve.rtt_ms.iloc[0] == 0 and curve.rtt_ms.iloc[-1] == 3000
    flips = np.flatnonzero(np.diff(curve.escalate.to_numpy().astype(int)))
    assert len(flips) == 1
    assert curve.rtt_ms.iloc[flips[0]] == 520 and curve.rtt_ms.iloc[flips[0] + 1] == 530
    assert_allclose(curve.cost_usd - curve.benefit_usd, -curve.net_benefit_usd)


def test_break_even_degenerate_cases_are_answers():
    free = edge.break_even_rtt(edge.EdgeInputs(latency_value_usd_per_s=0))
    assert free.always_pays and free.rtt_ms is None
    free_no_gain = edge.break_even_rtt(edge.EdgeInputs(latency_value_usd_per_s=0, quality_gain=0.01))
    assert free_no_gain.never_pays and free_no_gain.rtt_ms is None
    hopeless = edge.break_even_rtt(edge.EdgeInputs(quality_gain=0.02))   # 0.01 $ < 0.01 $ + latency
    assert hopeless.never_pays and "zero RTT" in hopeless.note
    assert edge.latency_value_for_break_even(edge.EdgeInputs(quality_gain=0.0), 1000) is None
    # a crossing past any RTT taken (margin $0.065 / $1e-9 a second: 65 million seconds) pays at every RTT
    far = edge.break_even_rtt(edge.EdgeInputs(latency_value_usd_per_s=1e-9))
    assert far.always_pays and far.rtt_ms is None and "600,000 ms" in far.note
    assert edge.decide(edge.EdgeInputs(rtt_ms=600_000, latency_value_usd_per_s=1e-9)).escalate
    # within it, the note's time is in seconds from 1,000 ms (fmt.duration_ms; it read "324,700 ms"):
    # (0.075 - 0.01) / 0.0002 - 0.3 s = 324.7 s; the default inputs' 523.3 ms stays in ms
    near = edge.break_even_rtt(edge.EdgeInputs(latency_value_usd_per_s=0.0002))
    assert near.rtt_ms == pytest.approx(324_700) and near.note == "escalation pays while RTT < 325 s"
    # (0.75 - 0.01) / (0.03 / 0.38 s) - 0.3 s = 9.0733 s
    assert edge.break_even_rtt(edge.EdgeInputs(value_usd=5.0)).note == "escalation pays while RTT < 9.07 s"
    assert edge.break_even_rtt(edge.EdgeInputs()).note == "escalation pays while RTT < 523 ms"


@pytest.mark.parametrize("kwargs, field", [
    (dict(rtt_ms=-1), "rtt_ms"),
    (dict(value_usd=float("nan")), "value_usd"),
    (dict(edge_quality=1.2), "edge_quality"),
    (dict(quality_gain=0.5), "quality_gain"),          # 0.80 + 0.5 > 1
    (dict(cloud_ms="slow"), "cloud_ms"),
    (dict(rtt_ms=600_001), "rtt_ms"),                  # past ten minutes: no round trip
    (dict(edge_ms=1e308), "edge_ms"),
    (dict(latency_value_usd_per_s=1e308), "latency_value_usd_per_s"),   # a cost of inf dollars
    (dict(network_cost_usd=1_000_000.01), "network_cost_usd"),
])
def test_bad_inputs_raise_input_error(kwargs, field):
    with pytest.raises(InputError, match=f"field {field}"):
        edge.decide(edge.EdgeInputs(**kwargs))


def test_lognormal_and_normal_rtt_have_the_stated_mean_and_jitter():
    for kind in ("lognormal", "normal"):
        s = edge.RttDistribution(kind, 400, 100).sample(400_000, seed=3)
        assert s.mean() == pytest.approx(400, rel=0.01) and s.std() == pytest.approx(100, rel=0.02)
        assert s.min() >= 0
    assert np.all(edge.RttDistribution("normal", 10, 50).sample(1000) >= 0)          # clipped at 0
    assert np.all(edge.RttDistribution("lognormal", 80, 0).sample(10) == 80)          # no jitter
    with pytest.raises(InputError, match="rtt_dist"):
        edge.RttDistribution("uniform", 80, 10).sample(10)


@pytest.mark.parametrize("kind", ["normal", "lognormal"])
def test_share_that_pays_matches_the_cdf_at_the_break_even(kind):
    dist = edge.RttDistribution(kind, 450, 250)
    cmp = edge.compare_policies(SEED, dist.sample(200_000, seed=7))
    want = float(dist.cdf(edge.break_even_rtt(SEED).rtt_ms))
    assert cmp.share_pays == pytest.approx(want, abs=0.005)
    assert cmp.when_pays.escalation_share == cmp.share_pays
    assert cmp.when_pays.expected_quality == pytest.approx(0.80 + 0.15 * cmp.share_pays)
    assert cmp.always.expected_quality == pytest.approx(0.95) and cmp.never.expected_quality == 0.80


def test_policies_on_hand_samples():
    # RTTs 80 and 300 ms pay (< 523 ms), 1500 and 2000 ms do not.
    cmp = edge.compare_policies(SEED, [80.0, 300.0, 1500.0, 2000.0])
    assert cmp.share_pays == 0.5
    v = 0.03 / 0.38
    want_latency = v * ((0.08 + 0.3) + (0.3 + 0.3)) / 4
    assert cmp.when_pays.latency_cost_usd == pytest.approx(want_latency)
    assert cmp.when_pays.money_cost_usd == pytest.approx(0.005)
    assert cmp.when_pays.net_benefit_usd == pytest.approx(0.5 * 0.075 - 0.005 - want_latency)
    assert cmp.always.net_benefit_usd == pytest.approx(0.075 - 0.01 - v * (0.38 + 0.6 + 1.8 + 2.3) / 4)
    assert cmp.never.net_benefit_usd == 0
    assert list(cmp.as_frame().policy) == ["never", "always", "when it pays"]
    with pytest.raises(InputError, match="no RTT samples"):
        edge.compare_policies(SEED, [])


finite = dict(allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(gain=st.floats(0, 0.2, **finite), value=st.floats(0, 5, **finite), money=st.floats(0, 0.1, **finite),
       v_lat=st.floats(0, 1, **finite), rtts=st.lists(st.floats(0, 5000, **finite), min_size=1, max_size=50))
def test_policy_invariants(gain, value, money, v_lat, rtts):
    inputs = edge.EdgeInputs(quality_gain=gain, value_usd=value, infer_cost_diff_usd=money,
                             network_cost_usd=0.0, latency_value_usd_per_s=v_lat)
    net = edge.net_benefit_usd(inputs, sorted(rtts))
    assert np.all(np.diff(net) <= 1e-15)                         # more RTT never helps
    cmp = edge.compare_policies(inputs, rtts)
    best = max(cmp.always.net_benefit_usd, cmp.never.net_benefit_usd)
    assert cmp.when_pays.net_benefit_usd >= best - 1e-12         # the adaptive policy is never worse
    assert 0 <= cmp.share_pays <= 1
    be = edge.break_even_rtt(inputs)
    if be.rtt_ms is not None:                                    # decision agrees with the break-even
        assert np.array_equal(net > 0, np.asarray(sorted(rtts)) < be.rtt_ms) or np.any(
            np.isclose(sorted(rtts), be.rtt_ms))
