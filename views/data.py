"""Data: load request logs (detected format, preview, column mapping, validation report), the live sources the
ingester follows, the loaded batches, and the price book."""
import logging
import re
import shutil
from pathlib import Path

import streamlit as st

from finops import schema, store
from finops.errors import InputError
from finops.filters import utc_time
from finops.fmt import MISSING, counted, span
from finops.ingest import ADAPTERS, IngestOptions, ingest_path, service
from finops.ingest import uploads as upload_files
from finops.ingest.preview import TABULAR, preview_path, rejected_rows, suggest_mapping
from finops.spend import exports, fleets, pricing
from views._shared import (
    bounded_dataframe,
    can,
    current_access,
    cursor,
    ingester_status_frame,
    kind_column,
    metric_row,
    plain,
    query,
    save_edits,
    store_label,
)

ROLE_READS = "Your login reads this page: {what} is for {who} (ask an admin for the role)."

st.title("Data")
st.caption("Load request logs into the store, check what was loaded (and delete it), and edit the price book. "
           "Every page reads what is stored here.")

NONE = "(not in the file)"
MAIN = ("ts", "model", "tenant", "sla_tier", "input_tokens", "output_tokens", "cached_input_tokens", "total_ms",
        "cost_usd", "request_id", "status")
DESCRIBED = {c.name: c.description for c in schema.COLUMNS}
TYPE_LABEL = {"generic": "Map the columns myself (generic)"}


log = logging.getLogger("finops")


def _upload_root() -> Path:
    """This session's folder in the upload area, touched on every run (an idle one is swept as abandoned)."""
    if "_upload_dir" not in st.session_state:
        st.session_state["_upload_dir"] = str(upload_files.session_folder())
    root = Path(st.session_state["_upload_dir"])
    upload_files.touch(root)
    return root


def _saved(upload) -> Path:
    """The upload written to this session's temp folder under its own name (detection reads content,
    DuckDB reads .gz by its extension); deleted once loaded (:func:`_discard`) or removed from the uploader.
    Before a new file is written, abandoned sessions' folders are swept and the area's size is checked
    (:func:`finops.ingest.uploads.make_room`: an InputError when it is full)."""
    folder = _upload_root() / upload.file_id
    target = folder / (Path(upload.name).name or "upload")
    if not target.exists():
        upload_files.make_room(upload.size, upload.name)
    return upload_files.save_upload(upload.getbuffer(), upload.name, folder)


def _discard(file_id: str) -> None:
    shutil.rmtree(_upload_root() / file_id, ignore_errors=True)


def _prune(uploads) -> None:
    """Delete the temp copies of files no longer in the uploader."""
    keep = {u.file_id for u in uploads or []}
    for d in _upload_root().iterdir():
        if d.name not in keep:
            shutil.rmtree(d, ignore_errors=True)


def _for_the_form(text: str) -> str:
    """A loader's message as this page's form asks it: the command line's ``--model`` and ``--start`` are the
    form's Model and Start fields here."""
    text = re.sub(r"with --start( ISO)?( \(e\.g\. --start [^)]*\))?", "in the Start field", text)
    return (text.replace("with --model", "in the Model field").replace("use --start and --model",
                                                                       "give a start time and a model")
            .replace("give --start and --model", "give a start time and a model"))


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB"


# ---- load files
st.subheader("Load request logs")
if can("upload"):
    limit_mb = st.get_option("server.maxUploadSize")
    uploads = st.file_uploader(
        "Log files: CSV, JSON Lines, JSON, Parquet or log text, optionally gzip- or zip-compressed",
        accept_multiple_files=True, key="uploads",
        type=["csv", "tsv", "txt", "log", "json", "jsonl", "ndjson", "parquet", "gz", "zip"])
    st.caption(f"Files up to {limit_mb:,} MB each load here. Larger files (or many) load from the command line "
               "on the dashboard's machine, while it runs: the command hands them to this dashboard's ingester, "
               "which loads them into the store it holds")
    st.code(f"python -m finops ingest PATH --db {store_label()}\n"
            "# any other table: add a column mapping and constants, e.g.\n"
            f"python -m finops ingest trace.csv --db {store_label()} \\\n"
            "    --map ts=TIMESTAMP,input_tokens=ContextTokens,output_tokens=GeneratedTokens --model gpt-4o",
            language="bash")
