"""Streamlit glue shared by the pages: the store connection, cached queries, the current filters.

Pages import from here and from ``finops``; they hold no SQL and no maths.
"""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import streamlit as st

from finops import access, store
from finops.errors import InputError
from finops.filters import Filters
from finops.fmt import counted, in_words, period, share
from finops.scale import slices


@st.cache_resource(show_spinner=False)
def _connection(path: str):
    """The store, opened once per server process: the file itself, or, while another process holds it (a
    first dashboard, ``serve-ingest``), that process's connection (:mod:`finops.remote`)."""
    return store.connect(path)


#: a served connection not used for this long is asked whether its holder still answers before a run uses it
_REMOTE_CHECK_S = 1.0


def _live_connection(path: str):
    """:func:`_connection`, made again when the process that served it went away: the next run opens the
    file itself if it is free now (or the new holder's connection)."""
    con = _connection(path)
    if getattr(con, "remote", False) and (con.lost or (con.idle_s() > _REMOTE_CHECK_S and not con.ping())):
        _connection.clear()
        con = _connection(path)
    return con


@st.cache_resource(show_spinner=False)
def sweep_abandoned_uploads():
    """Once per server process, at app start: delete the upload folders of sessions idle for longer than
    :data:`finops.ingest.uploads.UPLOAD_MAX_IDLE_S` (a browser closed mid-upload); each upload sweeps too."""
    from finops.ingest import uploads
    return uploads.sweep_uploads()


#: rows one table on a page shows; the whole table is a CSV download (formula cells neutralised)
MAX_TABLE_ROWS = 500
#: columns one table shows (a model x tenant matrix has a column per tenant): the first
MAX_TABLE_COLUMNS = 60
#: panels a page repeats per model (a histogram, a set of metrics): the largest
MAX_PANELS = 8


def bounded_dataframe(frame, where=None, *, sort_by: str | None = None, order: str = "the highest cost",
                      what: str = "rows", file_name: str = "table", max_rows: int = MAX_TABLE_ROWS, **kwargs) -> None:
    """``st.dataframe(frame, **kwargs)`` (in ``where``: a column, tab or container) showing at most
    ``max_rows`` rows: those with the largest ``sort_by`` (else the first), a caption saying how many of how
    many, and the whole table as a CSV download through our export path (cells that begin with =, +, -
    or @ neutralised)."""
    from finops.spend import exports
    where = where or st
    total, columns = len(frame), len(frame.columns)
    shown = frame
    if total > max_rows:
        shown = (frame.sort_values(sort_by, ascending=False, kind="stable", na_position="last") if sort_by
                 else frame).head(max_rows)
    if columns > MAX_TABLE_COLUMNS:
        shown = shown.iloc[:, :MAX_TABLE_COLUMNS]
    where.dataframe(shown, **kwargs)
    notes = []
    if total > max_rows:
        by = f" with {order}" if sort_by else ""
        notes.append(f"Showing the {max_rows:,} of {total:,} {what}{by}")
    if columns > MAX_TABLE_COLUMNS:
        notes.append(f"{'and' if notes else 'Showing'} the first {MAX_TABLE_COLUMNS} of {columns:,} columns")
    if notes:
        where.caption(" ".join(notes) + "; download the full CSV for the rest.")
    if notes:
        where.download_button(f"Download all {total:,} {what} (CSV)", exports.safe_csv(frame),
                              file_name=f"{file_name}.csv", mime="text/csv", icon=":material/download:",
                              on_click="ignore", key=f"full-{file_name}-{total}")


class _Card:
    """One place for an ``st.metric`` card in a :func:`metric_row`, as wide as its content unless told."""

    def __init__(self, slot) -> None:
        self._slot = slot

    def metric(self, *args, **kwargs):
        kwargs.setdefault("width", "content")
        return self._slot.metric(*args, **kwargs)


