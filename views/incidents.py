"""Incidents: what went wrong, for whom, since when, and the one thing to do about it."""
import pandas as pd
import streamlit as st

from finops import sql, store
from finops.fmt import MISSING
from finops.latency import diagnose
from finops.ops import alerts as alerts_mod
from finops.ops import incidents
from views._shared import (
    can,
    current_filters,
    cursor,
    filter_caption,
    metric_row,
    no_alert_state,
    plain,
    query,
    raw_rows_done,
    raw_rows_notice,
    save_edits,
    source_label,
    stop_if_store_empty,
)

SEVERITY_ICON = {"critical": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}
SEVERITY_COLOUR = {"critical": "red", "warning": "orange", "info": "blue"}

st.title("Incidents")
f = current_filters()
st.caption(filter_caption(f))
stop_if_store_empty("the incidents page")
if raw_rows_notice("Incidents (the diagnosis and the alerts read request rows)"):
    st.stop()

c1, c2 = st.columns(2)
window = c1.segmented_control("Judge each model per", ["hour", "15min"], default="hour", key="inc_window",
                              bind="query-params",
                              help="The diagnosis compares each model with its own usual behaviour window by "
                                   "window; a shorter window finds shorter incidents and more of them.") or "hour"
order = c2.segmented_control("Order", list(incidents.ORDERS), default="worst first", key="inc_order",
                             bind="query-params") or "worst first"
linked = st.query_params.get("incident")
# built in full: the incidents open on screen (a link's, those opened by hand, else the first in either order);
# the others need only their line
opened = {k.removeprefix("inc_open_") for k, v in st.session_state.items() if k.startswith("inc_open_") and v}
# a period of more requests than the raw-row budget: its latest hours, the alerts too (as incidents.incidents does)
scope = query(store.raw_scope, f)
if scope.narrowed:
    st.info(scope.note(), icon=":material/filter_list:")
    f = scope.filters
# the service alerts through the cache on their own: they do not depend on the diagnosis's window
fired = query(alerts_mod.open_alerts, f, leave_out=incidents.COST_RULES)
items = incidents.ordered(query(incidents.incidents, f, window=window, open_alerts=fired,
                                detailed=tuple(sorted(opened | ({linked} if linked else set()))),
                                first_of=() if linked else incidents.ORDERS), order)

if not items:
    no_alert_state(f, leave_out=incidents.COST_RULES)
    if why := query(diagnose.silent_why, f):
        # no request in the filters, or a trace of tokens and times: the diagnosis's silence says nothing
        st.info(f"No slow-path diagnosis: {why}.", icon=":material/help:")
    else:
        st.success("And no slow-path finding: no queue build-up, prefill or decode tail, cache collapse or P99 "
                   "spike stands out against each model's usual behaviour.", icon=":material/check_circle:")
else:
    counts = {s: sum(1 for i in items if i.severity == s) for s in incidents.SEVERITIES}
    cols = metric_row(3)
    for col, sev in zip(cols, incidents.SEVERITIES, strict=True):
        col.metric(f"{sev.capitalize()} incidents", f"{counts[sev]:,}", border=True)
    st.caption("One incident is every alert and diagnosis finding of one model whose hours overlap or touch. "
               "Severity: critical when at least 10 % of a model's requests were hit in its worst hour (lower "
               "bound of a 99.9 % interval) and SLA or error-rate alerts lasted 30 minutes or more; a warning "
               "for 1 % or any SLA minute; info when decode only ran slower than usual with no alert (a batch "
               "growing at a peak does that within every SLA). GPU under-use, spend and budget alerts are cost "
               "matters and stay on the alerts list. The slow-path findings compare each model with its usual "
               "behaviour in the period shown, so a shorter period can judge the same hours differently; the "
               "alerts' thresholds and a replica's usual share of the traffic (read in the hours around its gap) do "
               "not depend on the period.")
    for n, inc in enumerate(items):
        label = (f":{SEVERITY_COLOUR[inc.severity]}[**{inc.severity}**] {plain(inc.title)} · {inc.start:%a %Y-%m-%d}"
                 + incidents.hit_suffix(inc.title, inc.affected, inc.requests))
        box = st.expander(label, expanded=(inc.key == linked) or (linked is None and n == 0),
                          icon=SEVERITY_ICON[inc.severity], key=f"inc_open_{inc.key}", on_change="rerun")
        if not box.open:        # a closed incident's tables are not built: the list stays quick
            continue
        if not inc.detailed:    # opened in a way the run did not foresee: built in full now
            inc = query(incidents.find, f, inc.key, window=window) or inc
        with box:
            left, right = st.columns([3, 2])
            with left:
                st.markdown(f"**Do:** {plain(inc.action)}")
                st.markdown("**Evidence**")
                for line in inc.evidence:
                    st.markdown(f"- {plain(line)}")
            with right:
                m1, m2, m3 = metric_row(3)
                m1.metric("Lasted", incidents.minutes_text(inc.minutes))
                m2.metric("Hit", f"{inc.affected:,}",
                          help="Requests hit: failed, answered over their tier's SLA, or (a decode finding) slower in decode "
                               "than the finding's cut.")
                m3.metric("Alert time", incidents.minutes_text(inc.sla_minutes) if inc.sla_minutes else "none",
                          help="How long the model's SLA (P99 latency) or error-rate alerts lasted in the incident, "
                               "overlaps counted once.")
                st.caption(f"{incidents.span_text(inc.start, inc.end)} · model {plain(inc.model)}"
                           + (f" · tenants hit: {', '.join(plain(t) for t in inc.tenants)}" if inc.tenants else ""))
            st.markdown("**Timeline**")
            # an entry that ends on another day shows that day ("00:00" read as the same day's midnight)
            line = inc.timeline
            began, ended = pd.to_datetime(line["at"]), pd.to_datetime(line["until"])
            other_day = bool((ended.notna() & began.notna() & (ended.dt.normalize() != began.dt.normalize())).any())
            st.dataframe(line, hide_index=True, placeholder=MISSING, column_config={
                "at": st.column_config.DatetimeColumn("From (UTC)", format="MM-DD HH:mm", width=95),
                "until": st.column_config.DatetimeColumn("To", format="MM-DD HH:mm" if other_day else "HH:mm",
                                                         width=95 if other_day else 55),
                "kind": st.column_config.TextColumn("Source", width=80),
                "severity": st.column_config.TextColumn(
                    "Severity", width=75, help="An alert's: its rule's. A diagnosis finding's: "
                                               + diagnose.SEVERITY_MEANS),
                "what": st.column_config.TextColumn("What happened", width=820)})
            if inc.affected:
                shown = incidents.requests_table(inc.hit)
                st.markdown(f"**Requests hit** ({len(shown):,} of {inc.affected:,} shown: failed first, then the "
                            "slowest)")
                st.dataframe(shown, hide_index=True, placeholder=MISSING, height=240, column_config={
                    "request_id": st.column_config.TextColumn("Request"),
                    "ts": st.column_config.DatetimeColumn("Arrival (UTC)", format="YYYY-MM-DD HH:mm:ss"),
                    "tenant": "Tenant", "sla_tier": "SLA tier", "replica": "Replica",
                    "queue_s": st.column_config.NumberColumn("Queue wait (s)", format="%,.2f"),
                    "ttft_s": st.column_config.NumberColumn("Time to first token (s)", format="%,.2f"),
                    "total_s": st.column_config.NumberColumn("Total latency (s)", format="%,.2f"),
                    "why": st.column_config.TextColumn("Why it counts")})
                st.page_link("views/latency.py", label=f"See {min(incidents.LINKED_MAX, inc.affected)} of them segment by segment on the "
                                   "Latency page",
                             icon=":material/timeline:", query_params={"incident": inc.key, "inc_window": window})
    st.caption("Rules: the alert rules below and a slow-path diagnosis that compares each window with the model's "
               "usual queue, service and decode times. " + source_label())