else:
    uploads = None
    st.caption(ROLE_READS.format(what="loading logs", who="engineers"))

def _file_panel(upload) -> None:
    """One uploaded file: detected format, options, mapping form, preview and the load button."""
    key = upload.file_id
    if key in st.session_state.setdefault("_loaded_uploads", set()):
        st.caption(f"{plain(upload.name)} is loaded (see the validation report above); its temporary copy is "
                   "deleted. Remove it from the list above to load it again with other settings.")
        return
    with st.container(border=True):
        st.markdown(f"**{plain(upload.name)}** · {_size(upload.size)}")
        try:
            path = _saved(upload)
        except InputError as exc:
            st.error(f"Cannot take this file: {plain(exc)}", icon=":material/error:")
            return
        try:
            detected = preview_path(cursor(), path, upload.name)
        except InputError as exc:
            st.error(f"Cannot load this file: {plain(exc)}", icon=":material/error:")
            _discard(key)
            return
        choices = [] if detected.needs_mapping else [detected.format]
        if detected.kind in TABULAR and detected.format != "generic":
            choices.append("generic")
        elif detected.needs_mapping:
            choices = ["generic"]
        how = st.radio("Read it as", choices, key=f"how-{key}", horizontal=True,
                       format_func=lambda f, d=detected: TYPE_LABEL.get(f, f"Detected: {d.format_label}"))
        generic = how == "generic"
        c1, c2 = st.columns(2)
        model = c1.text_input("Model, for rows that name none", key=f"model-{key}",
                              placeholder="e.g. gpt-4o (required when the file has no model column)")
        tenant = c2.text_input("Tenant, for rows that name none", key=f"tenant-{key}", placeholder="default")
        start = None
        hint = next((a.export_hint for a in ADAPTERS if a.name == how), "")
        if "--start" in hint + (detected.message or "") or st.session_state.get(f"start-{key}"):
            # traces with times relative to their start, and batch results with none: the command line's --start
            start_text = st.text_input("Start (UTC), the time the file's first request was sent", key=f"start-{key}",
                                       placeholder="e.g. 2025-01-01T00:00:00")
            try:
                start = utc_time(start_text, field="Start") if start_text.strip() else None
            except InputError as exc:
                st.error(plain(exc), icon=":material/error:")
        mapping: dict[str, str] = {}
        if generic:
            st.markdown("**Column mapping**: which column of the file holds each canonical field "
                        "(ts is required; the model can be the constant above).")
            guess = suggest_mapping(detected.columns)
            options = [NONE, *detected.columns]

            def pick(canon: str, where) -> None:
                default = guess.get(canon)
                choice = where.selectbox(f"{canon}", options, index=options.index(default) if default else 0,
                                         key=f"map-{key}-{canon}", help=DESCRIBED[canon])
                if choice != NONE:
                    mapping[canon] = choice

            grid = st.columns(4)
            for i, canon in enumerate(MAIN):
                pick(canon, grid[i % 4])
            with st.expander("More canonical columns"):
                grid = st.columns(4)
                rest = [n for n in schema.NAMES if n not in MAIN and n != "attrs"]
                for i, canon in enumerate(rest):
                    pick(canon, grid[i % 4])
            st.caption("Columns left unmapped are kept, in each row's attrs.")
        options_ = IngestOptions(format="generic" if generic else detected.format, mapping=mapping,
                                 model=model.strip() or None, tenant=tenant.strip() or None, start=start,
                                 file_label=upload.name)
        try:
            p = preview_path(cursor(), path, upload.name, options_)
        except InputError as exc:
            st.error(plain(exc), icon=":material/error:")
            return
        zipped = f" (zip of {len(p.members)} files; the preview shows the first)" if p.members else ""
        st.caption(f"Format: **{p.format_label}** (`{p.format}`){zipped}. Container: {p.container}.")
        if p.message:
            # above the tabs: it says why the load button below is off (in the second tab, nobody saw it)
            st.warning(plain(_for_the_form(p.message)), icon=":material/rule:")
        raw_tab, stored_tab = st.tabs(["First rows of the file", "First rows as they will be stored"])
        raw_tab.dataframe(p.raw, placeholder=MISSING, hide_index=True)
        if p.message:
            stored_tab.caption("Nothing to show until the warning above is answered.")
        else:
            stored_tab.dataframe(p.shown.rename(columns={"_row": "row", "_reject": "rejected because"}),
                                 placeholder=MISSING, hide_index=True)
            bad = int(p.rows["_reject"].notna().sum())
            stored_tab.caption("Typed and validated exactly as the load will do it; empty columns are hidden."
                               + (f" {bad} of these rows would be rejected (see the last column)." if bad else ""))
        if st.button(f"Load {plain(upload.name)} into the store", key=f"load-{key}", type="primary",
                     disabled=not p.ready, icon=":material/upload:"):
            bar = st.progress(0.0, text=f"{plain(upload.name)}: starting")
            try:
                results = ingest_path(cursor(), path, options_,
                                      progress=lambda fr, text: bar.progress(min(max(fr, 0.0), 1.0), text=plain(text)))
                reports = []
                for r in results:
                    rej = rejected_rows(cursor(), path, upload.name, r.rejects) if r.rejects else None
                    reports.append({"result": r.as_dict(), "rejected_csv": exports.safe_csv(rej) if rej is not None
                                    else None, "every_row_rejected": r.every_row_rejected})
            except InputError as exc:
                bar.empty()
                st.error(f"Nothing loaded: {plain(exc)}", icon=":material/error:")
            except Exception:      # a bug of ours: the load's transaction rolled back; the details are logged
                log.exception("loading the upload %s failed", upload.name)
                bar.empty()
                st.error(f"Nothing loaded from {plain(upload.name)}: the load stopped on an error of ours, not of "
                         "the file's, and the store is as it was. The details are in the server log; please "
                         "report it.", icon=":material/error:")
            else:
                st.session_state["_load_reports"] = reports + st.session_state.get("_load_reports", [])
                if not all(rep["every_row_rejected"] for rep in reports):
                    st.session_state["_loaded_uploads"].add(key)
                    _discard(key)
                # else nothing loaded (the store is as it was): the file stays here to load again another way
                st.rerun()


