"""The bundled sample fleet: build a store from finops.sample.synth, once."""
from __future__ import annotations

import math
from collections.abc import Callable

import duckdb
import pandas as pd

DEMO_DAYS = 14
DEMO_SEED = 7
#: the longest sample fleet built: its requests are generated in memory first (about 50 MB a day: 1.4 GB at 28
#: days), so a month at most, not whatever a number typed asks for
MAX_DEMO_DAYS = 31


def check_demo(days, seed) -> None:
    """Refuse a sample fleet's days outside 1 to MAX_DEMO_DAYS, or a seed numpy cannot take (InputError)."""
    from finops.errors import InputError

    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DEMO_DAYS:
        raise InputError(f"must be a whole number of days from 1 to {MAX_DEMO_DAYS}, got {days!r}", field="days")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise InputError(f"must be a whole number from 0 to {2**32 - 1:,}, got {seed!r}", field="seed")


def build_demo(con: duckdb.DuckDBPyConnection, days: int = DEMO_DAYS, seed: int = DEMO_SEED,
               progress: Callable[[float, str], None] | None = None) -> int:
    """Generate the sample fleet and load it (idempotent: the same seed adds nothing twice).

    Returns the number of rows ingested.
    """
    from finops.ingest import ingest_frame
    from finops.sample import synth

    check_demo(days, seed)
    step = progress or (lambda f, w: None)
    step(0.05, f"generating {days} days of sample fleet traffic (seed {seed})")
    frame = synth.generate(days=days, seed=seed)
    step(0.6, f"loading {len(frame):,} requests into the store")
    result = ingest_frame(con, frame, name=f"sample fleet: {days} days, seed {seed}", fmt="sample-fleet")
    step(0.95, "setting example budgets")
    sample_budgets(con)
    step(1.0, "done")
    return result.rows_ingested


def _round_between(lo: float, hi: float) -> float | None:
    """The roundest amount strictly between ``lo`` and ``hi`` (whole hundreds, tens, dollars, cents)."""
    mid = (lo + hi) / 2
    for step in (100.0, 10.0, 1.0, 0.01):
        v = round(mid / step) * step
        if lo < v < hi:
            return round(v, 2)
    return None


def sample_budgets(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, float]]:
    """Example monthly budgets for the sample fleet, set from its own forecasts so the Budgets page opens on
    something to look at: the tenant with the largest forecast over budget (budget 90 % of its forecast, in
    whole hundreds), the next at risk (a round budget between its forecast and the interval's upper end),
    every other tenant on track (120 % of the upper end). Months that already have budgets are left alone.
    The months set are kept in the settings (:data:`finops.spend.budgets.SAMPLE_KEY`), so the page can say
    the budgets are examples until someone saves their own. Returns month -> tenant -> budget_usd."""
    from finops.spend import budgets

    out: dict[str, dict[str, float]] = {}
    for month in budgets.months(con):
        if budgets.budget_table(con, month)["budget_usd"].notna().any():
            continue
        table = budgets.status(con, month).table.sort_values("forecast_usd", ascending=False, kind="stable")
        table = table[table["forecast_usd"] > 0]
        chosen: dict[str, float] = {}
        for i, r in enumerate(table.itertuples()):
            high = r.forecast_high_usd if not math.isnan(r.forecast_high_usd) else r.forecast_usd
            if i == 0:
                chosen[r.tenant] = math.floor(0.9 * r.forecast_usd / 100) * 100 or round(0.9 * r.forecast_usd, 2)
            elif i == 1 and (v := _round_between(r.forecast_usd, high)) is not None:
                chosen[r.tenant] = v
            else:
                chosen[r.tenant] = math.ceil(1.2 * high / 10) * 10
        if chosen:
            key = month.strftime("%Y-%m")
            budgets.save_budgets(con, month, pd.DataFrame({"tenant": list(chosen),
                                                                   "budget_usd": list(chosen.values())}),
                                 sample=True)
            out[key] = chosen
    return out