def metric_row(n: int, where=None) -> list[_Card]:
    """``n`` places for ``st.metric`` cards side by side in ``where`` (default: the page), each filled once
    (``slot.metric(...)``). Each card is as wide as its label and value need (``width="content"``), so none is cut:
    the cards share the row and wrap to a new line on a narrow screen. ``st.columns(n)`` gave each a fixed share
    and cut its label and value ("Saving (USD) −$43…" at 1,100 px); a stretched card in a wrapping row is laid out
    from a 224 px basis and cut a value like "$1,234,567.89" four to a row at 1,400 px."""
    row = (where or st).container(horizontal=True)
    return [_Card(row.empty()) for _ in range(n)]


def percent_column(label: str, decimals: int = 1, bar: bool = False, **kwargs):
    """A column of shares (0.8965) shown as percents with a fixed number of decimals ("89.7%"; Streamlit's
    "percent" alone trims them, "89.6%" over "89.65%"): its ``step`` sets them. ``bar``: a progress bar from 0 to
    100 %."""
    step = 10.0 ** -(decimals + 2)
    if bar:
        return st.column_config.ProgressColumn(label, format="percent", min_value=0, max_value=1, step=step, **kwargs)
    return st.column_config.NumberColumn(label, format="percent", step=step, **kwargs)


#: a model's kind as the price book stores it and as people say it
KIND_WORDS = {"api": "API", "self_hosted": "self-hosted"}

#: what the latency pages' figures count (finops.sql.SERVED: every request a model served, whatever its status)
SERVED_NOTE = ("Counted: every request a model served, failed and timed-out ones too (the time their callers "
               "waited); cache hits are not.")


def percentile_note(frame) -> str:
    """How exact the percentiles of ``frame`` are (finops.latency.stats sets ``attrs['max_rel_error']``)."""
    err = frame.attrs.get("max_rel_error", 0.0)
    if err:
        return (f"Percentiles within {err:.1%} of the exact value: read from the latency sketches written when the "
                "logs were loaded (a tenant or tier filter, a period cut within an hour, or within a day for the "
                "Latency page's length and segment tables, or another grouping, gives exact ones).")
    return "Exact percentiles (linear interpolation between requests, as numpy)."


def kind_column(label: str = "Kind", **kwargs):
    """A column of price-book kinds (api, self_hosted) shown as words (API, self-hosted); the value, its CSV
    export and an edited cell stay the book's."""
    kwargs.setdefault("width", 100)                 # "self-hosted" whole (sized to the stored values it was cut)
    return st.column_config.SelectboxColumn(label, options=list(KIND_WORDS), format_func=lambda k: KIND_WORDS.get(k, k),
                                            **kwargs)


def top_panels(names: list, what: str = "models", max_panels: int = MAX_PANELS) -> list:
    """The first ``max_panels`` of ``names`` (the caller orders them, largest first) for panels a page
    repeats per name; a caption says how many are left out."""
    names = list(names)
    if len(names) > max_panels:
        st.caption(f"Showing the first {max_panels} of {len(names):,} {what}; narrow the sidebar filters to see "
                   "the others.")
    return names[:max_panels]


def store_path() -> str:
    return store.resolve_path(os.environ.get("FINOPS_DB") or None)


# what Streamlit's Markdown reads anywhere in a line: CommonMark's inline punctuation, ``$`` (LaTeX),
# ``<`` and ``&`` (HTML, entities), ``~`` (strike); ``:`` before a word (emoji, icons, ``:red[...]``,
# and breaks ``http://`` autolinks); ``_`` unless inside a word (where it is no emphasis)
_INLINE = re.compile(r"([\\`*\[\]()<!$~&]|:(?=\S)|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|(?<=www)\.)")
# and at the start of a line: headings, quotes, lists, tables
_LEADING = re.compile(r"^(\s*)([#>+\-=|]|\d+(?=[.)]))")