# ---- validation reports of this session's loads
reports = st.session_state.get("_load_reports", [])
if reports:
    st.subheader("Validation report")
    for i, rep in enumerate(reports):
        r = rep["result"]
        with st.container(border=True):
            already = (r["batch_id"] is None and not rep.get("every_row_rejected")
                       and r["duplicates_skipped"] == r["rows_read"] - r["rows_rejected"])
            st.markdown(f"**{plain(r['file'])}** read as `{r['format']}`"
                        + (f", batch {r['batch_id']}" if r["batch_id"] is not None else "")
                        + (" — already loaded: the same file read the same way adds nothing" if already else ""))
            if rep.get("every_row_rejected"):
                st.error(f"Nothing loaded from {plain(r['file'])}: every one of its {r['rows_read']:,} "
                         f"row{'s' if r['rows_read'] != 1 else ''} was rejected (the reasons by row and field below); "
                         "the store is as it was. Pick another format or map its columns, then load it again.",
                         icon=":material/error:")
            c = metric_row(4)
            c[0].metric("Rows read", f"{r['rows_read']:,}")
            c[1].metric("Rows ingested", f"{r['rows_ingested']:,}")
            c[2].metric("Rows rejected", f"{r['rows_rejected']:,}")
            c[3].metric("Duplicates skipped", f"{r['duplicates_skipped']:,}",
                        help="Rows whose request_id is already stored (or repeated in the file).")
            if r["rejects"]:
                shown = [dict(x, reason=_for_the_form(x["reason"])) for x in r["rejects"][:200]]
                st.dataframe(shown, placeholder=MISSING, hide_index=True, column_config={
                    "row": st.column_config.NumberColumn("Row in the file"),
                    "field": st.column_config.TextColumn("Field"), "reason": st.column_config.TextColumn("Reason")})
                if rep["rejected_csv"]:
                    st.download_button("Download the rejected rows (CSV)", rep["rejected_csv"],
                                       file_name=f"rejected_{Path(r['file']).stem}.csv", mime="text/csv",
                                       key=f"rejected-{i}", icon=":material/download:", on_click="ignore")
    if st.button("Clear the reports", key="clear-reports"):
        st.session_state["_load_reports"] = []
        st.rerun()

