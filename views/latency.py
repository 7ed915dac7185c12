"""Latency: where are requests slow, in which layer, since when, and what to do about it."""
import streamlit as st

from finops import charts, sql, store
from finops.errors import InputError
from finops.fmt import MISSING, duration_ms
from finops.latency import diagnose
from finops.latency import stats as latency
from finops.ops import alerts as alerts_mod
from finops.ops import readiness
from views._shared import (
    current_filters,
    cursor,
    empty_state,
    filter_caption,
    no_alert_state,
    plain,
    query,
    raw_rows_notice,
    source_label,
    stop_if_store_empty,
)


def percentile_note(frame) -> str:
    """How exact the percentiles of ``frame`` are (finops.latency.stats sets ``attrs['max_rel_error']``)."""
    err = frame.attrs.get("max_rel_error", 0.0)
    if err:
        return (f"Percentiles within {err:.1%} of the exact value: read from the hourly latency sketch written "
                "when the logs were loaded (a tenant or tier filter, or another grouping, gives exact ones).")
    return "Exact percentiles (linear interpolation between requests, as numpy)."


SEVERITY_ICON = {"critical": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}
SEVERITY_BADGE = {"critical": "red", "warning": "orange", "info": "blue"}
LAYER_TITLE = {"routing": "Routing layer", "queue": "Queue layer", "prefill": "Prefill", "decode": "Decode",
               "tail": "Long tail"}

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
                                                     title=f"total_ms: P50, P95 and P99 per {grain}"))
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
if lacking:
    st.info("These logs carry no " + ", ".join(f"`{x}`" for x in lacking)
            + ": the views that need them say so and are left out. Cache hits are not counted on this page.",
            icon=":material/info:")
if not cov.get("total_ms"):
    empty_state("These logs carry no `total_ms`, so there is no latency to show.")
    st.stop()

# ---------------------------------------------------------------- diagnosis
st.header("Diagnosis")
window = st.segmented_control("Judge each model per", ["hour", "15min"], default="hour", key="lat_window",
                              bind="query-params",
                              help="Each model is compared with its own usual behaviour window by window; "
                                   "adjacent flagged windows are reported as one span.") or "hour"
findings = query(diagnose.diagnose, f, window=window)
if not findings:
    st.success("No slow-path finding: no queue build-up, prefill or decode tail, cache collapse or P99 spike "
               "stands out against each model's usual behaviour.", icon=":material/check_circle:")
else:
    counts = {s: sum(1 for x in findings if x.severity == s) for s in ("critical", "warning", "info")}
    st.caption(" · ".join(f"{n} {s}" for s, n in counts.items() if n)
               + ". The playbook, top down: routing → queue → prefill → decode → long tail.")
    for fd in findings:
        with st.container(border=True):
            start, end = fd.metrics.get("window_start"), fd.metrics.get("window_end")
            when = f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC" if start is not None else ""
            st.markdown(f":{SEVERITY_BADGE[fd.severity]}-badge[{SEVERITY_ICON[fd.severity]} {fd.severity}] "
                        f"**{LAYER_TITLE[fd.layer]} · {plain(fd.model)}** &nbsp; {when}")
            st.markdown(plain(fd.evidence))
            st.markdown(f"**Do:** {plain(fd.action)}")
st.caption("Rules: a slow-path playbook that compares each window with the model's usual queue, service and "
           "decode times. " + source_label())

# ---------------------------------------------------------------- alerts
st.header("Open alerts")
open_alerts = query(alerts_mod.open_alerts, f)
if open_alerts.empty:
    no_alert_state(f)
else:
    st.dataframe(open_alerts, placeholder=MISSING, hide_index=True, column_order=["severity", "model", "tenant", "window_start",
                                                             "window_end", "message"],
                 column_config={"severity": "Severity", "rule": "Rule", "model": "Model", "tenant": "Tenant",
                                "window_start": st.column_config.DatetimeColumn("From (UTC)", format="YYYY-MM-DD HH:mm"),
                                "window_end": st.column_config.DatetimeColumn("To (UTC)", format="YYYY-MM-DD HH:mm"),
                                "message": st.column_config.TextColumn("Alert", width="large")})
