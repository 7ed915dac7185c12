"""finops.cascade.sweep: the sweep, frontier, hull, metrics and parametric mode (the eval CSV reader: test_uploads)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from finops.cascade import sweep as cascade
from finops.errors import InputError
from finops.ingest import uploads

DATA = Path(__file__).resolve().parent / "data"
GSM8K = DATA / "routellm_gsm8k_cascade.csv"
GSM8K_SOURCE = Path(__file__).resolve().parents[2] / "shared/realdata/routellm/gsm8k/gsm8k_responses.csv"
MAPPING = "confidence=confidence,small_quality=mixtral_correct,large_quality=gpt4_correct"


@pytest.fixture(scope="module")
def gsm8k() -> uploads.EvalData:
    return uploads.load_eval_csv(GSM8K, MAPPING + ",cost_small=mixtral_cost_usd_est,cost_large=gpt4_cost_usd_est")


def dominated(point, others: pd.DataFrame) -> bool:
    le = others.avg_cost <= point.avg_cost
    ge = others.avg_quality >= point.avg_quality
    strict = (others.avg_cost < point.avg_cost) | (others.avg_quality > point.avg_quality)
    return bool((le & ge & strict).any())


# ---------------------------------------------------------------------------------------
# the tiny example, worked by hand
# ---------------------------------------------------------------------------------------
# query  conf  small  large
#   A    0.9     1      1
#   B    0.7     0      1
#   C    0.5     1      0
#   D    0.3     0      1          flat costs: small 1, large 8
#
# tau          escalated  rate  cost          quality                 PGR = (q - 0.5) / 0.25
# 0.3 (min)    -          0     1             (1+0+1+0)/4 = 0.50       0
# 0.5          D          .25   1+.25*8 = 3   (1+0+1+1)/4 = 0.75       1
# 0.7          D,C        .50   5             (1+0+0+1)/4 = 0.50       0
# 0.9          D,C,B      .75   7             (1+1+0+1)/4 = 0.75       1
# 0.9+ (top)   all        1     9             large only  = 0.75       1
#
# q_small = 0.5 (rate 0), q_large = 0.75 (rate 1).
# APGR = trapezoids of width .25: (0+1)/2 + (1+0)/2 + (0+1)/2 + (1+1)/2 = 2.5, times .25 = 0.625
# CPT(50%): first crossing of 0.5 is on [0, .25] where PGR goes 0 -> 1: 0.5 * .25 = 0.125
# CPT(80%): same segment: 0.8 * .25 = 0.2
# Frontier: (1, .50) and (3, .75); (5, .50) (7, .75) (9, .75) are all dominated by (3, .75).
# Marginal: (3 - 1) / ((.75 - .50) * 100 points) = 0.08 per point.
# Oracle: escalate B and D (small wrong, large right): rate .5, quality 1.0,
#   cascade cost 1 + .5 * 8 = 5; router cost (1 + 8 + 1 + 8) / 4 = 4.5.
TINY = dict(confidence=[0.9, 0.7, 0.5, 0.3], small_quality=[1, 0, 1, 0], large_quality=[1, 1, 0, 1],
            cost_small=1.0, cost_large=8.0)


def test_tiny_curve_matches_hand_computation():
    curve = cascade.sweep(**TINY)
    assert_allclose(curve.escalation_rate, [0, .25, .5, .75, 1])
    assert_allclose(curve.avg_cost, [1, 3, 5, 7, 9])
    assert_allclose(curve.avg_quality, [.5, .75, .5, .75, .75])
    assert_array_equal(curve.threshold.iloc[:4], [0.3, 0.5, 0.7, 0.9])
    assert curve.threshold.iloc[-1] == np.nextafter(0.9, np.inf)


def test_tiny_apgr_and_cpt_match_hand_computation():
    m = cascade.routing_metrics(cascade.sweep(**TINY))
    assert (m.quality_small, m.quality_large) == (0.5, 0.75)
    assert_allclose([m.apgr, m.cpt50, m.cpt80], [0.625, 0.125, 0.2])


def test_tiny_frontier_marginal_and_baselines():
    rep = cascade.analyse(**TINY, quality_floor=0.7)
    assert_allclose(rep.frontier.avg_cost, [1, 3])
    assert_allclose(cascade.marginal_table(rep.curve).marginal_cost_per_point.iloc[1:], [0.08])
    assert rep.choice == cascade.CascadePoint(0.5, 0.25, 3.0, 0.75)
    b = rep.baselines
    assert (b.oracle_cascade.large_call_rate, b.oracle_cascade.avg_cost, b.oracle_cascade.avg_quality) == (.5, 5, 1)
    assert b.oracle_router.avg_cost == 4.5
    assert (b.direct_to_large.avg_cost, b.direct_to_large.avg_quality) == (8, .75)
    assert (b.small_only.avg_cost, b.small_only.avg_quality) == (1, .5)
    assert_allclose(b.random_routing.avg_quality, np.linspace(.5, .75, 11))


def test_random_routing_has_apgr_one_half_and_linear_cpt():
    b = cascade.baselines(**{k: TINY[k] for k in ("small_quality", "large_quality", "cost_small", "cost_large")})
    rand = b.random_routing.assign(threshold=np.arange(11))
    m = cascade.routing_metrics(rand)
    assert_allclose([m.apgr, m.cpt50, m.cpt80], [0.5, 0.5, 0.8])


# ---------------------------------------------------------------------------------------
# RouteLLM GSM8K (Mixtral-8x7B vs GPT-4, 1,319 questions)
# ---------------------------------------------------------------------------------------
def test_gsm8k_excerpt_is_the_whole_set(gsm8k):
    assert gsm8k.n_queries == 1319
    assert gsm8k.small_quality.sum() == 842 and gsm8k.large_quality.sum() == 1130  # SOURCES.md


@pytest.mark.parametrize("costs", ["flat", "per_query"])
@pytest.mark.parametrize("method", ["auto", "sort", "hash"])
def test_gsm8k_sweep_equals_brute_force_at_every_threshold(gsm8k, costs, method):
    cs, cl = (1.0, 8.0) if costs == "flat" else (gsm8k.cost_small, gsm8k.cost_large)
    args = (gsm8k.confidence, gsm8k.small_quality, gsm8k.large_quality, cs, cl)
    fast = cascade.sweep(*args, method=method)
    slow = cascade.sweep_reference(*args)
    assert len(fast) == np.unique(gsm8k.confidence).size + 1
    assert_array_equal(fast.threshold, slow.threshold)
    for col in ("escalation_rate", "avg_cost", "avg_quality"):
        assert_allclose(fast[col], slow[col], rtol=1e-12, atol=1e-15, err_msg=col)


def test_gsm8k_sweep_ends(gsm8k):
    curve = cascade.sweep(gsm8k.confidence, gsm8k.small_quality, gsm8k.large_quality, 1.0, 8.0)
    first, last = curve.iloc[0], curve.iloc[-1]
    assert (first.escalation_rate, first.avg_cost, first.avg_quality) == (0.0, 1.0, 842 / 1319)
    assert (last.escalation_rate, last.avg_cost, last.avg_quality) == (1.0, 9.0, 1130 / 1319)


def test_gsm8k_frontier_points_are_non_dominated(gsm8k):
    curve = cascade.sweep(gsm8k.confidence, gsm8k.small_quality, gsm8k.large_quality, 1.0, 8.0)
    front = cascade.pareto_frontier(curve)
    assert 1 < len(front) < len(curve)
    assert not any(dominated(p, curve) for p in front.itertuples())
    # ... and every point left out is dominated by, or equal to, a frontier point
    on_front = set(zip(front.avg_cost, front.avg_quality, strict=True))
    for p in curve.itertuples():
        if (p.avg_cost, p.avg_quality) not in on_front:
            assert dominated(p, front)
    assert np.all(np.diff(front.avg_cost) > 0) and np.all(np.diff(front.avg_quality) > 0)


def test_gsm8k_metrics_match_an_independent_computation(gsm8k):
    curve = cascade.sweep(gsm8k.confidence, gsm8k.small_quality, gsm8k.large_quality, 1.0, 8.0)
    m = cascade.routing_metrics(curve)
    weak, strong = 842 / 1319, 1130 / 1319
    x, acc = curve.escalation_rate.to_numpy(), curve.avg_quality.to_numpy()
    # RouteLLM's evaluate.py: APGR = (AUC - weak AUC) / (strong AUC - weak AUC), trapezoids over x.
    auc = np.trapezoid(acc, x)
    assert m.apgr == pytest.approx((auc - weak) / (strong - weak), abs=1e-12)
    # CPT by a plain loop over segments: first segment reaching the target, interpolated.
    for target, got in ((0.5, m.cpt50), (0.8, m.cpt80)):
        goal = weak + target * (strong - weak)
        for i in range(len(x)):
            if acc[i] >= goal - 1e-12:
                want = x[i] if i == 0 else x[i - 1] + (goal - acc[i - 1]) / (acc[i] - acc[i - 1]) * (x[i] - x[i - 1])
                break
        assert got == pytest.approx(want, abs=1e-12)
    # Pinned: the text-only confidence proxy beats random routing (APGR 0.5), modestly.
    assert m.apgr == pytest.approx(0.648, abs=5e-4)
    assert (m.cpt50, m.cpt80) == (pytest.approx(0.2161, abs=5e-4), pytest.approx(0.705, abs=5e-4))


def test_gsm8k_oracle_beats_the_cascade(gsm8k):
    b = cascade.baselines(gsm8k.small_quality, gsm8k.large_quality, 1.0, 8.0)
    assert b.oracle_cascade.large_call_rate == pytest.approx(383 / 1319)  # Mixtral wrong, GPT-4 right
    assert b.oracle_cascade.avg_quality == pytest.approx((842 + 383) / 1319)
    curve = cascade.sweep(gsm8k.confidence, gsm8k.small_quality, gsm8k.large_quality, 1.0, 8.0)
    assert curve.avg_quality.max() < b.oracle_cascade.avg_quality


def test_gsm8k_cheapest_meeting_is_on_the_frontier(gsm8k):
    curve = cascade.sweep(gsm8k.confidence, gsm8k.small_quality, gsm8k.large_quality, 1.0, 8.0)
    choice = cascade.cheapest_meeting(curve, 0.80)
    assert choice.avg_quality >= 0.80
    assert choice.avg_cost == curve[curve.avg_quality >= 0.80].avg_cost.min()
    assert choice.avg_cost in set(cascade.pareto_frontier(curve).avg_cost)
    assert cascade.cheapest_meeting(curve, 0.90) is None  # above GPT-4's 85.7%: cannot be met


@pytest.mark.skipif(not GSM8K_SOURCE.exists(), reason="needs ../shared/realdata (not in a clean clone)")
def test_committed_confidence_matches_the_derivation_from_source():
    src = pd.read_csv(GSM8K_SOURCE)
    committed = pd.read_csv(GSM8K)
    assert_array_equal(committed.confidence,
                       cascade.routellm_confidence(src["mistralai/Mixtral-8x7B-Instruct-v0.1_response"]))
    assert_array_equal(committed.mixtral_correct, src["mistralai/Mixtral-8x7B-Instruct-v0.1"].astype(int))


def test_routellm_confidence_features():
    f = cascade.confidence_features(["x = <<2*3=6>>6\n#### 6\n\n", "it costs $<<4*1", "However, #### 7",
                                     "#### $1,200.50", None])
    assert f.final_answer.tolist() == [True, False, False, True, False]   # "####" must open the last line
    assert f.hedged.tolist() == [False, False, True, False, False]
    conf = cascade.routellm_confidence(["#### 6", "x" * 2000 + "\n#### 6", "no answer"])
    assert_allclose(conf, [0.5 + 0.2 + 0.3 * (1 - 6 / 1000), 0.5 + 0.2, 0.2 + 0.3 * (1 - 9 / 1000)])


# ---------------------------------------------------------------------------------------
# parametric mode: the seed's table
# ---------------------------------------------------------------------------------------
def test_parametric_reproduces_the_seed_table():
    curve = cascade.parametric_curve(cascade.example_table(), 1.0, 8.0)   # $ per 1,000 queries
    by_tau = curve.set_index("threshold")
    assert_allclose(by_tau.loc[[0.95, 0.80, 0.65], "avg_cost"], [5.8, 3.4, 1.96])
    table = cascade.marginal_table(curve)
    assert_allclose(table.threshold, [0.95, 0.80, 0.65])
    assert np.isnan(table.marginal_cost_per_point.iloc[0])               # the seed's "-"
    assert_allclose(table.marginal_cost_per_point.iloc[1:], [0.8, 1.44 / 5])   # 0.8 and ~0.29 $/pt


def test_parametric_choice_is_3_4_not_the_seeds_3_1_typo():
    point = cascade.cheapest_meeting(cascade.parametric_curve(cascade.example_table()), 0.90)
    assert point.threshold == 0.80 and point.avg_cost == pytest.approx(3.4)


def test_parametric_edited_table_and_its_checks():
    table = cascade.example_table()
    table.loc[len(table)] = [0.5, 0.0, 0.80]
    table.loc[len(table)] = [1.01, 1.0, 0.97]
    rep = cascade.analyse_curve(cascade.parametric_curve(table, 1.0, 8.0))
    assert rep.metrics.quality_small == 0.80 and rep.metrics.quality_large == 0.97
    assert rep.metrics.apgr is not None
    bad = cascade.example_table()
    bad.loc[0, "escalation_rate"] = 60          # a percentage, not a share
    with pytest.raises(InputError, match="row 1.*escalation_rate.*outside 0..1"):
        cascade.parametric_curve(bad)
    bad = cascade.example_table()
    bad.loc[0, "escalation_rate"] = 0.05        # tau 0.95 escalating less than tau 0.80
    with pytest.raises(InputError, match="falls as tau rises"):
        cascade.parametric_curve(bad)


def test_parametric_metrics_with_explicit_ends():
    m = cascade.routing_metrics(cascade.parametric_curve(cascade.example_table()),
                                quality_small=0.80, quality_large=0.96)
    # points (r, PGR): (0,0) (.12,.5) (.3,.8125) (.6,1) (1,1)
    want_apgr = (.12 * .25 + .18 * (.5 + .8125) / 2 + .3 * (.8125 + 1) / 2 + .4 * 1)
    assert_allclose([m.apgr, m.cpt50, m.cpt80], [want_apgr, 0.12, 0.12 + .18 * (.3 / .3125)])


# ---------------------------------------------------------------------------------------
# hull, choice, degenerate inputs
# ---------------------------------------------------------------------------------------
def test_upper_hull_is_concave_subset_of_frontier(gsm8k):
    curve = cascade.sweep(gsm8k.confidence, gsm8k.small_quality, gsm8k.large_quality, 1.0, 8.0)
    hull, front = cascade.upper_hull(curve), cascade.pareto_frontier(curve)
    assert set(hull.avg_cost) <= set(front.avg_cost)
    assert hull.avg_cost.iloc[0] == front.avg_cost.iloc[0] and hull.avg_cost.iloc[-1] == front.avg_cost.iloc[-1]
    slopes = np.diff(hull.avg_quality) / np.diff(hull.avg_cost)
    assert np.all(np.diff(slopes) < 0)
    # no frontier point lies above the hull
    assert np.all(np.interp(front.avg_cost, hull.avg_cost, hull.avg_quality) >= front.avg_quality - 1e-12)


def test_cheapest_meeting_floor_exactly_met_and_unreachable():
    curve = cascade.sweep(**TINY)
    assert cascade.cheapest_meeting(curve, 0.75).avg_cost == 3.0
    assert cascade.cheapest_meeting(curve, 0.5).avg_cost == 1.0
    assert cascade.cheapest_meeting(curve, 0.76) is None
    with pytest.raises(InputError, match="quality floor"):
        cascade.cheapest_meeting(curve, float("nan"))


def test_single_query_and_constant_confidence():
    curve = cascade.sweep([0.5], [0], [1], 1.0, 8.0)
    assert_allclose(curve[["escalation_rate", "avg_cost", "avg_quality"]], [[0, 1, 0], [1, 9, 1]])
    curve = cascade.sweep([0.7] * 5, [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], 1.0, 8.0)
    assert len(curve) == 2


def test_no_gap_to_recover_is_an_answer_not_a_crash():
    m = cascade.routing_metrics(cascade.sweep([0.1, 0.9], [1, 0], [0, 1], 1.0, 8.0))
    assert m.apgr is None and m.cpt50 is None and "no gap" in m.note
    m = cascade.routing_metrics(cascade.sweep([0.1, 0.9], [1, 1], [0, 1], 1.0, 8.0))
    assert m.apgr is None and "not better" in m.note


def test_negative_zero_groups_with_zero():
    curve = cascade.sweep([0.0, -0.0, 1.0], [1, 0, 1], [0, 1, 1], 1.0, 1.0, method="hash")
    assert len(curve) == 3


@pytest.mark.parametrize("kwargs, match", [
    (dict(confidence=[]), "no queries"),
    (dict(confidence=[0.1, np.nan, 0.3, 0.4]), "position 1 is not a finite number"),
    (dict(small_quality=[1, 0]), "has 2 values but confidence has 4"),
    (dict(cost_large=-1.0), "cost >= 0"),
    (dict(cost_small=[1, 1, -1, 1]), "position 2 is negative"),
    (dict(cost_small="cheap"), "is not a number"),
])
def test_bad_sweep_input_raises_input_error(kwargs, match):
    with pytest.raises(InputError, match=match):
        cascade.sweep(**{**TINY, **kwargs})


# ---------------------------------------------------------------------------------------
# invariants
# ---------------------------------------------------------------------------------------
@st.composite
def eval_sets(draw):
    n = draw(st.integers(1, 60))
    levels = draw(st.integers(1, 12))               # few levels -> many ties
    conf = draw(st.lists(st.integers(0, levels), min_size=n, max_size=n))
    qs = draw(st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=n, max_size=n))
    ql = draw(st.lists(st.sampled_from([0.0, 1.0, 0.25]), min_size=n, max_size=n))
    per_query = draw(st.booleans())
    costs = st.floats(0, 10, allow_nan=False)
    cs = draw(st.lists(costs, min_size=n, max_size=n)) if per_query else draw(costs)
    cl = draw(st.lists(costs, min_size=n, max_size=n)) if per_query else draw(costs)
    return np.asarray(conf, float) / levels, qs, ql, cs, cl


@settings(max_examples=150, deadline=None)
@given(eval_sets())
def test_sweep_invariants(data):
    curve = cascade.sweep(*data)
    rate, cost = curve.escalation_rate.to_numpy(), curve.avg_cost.to_numpy()
    assert np.all(np.diff(curve.threshold) > 0)
    assert np.all(np.diff(rate) > 0)                          # rate rises strictly with tau
    assert np.all(np.diff(cost) >= -1e-12)                    # cost never falls (costs >= 0)
    assert rate[0] == 0 and rate[-1] == 1
    assert_allclose(curve.avg_quality.iloc[[0, -1]], [np.mean(data[1]), np.mean(data[2])])
    ref = cascade.sweep_reference(*data)
    assert_allclose(curve[["escalation_rate", "avg_cost", "avg_quality"]],
                    ref[["escalation_rate", "avg_cost", "avg_quality"]], rtol=1e-12, atol=1e-12)
    assert_allclose(cascade.sweep(*data, method="hash"), cascade.sweep(*data, method="sort"),
                    rtol=1e-12, atol=1e-12)
    front = cascade.pareto_frontier(curve)
    assert not any(dominated(p, curve) for p in front.itertuples())
    m = cascade.routing_metrics(curve)
    if m.cpt50 is not None:
        assert 0 <= m.cpt50 <= m.cpt80 <= 1
