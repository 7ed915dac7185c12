"""Percentiles: how slow is each model at its median and at its tail, and since when."""
import streamlit as st

from finops import charts, sql, store
from finops.fmt import MISSING, duration_columns
from finops.latency import stats as latency
from views._shared import (
    SERVED_NOTE,
    bounded_dataframe,
    current_filters,
    empty_state,
    filter_caption,
    percentile_note,
    plain,
    query,
    raw_rows_notice,
    source_label,
    stop_if_store_empty,
)

FIELD_WORDS = {"total_ms": "total latency", "ttft_ms": "time to first token", "queue_ms": "queue wait",
               "service_ms": "service time"}
#: why a group may lack a field, said only for the fields it explains (a trace with no latency at all is no API's doing)
WHY_MISSING = {"queue_ms": "a hosted API reports no queue wait", "service_ms": "a hosted API reports no service split"}
GROUP_WORDS = {"model": "model", "sla_tier": "SLA tier", "tenant": "tenant", "route": "route", "replica": "replica"}


st.title("Percentiles")
f = current_filters()
st.caption(filter_caption(f))
stop_if_store_empty("the percentiles page")
if raw_rows_notice("Percentiles per tenant, tier, route or replica"):
    st.stop()
cov = query(latency.coverage, f)
fields = [x for x in sql.LATENCY_FIELDS if cov.get(x)]
if not cov.get("ts") or not fields:
    empty_state("No request served by a model with a latency matches these filters.")
    st.stop()

field = st.segmented_control("Latency", fields, default=fields[0], key="pct_field", bind="query-params",
                             format_func=lambda c: FIELD_WORDS.get(c, c)) or fields[0]
what = FIELD_WORDS.get(field, field)


# ---------------------------------------------------------------- the table
st.header(f"P50, P95 and P99 of {what}")
by = st.segmented_control("Per", list(GROUP_WORDS), default="model", key="lat_by", bind="query-params",
                          format_func=lambda c: GROUP_WORDS[c]) or "model"
pct = query(latency.percentiles, f, by=(by,), fields=(field,))
cols = [f"{field}_p50", f"{field}_p95", f"{field}_p99"]
table, unit, named = duration_columns(pct, cols)
fmt = "%,.2f" if unit == "s" else "%,.0f"
timed = f"requests_with_{field}"
bounded_dataframe(table, sort_by="requests", order="the most requests", what="groups", file_name="percentiles",
                  placeholder=MISSING, hide_index=True, column_order=[by, "requests", timed, *named.values()],
                  column_config={
    by: GROUP_WORDS[by].capitalize(), "requests": st.column_config.NumberColumn("Requests served", format="%,d"),
    timed: st.column_config.NumberColumn(f"With {what}", format="%,d",
                                         help=f"The requests whose logs carry a {what}: the percentiles are over these."),
    **{named[c]: st.column_config.NumberColumn(f"{c.rsplit('_', 1)[1].upper()} ({unit})", format=fmt)
       for c in cols}})
why = f" ({WHY_MISSING[field]})" if field in WHY_MISSING else ""
absent = f" {MISSING}: that group's logs carry no {what}{why}." if pct[cols].isna().to_numpy().any() else ""
partly = pct[(pct[timed] > 0) & (pct[timed] < pct["requests"])]
part = (f" In {len(partly):,} of the groups only some requests carry a {what} (\"With {what}\" fewer than served): "
        "the percentiles are of those." if len(partly) else "")
# a percentile of a handful of requests is (near) the slowest of them: said, with how many groups are such
few = int(((pct[timed] > 0) & (pct[timed] < latency.TAIL_REQUESTS)).sum())
tiny = (f" A P99 over fewer than {latency.TAIL_REQUESTS} requests (a P95 over fewer than 20) is at or near the group's "
        f"slowest request, not a tail: read it with its count ({few:,} of the {len(pct):,} groups here)."
        if few else "")
st.caption(percentile_note(pct) + f" {SERVED_NOTE}{absent}{part}{tiny} " + source_label())

# ---------------------------------------------------------------- over time, one panel per model
st.header(f"{what.capitalize()} over time, per model")
lo, hi = query(store.time_span)
grain = sql.grain_for(f.since or lo, f.until or hi, "latency")
over = query(latency.over_time, f, field, grain=grain)
if over.empty:
    empty_state(f"No request carries {what} in this period.")
else:
    models = list(dict.fromkeys(over["grp"]))
    grid = st.columns(2)
    for i, model in enumerate(models):
        with grid[i % 2]:
            st.altair_chart(charts.beside(charts.percentile_panel(over[over["grp"] == model], grain, what,
                                                                  title=f"{model}: {what} per {grain}")))
    without = [m for m in query(store.distinct_values, "model") if m not in models and (not f.models or m in f.models)]
    if without:
        st.caption(f"No {what} in the logs of {', '.join(plain(m) for m in without)}{why}.")
    st.caption(f"One panel per model, one point per {grain}: P99 (solid), P95 (dashed) and P50 (dotted); log scale, "
               "so a tail spike stands out against the median. " + percentile_note(over) + " " + source_label())
st.page_link("views/incidents.py", label="What went wrong and when: the Incidents page", icon=":material/emergency:")
