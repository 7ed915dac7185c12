"""One costing per page run (``finops.spend.report.shared_costing``): every spend figure computed inside the block
equals the same figure computed without it, on the sample fleet under several filters and two idle policies (a
period cut to tenants, models or tiers reads the period's costing, its usage rows kept to those); the block
costs a period once; a write inside it (a new data version) is seen at once; a result over the row cap is not
kept."""
from __future__ import annotations

import dataclasses
import shutil
from dataclasses import replace
from datetime import datetime, timedelta

import pandas as pd
import pytest

from finops import store
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.ops import alerts, incidents
from finops.spend import budgets, costviews, pricing, routing
from finops.spend import report as spend
from helpers import spend_frame

USAGE = pricing.IdlePolicy("usage")        # idle GPU time charged out to the tenants by their busy time


@pytest.fixture(scope="module")
def con(demo_db, tmp_path_factory):
    path = tmp_path_factory.mktemp("shared") / "demo.duckdb"
    shutil.copy(demo_db, path)
    c = store.connect(str(path))
    yield c
    c.close()


def _filters(con) -> dict[str, Filters]:
    lo, hi = store.time_span(con)
    day = datetime(hi.year, hi.month, hi.day)
    return {
        "seven whole days": Filters(since=day - timedelta(days=6), until=day + timedelta(days=1)),
        "mid-hour start": Filters(since=day - timedelta(days=2, minutes=-17), until=day + timedelta(days=1)),
        "one tenant": Filters(since=day - timedelta(days=6), tenants=(store.distinct_values(con, "tenant")[0],)),
        "one model": Filters(models=(store.distinct_values(con, "model")[0],)),
        "a tier, two tenants, a model": Filters(since=day - timedelta(days=3), sla_tiers=("premium",),
                                                tenants=tuple(store.distinct_values(con, "tenant")[:2]),
                                                models=tuple(store.distinct_values(con, "model")[:3])),
        "one tier": Filters(sla_tiers=("batch",)),
        "everything": Filters(),
    }


def _or_refusal(figure):
    try:
        return figure()
    except InputError as exc:
        return f"refused: {exc}"


def _figures(con, f: Filters) -> dict:
    """The spend figures of the pages that read ``costed`` (the Overview, Cost, Routing, Budgets, Incidents)."""
    c = con.cursor()
    return {
        "report by model": spend.report(c, f, by=["model"]),
        "report by day, tenant": spend.report(c, f, by=["day", "tenant"]),
        "report, requests only": spend.report(c, f, by=["tenant"], include_idle=False),
        "report, idle charged by usage": spend.report(c, f, by=["tenant", "model"], idle_policy=USAGE),
        "showback, idle charged by usage": costviews.showback(c, f, idle_policy=USAGE),
        "unit costs": spend.unit_costs(c, f),
        "kpis with change": costviews.kpis_with_change(c, f, p99=False),
        "kpi trends": costviews.kpi_trends(c, f, p99=False),
        "spend over time": costviews.spend_over_time(c, f),
        "top tenants": costviews.top_tenants(c, f, 8),
        "showback": costviews.showback(c, f),
        "token mix": costviews.token_mix(c, f),
        "mix by route": routing.mix(c, f, "route"),
        "cache savings": routing.cache_savings(c, f),
        "cascade summary": routing.cascade_summary(c, f),
        "what-if, per tier": _or_refusal(lambda: routing.whatif(c, f, "per-tier")),   # needs a small and a large
        "budget status": budgets.status(c, (f.since or datetime(2026, 11, 20)).strftime("%Y-%m"), f,
                                        as_of=datetime(2026, 11, 24)),
        "open alerts": alerts.open_alerts(c, f, now=datetime(2030, 1, 1)),
        "incidents": incidents.summary(c, f),
    }


def _equal(a, b, what: str) -> None:
    """Equal, floats to 1e-9 relative: a latency mean over raw rows sums doubles in DuckDB's thread order, which
    differs run to run with or without the block (money is DECIMAL until the last step, and equal either way)."""
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, obj=what, check_exact=False, rtol=1e-9)
    elif dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            _equal(getattr(a, field.name), getattr(b, field.name), f"{what}.{field.name}")
    elif isinstance(a, dict | list | tuple) and any(isinstance(v, pd.DataFrame) for v in
                                                    (a.values() if isinstance(a, dict) else a)):
        for k, v in (a.items() if isinstance(a, dict) else enumerate(a)):
            _equal(v, b[k], f"{what}[{k}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9), what
    else:
        assert a == b, what


def test_every_spend_figure_is_the_same_inside_the_block(con):
    for name, f in _filters(con).items():
        alone = _figures(con, f)
        with spend.shared_costing():
            shared = _figures(con, f)
        for what, value in alone.items():
            _equal(value, shared[what], f"{name}: {what}")


def test_a_period_is_costed_once_and_reread(con):
    f = _filters(con)["seven whole days"]
    with spend.shared_costing():
        memo = spend._shared_rows.get()
        spend.report(con.cursor(), f, by=["model"])
        assert len(memo) == 1
        first = next(iter(memo.values()))
        spend.report(con.cursor(), f, by=["tenant"])
        spend.report(con.cursor(), f, by=["model"], include_idle=False)   # the same rows, idle left out after
        assert len(memo) == 1 and next(iter(memo.values())) is first
        spend.report(con.cursor(), Filters(since=f.since - timedelta(days=1), until=f.until), by=["model"])
        assert len(memo) == 2
        spend.report(con.cursor(), replace(f, tenants=(store.distinct_values(con, "tenant")[0],)), by=["model"])
        assert len(memo) == 2                                               # a tenant's: the period's rows
    assert spend._shared_rows.get() is None                                 # dropped with the block


def test_a_write_inside_the_block_is_seen_at_once(tmp_path, demo_db):
    path = tmp_path / "w.duckdb"
    shutil.copy(demo_db, path)
    c = store.connect(str(path))
    lo, hi = store.time_span(c)
    f = Filters(since=datetime(hi.year, hi.month, hi.day), until=datetime(hi.year, hi.month, hi.day) + timedelta(days=1))
    with spend.shared_costing():
        before = spend.report(c.cursor(), f, by=())
        ingest_frame(c, spend_frame([("shared-1", datetime(hi.year, hi.month, hi.day, 1, 30), "acme", "premium",
                                      "gpt-4o", 1000, 100, 0, 50.0, 300.0, 0.25, False, "ok", None, None)]))
        after = spend.report(c.cursor(), f, by=())
    assert int(after["requests"].iloc[0]) == int(before["requests"].iloc[0]) + 1
    # the recorded $0.25 of the new request, exactly (costs are DECIMAL)
    assert float(after["cost_usd"].iloc[0]) == pytest.approx(float(before["cost_usd"].iloc[0]) + 0.25, abs=1e-9)
    pd.testing.assert_frame_equal(after, spend.report(c.cursor(), f, by=()))
    c.close()


def test_rows_over_the_cap_are_used_once_not_kept(con, monkeypatch):
    monkeypatch.setattr(spend, "SHARED_COSTING_MAX_ROWS", 10)
    f = _filters(con)["seven whole days"]
    alone = spend.report(con.cursor(), f, by=["model"])
    with spend.shared_costing():
        shared = spend.report(con.cursor(), f, by=["model"])
        assert spend._shared_rows.get() == {}
    pd.testing.assert_frame_equal(alone, shared)
