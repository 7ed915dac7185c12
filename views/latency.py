"""Latency: where are requests slow, in which layer, since when, and what to do about it."""
import streamlit as st

from finops import charts, sql, store
from finops.fmt import MISSING, duration_columns, duration_ms, in_words, share
from finops.fmt import counted as counted_noun
from finops.ingest import engine
from finops.latency import stats as latency
from finops.ops import incidents
from views._shared import (
    SERVED_NOTE,
    bounded_dataframe,
    current_filters,
    empty_state,
    filter_caption,
    fleet_wide,
    percentile_note,
    plain,
    query,
    raw_rows_notice,
    source_label,
    stop_if_store_empty,
    top_panels,
)

#: the log's columns as the page names them in its sentences ("these logs carry no queue wait")
LOG_WORDS = {"total_ms": "total latency", "queue_ms": "queue wait", "service_ms": "service time",
             "ttft_ms": "time to first token", "prefill_ms": "prefill time", "decode_ms": "decode time",
             "input_tokens": "prompt tokens", "output_tokens": "output tokens"}
SEGMENT_WORDS = {"total_ms": "Total latency", "route_ms": "Routing", "queue_ms": "Queue wait", "prefill_ms": "Prefill",
                 "decode_ms": "Decode", "service_ms": "Service time", "ttft_ms": "Time to first token",
                 "first_token_ms": "To first token", "after_first_token_ms": "After first token",
                 "other_ms": "Other (unlogged)"}

#: how a request that logs only its time to first token is split (finops.store.SEGMENT_EXPRS)
TTFT_SPLIT_NOTE = ("A request whose logs give its time to first token but no prefill or decode time splits at its "
                   "first token: 'to first token' (that wait, less any routing and queue time logged) and 'after "
                   "first token' (decode and streaming). ")

st.title("Latency")
f = current_filters()
st.caption(filter_caption(f))
stop_if_store_empty("the latency page")
if raw_rows_notice("The diagnosis, alerts, breakdowns and exact percentiles"):
    # a rollup-only store (finops.scale) still has the hourly latency sketch: percentiles by model
    if f.tenants or f.sla_tiers:
        st.info("The attached latency sketch is per model and hour: clear the tenant and tier filters to see "
                "its percentiles.", icon=":material/filter_alt_off:")
        st.stop()
    st.header("Percentiles")
    pct = query(latency.percentiles, f, by=("model",))
    if pct.empty:
        empty_state("No served request in the attached sketch matches these filters.")
        st.stop()
    st.dataframe(pct, placeholder=MISSING, hide_index=True, column_config={
        "model": "Model", "requests": st.column_config.NumberColumn("Requests", format="%,d"),
        **{c: st.column_config.NumberColumn(c.replace("_ms_p", " P").replace("_", " "), format="%,.0f ms")
           for c in pct.columns if "_ms_p" in c}})
    st.caption(percentile_note(pct) + " " + source_label())
    lo, hi = query(store.time_span)
    grain = sql.grain_for(f.since or lo, f.until or hi, "latency")
    grain = grain if grain in latency.SKETCH_KEYS else "hour"
    over = query(latency.over_time, f, "total_ms", grain=grain)
    if not over.empty:
        st.altair_chart(charts.percentiles_over_time(over, grain, "total_ms",
                                                     title=f"Total latency: P50, P95 and P99 per {grain}"))
    st.stop()
scope = query(store.raw_scope, f)
if scope.narrowed:
    st.info(scope.note(), icon=":material/filter_list:")

cov = query(latency.coverage, f)
if not cov.get("ts"):
    empty_state("No request served by a model matches these filters (semantic-cache hits are not counted here).")
    st.stop()
lacking = latency.lacking(cov, ("total_ms", "queue_ms", "service_ms", "ttft_ms", "prefill_ms", "decode_ms",
                                "input_tokens", "output_tokens"))
words = [LOG_WORDS[x] for x in lacking]
carry_no = "These logs carry no " + (", ".join(words[:-1]) + " or " if len(words) > 1 else "") + (words or [""])[-1]
if not cov.get("total_ms"):
    # one sentence, not two: every view here reads the total latency
    st.info(carry_no + ", so there is no latency to show: every view on this page reads each request's total "
            "latency (total_ms). Load logs that time their requests on the Data page, or widen the date range or "
            "the sidebar filters if other models' logs do.", icon=":material/info:")
    st.stop()
if lacking:
    st.info(carry_no + ": the views that need them say so and are left out.", icon=":material/info:")

