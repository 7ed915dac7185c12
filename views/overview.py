"""Overview: what did we spend, on which models and tenants, and is it going up?"""
import streamlit as st

from finops import charts
from finops.fmt import MISSING, counted, in_words, share, usd
from finops.latency.stats import TAIL_REQUESTS
from finops.ops import alerts, incidents, slo
from finops.spend import costviews, fleets
from finops.spend.costviews import period_label
from views._shared import (
    bounded_dataframe,
    current_filters,
    empty_state,
    filter_caption,
    metric_row,
    no_alert_state,
    nothing_priced_state,
    open_elsewhere,
    plain,
    query,
    raw_rows_notice,
    rules_judged,
    source_label,
    stop_if_store_empty,
    unpriced_banner,
)

SHORT_LIST = 5
SEVERITY_COLOUR = {"critical": "red", "warning": "orange", "info": "blue"}

st.title("Overview")
f = current_filters()
st.caption(filter_caption(f))
stop_if_store_empty("the overview")
unpriced_banner(f)

# the fleet-wide P99 is not read: the Overview shows latency per model (below)
k = query(costviews.kpis_with_change, f, p99=False)
if not k.current.requests and not k.current.spend_usd:
    empty_state()
    st.stop()

# ---- KPIs, each against the previous period of equal length
trends = query(costviews.kpi_trends, f, p99=False)
DELTA_COLOR = {"worse": "inverse", "better": "normal", "neutral": "off"}
# one P99 over every model describes none of them: latency is per model below
items = [i for i in k.items if i.spec.field != "p99_total_ms"]
for row in (items[:4], items[4:]):
    cols = metric_row(len(row))
    for col, item in zip(cols, row, strict=True):
        spark = charts.sparkline(trends[item.spec.field]) if item.spec.field in trends else None
        col.metric(item.spec.label, item.text, delta=item.change_text, delta_color=DELTA_COLOR[item.spec.up_is],
                   help=item.spec.help, border=True, chart_data=spark if spark and len(spark) > 1 else None)
days = (k.period.until - k.period.since).days or 1 if k.previous_period is not None else None
if k.previous_period is None:
    notes = ["Period shown: all data."]
elif k.previous is None:
    notes = [f"Period shown: {period_label(k.period)} (UTC). The store holds no requests in the previous {days:,} day{'s' if days != 1 else ''} "
             f"({period_label(k.previous_period)}), so there is no change to show."]
else:
    notes = [f"Period shown: {period_label(k.period)} (UTC). Changes compare with the previous {days} days "
             f"({period_label(k.previous_period)})."]
    if k.previous_coverage is not None and k.previous_coverage < 0.999:
        notes.append(f"The store covers only {100 * k.previous_coverage:.0f} % of that previous period, so the "
                     "changes overstate growth.")
cur = k.current
if 0 < cur.status_requests < cur.requests:
    # a trace of tokens and times beside logs with a status: its requests count as ok, which dilutes the rate
    notes.append(f"Error rate: {cur.requests - cur.status_requests:,} of the {cur.requests:,} requests carry no "
                 f"status (a trace of tokens and times) and count as ok; of the {cur.status_requests:,} that carry "
                 f"one, {cur.errors:,} failed ({share(cur.errors / cur.status_requests)}).")
notes.append(source_label())
st.caption(" ".join(notes))
if k.idle_share is not None and k.idle_share >= 0.05:
    st.warning(f"**{usd(k.idle_usd)} ({share(k.idle_share)}) of this spend is idle self-hosted GPU capacity**: "
               "GPU hours paid for that served no request. The Cost page shows it per model and hour.",
               icon=":material/memory:")
    # the fleets of this spend billed by their traffic (not every self-hosted model of the price book)
    fleet = query(costviews.gpu_fleet, f).summary
    by_traffic = fleet[(fleet["billed_by"] == "traffic") & (fleet["fleet_cost_usd"] > 0)]["model"]
    if len(by_traffic):
        st.caption(f"{', '.join(plain(m) for m in by_traffic)}: {fleets.TRAFFIC_NOTE} (Data page).")