def plain(text) -> str:
    r"""A user-supplied value (tenant, model, file, batch name, a message naming one) for Markdown:
    what Markdown would read is backslash-escaped and line breaks become spaces, so it shows as itself:
    never a link, an image fetched from elsewhere, a colour, an icon, LaTeX or HTML.

    >>> print(plain("![x](http://h/p.png) **b** :red[x] $x$ <img> prompt_chars > 4"))
    \!\[x\]\(http\://h/p.png\) \*\*b\*\* \:red\[x\] \$x\$ \<img> prompt_chars > 4
    """
    one_line = re.sub(r"[\r\n]+", " ", str(text))
    return _LEADING.sub(r"\1\\\2", _INLINE.sub(r"\\\1", one_line))


def store_label() -> str:
    """The store as a visitor may see it: its path under the project (``data/finops.duckdb``), else its
    file name; never a server's absolute path."""
    from pathlib import Path

    path = Path(store_path()).resolve()
    root = Path(__file__).resolve().parent.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else path.name


def connection():
    """The process's one connection to the store (a cursor per use is taken by ``cursor``)."""
    return _live_connection(store_path())


def cursor():
    return connection().cursor()


@st.cache_data(show_spinner=False, max_entries=512)
def _call(path: str, version: int, key: str, _fn: Callable, args: tuple, kwargs: tuple):
    # ``key`` (the function's qualified name) stands in for ``_fn`` in the cache key: Streamlit skips
    # arguments whose names start with an underscore. ``fn`` reads one state of the store, whatever is loaded
    # meanwhile (store.snapshot)
    cur = _live_connection(path).cursor()
    with store.snapshot(cur):
        return _fn(cur, *args, **dict(kwargs))


def query(fn: Callable, *args, **kwargs):
    """``fn(con, *args, **kwargs)`` through the cache, ``fn`` a function of ``finops``.

    The cache key is the function's qualified name, its arguments and the store's data version,
    which every write bumps (:func:`finops.store.bump_data_version`): a load, a deletion, a price,
    budget or setting edit shows at once, in every browser tab and process. Within a raw-row section
    on a rollup-only store (:func:`raw_rows_notice`), ``fn`` runs on the slice of the dataset read for it.
    """
    key = f"{fn.__module__}.{fn.__qualname__}"
    version = _data_version(connection())
    on_slice = _on_slice.get()
    if on_slice is not None:
        return _slice_call(store_path(), version, on_slice, key, fn, args, tuple(sorted(kwargs.items())))
    return _call(store_path(), version, key, fn, args, tuple(sorted(kwargs.items())))


# ---- raw rows on demand (finops.scale.slices): on a rollup-only store whose dataset folder was recorded at
# attach time, the raw-row sections of a page run on a slice of that dataset (one model, at most 24 hours)

#: the slice's filters while the page's raw-row sections run on it (:func:`raw_rows_notice`), else None;
#: set within one script run (reset by :func:`page_run`) and never shared with another session's thread
_on_slice: ContextVar[Filters | None] = ContextVar("finops_on_slice", default=None)


def _release_slice(shared: slices.SharedSlice) -> None:
    shared.close()          # waits for a use in progress on another thread


@st.cache_resource(show_spinner=False, max_entries=slices.MAX_KEPT_SLICES, on_release=_release_slice)
def _slice(path: str, version: int, f: Filters) -> slices.SharedSlice:
    """The dataset's requests for ``f`` (one model, at most 24 hours), read once per server process and store
    data version into a cursor of the process's connection: a rerun, another tab or another section with the
    same filters reads no Parquet file again. At most :data:`~finops.scale.slices.MAX_KEPT_SLICES` are kept;
    the oldest one's cursor is closed when a new one is read."""
    return slices.SharedSlice(slices.open_slice(_live_connection(path), f))


