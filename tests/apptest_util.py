"""Helpers for AppTest smoke tests: run app.py on a given store and switch to a page."""
from __future__ import annotations

import os
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def run_page(db_path: str, page: str | None = None, timeout: float = 120, query_params: dict | None = None):
    """AppTest of app.py on ``db_path``, switched to ``page`` (e.g. "views/cost.py")."""
    os.environ["FINOPS_DB"] = db_path
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in (query_params or {}).items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    return at


def texts(at) -> str:
    """All markdown, captions, titles, headers, info/warning text of a run, joined (for assertions)."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success"):
        parts.extend(str(getattr(e, "value", "")) for e in getattr(at, kind))
    return "\n".join(parts)