if can("upload"):
    _prune(uploads)
    for upload in uploads or []:
        _file_panel(upload)


# ---- live sources: what the ingester follows, watches, pulls and scrapes
st.subheader("Live sources")
st.caption("The ingester runs inside this dashboard's server, whether or not a tab is open: every 2 seconds it "
           "loads the new complete lines of the followed logs (from where it stopped, also after a restart or a "
           "rotated log), the new files of the watched folders, and runs the pulls and scrapes that are due. "
           "Rows already stored are skipped. Only the sources an admin configured here are read.")
status = ingester_status_frame()
if current_access().scoped:      # the rows loaded add up every tenant's requests
    st.info("The live sources load every tenant's requests; your login sees only its own tenants, so they are not "
            "listed.", icon=":material/lock:")
elif status.empty:
    st.info("No live source is configured. " + ("Add one below." if can("edit_settings") else
            "An admin adds them here (or with python -m finops serve-ingest --add-follow PATH)."),
            icon=":material/sensors_off:")
else:
    shown = status.assign(
        last_ok=[f"{t:%Y-%m-%d %H:%M:%S}" if t is not None and t == t else "never" for t in status["last_ok"]],
        rows_total=[f"{int(n):,}" for n in status["rows_total"]],
        last_error=[e or MISSING for e in status["last_error"]])
    bounded_dataframe(shown.drop(columns=["enabled", "last_run"]), what="sources", file_name="ingester_sources",
                      hide_index=True, placeholder=MISSING, column_config={
                          "id": st.column_config.NumberColumn("Id", format="%d"),
                          "source": st.column_config.TextColumn("Source"),
                          "state": st.column_config.TextColumn("State"),
                          "last_ok": st.column_config.TextColumn("Last load (UTC)"),
                          "rows_total": st.column_config.TextColumn("Rows loaded"),
                          "last_error": st.column_config.TextColumn("Last error")})
    configured = status[status["id"] != service.OTLP_ID]
    if can("follow") and not configured.empty:
        st.markdown("**Start or stop following a configured source**")
        for r in configured.itertuples(index=False):
            c1, c2 = st.columns([5, 1], vertical_alignment="center")
            c1.markdown(f"{r.id}. {plain(r.source)}")
            if c2.button("Stop" if r.enabled else "Start", key=f"ingest-toggle-{r.id}",
                         icon=":material/stop_circle:" if r.enabled else ":material/play_circle:"):
                save_edits(lambda r=r: service.set_enabled(cursor(), int(r.id), not r.enabled), "The source",
                           lambda s_: f"Source {s_.id} {'started' if s_.enabled else 'stopped'}.")
    elif not can("follow"):
        st.caption(ROLE_READS.format(what="starting and stopping sources", who="engineers"))
