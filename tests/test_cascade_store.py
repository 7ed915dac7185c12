"""finops.cascade.shadow: shadow evaluation read from the store, quality floors, the curve as shown (uploads: test_uploads)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from finops import store
from finops.cascade import shadow as cascade_store
from finops.cascade import sweep as cascade
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame

DATA = Path(__file__).resolve().parent / "data"
T0 = pd.Timestamp("2026-11-20 10:00:00")
NASTY = "o'brien; drop table requests"


def _row(request_id: str, minute: float, **kw) -> dict:
    row = dict(request_id=request_id, ts=T0 + pd.Timedelta(minutes=minute), tenant="acme", model="gpt-4o-mini",
               strategy="cascade", escalated=False, cache_hit=False, input_tokens=None, output_tokens=None,
               cached_input_tokens=None, confidence=None, quality=None, cost_usd=None, attrs=None)
    row.update(kw)
    if isinstance(row["attrs"], dict):
        row["attrs"] = json.dumps(row["attrs"])
    return row


def _store(rows: list[dict]):
    con = store.connect(":memory:")
    ingest_frame(con, pd.DataFrame(rows))
    return con


# Hand-made shadow evaluation on gpt-4o-mini -> gpt-4o (book: mini 0.15 / 0.60 / cached 0.075 $ per 1M,
# 4o 2.50 / 10.00 / cached 1.25 $ per 1M).
#
# query  conf  small  large (from)                        small cost            large cost
#  q1    0.9     1    1 (attrs.shadow_large_quality)      1000 in, 100 out      q1's tokens on gpt-4o (estimate)
#  q2    0.3     0    1 (answer a2; q2 points at it)      2000 in, 50 out       a2: 2000 in (500 cached), 200 out
#  q3    0.6     1    0 (answer a3 points at q3; it       recorded 0.01 $       a3 recorded 0.02 $
#                        wins over attrs.large_quality)
#  q4    0.5     0    - (no large label: left out)
#  q5    0.99    1    - cache hit: not a query
#  q6    -       1    - a direct large call: no confidence, not a query
HAND = [
    _row("q1", 0, confidence=0.9, quality=1.0, input_tokens=1000, output_tokens=100,
         attrs={"shadow_large_quality": 1.0}),
    _row("q2#attempt", 1, confidence=0.3, quality=0.0, escalated=True, input_tokens=2000, output_tokens=50,
         attrs={"parent_id": "q2"}),
    _row("q2", 1.1, model="gpt-4o", quality=1.0, input_tokens=2000, cached_input_tokens=500, output_tokens=200),
    _row("q3", 2, tenant="beta", confidence=0.6, quality=1.0, escalated=True, cost_usd=0.01,
         attrs={"large_quality": 1.0}),
    _row("a3", 2.1, tenant="beta", model="gpt-4o", quality=0.0, cost_usd=0.02, attrs={"parent_id": "q3"}),
    _row("q4", 3, tenant="beta", confidence=0.5, quality=0.0, input_tokens=10, output_tokens=10),
    _row("q5", 4, confidence=0.99, quality=1.0, cache_hit=True),
    _row("q6", 5, model="gpt-4o", quality=1.0, input_tokens=5, output_tokens=5),
]


@pytest.fixture()
def hand():
    con = _store(HAND)
    yield con
    con.close()


def test_hand_store_per_query_arrays(hand):
    s = cascade_store.shadow_eval(hand)
    assert s.status == "ok"
    assert (s.n_attempts, s.n_small_labelled, s.n_large_labelled, s.n_complete) == (4, 4, 3, 3)
    d = s.eval_data()
    assert_array_equal(d.confidence, [0.9, 0.3, 0.6])
    assert_array_equal(d.small_quality, [1, 0, 1])
    assert_array_equal(d.large_quality, [1, 1, 0])
    done = s.complete()
    assert done["request_id"].tolist() == ["q1", "q2#attempt", "q3"]
    assert done["large_model"].tolist() == ["gpt-4o"] * 3      # q1: the model that answers mini's escalations
    assert done["large_quality_source"].tolist() == [cascade_store.SHADOW_ATTR, cascade_store.LINKED,
                                                     cascade_store.LINKED]
    assert s.large_label_sources == {cascade_store.LINKED: 2, cascade_store.SHADOW_ATTR: 1}
    assert not s.only_escalated


def test_hand_store_costs_by_hand(hand):
    d = cascade_store.shadow_eval(hand).eval_data()
    small = [(1000 * 0.15 + 100 * 0.60) / 1e6, (2000 * 0.15 + 50 * 0.60) / 1e6, 0.01]
    large = [(1000 * 2.50 + 100 * 10.0) / 1e6, (1500 * 2.50 + 500 * 1.25 + 200 * 10.0) / 1e6, 0.02]
    assert_allclose(d.cost_small, np.array(small) * 1000)       # $ per 1,000 queries
    assert_allclose(d.cost_large, np.array(large) * 1000)


def test_hand_store_sweep_matches_the_reference(hand):
    d = cascade_store.shadow_eval(hand).eval_data()
    fast = cascade.sweep(d.confidence, d.small_quality, d.large_quality, d.cost_small, d.cost_large)
    slow = cascade.sweep_reference(d.confidence, d.small_quality, d.large_quality, d.cost_small, d.cost_large)
    assert_allclose(fast.to_numpy(), slow.to_numpy())


def test_filters_select_attempts_and_pairs(hand):
    beta = cascade_store.shadow_eval(hand, Filters(tenants=("beta",)))
    assert beta.complete()["request_id"].tolist() == ["q3"]
    assert beta.n_attempts == 2
    by_large = cascade_store.shadow_eval(hand, Filters(models=("gpt-4o",)))
    assert by_large.n_complete == 3                              # the pair's large model selects it
    assert cascade_store.shadow_eval(hand, Filters(models=("llama-3.1-8b",))).status == "no_confidence"
    assert cascade_store.shadow_eval(hand).pairs().to_dict("records") == [
        {"small_model": "gpt-4o-mini", "large_model": "gpt-4o", "queries": 3}]


def test_empty_store_says_so(empty_db):
    con = store.connect(empty_db)
    s = cascade_store.shadow_eval(con)
    assert s.status == "no_confidence" and s.eval_data() is None and s.n_attempts == 0
    assert "confidence" in s.message
    con.close()


def test_store_without_large_labels_says_so():
    con = _store([_row("a", 0, confidence=0.7, quality=1.0), _row("b", 1, confidence=0.2, quality=0.0)])
    s = cascade_store.shadow_eval(con)
    assert s.status == "no_large_labels" and s.eval_data() is None
    assert "lacks large-model labels" in s.message


def test_store_without_any_label_says_so():
    s = cascade_store.shadow_eval(_store([_row("a", 0, confidence=0.7)]))
    assert s.status == "no_small_labels" and s.n_attempts == 1


def test_only_escalated_labels_are_flagged():
    con = _store([_row("x#attempt", 0, confidence=0.4, quality=0.0, escalated=True, attrs={"parent_id": "x"}),
                  _row("x", 0.1, model="gpt-4o", quality=1.0)])
    s = cascade_store.shadow_eval(con)
    assert s.only_escalated and "only low-confidence queries" in s.message


def test_unpriced_model_leaves_costs_incomplete():
    con = _store([_row("a", 0, model="mystery-small", confidence=0.7, quality=1.0, input_tokens=10, output_tokens=5,
                       attrs={"large_quality": 1, "large_model": "mystery-large"})])
    s = cascade_store.shadow_eval(con)
    assert s.status == "ok" and not s.costs_complete
    assert s.unpriced_models == ("mystery-large", "mystery-small")
    d = s.eval_data()
    assert d.cost_small is None and d.cost_large is None
    assert s.complete()["large_model"].tolist() == ["mystery-large"]      # from attrs.large_model


def test_self_hosted_costs_an_effective_price_per_request():
    # llama-3.1-8b: 4 replicas x 1 GPU x 2.50 $/h = 10 $ for the one hour; 4 requests -> 2.50 $ each.
    # llama-3.1-70b: 3 x 4 x 2.50 = 30 $ for the hour; 1 request -> 30 $.
    rows = [_row(f"s{i}", i, model="llama-3.1-8b", confidence=0.2 * i, quality=1.0, service_ms=100.0,
                 attrs={"shadow_large_quality": 1.0}) for i in range(1, 4)]
    rows[0].update(escalated=True, attrs=json.dumps({"parent_id": "big"}))
    rows.append(_row("big", 1.5, model="llama-3.1-70b", quality=0.0, service_ms=900.0))
    rows.append(_row("other", 6, model="llama-3.1-8b", service_ms=100.0))
    con = _store(rows)
    assert cascade_store.effective_request_prices(con, Filters()) == pytest.approx(
        {"llama-3.1-8b": 2.5, "llama-3.1-70b": 30.0})
    d = cascade_store.shadow_eval(con).eval_data()
    assert_allclose(d.cost_small, [2_500.0] * 3)
    assert_allclose(d.cost_large, [30_000.0] * 3)
    assert_array_equal(d.large_quality, [0.0, 1.0, 1.0])


# ---------------------------------------------------------------------------------------- floors
def test_floors_round_trip_with_a_hostile_tenant_name(hand):
    assert cascade_store.quality_floors(hand) == {}
    cascade_store.save_quality_floors(hand, {"premium": 0.95, NASTY: 0.9})
    assert cascade_store.quality_floors(hand) == {NASTY: 0.9, "premium": 0.95}
    cascade_store.set_quality_floor(hand, "standard", 0.85)
    cascade_store.set_quality_floor(hand, "premium", None)
    assert cascade_store.quality_floors(hand) == {NASTY: 0.9, "standard": 0.85}
    assert cascade_store.shadow_eval(hand).n_complete == 3          # requests untouched


def test_floors_persist_in_the_store_file(tmp_path):
    path = str(tmp_path / "floors.duckdb")
    con = store.connect(path)
    cascade_store.save_quality_floors(con, {"premium": 0.95})
    con.close()
    con = store.connect(path)
    assert cascade_store.quality_floors(con) == {"premium": 0.95}
    con.close()


def test_floors_table_in_percent(hand):
    cascade_store.save_quality_floors(hand, {"premium": 0.95})
    table = cascade_store.floors_table(hand, ["acme", "beta"])
    assert table["tenant"].tolist() == ["acme", "beta", "premium"]
    assert table["floor_pct"].iloc[2] == pytest.approx(95.0) and table["floor_pct"].iloc[:2].isna().all()
    table.loc[0, "floor_pct"] = 90.0
    table.loc[2, "floor_pct"] = np.nan                                # cleared
    assert cascade_store.save_floors_table(hand, table) == {"acme": 0.9}


@pytest.mark.parametrize("tenant, pct, match", [
    ("x", 101.0, "between 0 and 100"), ("", 90.0, "no tenant"), ("x", "lots", "not a number")])
def test_floors_table_rejects_bad_rows(hand, tenant, pct, match):
    table = pd.DataFrame({"tenant": [tenant], "floor_pct": pd.Series([pct], dtype=object)})
    with pytest.raises(InputError, match=match):
        cascade_store.save_floors_table(hand, table)
    assert cascade_store.quality_floors(hand) == {}


def test_floors_table_rejects_a_tenant_twice(hand):
    with pytest.raises(InputError, match="twice"):
        cascade_store.save_floors_table(hand, pd.DataFrame({"tenant": ["a", "a"], "floor_pct": [90.0, 80.0]}))


def test_floor_out_of_range_is_refused(hand):
    with pytest.raises(InputError, match="between 0 and 1"):
        cascade_store.save_quality_floors(hand, {"premium": 95})


def test_floor_choices_on_the_seed_table():
    curve = cascade.parametric_curve(cascade.example_table())
    out = cascade_store.floor_choices(curve, {"premium": 0.95, "standard": 0.90, "gold": 0.99})
    assert out["tenant"].tolist() == ["gold", "premium", "standard"]
    assert out["meets"].tolist() == [False, True, True]
    assert_allclose(out["avg_cost"].iloc[1:], [5.8, 3.4])
    assert_allclose(out["threshold"].iloc[1:], [0.95, 0.80])
    assert np.isnan(out["threshold"].iloc[0])


def test_floor_choices_use_a_tenants_own_curve():
    seed = cascade.parametric_curve(cascade.example_table())
    own = cascade.sweep([0.9, 0.1], [1, 0], [1, 1], 1.0, 8.0)      # one escalation reaches 100 %
    out = cascade_store.floor_choices(seed, {"a": 0.9, "b": 0.9}, {"a": own})
    assert out["curve"].tolist() == ["this tenant's queries", "all queries"]
    assert_allclose(out["avg_cost"], [5.0, 3.4])


def test_tenant_curves_need_enough_queries(hand):
    s = cascade_store.shadow_eval(hand)
    assert cascade_store.tenant_curves(s, 1.0, 8.0) == {}
    curves = cascade_store.tenant_curves(s, 1.0, 8.0, min_queries=2)
    assert list(curves) == ["acme"]
    assert_allclose(curves["acme"]["avg_cost"], [1.0, 5.0, 9.0])


# ---------------------------------------------------------------------------------------- page helpers
def test_slider_points_thin_long_curves_and_keep_the_choice():
    rng = np.random.default_rng(0)
    n = 5000
    curve = cascade.sweep(rng.random(n), rng.integers(0, 2, n), rng.integers(0, 2, n), 1.0, 8.0)
    keep = float(curve["threshold"].iloc[1234])
    pts = cascade_store.slider_points(curve, max_points=50, keep=[keep])
    assert len(pts) <= 52
    assert pts["threshold"].iloc[0] == curve["threshold"].iloc[0]
    assert pts["threshold"].iloc[-1] == curve["threshold"].iloc[-1]
    assert keep in pts["threshold"].tolist()
    assert pts["threshold"].is_monotonic_increasing


def test_seed_form_table_is_the_seeds():
    report = cascade.analyse_curve(cascade.parametric_curve(cascade.example_table()))
    table, which = cascade_store.example_form_table(report)
    assert_allclose(table["avg_cost"], [5.8, 3.4, 1.96])
    assert_allclose(table["marginal_cost_per_point"].iloc[1:], [0.8, 1.44 / 5])
    assert "3 Pareto-frontier points" in which


# ---------------------------------------------------------------------------------------- sample fleet
def test_sample_fleet_has_a_sweepable_shadow_evaluation(demo_db):
    con = store.connect(demo_db)       # read-write, as a page test in this process may hold it open already
    try:
        s = cascade_store.shadow_eval(con)
    finally:
        con.close()
    assert s.status == "ok" and s.costs_complete and not s.only_escalated
    assert set(s.large_label_sources) == {cascade_store.LINKED, cascade_store.SHADOW_ATTR}
    pairs = dict(zip(s.pairs()["small_model"], s.pairs()["large_model"], strict=True))
    assert pairs == {"gpt-4o-mini": "gpt-4o", "llama-3.1-8b": "llama-3.1-70b"}
    done = s.complete()
    # linked answers are exactly the escalated attempts; the large model beats the small one
    assert (done["escalated"].astype(bool) == (done["large_quality_source"] == cascade_store.LINKED)).all()
    assert done["large_quality"].mean() > done["small_quality"].mean()
    d = s.eval_data()
    report = cascade.analyse(d.confidence, d.small_quality, d.large_quality, d.cost_small, d.cost_large)
    assert 0.5 < report.metrics.apgr <= 1.0
