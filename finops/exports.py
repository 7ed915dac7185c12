"""Exports: CSV that spreadsheets cannot execute, Parquet, and a FOCUS-shaped CSV."""
from __future__ import annotations

import io

import pandas as pd

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    """Prefix a quote to text cells that a spreadsheet would run as a formula.

    >>> neutralise("=HYPERLINK(1)"), neutralise("-3 apples"), neutralise(-3), neutralise("acme")
    ("'=HYPERLINK(1)", "'-3 apples", -3, 'acme')
    """
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def safe_csv(frame: pd.DataFrame) -> str:
    """CSV text of ``frame`` with formula-like text cells neutralised (numbers are left as numbers)."""
    out = frame.copy()
    for c in out.columns:
        if out[c].dtype == object or pd.api.types.is_string_dtype(out[c]):
            out[c] = out[c].map(neutralise)
    out.columns = [neutralise(str(c)) for c in out.columns]
    buf = io.StringIO()
    out.to_csv(buf, index=False)
    return buf.getvalue()