if can("edit_settings"):
    with st.expander("Add or remove a source (admin)", icon=":material/settings_input_antenna:"):
        with st.form("add_source"):
            kinds = list(service.KINDS)
            kind = st.selectbox("Kind", kinds, format_func=lambda k: f"{k}: {service.KINDS[k]}", key="source_kind")
            target = st.text_input("Path, folder or URL", key="source_target",
                                   help="follow: a log file on this server; watch: a folder; pull-langfuse: its "
                                        "base URL; scrape-vllm: http://HOST:8000/metrics; pull-litellm: empty")
            c1, c2, c3 = st.columns(3)
            fmt = c1.selectbox("Format (follow, watch)", ["(detected)", *[a.name for a in ADAPTERS]],
                               key="source_format")
            pattern = c2.text_input("Files (watch)", value="*.jsonl", key="source_glob")
            every = c3.number_input("Every (s, pulls and scrapes)", min_value=service.MIN_EVERY_S,
                                    max_value=service.MAX_EVERY_S, value=15.0, key="source_every")
            c1, c2 = st.columns(2)
            cred = c1.text_input("Credential's environment variable (pulls)", key="source_credential",
                                 placeholder="LITELLM_DSN, or PUBLIC,SECRET for Langfuse",
                                 help="the NAME of a variable or secrets.toml key; the secret itself is never "
                                      "stored or shown")
            replica = c2.text_input("Replica name (scrape)", key="source_replica")
            add = st.form_submit_button("Add the source", type="primary", icon=":material/add:")
        if add:
            save_edits(lambda: service.add_source(
                cursor(), kind, target, format=None if fmt == "(detected)" else fmt,
                pattern=pattern if kind == "watch" else None, credential=cred or None,
                every_s=every if kind in service.SCHEDULED else None, replica=replica or None),
                "The source", lambda s_: f"Added source {s_.id}: {s_.label()}.")
        configured = status[status["id"] != service.OTLP_ID]
        if not configured.empty:
            c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
            gone = c1.selectbox("Remove a source (its loaded rows stay)", list(configured["id"]),
                                format_func=lambda i: f"{i}. {configured.set_index('id').loc[i, 'source']}",
                                key="source_remove")
            if c2.button("Remove", key="source-remove", icon=":material/delete:"):
                save_edits(lambda: service.remove_source(cursor(), int(gone)), "The source",
                           lambda s_: f"Removed source {s_.id}.")
        otlp_port = query(service.configured_otlp_port)
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        port = c1.number_input("OTLP/HTTP receiver port on 127.0.0.1 (0: off)", min_value=0, max_value=65535,
                               value=otlp_port or 0, step=1, key="otlp_port",
                               help="an OpenTelemetry Collector or SDK on this machine sends POST /v1/traces here")
        if c2.button("Save", key="otlp-save", icon=":material/save:"):
            save_edits(lambda: service.set_otlp_port(cursor(), int(port)), "The OTLP port",
                       lambda _: f"OTLP/HTTP receiver {'on 127.0.0.1:' + str(int(port)) if port else 'off'}.")
st.caption("From a shell: `python -m finops serve-ingest --list`, `--add-follow PATH`, `--add-watch DIR --glob "
           "'*.jsonl'`, `--add-pull litellm --dsn-env LITELLM_DSN --every 300`, `--add-scrape vllm --url URL "
           "--every 15`, `--remove ID`; without a dashboard, `python -m finops serve-ingest` runs the ingester.")

# ---- loaded batches
st.subheader("Loaded batches")
batches = query(store.batches)
if current_access().scoped:      # a batch's counts and time span add up every tenant's requests
    st.info("Batches hold every tenant's requests; your login sees only its own tenants, so they are not listed.",
            icon=":material/lock:")
elif batches.empty:
    st.info("No batches loaded yet: the store is empty. Load files above, or build the sample fleet with "
            f"`python -m finops demo --db {store_label()}`.", icon=":material/database:")