with st.expander("Alert rules and SLA targets", icon=":material/tune:"):
    con = cursor()
    st.caption("Common production thresholds to start from. Changes are saved in this store's settings.")
    rules = query(alerts_mod.rules_frame)
    edited = st.data_editor(
        rules, placeholder=MISSING, hide_index=True, key="alert_rules", disabled=["name", "title", "unit"],
        column_order=["enabled", "title", "threshold", "unit", "window", "sustained", "min_requests", "severity"],
        column_config={
            "enabled": st.column_config.CheckboxColumn("On"), "title": "Rule",
            "threshold": st.column_config.NumberColumn("Threshold", min_value=0.0, format="%.3g",
                                                       help="a fraction for % rules (0.01 = 1 %), a multiple of the "
                                                            "SLA for P99, requests waiting for the queue"),
            "unit": "Unit",
            "window": st.column_config.SelectboxColumn("Window", options=list(alerts_mod.WINDOWS)),
            "sustained": st.column_config.NumberColumn("Sustained (windows)", min_value=1, step=1),
            "min_requests": st.column_config.NumberColumn("Min requests per window", min_value=0, step=1),
            "severity": st.column_config.SelectboxColumn("Severity", options=list(alerts_mod.SEVERITIES))})
    sla = query(alerts_mod.sla_targets)
    metric_now = query(alerts_mod.sla_metric, f)
    metric = st.radio("The SLA is on", list(sql.SLA_COLUMNS), index=list(sql.SLA_COLUMNS).index(metric_now),
                      horizontal=True, key="sla_metric",
                      help="ttft_ms: time to first token (interactive SLAs); total_ms: end-to-end latency. By default "
                           "TTFT where the logs carry it.")
    st.markdown("**P99 SLA per tier (ms)**: an alert fires above the rule's multiple of it.")
    cols = st.columns(max(len(sla), 1))
    new_sla = {tier: col.number_input(tier, min_value=1.0, value=float(v), step=100.0, key=f"sla_{tier}")
               for col, (tier, v) in zip(cols, sla.items(), strict=True)}
    if st.button("Save rules and SLA targets", icon=":material/save:"):
        try:
            alerts_mod.save_rules(con, edited)
            alerts_mod.save_sla_targets(con, new_sla)
            alerts_mod.save_sla_metric(con, metric)
        except InputError as exc:
            st.error(plain(exc))
        else:
            st.success("Saved. Alerts are re-evaluated with the new rules.")

# ---------------------------------------------------------------- percentiles
st.header("Percentiles")
by = st.segmented_control("Per", ["model", "sla_tier", "tenant", "route", "replica"], default="model",
                          key="lat_by", bind="query-params") or "model"
pct = query(latency.percentiles, f, by=(by,))
st.dataframe(pct, placeholder=MISSING, hide_index=True, column_config={
    by: by.replace("_", " ").capitalize(), "requests": st.column_config.NumberColumn("Requests", format="%,d"),
    **{c: st.column_config.NumberColumn(c.replace("_ms_p", " P").replace("_", " "), format="%,.0f ms")
       for c in pct.columns if "_ms_p" in c}})
st.caption(percentile_note(pct) + f" {MISSING}: that group's logs lack the field (API models report no queue time). "
           + source_label())

# ---------------------------------------------------------------- queue histogram
st.header("Queue time")
if not cov.get("queue_ms"):
    st.info("These logs carry no `queue_ms`: the time a request waited for a free slot is unknown, so the queue "
            "layer cannot be told apart from service time.", icon=":material/info:")