@st.cache_data(show_spinner=False, max_entries=512)
def _slice_call(path: str, version: int, f: Filters, key: str, _fn: Callable, args: tuple, kwargs: tuple):
    # as _call, on the slice's cursor, one use at a time (its temporary tables are that cursor's alone)
    try:
        return _slice(path, version, f).run(_fn, *args, **dict(kwargs))
    except slices.SliceClosed:          # evicted by another session between taking it and using it: read it again
        return _slice(path, version, f).run(_fn, *args, **dict(kwargs))


@contextlib.contextmanager
def page_run() -> Iterator[None]:
    """Around one page's run (app.py): its queries read the store, until a raw-row section reads a slice."""
    token = _on_slice.set(None)
    try:
        yield
    finally:
        _on_slice.reset(token)


def raw_rows_done() -> None:
    """After a raw-row section in the middle of a page: the queries that follow read the store again."""
    _on_slice.set(None)


#: how long a data version read through another process is used again (a page sees a write of another
#: process within this, a write of this one at once)
SERVED_VERSION_TTL_S = 1.0
_served_versions: dict = {}


def _data_version(con) -> int:
    """The store's data version for the cache key: read afresh from the file itself; through the process
    serving the store (one round trip each), read again once :data:`SERVED_VERSION_TTL_S` passed or this
    process sent a write since."""
    if not getattr(con, "remote", False):
        return store.data_version(con.cursor())
    import time
    now = time.monotonic()
    seen = _served_versions.get(id(con))
    if seen is not None and seen[0] == con.writes and now - seen[1] < SERVED_VERSION_TTL_S:
        return seen[2]
    writes = con.writes
    version = store.data_version(con.cursor())
    _served_versions.clear()                # one entry: the process's connection
    _served_versions[id(con)] = (writes, now, version)
    return version


# ---- who is looking: login, role, tenant scope (the rules are finops.access; this is the Streamlit side)

def _secrets_section(name: str) -> dict | None:
    """A section of ``.streamlit/secrets.toml`` (or of the files ``--secrets.files`` names), None when there
    is no secrets file or no such section. Its values are never shown or logged."""
    try:
        section = st.secrets.get(name)
    except FileNotFoundError:       # no secrets file at all: local mode
        return None
    return section.to_dict() if hasattr(section, "to_dict") else (dict(section) if section else None)


def login_providers() -> list[str | None]:
    """The providers ``[auth]`` configures, as ``st.login`` takes them: None for the section's own
    ``client_id``, else the names of its ``[auth.NAME]`` sections; empty without auth."""
    section = _secrets_section("auth") or {}
    named = [k for k, v in section.items() if isinstance(v, dict) and v.get("client_id")]
    return ([None] if section.get("client_id") else []) + named


def auth_configured() -> bool:
    """An ``[auth]`` section naming an OIDC provider: the dashboard asks every visitor to log in."""
    return bool(login_providers())


def role_config() -> access.RoleConfig:
    return access.RoleConfig.from_mapping(_secrets_section("roles"))


def session_access() -> access.Access | None:
    """Who this browser session is: :data:`finops.access.LOCAL` without auth configured; None when auth is
    configured and nobody is logged in; else the role and tenant scope of ``st.user``'s ID-token claims
    (a cookie signed with ``cookie_secret``: a visitor cannot write their own claims)."""
    if not auth_configured():
        return access.LOCAL
    if not st.user.is_logged_in:
        return None
    return access.access_for(st.user.to_dict(), role_config())


def current_access() -> access.Access:
    """Who is looking, read afresh from the session's login on every call (app.py also sets it as the
    acting person for the write functions, :func:`finops.access.act_as`)."""
    return session_access() or access.Access(None)


def can(action: str) -> bool:
    """Whether the person looking may ``action`` (a key of :data:`finops.access.RIGHTS`): pages render a
    write control only ``if can("...")``, and the write function checks again (:func:`finops.access.require`)."""
    return current_access().can(action)