else:
    st.caption(f"{len(batches):,} batch{'es' if len(batches) != 1 else ''}, {int(batches['rows_ingested'].sum()):,} "
               "requests. Deleting a batch removes "
               "its requests and their rollups; loading the same file again brings them back.")
    head = st.columns([4, 2, 2, 2, 3, 1])
    for col, title in zip(head, ("File", "Format", "Requests", "Rejected / duplicates", "Time span (UTC)", ""),
                          strict=True):
        col.markdown(f"**{title}**")
    for b in batches.head(100).itertuples(index=False):
        row = st.columns([4, 2, 2, 2, 3, 1], vertical_alignment="center")
        row[0].markdown(f"{plain(b.file_name)}  \n:gray[batch {b.batch_id}, loaded {b.loaded_at:%Y-%m-%d %H:%M}]")
        row[1].markdown(f"`{b.format}`")
        row[2].markdown(f"{b.rows_ingested:,} of {b.rows_read:,}")
        row[3].markdown(f"{b.rows_rejected:,} / {b.rows_duplicate:,}")
        row[4].markdown(span(b.min_ts, b.max_ts) if b.rows_ingested else MISSING)
        if can("delete_batch"):
            with row[5].popover("Delete", icon=":material/delete:"):
                st.markdown(f"Delete batch {b.batch_id} ({counted(b.rows_ingested, 'request')} of {plain(b.file_name)})?")
                if st.button("Delete it", key=f"delete-{b.batch_id}", type="primary"):
                    n = store.delete_batch(cursor(), int(b.batch_id))
                    st.toast(f"Deleted batch {b.batch_id}: {n:,} requests.", icon=":material/delete:")
                    st.rerun()
    if len(batches) > 100:
        st.caption(f"The 100 newest of {len(batches):,} batches are listed.")

# ---- price book
st.subheader("Price book")
unpriced = query(pricing.unpriced_models)
if len(unpriced):
    st.warning(f"Models with traffic but no price: {', '.join(plain(m) for m in unpriced['model'])}. Their requests "
               "cost $0 until you add a row for them below or an alias naming a priced model (unless the logs "
               "carry their cost).", icon=":material/money_off:")
if can("edit_prices"):
    with st.form("prices"):
        edited = st.data_editor(query(pricing.price_book), placeholder=MISSING, hide_index=True, num_rows="dynamic", key="price_editor",
                                column_config={
            "model": st.column_config.TextColumn("Model", required=True),
            "provider": st.column_config.TextColumn("Provider"), "publisher": st.column_config.TextColumn("Publisher"),
            "kind": kind_column(required=True),
            "size_class": st.column_config.TextColumn("Size class"),
            "input_usd_per_1m": st.column_config.NumberColumn("Input ($ per 1M tokens)", format="$%,.3f"),
            "output_usd_per_1m": st.column_config.NumberColumn("Output ($ per 1M tokens)", format="$%,.3f"),
            "cached_input_usd_per_1m": st.column_config.NumberColumn("Cached input ($ per 1M tokens)", format="$%,.3f"),
            "request_usd": st.column_config.NumberColumn("Per request ($)", format="$%,.4f"),
            "gpu_hour_usd": st.column_config.NumberColumn("GPU-hour ($)", format="$%,.2f"),
            "gpus_per_replica": st.column_config.NumberColumn("GPUs per replica", format="%d"),
            "replicas": st.column_config.NumberColumn("Replicas", format="%d"),
            "slots_per_replica": st.column_config.NumberColumn("Concurrent slots per replica", format="%d"),
            "price_as_of": st.column_config.DateColumn("Price as of"),
            "source": st.column_config.TextColumn("Source of the price"),
            "service_tier": st.column_config.TextColumn("Service tier", help="empty: standard; or batch, flex, priority"),
            "min_input_tokens": st.column_config.NumberColumn(
                "Above input tokens", format="%d", help="a context tier: the row prices requests whose input exceeds "
                "this (0 or empty: every request)"),
            "effective_from": st.column_config.DateColumn("In force from", help="empty: always"),
            "effective_to": st.column_config.DateColumn("In force until (exclusive)", help="empty: open-ended"),
            "cache_write_usd_per_1m": st.column_config.NumberColumn("Cache write ($ per 1M tokens)", format="$%,.3f"),
            "cache_write_1h_usd_per_1m": st.column_config.NumberColumn("1-hour cache write ($ per 1M tokens)",
                                                                       format="$%,.3f")})
        save = st.form_submit_button("Save prices", type="primary", icon=":material/save:")
    if save:
        save_edits(lambda: pricing.save_price_book(cursor(), edited), "Prices",
                   lambda n: f"Saved {n} prices: every page is repriced.")
    if st.button("Reset to the bundled list prices (data/prices.csv)", key="reset-prices"):
        pricing.reset_price_book(cursor())
        st.rerun()
