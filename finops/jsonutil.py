"""Values as JSON-ready Python: what the CLI prints, the settings table stores and ``as_dict`` returns.

:func:`jsonable` turns numpy scalars and arrays, pandas timestamps and missing values into plain
JSON values (``inf``, NaN, NaT and NA become ``None``, so ``json.dumps(..., allow_nan=False)``
holds); :func:`records` does it for a DataFrame's rows.
"""
from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pandas as pd

__all__ = ["jsonable", "records"]


def jsonable(value):
    """``value`` as JSON-ready Python: dicts and sequences recursively, numpy scalars and arrays as
    Python numbers and lists, timestamps as ISO text, NaN/inf/NaT/NA as ``None``.

    >>> jsonable({"p99_s": np.array([1.5, np.inf]), "n": np.int64(3), "at": pd.Timestamp("2026-01-01 10:00"),
    ...           "gap": pd.NaT, "ok": np.bool_(True), "tiers": ("premium", None)})
    {'p99_s': [1.5, None], 'n': 3, 'at': '2026-01-01T10:00:00', 'gap': None, 'ok': True, 'tiers': ['premium', None]}
    """
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NaT or (not isinstance(value, str | bytes) and pd.api.types.is_scalar(value) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp | datetime):
        return value.isoformat()
    return value


def records(frame: pd.DataFrame) -> list[dict]:
    """A DataFrame as a list of JSON-ready dicts, one per row."""
    return [jsonable(r) for r in frame.to_dict(orient="records")]
