"""The bundled sample fleet: build a store from finops.sample.synth, once."""
from __future__ import annotations

from collections.abc import Callable

import duckdb

DEMO_DAYS = 14
DEMO_SEED = 7


def build_demo(con: duckdb.DuckDBPyConnection, days: int = DEMO_DAYS, seed: int = DEMO_SEED,
               progress: Callable[[float, str], None] | None = None) -> int:
    """Generate the sample fleet and load it (idempotent: the same seed adds nothing twice).

    Returns the number of rows ingested.
    """
    from finops.ingest import ingest_frame
    from finops.sample import synth

    step = progress or (lambda f, w: None)
    step(0.05, f"generating {days} days of sample fleet traffic (seed {seed})")
    frame = synth.generate(days=days, seed=seed)
    step(0.6, f"loading {len(frame):,} requests into the store")
    result = ingest_frame(con, frame, name=f"sample fleet: {days} days, seed {seed}", fmt="sample-fleet")
    step(1.0, "done")
    return result.rows_ingested
