"""finops dashboard: the only router. Navigation, the shared sidebar filters, nothing else."""
from __future__ import annotations

import atexit
import gc
import os
from dataclasses import replace
from datetime import datetime, time, timedelta
from pathlib import Path

import streamlit as st

from finops import access, store
from finops.errors import InputError
from finops.filters import filters_for
from finops.ingest.loader import stored_span
from finops.sample import demo
from finops.spend.report import shared_costing
from views import PAGES, missing_pages
from views._shared import (
    connection,
    ingester_status,
    live_sources,
    login_providers,
    page_run,
    plain,
    query,
    session_access,
    start_ingester,
    store_label,
    store_path,
    sweep_abandoned_uploads,
)

st.set_page_config(page_title="finops · LLM fleet FinOps", page_icon=":material/payments:", layout="wide")

ROOT = Path(__file__).resolve().parent


@st.cache_resource(show_spinner=False)
def _heap_frozen() -> bool:
    """Once per server process, after its first run: the objects alive then (the imported libraries, some
    180,000 of them) are moved out of the cycle collector's reach (``gc.freeze``), so that the full collection
    a rerun's allocations trigger no longer walks them (measured 83-92 ms a rerun on the Overview; 0 after).
    No collection first: it would add as much to the first page a visitor waits for; what of the first run
    is garbage then stays, once."""
    gc.freeze()
    atexit.register(gc.unfreeze)       # at exit they are collected as before (the extensions' finalisers run)
    return True


def _first_start() -> None:
    """Build the sample fleet the first time the default store is opened empty."""
    path = store_path()
    auto = os.environ.get("FINOPS_DEMO", "1" if path == str(store.DEFAULT_DB) else "0") == "1"
    if not auto or store.row_count(connection().cursor()) > 0:
        return
    bar = st.progress(0.0, text="First start: building the sample fleet store")
    with access.system():           # the dashboard's own write, whoever the first visitor is
        demo.build_demo(connection().cursor(), progress=lambda f, what: bar.progress(min(f, 1.0), text=what))
    bar.empty()


PRESETS = ("custom", "last 24 h", "last 7 days", "last 30 days", "this month", "last month")
FILTER_KEYS = (("tenant", "Tenants", "tenant"), ("model", "Models", "model"), ("tier", "SLA tiers", "sla_tier"))


def preset_range(preset: str, newest: datetime) -> tuple[datetime, datetime] | None:
    """``[since, until)`` of a period preset, counted back from the newest stored request (a store's "now")."""
    day = datetime.combine(newest.date(), time())
    if preset == "last 24 h":
        end = newest.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        return end - timedelta(hours=24), end
    if preset in ("last 7 days", "last 30 days"):
        return day - timedelta(days=int(preset.split()[1]) - 1), day + timedelta(days=1)
    first = day.replace(day=1)
    if preset == "this month":
        return first, day + timedelta(days=1)
    if preset == "last month":
        return (first - timedelta(days=1)).replace(day=1), first
    return None


def _to_custom() -> None:
    st.session_state["period"] = "custom"


def _gate() -> access.Access:
    """Who is looking; without a login (auth configured), a role or a tenant, the run stops on a sentence."""
    try:
        who = session_access()
    except InputError as exc:       # a misspelt [roles] section: a sentence for whoever runs the server
        st.error(f"The login is misconfigured: {plain(exc)}", icon=":material/settings:")
        st.stop()
    if who is None:
        st.title("finops")
        st.markdown("Sign in to see your fleet's spend and latency.")
        for provider in login_providers():
            st.button("Log in" if provider is None else f"Log in with {provider}", key=f"login-{provider}",
                      type="primary", icon=":material/login:", on_click=st.login, args=(provider,))
        st.stop()
    refusal = ("none of your groups grants access to this dashboard; ask an admin to add you to a viewer, "
               "engineer or admin group" if who.role is None else
               "your login lists no tenant you may see; ask an admin to grant you one" if who.tenants == () else "")
    if refusal:
        st.title("finops")
        st.error(f"Signed in as {plain(who.user or 'an unnamed user')}, but {refusal}.", icon=":material/block:")
        st.button("Log out", icon=":material/logout:", on_click=st.logout)
        st.stop()
    return who


def _unknown_in_url(options: dict[str, list]) -> dict[str, list[str]]:
    """Values the URL names that the store does not hold, per filter (read before the widgets drop them)."""
    out = {}
    for key, _, _ in FILTER_KEYS:
        asked = [v for v in st.query_params.get_all(key) if v]
        unknown = [v for v in asked if v not in options[key]]
        if unknown:
            out[key] = unknown
    return out


def _bad_period_in_url(first, last) -> list[str]:
    """What the URL's period keys hold that the fields cannot show (read before the widgets drop it): a from or
    to that is no date (YYYY-MM-DD) or lies outside the stored days, a period that is no preset."""
    out = []
    for key, label in (("from", "From"), ("to", "To")):
        raw = st.query_params.get(key)
        if not raw:
            continue
        try:
            day = datetime.strptime(raw, "%Y-%m-%d").date()
        except ValueError:
            out.append(f"{key}={plain(raw[:40])} is no date (YYYY-MM-DD): '{label}' ignored it")
            continue
        if first is not None and not first <= day <= last:
            out.append(f"{key}={raw} is outside the stored days ({first:%Y-%m-%d} to {last:%Y-%m-%d})")
    raw = st.query_params.get("period")
    if raw and raw not in PRESETS:
        out.append(f"period={plain(raw[:40])} is none of {', '.join(PRESETS)}: 'Period' ignored it")
    return out