# ---- latency per model, against its rule
lat = query(slo.model_latency, f)
if len(lat.table):
    st.subheader("Latency per model")
    shown = slo.overview_table(lat, query(alerts.open_alerts, f, leave_out=incidents.COST_RULES),
                               query(alerts.sla_judged_models, f))
    sla_name = slo.METRIC_NAMES.get(lat.metric, lat.metric)
    # whole hours where the alerts are hourly ("8", not "8.00"); quarter hours where they are judged per 15 minutes
    hours_format = "%,d" if (shown["hours_over"].dropna() % 1 == 0).all() else "%,.2f"
    bounded_dataframe(shown, sort_by="requests", order="the most requests", what="models",
                      file_name="latency_per_model", placeholder=MISSING, hide_index=True,
                 # an SLA on total latency: its column is the total's, shown once
                 column_order=["model", "requests", "sla_requests", "sla_p99_s",
                               *(["total_requests", "total_p99_s"] if lat.metric != "total_ms" else []), "hours_over"],
                 column_config={
                     "model": st.column_config.TextColumn("Model"),
                     "requests": st.column_config.NumberColumn("Requests served", format="%,d"),
                     "sla_requests": st.column_config.NumberColumn(
                         f"With {sla_name}", format="%,d",
                         help=f"The requests whose logs carry a {sla_name}: its P99 is over these."),
                     "sla_p99_s": st.column_config.NumberColumn(f"P99 {sla_name} (s)", format="%.2f",
                                                                help="The latency the SLA is on."),
                     "total_requests": st.column_config.NumberColumn(
                         "With total latency", format="%,d",
                         help="The requests whose logs carry a total latency: its P99 is over these."),
                     "total_p99_s": st.column_config.NumberColumn("P99 total latency (s)", format="%.2f"),
                     "hours_over": st.column_config.NumberColumn("Hours over the rule", format=hours_format,
                                                                 help="Hours of the period with an open P99 alert "
                                                                      "on this model (any tenant). " + MISSING
                                                                      + ": no hour was judged: its logs carry no "
                                                                        "such latency, or no hour had the rule's "
                                                                        "fewest requests (below).")})
    counts = ["sla_requests", *(["total_requests"] if lat.metric != "total_ms" else [])]
    few = int(((shown[counts] > 0) & (shown[counts] < TAIL_REQUESTS)).any(axis=1).sum())
    st.caption(plain(lat.rule) + (" The rule is switched off." if not lat.enabled else "")
               + " Percentiles over the whole period; the Latency page has them per tier and hour."
               + (f" A P99 over fewer than {TAIL_REQUESTS} requests is at or near the slowest of them, not a "
                  f"tail ({counted(few, 'model')} here)." if few else "") + " " + source_label())

# ---- spend over time
st.subheader("Spend over time")
idle_col, names_col = st.columns([1, 1])
with_idle = idle_col.toggle("Include idle GPU capacity", value=True, key="idle", bind="query-params",
                            help="Idle capacity is paid GPU time no request used. Switch it off to compare the models.")
models_as = names_col.segmented_control(
    "Models", list(costviews.MODEL_NAMES), default="model", format_func=costviews.MODEL_NAMES.get,
    key="overview_models", bind="query-params",
    help="As logged: each name the logs use is its own series. As priced: the names one price applies to are one "
         "series (gpt-4o-mini-2024-07-18 and openai/gpt-4o-mini are gpt-4o-mini).") or "model"
sot = query(costviews.spend_over_time, f, include_idle=with_idle, models=models_as)
grain = query(costviews.grain, f)
if len(sot) and not (sot["cost_usd"] > 0).any():
    nothing_priced_state(f, "Spend over time")
else:
    st.altair_chart(charts.spend_over_time(sot, grain, title=f"Spend per {grain} by model (USD)"))
    edges = query(costviews.partly_covered, f, grain)
    st.caption(f"{charts.spend_over_time_mark(sot, grain).capitalize()} stack each model's spend per {grain}"
               + (". Grey is idle self-hosted GPU capacity: paid for, used by no request. "
                  if with_idle and (sot["series"] == costviews.IDLE).any()
                  else ". " if with_idle else ", idle GPU capacity left out. ")
               + (edges + " " if edges else "") + source_label())

# ---- top tenants
top = query(costviews.top_tenants, f, 8)
st.subheader("Top tenants by spend")
if top.table.empty:
    empty_state("No tenant spend matches these filters.")
elif not (top.table["cost_usd"] > 0).any():
    nothing_priced_state(f, "Tenant spend")