st.caption("Where the time of a request goes: queue, prefill and decode, by prompt and output length, and the "
           "slowest requests segment by segment. " + SERVED_NOTE)
c1, c2 = st.columns(2)
with c1:
    st.page_link("views/incidents.py", label="Incidents: what went wrong, when, and what to do",
                 icon=":material/emergency:")
with c2:
    st.page_link("views/percentiles.py", label="Percentiles per model over time", icon=":material/stacked_line_chart:")

# ---------------------------------------------------------------- queue histogram
st.header("Queue time")
if not cov.get("queue_ms"):
    st.info("These logs carry no queue wait: the time a request waited for a free slot is unknown, so the queue "
            "layer cannot be told apart from service time.", icon=":material/info:")
else:
    c1, c2 = st.columns([1, 2])
    scale = c1.segmented_control("Bins", ["log", "linear"], default="log", key="q_scale", bind="query-params") or "log"
    bins = c2.slider("Number of bins", 10, 80, 40, step=5, key="q_bins")
    hist = query(latency.histogram, f, "queue_ms", bins=bins, scale=scale)
    qp = query(latency.percentiles, f, by=("model",), fields=("queue_ms",)).set_index("model")
    models = top_panels(hist.groupby("grp", sort=False)["count"].sum().sort_values(ascending=False, kind="stable").index)
    grid = st.columns(2)
    for i, model in enumerate(models):
        h = hist[hist["grp"] == model]
        marks = {p.upper(): qp.loc[model, f"queue_ms_{p}"] for p in ("p50", "p95", "p99")} if model in qp.index else {}
        total = int(h["count"].sum())
        with grid[i % 2]:
            if h["hi"].max() <= 1.0 and (scale == "log" or h["lo"].max() <= 0.5):
                st.markdown(f"**{plain(model)}**: " + ("its one request did not wait in a queue." if total == 1 else
                                                       f"none of its {total:,} requests waited in a queue."))
                continue
            st.altair_chart(charts.beside(charts.queue_histogram(h, marks, scale, field_label="queue wait",
                                                                 title=f"{model}: queue wait per request")))
            notes = []
            if scale == "log":
                zero = int(h[h["bin"] == 0]["count"].sum())      # the first bin holds the waits of 0 (stats.histogram_edges)
                if zero:
                    notes.append(f"{zero:,} of {total:,} requests ({share(zero / total)}) did not wait and are not drawn "
                                 f"on the log axis, which starts at the lowest wait above 0, "
                                 f"{duration_ms(h['hi'].iloc[0], fine=True)}.")
            marks_text = ", ".join(f"{k} {duration_ms(v, fine=True)}" for k, v in marks.items())
            if marks_text:
                # a percentile below the log axis's first bin (a wait of 0) has no dashed line: said, not left missing
                off = charts.marks_off_log_axis(h, marks, scale)
                notes.append(f"Queue wait {marks_text}"
                             + (f" ({in_words(off)}: left of the log axis, no dashed line)." if off else "."))
            st.caption(" ".join(notes))
    counted = (f"Counted from the hourly latency sketch written at load time: a wait within "
               f"{hist.attrs['edge_tolerance'] - 1:.0%} of a bin edge may be counted in the bin beside it. "
               if hist.attrs.get("edge_tolerance") else "")
    st.caption("Dashed lines: P50, P95 and P99 of the queue wait. A queue-bound model has a heavy right tail here "
               "while its service time stays put. " + counted + source_label())

# ---------------------------------------------------------------- segments
st.header("Where the time goes")
seg = query(latency.segments, f)
if seg.empty:
    empty_state("No request with total_ms matches these filters.")
else:
    st.altair_chart(charts.segment_bars(seg))
    st.caption("Each bar is the mean of each segment over the requests whose total latency lies within ±0.5 percentage "
               "points of that percentile (P99: between P98.5 and P99.5; the request at the percentile in a small "
               "group), so the segments add up to the bar's total, which is close to the percentile itself. 'other' "
               "is time no logged segment accounts for (network, gateway). " + TTFT_SPLIT_NOTE
               + (f"Read from the table of total-latency buckets written at load time: the bands are cut at bucket "
                  f"edges, so a bar's total is within {seg.attrs['max_rel_error']:.0%} of the exact band's. "
                  if seg.attrs.get("max_rel_error") else "") + source_label())