def fleet_wide(what: str) -> bool:
    """Whether a section that adds up every tenant's traffic (a shared fleet's load, its GPU cost) may be
    shown: not to a tenant-scoped login, which is told why (the caller skips the section)."""
    who = current_access()
    if not who.scoped:
        return True
    st.info(f"{what} adds up every tenant's traffic; your login sees only tenants "
            f"{', '.join(plain(t) for t in who.tenants)}, so it is not shown.", icon=":material/lock:")
    return False


def current_filters() -> Filters:
    """The sidebar's filters (set by app.py before it runs a page)."""
    return st.session_state["_filters"]


def filter_caption(f: Filters) -> str:
    parts = []
    if f.since and f.until:
        parts.append(f"{period(f.since, f.until)} (UTC)")
    for label, values in (("tenants", f.tenants), ("models", f.models), ("tiers", f.sla_tiers)):
        if values:
            parts.append(f"{label}: {', '.join(plain(v) for v in values)}")
    return " · ".join(parts) or "all data"


def empty_state(message: str = "No requests match these filters.") -> None:
    st.info(message + " Widen the date range or clear the sidebar filters, or load logs on the Data page.",
            icon=":material/filter_alt_off:")


def nothing_priced_state(f: Filters, what: str = "This chart") -> None:
    """Said where a spend chart would be drawn at $0.00 everywhere: every request in the filters ``f`` is of a model
    nothing prices (the banner above lists them), so there is no spend to draw, which is not the same as free; with
    every model priced, the requests really cost nothing (cache hits, free models) and it says that."""
    from finops.spend import report
    if query(report.unpriced_models, f).empty:
        st.info(f"{what} has nothing to show: the requests in these filters cost $0.00 (cache hits, or models "
                "priced at $0).", icon=":material/money_off:")
        return
    st.info(f"{what} has nothing to show: no request in these filters has a price (the models above are counted "
            "at $0.00). Add a price or an alias on the Data page and it fills in.", icon=":material/money_off:")


def store_is_empty() -> bool:
    """No requests and no attached rollups: nothing to show (a rollup-only store is not empty)."""
    return query(store.row_count) == 0 and not query(store.rollup_only)


def rollup_only() -> bool:
    """The store holds attached rollups but no raw rows (finops.scale): raw-row sections say so. True too within
    a raw-row section reading a dataset slice (only such a store has one), whose cursor does hold rows."""
    return _on_slice.get() is not None or query(store.rollup_only)


def raw_rows_notice(what: str, from_dataset: bool = True) -> bool:
    """Whether the caller skips ``what``, a section that reads raw rows: False on a store that holds them.

    On a rollup-only store, when ``from_dataset``, a dataset folder was recorded at attach time and the sidebar
    picks one model and at most 24 hours, the dataset's requests for them are read (:func:`_slice`, cached), a
    sentence says so, and False: the queries that follow run on that slice until :func:`raw_rows_done` or the
    page's end. Otherwise a sentence says what to do (pick one model and a day; or that the store has no raw
    rows) or why the dataset could not be read, and True. ``from_dataset=False``: a section one model's day
    cannot answer (a forecast, a cascade's model pairs), which says the store has no raw rows."""
    if _on_slice.get() is not None or not rollup_only():
        return False
    f = current_filters()
    if not from_dataset or not query(slices.dataset_recorded):
        st.info(f"{what}: {store.RAW_ROWS_NEEDED}", icon=":material/table_rows:")
        return True
    problem = query(slices.slice_problem, f)
    if problem:
        st.info(f"{what}: {slices.SLICE_NEEDED}: {problem}.", icon=":material/table_rows:")
        return True
    try:
        with st.spinner(f"Reading {', '.join(plain(m) for m in f.models)}'s requests from the dataset"):
            part = _slice(store_path(), _data_version(connection()), f).slice
    except InputError as exc:           # the folder moved or deleted since, a damaged file: a sentence
        st.warning(f"{what}: the requests could not be read from the dataset: {plain(exc)}.",
                   icon=":material/error:")
        return True
    days = part.days
    st.info(f"{what}: these figures were read from the dataset the rollups were computed from, for {plain(f.models[0])}, "
            f"{period(part.filters.since, part.filters.until)} (UTC): {part.requests:,} requests, from "
            f"{len(days)} daily partition{'s' if len(days) != 1 else ''}"
            + (f" ({', '.join(days)})" if days else "") + ".", icon=":material/table_rows:")
    if part.scope.narrowed:
        st.info(part.scope.note(), icon=":material/filter_list:")
    _on_slice.set(f)
    return False