else:
    st.dataframe(query(pricing.price_book), placeholder=MISSING, hide_index=True)
st.caption("These rows are ours and override the catalogue: API models cost their tokens at these prices unless "
           "the logs record a cost; self-hosted models cost replicas × GPUs per replica × $ per GPU-hour for the "
           "hours their fleet ran (its schedule below, else while it served traffic), allocated to requests by "
           "busy time. A model with no row here is priced from the catalogue. "
           "Saving reprices every page at once; nothing is re-loaded.")

# ---- how each model is priced, aliases, the catalogue
st.subheader("How each model is priced")
bounded_dataframe(query(pricing.resolution), what="model names", file_name="model_resolution", placeholder=MISSING, hide_index=True, column_config={
    "model": st.column_config.TextColumn("Model as logged"), "provider": st.column_config.TextColumn("Provider"),
    "price_source": None, "price_provider": None, "price_model": None,
    "how": st.column_config.TextColumn("Priced by")})
st.caption("In this order: an alias below, our price book row for the name, the catalogue (dated names such as "
           "gpt-4o-2024-11-20 and provider prefixes such as openai/ resolved), else unpriced ($0, and said on "
           "the pages that show money).")
if can("edit_aliases"):
    with st.form("aliases"):
        st.markdown("**Aliases**: price a private or deployment name as another model (a price book model, or a "
                    "catalogue model with its provider; not another alias: aliases do not chain).")
        alias_edit = st.data_editor(query(pricing.aliases), placeholder=MISSING, hide_index=True, num_rows="dynamic", key="alias_editor",
                                    column_config={"alias": st.column_config.TextColumn("Name as logged"),
                                                   "model": st.column_config.TextColumn("Priced as model"),
                                                   "provider": st.column_config.TextColumn("Catalogue provider")})
        save_aliases = st.form_submit_button("Save aliases", icon=":material/save:")
    if save_aliases:
        save_edits(lambda: pricing.save_aliases(cursor(), alias_edit), "Aliases",
                   lambda n: f"Saved {n} aliases: every page is repriced.")
else:
    st.dataframe(query(pricing.aliases), placeholder=MISSING, hide_index=True)
cat = query(pricing.catalogue_status)
st.caption(f"Catalogue: {cat['source']}, {cat['rows']:,} dated price rows of {cat['providers']:,} providers, "
           "shipped inside the package (no network). To take a newer one, raise the genai-prices pin in "
           "requirements.txt and run `python -m finops prices sync`.")

# ---- self-hosted fleets: the schedule, reservations, the idle policy
st.subheader("Self-hosted fleets")
fleet_basis = query(fleets.billing_basis)
if fleet_basis.empty:
    st.info("No self-hosted model in the price book: give a model the kind self_hosted above (with its GPUs per "
            "replica and $ per GPU-hour) to describe its fleet here.", icon=":material/dns:")
