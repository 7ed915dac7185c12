"""Streamlit glue shared by the pages: the store connection, cached queries, the current filters.

Pages import from here and from ``finops``; they hold no SQL and no maths.
"""
from __future__ import annotations

import importlib
import os

import streamlit as st

from finops import store
from finops.filters import Filters
from finops.ui_support import data_version


@st.cache_resource(show_spinner=False)
def _connection(path: str):
    return store.connect(path)


def store_path() -> str:
    return store.resolve_path(os.environ.get("FINOPS_DB") or None)


def connection():
    """The process's one connection to the store (a cursor per use is taken by ``cursor``)."""
    return _connection(store_path())


def cursor():
    return connection().cursor()


@st.cache_data(show_spinner=False, max_entries=512)
def _call(path: str, version: tuple, fn: str, args: tuple, kwargs: tuple):
    module, name = fn.rsplit(".", 1)
    func = getattr(importlib.import_module(module), name)
    return func(_connection(path).cursor(), *args, **dict(kwargs))


def query(fn: str, *args, **kwargs):
    """Call ``finops.<module>.<function>(con, *args, **kwargs)`` through the cache.

    The cache key includes the store's data version, so a load, a deletion or a
    price edit shows at once.
    """
    con = connection()
    return _call(store_path(), data_version(con.cursor()), fn, args, tuple(sorted(kwargs.items())))


def current_filters() -> Filters:
    """The sidebar's filters (set by app.py)."""
    return st.session_state.get("_filters", Filters())


def filter_caption(f: Filters) -> str:
    parts = []
    if f.since and f.until:
        parts.append(f"{f.since:%Y-%m-%d} to {(f.until.date()):%Y-%m-%d} (exclusive), UTC")
    for label, values in (("tenants", f.tenants), ("models", f.models), ("tiers", f.sla_tiers)):
        if values:
            parts.append(f"{label}: {', '.join(values)}")
    return " · ".join(parts) or "all data"


def empty_state(message: str = "No requests match these filters.") -> None:
    st.info(message + " Widen the date range or clear the sidebar filters, or load logs on the Data page.")


def source_label() -> str:
    """Where the numbers come from, for captions under charts."""
    return f"Source: request logs in store `{os.path.basename(store_path())}`"
