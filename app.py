"""finops dashboard: the only router. Navigation, the shared sidebar filters, nothing else."""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from finops import store
from finops.filters import filters_for
from finops.ingest.loader import stored_span
from finops.sample import demo
from views import PAGES, missing_pages
from views._shared import FOLLOW_KEY, connection, follow_status, query, store_label, store_path

st.set_page_config(page_title="finops · LLM fleet FinOps", page_icon=":material/payments:", layout="wide")

ROOT = Path(__file__).resolve().parent


def _first_start() -> None:
    """Build the sample fleet the first time the default store is opened empty."""
    path = store_path()
    auto = os.environ.get("FINOPS_DEMO", "1" if path == str(store.DEFAULT_DB) else "0") == "1"
    if not auto or store.row_count(connection().cursor()) > 0:
        return
    bar = st.progress(0.0, text="First start: building the sample fleet store")
    demo.build_demo(connection().cursor(), progress=lambda f, what: bar.progress(min(f, 1.0), text=what))
    bar.empty()


def _sidebar():
    con = connection().cursor()
    span = query(stored_span)
    lo, hi = span.first, span.last
    rows = store.row_count(con)
    w_lo, w_hi = span.window
    with st.sidebar:
        counted = (f"{query(store.rollup_requests):,} requests in attached rollups (no raw rows)"
                   if not rows and query(store.rollup_only) else f"{rows:,} requests")
        st.caption(f"Store: `{store_label()}`  \n{counted}"
                   + (f", {lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M} UTC" if lo else " (empty)" if not rows else ""))
        if span.outside:
            st.caption(f":orange[{span.outside:,} request{'s' if span.outside != 1 else ''} outside "
                       f"{w_lo:%Y-%m-%d} to {w_hi:%Y-%m-%d}] are not shown on any page: delete their batch on "
                       "the Data page (its time span says which).")
        first = lo.date() if lo else None
        last = hi.date() if hi else None
        start = st.date_input("From", value=first, min_value=first, max_value=last, key="from",
                              bind="query-params", disabled=lo is None)
        end = st.date_input("To", value=last, min_value=first, max_value=last, key="to",
                            bind="query-params", disabled=lo is None)
        if start and end and start > end:
            st.warning("'From' is after 'To': showing the single day 'From'.")
            end = start
        if lo is None and rows:
            # every stored request lies outside the window: the period is the window, which holds none
            start, end = w_lo.date(), w_hi.date()
        tenants = st.multiselect("Tenants", query(store.distinct_values, "tenant"), key="tenant",
                                 bind="query-params", placeholder="all tenants")
        models = st.multiselect("Models", query(store.distinct_values, "model"), key="model",
                                bind="query-params", placeholder="all models")
        tiers = st.multiselect("SLA tiers", query(store.distinct_values, "sla_tier"), key="tier",
                               bind="query-params", placeholder="all tiers")
        if st.session_state.get(FOLLOW_KEY):
            follow_status()
    st.session_state["_filters"] = filters_for(start, end, tenants, models, tiers)


missing = missing_pages()
if missing:
    raise RuntimeError(f"app.py: page files declared in views.PAGES are missing: {', '.join(missing)}")
pages = [st.Page(str(ROOT / p.file), title=p.title, icon=p.icon, default=(n == 0)) for n, p in enumerate(PAGES)]
page = st.navigation(pages)      # first, so the menu is ours even while the sample store is built
_first_start()
_sidebar()
page.run()