def stop_if_store_empty(what: str = "this page") -> None:
    """The empty-store state shared by every page: say so, point at the Data page, stop the script."""
    if not store_is_empty():
        return
    st.info(f"The store `{os.path.basename(store_path())}` holds no requests yet, so {what} has nothing to show. "
            "Load request logs on the Data page, or build the sample fleet with "
            "`python -m finops demo --db " + store_label() + "`.", icon=":material/database:")
    st.page_link("views/data.py", label="Go to the Data page", icon=":material/upload_file:")
    st.stop()


def data_origin() -> str:
    """Whose requests the store holds: 'the sample fleet', 'your request logs' or both."""
    formats = set(query(store.batches)["format"])
    if not formats:
        return "no data"
    if formats == {slices.SLICE_FORMAT}:    # a raw-row section on a slice (raw_rows_notice)
        return "the requests read from the dataset the rollups were computed from"
    sample = {f for f in formats if f == "sample-fleet"}
    if sample and sample == formats:
        return "the sample fleet (synthetic requests)"
    if sample:
        return "your request logs and the sample fleet (synthetic requests)"
    return "your request logs"


def source_label(extra: str = "") -> str:
    """Where the numbers come from, for captions under charts and tables."""
    tail = f" {extra}" if extra else ""
    return f"Source: {data_origin()} in store `{os.path.basename(store_path())}`, priced with the price book.{tail}"


# ---- the ingester: one per server process, following the sources an admin configured (finops.ingest.service)

@st.cache_resource(show_spinner=False)
def _ingester(path: str, served_by_another: bool):
    """Once per server process: the ingester on the process's connection, acting as the system, whoever has a
    tab open (``FINOPS_INGESTER=0`` leaves it off). Its control endpoint lets ``python -m finops ingest`` and
    ``report`` run while this process holds the store."""
    if os.environ.get("FINOPS_INGESTER", "1") == "0" or served_by_another:
        return None         # a store another process serves: that process runs the ingester
    import atexit

    from finops.commands.serve_ingest import COMMANDS
    from finops.ingest import service
    from finops.ops import delivery
    ing = service.Ingester(_connection(path), path, secret=delivery.secret, otlp_port=None, commands=COMMANDS)
    atexit.register(ing.stop)
    return ing.start()


def start_ingester():
    """The process's ingester, started on the first run of the app (app.py); none while another process
    holds the store (the first run after it went away and this process opened the file starts one)."""
    return _ingester(store_path(), bool(getattr(connection(), "remote", False)))


def ingester_status_frame():
    """The ingester's status per source, read afresh (its status writes do not bump the data version)."""
    from finops.ingest import service
    return service.status_frame(cursor(), full_paths=can("edit_settings"))     # a server's paths: admins only


def live_sources() -> bool:
    """Whether any configured source is enabled (cached on the data version: configuring one bumps it)."""
    from finops.ingest import service
    return any(s.enabled for s in query(service.sources))