# ---------------------------------------------------------------- buckets
st.header("Prefill-bound or decode-bound?")
left, right = st.columns(2)
prompt_field = "input_tokens" if cov.get("input_tokens") else ("prompt_chars" if cov.get("prompt_chars") else None)
with left:
    if prompt_field is None:
        st.info("These logs carry no prompt length (prompt tokens or characters).", icon=":material/info:")
    else:
        b = query(latency.length_buckets, f, prompt_field)
        unit = "prompt tokens" if prompt_field == "input_tokens" else "prompt characters"
        st.altair_chart(charts.beside(charts.latency_by_bucket(b, unit, title=f"Latency by prompt length ({unit})",
                                                             legend_columns=2)))
        st.caption("Rising steeply with the prompt: prefill-bound (compute). " + percentile_note(b))
with right:
    if not cov.get("output_tokens"):
        st.info("These logs carry no output token counts, so latency cannot be bucketed by output length.",
                icon=":material/info:")
    else:
        b = query(latency.length_buckets, f, "output_tokens")
        st.altair_chart(charts.beside(charts.latency_by_bucket(b, "output tokens",
                                                             title="Latency by output length (tokens)", legend_columns=2)))
        st.caption("Rising with the output: decode-bound (memory bandwidth, KV cache). " + percentile_note(b))

st.subheader("Decode speed against concurrency")
dec = query(latency.decode_vs_concurrency, f)
if dec.empty:
    st.info("Decode speed needs output token counts and a decode time (logged, or total latency less the time "
            "to first token): these logs lack them.", icon=":material/info:")
elif not (dec["requests"] >= charts.DECODE_LEVEL_MIN_REQUESTS).any():
    # an empty chart with a "0.000000" axis said nothing
    st.info(f"Too few requests to draw: decode speed is drawn for the levels of requests in service with "
            f"{charts.DECODE_LEVEL_MIN_REQUESTS} requests or more, and here the most at any level is "
            f"{counted_noun(int(dec['requests'].max()), 'request')} "
            f"({counted_noun(int(dec['requests'].sum()), 'request')} "
            "with a decode time in all). Widen the date range.", icon=":material/info:")
else:
    st.altair_chart(charts.decode_rate(dec))
    st.caption(f"Requests in service = the mean number of the model's requests (all tenants) in service, from the "
               f"start of service (arrival + route + queue) to the end, over the {latency.CONCURRENCY_WINDOW_S}-second "
               "window a request arrived in, rounded (at least 1). Levels with fewer than 5 requests are left out. "
               "A falling line: decode slows as the batch grows. " + percentile_note(dec) + " " + source_label())

st.subheader("Time to first token and time per output token")
tt = query(latency.ttft_tpot, f)
if tt.empty or (tt["with_ttft"].sum() == 0 and tt["with_tpot"].sum() == 0):
    st.info("These logs carry no time to first token and no decode time per token.", icon=":material/info:")
else:
    ttft_cols = sorted((c for c in tt.columns if c.startswith("ttft_ms_p")), key=lambda c: float(c.rsplit("_p", 1)[1]))
    tpot_cols = sorted((c for c in tt.columns if c.startswith("tpot_ms_p")), key=lambda c: float(c.rsplit("_p", 1)[1]))
    shown_tt, ttft_unit, ttft_named = duration_columns(tt, ttft_cols)
    bounded_dataframe(shown_tt, sort_by="requests", order="the most requests", what="models", file_name="ttft_tpot",
                      placeholder=MISSING, hide_index=True,
                 column_order=["grp", "requests", *ttft_named.values(), *tpot_cols], column_config={
        "grp": "Model", "requests": st.column_config.NumberColumn("Requests", format="%,d"),
        **{ttft_named[c]: st.column_config.NumberColumn(f"First token {c.rsplit('_', 1)[1].upper()} ({ttft_unit})",
                                                        format="%,.2f" if ttft_unit == "s" else "%,.0f")
           for c in ttft_cols},
        **{c: st.column_config.NumberColumn(f"Per output token {c.rsplit('_', 1)[1].upper()} (ms)", format="%,.1f")
           for c in tpot_cols}})
    st.caption("Time per output token = (total latency − time to first token) / (output tokens − 1), the vLLM "
               "benchmark definition (the decode time is used where the first token's time is absent). " + percentile_note(tt) + " " + source_label())

# ---------------------------------------------------------------- the engine's own series (vLLM /metrics)
st.header("Engine view (scraped from vLLM)")
span_lo, span_hi = query(store.time_span)
engine_grain = sql.grain_for(f.since or span_lo, f.until or span_hi, "latency")
# the engines serve every tenant: a tenant-scoped login is told why the view is not shown
eng = query(engine.engine_over_time, f, engine_grain) if fleet_wide("The engine view") else None
if eng is None:
    pass