else:
    left, right = st.columns([2, 3])
    left.altair_chart(charts.beside(charts.top_tenants(top.table, title="Tenant spend in the period (USD)"),
                                   chars=22))          # two fifths of the page
    right.altair_chart(charts.beside(charts.tenant_trend(top.trend, top.grain, title=f"Tenant spend per {top.grain} (USD)")))
    extra = f" {top.others} smaller tenants are not shown." if top.others else ""
    idle = (f" Idle GPU capacity ({usd(top.idle_usd)} in the period) is a fleet cost and in no tenant's total."
            if top.idle_usd > 0 else "")
    edges = query(costviews.partly_covered, f, top.grain)
    st.caption(f"Hover a bar for its share and its change against the previous period.{extra}{idle} "
               + (edges + " " if edges else "") + source_label())

#: requests in the period up to which the Overview groups its incidents as it opens (about a second here)
INCIDENTS_AT_ONCE = 2_000_000

# ---- incidents: the alerts (read above) at once; grouped with the diagnosis, which reads the period's raw
# rows (seconds on a large store), when the section is opened
st.subheader("Incidents")
if raw_rows_notice("Incidents on latency, errors and queues"):
    pass
else:
    # the service alerts only: the money rules (spend, budgets, GPU under-use) never make an incident
    fired = query(alerts.open_alerts, f, leave_out=incidents.COST_RULES)
    service = incidents.service_alerts(fired)
    if service.empty:
        no_alert_state(f, leave_out=incidents.COST_RULES)
    else:
        counts = service["severity"].value_counts()
        models = sorted(service["model"].dropna().unique())
        judged, _, elsewhere = rules_judged(f, incidents.COST_RULES)
        st.markdown(" · ".join(f"{counts[s]:,} {s}" for s in incidents.SEVERITIES if counts.get(s))
                    + f" service alert{'s' if len(service) != 1 else ''} open in this period on "
                    + ", ".join(plain(m) for m in models[:SHORT_LIST])
                    + (f" and {len(models) - SHORT_LIST:,} more models" if len(models) > SHORT_LIST else "") + "."
                    + open_elsewhere(f, incidents.COST_RULES),
                    help=f"The service rules, judged here: {in_words(judged)}."
                         + (f" The other rules ({in_words(elsewhere)}) are judged on the Alerts page." if elsewhere else ""))
    # the grouping reads the period's requests: at once up to INCIDENTS_AT_ONCE of them, on request above
    at_once = k.current.requests <= INCIDENTS_AT_ONCE
    box = st.expander("The worst incidents: these alerts and the diagnosis's findings, grouped", expanded=at_once,
                      key="ov_incidents", bind="query-params", icon=":material/emergency:", on_change="rerun")
    if not box.open:
        st.caption(f"Open to group the alerts with the slow-path diagnosis, which reads the period's "
                   f"{k.current.requests:,} requests (a few seconds at this size).")
    else:
        # the Incidents page's incidents, counted and titled without their evidence and request lists
        found = query(incidents.summary, f, window="hour", open_alerts=fired)
        with box:
            if found.empty:
                st.info("The alerts and the diagnosis make no incident in this period.", icon=":material/check:")
            else:
                counts = found["severity"].value_counts()
                st.markdown(" · ".join(f"{counts[s]:,} {s}" for s in incidents.SEVERITIES if counts.get(s))
                            + f" incident{'s' if len(found) != 1 else ''} in this period (the alerts above with the "
                            "diagnosis's findings, one per model and overlapping hours), worst first:")
                for inc in found.head(SHORT_LIST).itertuples(index=False):
                    with st.container(border=True):
                        c1, c2 = st.columns([5, 1], vertical_alignment="center")
                        c1.markdown(f":{SEVERITY_COLOUR[inc.severity]}-badge[{inc.severity}] **{plain(inc.title)}**  \n"
                                    f"{incidents.span_text(inc.start, inc.end)}"
                                    + incidents.hit_suffix(inc.title, inc.affected, inc.requests))
                        with c2:
                            st.page_link("views/incidents.py", label="Open", icon=":material/open_in_new:",
                                         query_params={"incident": inc.key})
    st.page_link("views/incidents.py", label="All incidents: timelines, evidence and the requests hit",
                 icon=":material/emergency:")
    st.caption("An incident groups the alerts and diagnosis findings of one model whose hours overlap. "
               + source_label())