else:
    c1, c2 = st.columns([1, 2])
    scale = c1.segmented_control("Bins", ["log", "linear"], default="log", key="q_scale", bind="query-params") or "log"
    bins = c2.slider("Number of bins", 10, 80, 40, step=5, key="q_bins")
    hist = query(latency.histogram, f, "queue_ms", bins=bins, scale=scale)
    qp = query(latency.percentiles, f, by=("model",), fields=("queue_ms",)).set_index("model")
    models = list(dict.fromkeys(hist["grp"]))
    grid = st.columns(2)
    for i, model in enumerate(models):
        h = hist[hist["grp"] == model]
        marks = {p.upper(): qp.loc[model, f"queue_ms_{p}"] for p in ("p50", "p95", "p99")} if model in qp.index else {}
        total = int(h["count"].sum())
        with grid[i % 2]:
            if h["hi"].max() <= 1.0 and (scale == "log" or h["lo"].max() <= 0.5):
                st.markdown(f"**{plain(model)}**: none of its {total:,} requests waited (queue_ms = 0).")
                continue
            st.altair_chart(charts.queue_histogram(h, marks, scale, title=f"{model}: queue_ms per request"))
            notes = []
            if scale == "log":
                zero = int(h[h["bin"] == 0]["count"].sum())
                notes.append(f"{zero:,} of {total:,} requests ({zero / total:.0%}) waited less than "
                             f"{h['hi'].iloc[0]:,.3g} ms (their lowest non-zero wait) and are not drawn on the log axis.")
            marks_text = ", ".join(f"{k} {duration_ms(v)}" for k, v in marks.items())
            if marks_text:
                notes.append(f"queue_ms {marks_text}.")
            st.caption(" ".join(notes))
    st.caption("Dashed lines: P50, P95 and P99 of queue_ms. A queue-bound model has a heavy right tail here "
               "while its service time stays put. " + source_label())

# ---------------------------------------------------------------- segments
st.header("Where the time goes")
seg = query(latency.segments, f)
if seg.empty:
    empty_state("No request with total_ms matches these filters.")
else:
    st.altair_chart(charts.segment_bars(seg))
    st.caption("Each bar is the mean of each segment over the requests whose total_ms lies within ±0.5 percentage "
               "points of that percentile (P99: between P98.5 and P99.5; the request at the percentile in a small "
               "group), so the segments add up to the bar's total, which is close to the percentile itself. 'other' "
               "is time no logged segment accounts for (network, gateway). " + source_label())

# ---------------------------------------------------------------- over time
st.header("Percentiles over time")
lo, hi = query(store.time_span)
grain = sql.grain_for(f.since or lo, f.until or hi, "latency")
fields = [x for x in ("total_ms", "queue_ms", "service_ms", "ttft_ms") if cov.get(x)]
field = st.segmented_control("Field", fields, default="total_ms", key="lat_field", bind="query-params") or "total_ms"
over = query(latency.over_time, f, field, grain=grain)
if over.empty:
    empty_state(f"No request carries {field} in this period.")
else:
    st.altair_chart(charts.percentiles_over_time(over, grain, field, title=f"{field}: P50, P95 and P99 per {grain}"))
    st.caption(f"One point per model and {grain}; log scale, so a P99 spike stands out against the median. "
               + percentile_note(over) + " " + source_label())

# ---------------------------------------------------------------- buckets
st.header("Prefill-bound or decode-bound?")
left, right = st.columns(2)
prompt_field = "input_tokens" if cov.get("input_tokens") else ("prompt_chars" if cov.get("prompt_chars") else None)
with left:
    if prompt_field is None:
        st.info("These logs carry no prompt length (`input_tokens` or `prompt_chars`).", icon=":material/info:")
    else:
        b = query(latency.length_buckets, f, prompt_field)
        unit = "prompt tokens" if prompt_field == "input_tokens" else "prompt characters"
        st.altair_chart(charts.latency_by_bucket(b, unit, title=f"Latency by prompt length ({unit})"))
        st.caption("Rising steeply with the prompt: prefill-bound (compute).")
with right:
    if not cov.get("output_tokens"):
        st.info("These logs carry no `output_tokens`, so latency cannot be bucketed by output length.",
                icon=":material/info:")
    else:
        b = query(latency.length_buckets, f, "output_tokens")
        st.altair_chart(charts.latency_by_bucket(b, "output tokens", title="Latency by output length (tokens)"))
        st.caption("Rising with the output: decode-bound (memory bandwidth, KV cache).")