elif eng.empty:
    st.caption("No vLLM engine metrics were scraped for these models and period: `python -m finops scrape vllm "
               "--url http://HOST:8000/metrics --replica NAME` stores each replica's running and waiting requests, "
               "KV-cache usage, prefix-cache hits and preemptions beside the request logs.")
else:
    st.caption("What each vLLM engine said of itself, per model, beside the request percentiles on the same time "
               f"axis ({engine_grain} windows). Running and waiting: each replica's mean over its scrapes in the "
               "window, added up over the replicas. KV cache: the mean over the scrapes and the fullest one (the "
               "fullest engine of a replica). Prefix-cache hit rate and preemptions: what vLLM's counters rose by "
               "in the window (a server restart counted from zero). The time axis is the span scraped. Tenant and "
               "tier filters do not apply to the engine: its replicas serve everyone.")
    ttft = query(latency.over_time, f, "ttft_ms", grain=engine_grain) if cov.get("ttft_ms") else None
    total = query(latency.over_time, f, "total_ms", grain=engine_grain)
    domain = charts.time_domain(eng)        # the scraped span: the request P99s beside it, clipped to it
    for model in top_panels(engine.models_by_scrapes(eng)):
        st.subheader(plain(model))
        panels = charts.engine_panels(
            model, eng[eng["model"] == model], ttft[ttft["grp"] == model] if ttft is not None else total.iloc[0:0],
            total[total["grp"] == model], engine_grain, domain)
        for chart in panels:
            st.altair_chart(chart)

# ---------------------------------------------------------------- slowest
linked = incidents.parse_key(st.query_params.get("incident", ""))
shown = None
if linked is not None:
    window = st.query_params.get("inc_window", "hour")
    inc = query(incidents.find, f, st.query_params.get("incident"),
                window=window if window in ("hour", "15min") else "hour")
    if inc is None:
        st.warning("The incident this link names is not among those of the period and filters in the sidebar: "
                   "showing the slowest requests instead.", icon=":material/link_off:")
    elif not inc.affected:
        st.info(f"The incident '{plain(inc.title)}' hit no request in these filters.", icon=":material/info:")
    else:
        st.header("Requests hit by an incident")
        st.markdown(f"**{plain(inc.title)}** · {incidents.span_text(inc.start, inc.end)}")
        shown = query(latency.requests_by_id, tuple(inc.hit["request_id"].head(incidents.LINKED_MAX)))
        st.page_link("views/incidents.py", label="Back to the incident", icon=":material/arrow_back:",
                     query_params={"incident": inc.key})
if shown is None:
    st.header("The slowest requests")
    n = st.slider("How many", 5, 50, 15, step=5, key="slow_n")
    shown = query(latency.slowest, f, n)
    chart_title = f"The {len(shown)} slowest requests, segment by segment"
else:
    chart_title = f"{len(shown)} of its {inc.affected:,} requests hit (failed ones first), segment by segment"
st.altair_chart(charts.slowest_traces(shown, title=chart_title))
table, unit, named = duration_columns(shown, [c for c in shown.columns if c.endswith("_ms")])
bounded_dataframe(table, what="requests", file_name="slowest_requests", placeholder=MISSING, hide_index=True, column_order=[
    c for c in ("request_id", "ts", "model", "tenant", "sla_tier", "replica", "status", *(named.get(m, m) for m in (
        "total_ms", "queue_ms", "ttft_ms", "prefill_ms", "decode_ms", "service_ms")), "input_tokens", "output_tokens")
    if c in table and table[c].notna().any() and not (c == "model" and table[c].nunique() == 1)], column_config={
    "request_id": "Request", "model": "Model", "tenant": "Tenant", "sla_tier": "SLA tier", "route": "Route",
    "replica": "Replica", "status": "Status", "input_tokens": st.column_config.NumberColumn("Input tokens", format="%,d"),
    "output_tokens": st.column_config.NumberColumn("Output tokens", format="%,d"),
    "prompt_chars": st.column_config.NumberColumn("Prompt characters", format="%,d"),
    "ts": st.column_config.DatetimeColumn("Arrival (UTC)", format="YYYY-MM-DD HH:mm:ss.SSS"),
    **{named[c]: st.column_config.NumberColumn(f"{SEGMENT_WORDS.get(c, c)} ({unit})",
                                               format="%,.2f" if unit == "s" else "%,.1f")
       for c in named}})
st.caption("The P99 'trace': each request's own segments. 'other' is the part no logged segment accounts for. "
           + TTFT_SPLIT_NOTE + source_label())