# Enter in a date field applies the typed date at once (the field applies it when it loses focus)
ENTER_APPLIES_DATE = """<script>
const doc = window.parent.document;
if (!doc.__finopsEnterBlur) {
  doc.__finopsEnterBlur = true;
  doc.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.target.closest && e.target.closest('[data-testid="stDateInput"]')) e.target.blur();
  }, true);
}
</script>"""


def _sidebar(who: access.Access):
    con = connection().cursor()
    span = query(stored_span)
    lo, hi = span.first, span.last
    rows = store.row_count(con)
    w_lo, w_hi = span.window
    with st.sidebar:
        st.caption(f":material/{'computer' if who.local else 'person'}: {plain(who.describe())}")
        if not who.local:
            st.button("Log out", key="logout", icon=":material/logout:", on_click=st.logout)
        counted = (f"{query(store.rollup_requests):,} requests in attached rollups (no raw rows)"
                   if not rows and query(store.rollup_only) else f"{rows:,} requests")
        if who.scoped:                  # the store's own counts add up every tenant's requests
            counted = "your tenants' requests"
        st.caption(f"Store: `{store_label()}`  \n{counted}"
                   + (f", {lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M} UTC" if lo else " (empty)" if not rows else ""))
        if span.outside and not who.scoped:
            st.caption(f":orange[{span.outside:,} request{'s' if span.outside != 1 else ''} outside "
                       f"{w_lo:%Y-%m-%d} to {w_hi:%Y-%m-%d}] are not shown on any page: delete their batch on "
                       "the Data page (its time span says which).")
        first = lo.date() if lo else None
        last = hi.date() if hi else None
        bad_period = _bad_period_in_url(first, last)
        preset = st.selectbox("Period", PRESETS, key="period", bind="query-params", disabled=lo is None,
                              help="Counted back from the newest stored request. Editing From or To makes it custom.")
        exact = preset_range(preset, hi) if hi is not None else None
        if exact is not None:        # the fields show the preset's days, clamped to the stored ones
            shown_from = min(max(exact[0].date(), first), last)
            st.session_state["from"] = shown_from
            st.session_state["to"] = max(min((exact[1] - timedelta(microseconds=1)).date(), last), shown_from)
        start = st.date_input("From", value=None if exact is not None else first, min_value=first, max_value=last, key="from",
                              bind="query-params", disabled=lo is None, on_change=_to_custom)
        end = st.date_input("To", value=None if exact is not None else last, min_value=first, max_value=last, key="to",
                            bind="query-params", disabled=lo is None, on_change=_to_custom,
                            help="Included: the period ends at the end of this day (UTC).")
        st.iframe(ENTER_APPLIES_DATE, height=1)
        if bad_period:
            st.warning("The link's period: " + "; ".join(bad_period) + ".", icon=":material/link_off:")
        if start and end and start > end:
            st.warning("'From' is after 'To': showing the single day 'From'.")
            end = start
        if lo is None and rows:
            # every stored request lies outside the window: the period is the window, which holds none
            start, end = w_lo.date(), w_hi.date()
        options = {key: query(store.distinct_values, column) for key, _, column in FILTER_KEYS}
        options["tenant"] = who.visible_tenants(options["tenant"])    # a scoped login is offered its own only
        unknown = _unknown_in_url(options)
        picked = {key: st.multiselect(label, options[key], key=key, bind="query-params",
                                      placeholder=f"all {'your ' if key == 'tenant' and who.scoped else ''}"
                                                  f"{label.lower()}") for key, label, _ in FILTER_KEYS}
        for key, label, _ in FILTER_KEYS:
            if key == "tenant" and key in unknown and who.scoped:      # never says whether a tenant exists
                st.warning(f"The link names tenants your login may not see, ignored: "
                           f"{', '.join(plain(v) for v in unknown[key])}.", icon=":material/lock:")
            elif key in unknown:
                rest = "showing the others" if picked[key] else f"showing all {label.lower()}"
                st.warning(f"The link names {label.lower()} this store does not hold, left out: "
                           f"{', '.join(plain(v) for v in unknown[key])}; {rest}.", icon=":material/link_off:")
        if live_sources():
            ingester_status()
    tenants, _ = who.scope(picked["tenant"])      # the scope, whatever the widget or the URL held
    f = filters_for(start, end, tenants, picked["model"], picked["tier"], scoped=who.scoped)
    if exact is not None:            # a preset filters its exact span, even where the store holds nothing
        f = replace(f, since=exact[0], until=exact[1])
    st.session_state["_filters"] = f


missing = missing_pages()
if missing:
    raise RuntimeError(f"app.py: page files declared in views.PAGES are missing: {', '.join(missing)}")
# the first page is served at the root URL; its own name (/overview, as a link might spell it) runs it too, filters
# kept, where Streamlit would say "Page not found" (the default page takes another, unused name for that)
pages = [st.Page(str(ROOT / p.file), title=p.title, icon=p.icon, default=(n == 0),
                 url_path=f"{p.slug}-home" if n == 0 else None) for n, p in enumerate(PAGES)]
pages.append(st.Page(str(ROOT / PAGES[0].file), title=PAGES[0].title, icon=PAGES[0].icon, url_path=PAGES[0].slug,
                     visibility="hidden"))
who = _gate()                    # before the menu: a visitor who is not signed in sees only the login
access.act_as(who)               # the write functions of finops check who acts (finops.access.require)
page = st.navigation(pages)      # first, so the menu is ours even while the sample store is built
try:
    connection()
except store.StoreError as exc:     # held by another process, or not a store: a sentence, never a traceback
    st.error(plain(exc), icon=":material/lock:")
    st.stop()
sweep_abandoned_uploads()
_first_start()
start_ingester()
_sidebar(who)
with shared_costing(), page_run():    # a page's spend figures share one costing of each period; its raw-row
    page.run()                        # sections may read a slice of the dataset (views._shared.raw_rows_notice)
_heap_frozen()