raw_rows_done()         # the rules are the store's settings

# ---------------------------------------------------------------- rules
if can("edit_alert_rules"):
    with st.expander("Alert rules and SLA targets", icon=":material/tune:"):
        con = cursor()
        st.caption("Common production thresholds to start from. Changes are saved in this store's settings; the SLA "
                   "per tier also decides which requests an incident counts as hit.")
        rules = query(alerts_mod.rules_frame)
        edited = st.data_editor(
            rules, placeholder=MISSING, hide_index=True, key="alert_rules", disabled=["name", "title", "unit"],
            column_order=["enabled", "title", "threshold", "unit", "window", "sustained", "min_requests", "severity"],
            column_config={
                "enabled": st.column_config.CheckboxColumn("On"), "title": "Rule",
                "threshold": st.column_config.NumberColumn("Threshold", min_value=0.0, max_value=alerts_mod.MAX_RULE_THRESHOLD,
                                                           required=True, format="localized",
                                                           help="a fraction for % rules (0.01 = 1 %), a multiple of the "
                                                                "SLA for P99, requests waiting for the queue"),
                "unit": "Unit",
                "window": st.column_config.SelectboxColumn("Window", options=list(alerts_mod.WINDOWS)),
                "sustained": st.column_config.NumberColumn("Sustained (windows)", min_value=1, step=1, required=True,
                                                           max_value=alerts_mod.MAX_SUSTAINED),
                "min_requests": st.column_config.NumberColumn("Min requests per window", min_value=0, step=1, required=True,
                                                              max_value=alerts_mod.MAX_MIN_REQUESTS,
                                                              help="For the engine rules (KV cache, engine queue): "
                                                                   "the fewest scrapes of vLLM's metrics a window "
                                                                   "needs to be judged."),
                "severity": st.column_config.SelectboxColumn("Severity", options=list(alerts_mod.SEVERITIES))})
        sla = query(alerts_mod.sla_targets)
        metric_now = query(alerts_mod.sla_metric, f)
        metric_words = {"ttft_ms": "time to first token", "total_ms": "total latency"}
        metric = st.radio("The SLA is on", list(sql.SLA_COLUMNS), index=list(sql.SLA_COLUMNS).index(metric_now),
                          horizontal=True, key="sla_metric", format_func=lambda c: metric_words.get(c, c),
                          help="Time to first token suits interactive SLAs; total latency is end to end. By default "
                               "time to first token where the logs carry it.")
        st.markdown("**P99 SLA per tier (ms)**: an alert fires above the rule's multiple of it.")
        cols = st.columns(max(len(sla), 1))
        new_sla = {tier: col.number_input(tier, min_value=1.0, value=float(v), step=100.0, key=f"sla_{tier}")
                   for col, (tier, v) in zip(cols, sla.items(), strict=True)}
        if st.button("Save rules and SLA targets", icon=":material/save:"):
            def _save():
                alerts_mod.save_rules(con, edited)
                alerts_mod.save_sla_targets(con, new_sla)
                alerts_mod.save_sla_metric(con, metric)
            save_edits(_save, "Rules and SLA targets", lambda _: "Saved: incidents and alerts are judged by the new rules.")
else:
    st.caption("Alert rules and SLA targets are set by an admin.")