st.subheader("Decode speed against concurrency")
dec = query(latency.decode_vs_concurrency, f)
if dec.empty:
    st.info("Decode speed needs `output_tokens` and a decode time (`decode_ms`, or `total_ms` and `ttft_ms`): "
            "these logs lack them.", icon=":material/info:")
else:
    st.altair_chart(charts.decode_rate(dec))
    st.caption("Requests in service = requests of the same model whose [start of service, end] overlaps this one's "
               "start (arrival + route + queue). Levels with fewer than 5 requests are left out. A falling line: "
               "decode slows as the batch grows. " + source_label())

st.subheader("Time to first token and time per output token")
tt = query(latency.ttft_tpot, f)
if tt.empty or (tt["with_ttft"].sum() == 0 and tt["with_tpot"].sum() == 0):
    st.info("These logs carry no `ttft_ms` and no decode time per token.", icon=":material/info:")
else:
    order = ["grp", "requests", "with_ttft", "with_tpot"] + sorted(
        (c for c in tt.columns if "_ms_p" in c), key=lambda c: (not c.startswith("ttft"), float(c.rsplit("_p", 1)[1])))
    st.dataframe(tt, placeholder=MISSING, hide_index=True, column_order=order, column_config={
        "grp": "Model", "requests": st.column_config.NumberColumn("Requests", format="%,d"),
        "with_ttft": st.column_config.NumberColumn("With TTFT", format="%,d"),
        "with_tpot": st.column_config.NumberColumn("With TPOT", format="%,d"),
        **{c: st.column_config.NumberColumn(c.replace("_ms_p", " P").upper(), format="%,.1f ms")
           for c in tt.columns if "_ms_p" in c}})
    st.caption("TPOT = (total_ms − ttft_ms) / (output_tokens − 1), the vLLM benchmark definition (decode_ms is "
               "used where TTFT is absent). " + percentile_note(tt) + " " + source_label())

# ---------------------------------------------------------------- slowest
st.header("The slowest requests")
n = st.slider("How many", 5, 50, 15, step=5, key="slow_n")
slow = query(latency.slowest, f, n)
st.altair_chart(charts.slowest_traces(slow, title=f"The {len(slow)} slowest requests, segment by segment"))
st.dataframe(slow, placeholder=MISSING, hide_index=True, column_config={
    "ts": st.column_config.DatetimeColumn("Arrival (UTC)", format="YYYY-MM-DD HH:mm:ss.SSS"),
    **{c: st.column_config.NumberColumn(c, format="%,.1f") for c in slow.columns if c.endswith("_ms")}})
st.caption("The P99 'trace': each request's own segments. 'other' is the part no logged segment accounts for. "
           + source_label())

# ---------------------------------------------------------------- readiness
st.header("Production readiness")
con = cursor()
check = query(readiness.checklist)
done = int(check["done"].sum())
st.progress(done / len(check), text=f"{done} of {len(check)} items done")
STATUS = {"pass": ":green-badge[:material/check: from the store]", "fail": ":red-badge[:material/close: not yet]",
          "partial": ":orange-badge[:material/rule: partly]", "manual": ":gray-badge[:material/person: a person ticks]"}
for category, items in check.groupby("category", sort=False):
    st.markdown(f"**{category}**")
    for item in items.itertuples(index=False):
        c1, c2 = st.columns([3, 2])
        with c1:
            ticked = st.checkbox(f"{item.item}: {item.requirement}", value=bool(item.ticked), key=f"ready_{item.id}",
                                 help="Tick when a person has confirmed it; the tick is saved in the store.")
            if ticked != bool(item.ticked):
                readiness.tick(con, item.id, ticked)
                st.rerun()
        with c2:
            st.markdown(STATUS[item.status] + (f" · ticked {item.ticked_at}" if item.ticked else ""))
            st.caption(item.evidence)
st.caption("A production-readiness checklist. Items marked 'from the store' are judged from the "
           "logs, load tests and settings in this store.")