else:
    st.markdown("\n".join(f"- **{plain(r.model)}**: {plain(r.how)}" for r in fleet_basis.itertuples(index=False)))
    if can("edit_fleets"):
        with st.form("fleet_schedule"):
            st.markdown("**Schedule**: the periods each fleet ran, in UTC. A fleet is billed replicas × GPUs per replica × "
                        "$ per GPU-hour for the hours of its periods, and for no other; periods at different sites add "
                        "up. A model without periods is billed while it served traffic: from its first request's hour "
                        f"to its last's, through silences of up to {pricing.TRAFFIC_GAP_HOURS} hours but not longer ones.")
            schedule_edit = st.data_editor(query(fleets.schedule), hide_index=True, num_rows="dynamic",
                                           key="schedule_editor", column_config={
                "model": st.column_config.SelectboxColumn("Model", options=list(fleet_basis["model"]), required=True),
                "starts_at": st.column_config.DatetimeColumn("From (UTC)", required=True),
                "ends_at": st.column_config.DatetimeColumn("To (UTC, exclusive)", help="empty: still running"),
                "replicas": st.column_config.NumberColumn("Replicas", min_value=0, step=1, format="%d", required=True),
                "gpus_per_replica": st.column_config.NumberColumn("GPUs per replica", min_value=1, step=1, format="%d",
                                                                  help="empty: the price book's"),
                "gpu_hour_usd": st.column_config.NumberColumn("$ per GPU-hour", min_value=0.0, format="$%,.3f",
                                                              help="empty: the price book's"),
                "gpu_type": st.column_config.TextColumn("GPU type"), "site": st.column_config.TextColumn("Site"),
                "source": st.column_config.SelectboxColumn("Source", options=list(fleets.SOURCES),
                                                           help="declared by you, or inferred from the logs")})
            save_schedule = st.form_submit_button("Save the schedule", type="primary", icon=":material/save:")
        if save_schedule:
            save_edits(lambda: fleets.save_schedule(cursor(), schedule_edit), "Schedule",
                       lambda n: f"Saved {n} periods: every page is repriced.")
        if st.button("Infer periods from the logs' replica ids", key="infer-fleet", icon=":material/auto_fix_high:",
                     help="For each fleet without a declared period: the distinct replicas each hour's requests name, "
                          "per site, labelled inferred. A replica that served nothing in an hour is not seen."):
            n = fleets.apply_inferred(cursor())
            st.toast(f"{n} periods inferred from the logs." if n else "No request names its replica: nothing to infer.",
                     icon=":material/check:")
            st.rerun()
    else:
        st.dataframe(query(fleets.schedule), placeholder=MISSING, hide_index=True)
    st.caption("Or load a CSV (model, from, to, replicas, gpus_per_replica, gpu_hour_usd, gpu_type, site) from the "
               f"command line: `python -m finops fleet load FILE --db {store_label()}`; `fleet show` lists them.")
    if can("edit_fleets"):
        with st.form("fleet_reservations"):
            st.markdown("**Reservations**: the replicas of a fleet a tenant reserved, the weights by which the "
                        "'spread by reservations' policy charges out its idle GPU time.")
            reservations_edit = st.data_editor(query(fleets.reservations), hide_index=True, num_rows="dynamic",
                                               key="reservations_editor", column_config={
                "model": st.column_config.SelectboxColumn("Model", options=list(fleet_basis["model"]), required=True),
                "tenant": st.column_config.TextColumn("Tenant", required=True),
                "replicas": st.column_config.NumberColumn("Replicas reserved", min_value=0.0, required=True)})
            save_reservations = st.form_submit_button("Save reservations", icon=":material/save:")
        if save_reservations:
            save_edits(lambda: fleets.save_reservations(cursor(), reservations_edit), "Reservations",
                       lambda n: f"Saved {n} reservations.")
        current_policy = query(fleets.default_policy)
        with st.form("idle_policy_default"):
            st.markdown("**Idle policy**: how reports and FOCUS exports charge idle GPU time unless they choose "
                        "otherwise (the Cost page and `python -m finops report --idle-policy` do).")
            keys = [p.key for p in pricing.IDLE_POLICIES]
            labels = {p.key: f"{p.label}: {p.help}" for p in pricing.IDLE_POLICIES}
            c1, c2 = st.columns([3, 2])
            chosen = c1.selectbox("Default idle policy", keys, index=keys.index(current_policy.kind),
                                  format_func=labels.get, key="default_idle_policy")
            centre_name = c2.text_input("Cost centre (for 'charge to a cost centre')",
                                        value=current_policy.cost_centre or "platform", key="default_idle_centre")
            save_policy = st.form_submit_button("Save the idle policy", icon=":material/save:")
        if save_policy:
            save_edits(lambda: fleets.set_default_policy(
                           cursor(), pricing.IdlePolicy(chosen, centre_name if chosen == "centre" else "")),
                       "Idle policy", lambda saved: f"Idle GPU time is now charged: {saved.label}.")
    else:
        if not current_access().scoped:      # reservations name every tenant
            st.dataframe(query(fleets.reservations), placeholder=MISSING, hide_index=True)
        st.caption(f"Idle policy: {query(fleets.default_policy).label}.")