@st.fragment(run_every="3s")
def ingester_status() -> None:
    """Every 3 s in the sidebar: what the ingester loaded; the page reruns when the store changed, so a page
    shows new rows within a few seconds of their load."""
    from finops.fmt import MISSING

    frame = ingester_status_frame()
    live = frame[frame["enabled"]]
    if live.empty:
        return
    failing = int((live["state"] == "failing").sum())
    last = live["last_ok"].dropna().max() if live["last_ok"].notna().any() else None
    st.caption((f":orange[●] {failing} of {len(live)} live sources failing (see the Data page)" if failing else
                f":green[●] {len(live)} live source{'s' if len(live) != 1 else ''}")
               + f": {int(live['rows_total'].sum()):,} rows loaded, last at "
               + (f"{last:%H:%M:%S} UTC" if last is not None else MISSING) + ".")
    version = store.data_version(cursor())
    seen = st.session_state.get("_ingest_seen_version")
    st.session_state["_ingest_seen_version"] = version
    if seen is not None and version != seen:
        st.rerun(scope="app")


def rules_judged(f: Filters, leave_out: tuple[str, ...] = ()) -> tuple[list[str], list[str], list[str]]:
    """(judged, turned off, judged elsewhere), rules in plain words, for a page that evaluated the alert rules
    but ``leave_out`` (``alerts.judged_rules``): the third are the rules left out that the Alerts page judges."""
    from finops.ops import alerts

    judged, off = query(alerts.judged_rules, f, leave_out=leave_out)
    elsewhere = [r for r in query(alerts.judged_rules, f)[0] if r not in judged] if leave_out else []
    return judged, off, elsewhere


def open_elsewhere(f: Filters, leave_out: tuple[str, ...]) -> str:
    """The sentence naming the open alerts of the rules a page left out (``leave_out``: the Overview's and the
    Incidents page's ``incidents.COST_RULES``), counted as the Alerts page counts them for the same filters (its
    'Open <severity> alerts'); '' when none is open. Only those rules are evaluated here."""
    from finops.ops import alerts

    if not leave_out:
        return ""
    others = tuple(r for r in alerts.EVALUATORS if r not in leave_out)
    fired = alerts.annotate(query(alerts.open_alerts, f, leave_out=others), query(alerts.alert_states),
                            alerts.utc_now())
    fired = fired[fired["state"] == "open"]
    if fired.empty:
        return ""
    counts = fired["severity"].value_counts()
    rules = in_words(list(dict.fromkeys(alerts.rule_name(r) for r in fired["rule"])))
    return (" " + " · ".join(f"{counts[s]:,} {s}" for s in alerts.SEVERITIES if counts.get(s))
            + f" cost alert{'s' if len(fired) != 1 else ''} {'are' if len(fired) != 1 else 'is'} open in this period "
            f"({rules}): see the Alerts page.")


def no_alert_state(f: Filters, leave_out: tuple[str, ...] = ()) -> None:
    """"No alert fired", said only of the rules judged and the windows they could judge; the rest are named.
    ``leave_out``: the rules the page did not evaluate (the same ``leave_out`` it gave ``open_alerts``: the
    Overview's and the Incidents page's service alerts leave out ``incidents.COST_RULES``), named as being on the
    Alerts page."""
    from finops.ops import alerts

    blind = query(alerts.unjudged, f)
    blind = blind[~blind["rule"].isin(leave_out)]      # a rule this page does not judge is not named as unjudged
    if blind.empty:
        judged, off, elsewhere = rules_judged(f, leave_out)
        said = (f"No {'service ' if leave_out else ''}alert fired in this period. Rules judged, each within its "
                f"threshold: {in_words(judged)}." if judged else
                "No alert fired in this period, and no rule is turned on to judge it.")
        if off:
            said += f" Turned off (on the Incidents page): {in_words(off)}."
        if elsewhere:
            said += f" The other rules ({in_words(elsewhere)}) are judged on the Alerts page."
        said += open_elsewhere(f, leave_out)
        (st.success if judged else st.warning)(said, icon=":material/notifications_off:" if judged else
                                               ":material/help:")
        return
    # the title as the rule names it ("P99 latency above 1.5 x the tier's SLA"): lower-cased, it read "p99 ... sla"
    few = [f"{plain(r.title)}: {plain(r.why)}" for r in blind.itertuples(index=False) if r.reason == "too_few"]
    raw = _rules_and_why(blind[blind["reason"] != "too_few"])
    said = []
    if few:
        said.append("some had too few requests to judge: " + "; ".join(few) + ". Their health is unknown, not "
                    "fine: widen the period, or "
                    + ("lower the rule's minimum requests per window on the Incidents page" if can("edit_alert_rules")
                       else "ask an admin to lower the rule's minimum requests per window"))
    if raw:
        said.append(("and " if few else "") + "some rules were not judged: " + "; ".join(raw))
    st.warning(f"No {'service ' if leave_out else ''}alert fired on the windows the rules could judge, but "
               + "; ".join(said) + "." + open_elsewhere(f, leave_out), icon=":material/help:")


def _rules_and_why(rows) -> list[str]:
    """'<rule names>: <why>' for each reason of :func:`finops.ops.alerts.unjudged` rows, the rules that share one
    named together ("GPU utilisation high and GPU utilisation low: ...")."""
    from finops.ops import alerts
    by_why: dict[str, list[str]] = {}
    for r in rows.itertuples(index=False):
        by_why.setdefault(r.why, []).append(alerts.rule_name(r.rule))
    # a why names models and tenants as logged: Markdown must show them as text
    return [f"{in_words(names)}: {plain(why)}" for why, names in by_why.items()]


def rules_not_judged(f: Filters) -> None:
    """Beside the alerts that did fire, the rules these filters leave unjudged, in one sentence: on a store of
    attached rollups (no raw rows) those a raw row would judge (:func:`finops.ops.alerts.reads_raw_rows`), and
    anywhere a rule whose field the logs do not carry (a trace with no latency: the P99 rule; none with a status: the
    error rate) or that had no day to judge (the spend spike on a store younger than its baseline)."""
    from finops.ops import alerts

    # the whole of unjudged (its windows too small to judge) only where the store has no raw rows, as before
    raw = []
    if rollup_only():
        blind = query(alerts.unjudged, f)
        raw = _rules_and_why(blind[blind["reason"] == "raw_rows"])
    if raw:
        st.info("These alerts are judged on the hourly rollups attached to this store. Not judged: "
                + "; ".join(raw) + ".", icon=":material/table_rows:")
    blind = _rules_and_why(query(alerts.not_carried, f))
    if blind:
        st.info("Not judged: " + "; ".join(blind) + ".", icon=":material/help:")


def unpriced_banner(f: Filters, of: str = "the requests in these filters") -> None:
    """Traffic no price book row, alias or catalogue entry prices counts at $0: say so, never in silence. Said of
    the requests of ``f``, the page's view (``of`` names them in the sentence): a model nothing prices outside it
    changes no figure here, and nothing is said when every request in it is priced. A login's scope is in ``f``:
    the counts are its tenants' own."""
    from finops.spend import report
    unpriced = query(report.unpriced_models, f)
    if unpriced.empty:
        return
    names = ", ".join(f"{m} ({counted(n, 'request')})" for m, n in zip(unpriced["model"], unpriced["requests"],
                                                                   strict=True))
    with st.container(border=True):
        st.warning(f"No price for {len(unpriced)} model(s), {share(float(unpriced['share_of_requests'].sum()))} of "
                   f"{of}, counted at $0.00 in every spend figure here and left out of every $ per 1M tokens (as $0 "
                   "they would read as free):", icon=":material/money_off:")
        st.text(names)
        st.page_link("views/data.py", label="Add a price or an alias on the Data page", icon=":material/sell:")


def save_edits(save, what: str, done) -> None:
    """Run a write of an editor's rows; its refusal is a sentence naming ``what`` was not saved, its success a
    toast (``done(result)``) and a rerun, so every page reads the new data version."""
    from finops.errors import InputError
    try:
        result = save()
    except InputError as exc:
        st.error(f"{what} not saved: {plain(exc)}", icon=":material/error:")
    else:
        st.toast(done(result), icon=":material/check:")
        st.rerun()
