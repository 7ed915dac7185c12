"""Capacity: how many replicas to buy, what they cost, and whether they keep up with a spike."""
import os

import pandas as pd
import streamlit as st

from finops import charts
from finops.capacity import calculator, plans, queueing
from finops.capacity.calculator import BINDING_LABELS, format_seconds
from finops.capacity.forecast import MAX_FORECAST_DAYS
from finops.capacity.loadtest import fit_loadtest
from finops.capacity.observed import FIT_MIN_REQUESTS, observed_load, self_hosted_models
from finops.errors import InputError
from finops.fmt import MISSING, counted, duration_columns, number, usd
from finops.ingest import loadtests
from views._shared import (
    bounded_dataframe,
    can,
    current_filters,
    filter_caption,
    fleet_wide,
    metric_row,
    percent_column,
    plain,
    query,
    raw_rows_done,
    raw_rows_notice,
    rollup_only,
    source_label,
    store_is_empty,
)

st.title("Capacity")
st.caption("How many GPU replicas a model needs, what they cost, and what happens when traffic spikes: "
           "an M/M/c queue (Erlang C) with Allen–Cunneen's correction for service-time variability, "
           "filled from your logs or your load tests.")
f = current_filters()
if not fleet_wide("The Capacity page"):       # tenants share one fleet: its load is every tenant's
    st.stop()
st.caption(filter_caption(f) + " · Only the date range and the model filter apply here: tenants and tiers "
           "share one fleet.")

EMPTY_STORE = store_is_empty()
observed = query(observed_load, f)
#: the same rows by model (each fill, pick and forecast reads one)
observed_by_model = observed.set_index("model")
book = query(self_hosted_models)
FORECAST_TRUST_MAPE_PCT = 25.0   # a backtest error above this is said in a warning beside the forecast
MEAN, RATE = "mean service time (s)", "requests per second per slot"

# a common starting point: 14 req/s on ten replicas of 2 req/s each, 70 % busy
DEFAULTS = {
    "cap_lambda": 14.0, "cap_service_as": MEAN, "cap_service_s": 0.5, "cap_mu": 2.0, "cap_cv_service": 1.0,
    "cap_cv_arrival": 1.0, "cap_replicas": 10, "cap_slots": 1, "cap_sla_s": 2.0, "cap_rho": 0.70,
    "cap_redundancy_pct": 25, "cap_tokens": 1000.0, "cap_filled_from": None,
}
PRICED = book.dropna(subset=["gpu_hour_usd", "gpus_per_replica"])
if len(PRICED):           # priced like the book's first self-hosted model until a fill says otherwise
    DEFAULTS.update(cap_gpu_hour_usd=float(PRICED["gpu_hour_usd"].iloc[0]), cap_gpus=int(PRICED["gpus_per_replica"].iloc[0]),
                    cap_priced_as=f"{PRICED['model'].iloc[0]}'s row of the price book")
else:
    DEFAULTS.update(cap_gpu_hour_usd=2.0, cap_gpus=1, cap_priced_as="an illustrative $2 per GPU-hour (no self-hosted "
                                                                      "model in the price book)")
# the inputs that define a scenario (bound to the URL, so a scenario can be shared), with the range each takes:
# a URL asking for more is clamped and said; a 0 in a URL is a 0
SCENARIO_KEYS = ("cap_lambda", "cap_sla_s", "cap_service_s", "cap_cv_service", "cap_cv_arrival", "cap_replicas",
                 "cap_slots", "cap_rho", "cap_redundancy_pct")
LIMITS = {"cap_lambda": (0.0, 1_000_000.0), "cap_sla_s": (0.0, 3_600.0), "cap_service_s": (0.001, 3_600.0),
          "cap_mu": (0.001, 1_000.0), "cap_cv_service": (0.0, queueing.MAX_CV), "cap_cv_arrival": (0.0, queueing.MAX_CV),
          "cap_replicas": (0, 100_000), "cap_slots": (1, calculator.MAX_SLOTS_PER_REPLICA), "cap_rho": (0.30, 0.95), "cap_redundancy_pct": (0, 100)}
# the fields a fill sets besides the scenario's, with their ranges
FILL_LIMITS = {"cap_gpu_hour_usd": (0.0, calculator.MAX_GPU_HOUR_USD), "cap_gpus": (1, calculator.MAX_GPUS_PER_REPLICA),
               "cap_tokens": (0.0, calculator.MAX_TOKENS_PER_REQUEST)}
# a first visit with no scenario in its link opens on the busiest self-hosted model of the logs (below)
FRESH = "cap_lambda" not in st.session_state and not any(k in st.query_params for k in SCENARIO_KEYS)
if "cap_url_read" not in st.session_state:
    st.session_state["cap_url_read"] = True
    clamped = []
    for key, (lo, hi) in LIMITS.items():
        raw = st.query_params.get(key)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            clamped.append(f"{key}={raw!r} is not a number: the default is used")
            continue
        if value != value or value < lo or value > hi:
            value = lo if value != value or value < lo else hi
            clamped.append(f"{key}={raw} is outside {lo:,} to {hi:,}: {value:,} is used")
        st.session_state[key] = int(value) if isinstance(lo, int) else value
    if clamped:
        st.session_state["cap_url_clamped"] = clamped
for key, value in DEFAULTS.items():
    st.session_state.setdefault(key, value)
if st.session_state.get("cap_url_clamped"):
    st.warning("The link asked for values the calculator does not take: " + "; ".join(st.session_state["cap_url_clamped"]),
               icon=":material/tune:")


def _scenario_origin() -> str:
    """Where the calculator's numbers come from, for its caption."""
    now = {k: st.session_state[k] for k in SCENARIO_KEYS}
    filled = st.session_state.get("cap_filled_values")
    if filled and st.session_state["cap_filled_from"]:
        edited = any(now[k] != v for k, v in filled.items())
        return f"your inputs, filled from your logs ({st.session_state['cap_filled_from']}" + (
            ", then edited)" if edited else ")")
    if all(now[k] == DEFAULTS[k] for k in SCENARIO_KEYS) and st.session_state["cap_service_as"] == MEAN:
        return "the defaults, a common starting point: 14 req/s on 10 replicas of 2 req/s, 70 % busy (illustrative)"
    return "your inputs"


def _fill(model: str, slots: int | None = None) -> None:
    """Put a model's measured peak hour into the calculator's inputs."""
    row = observed_by_model.loc[model]
    values = {"cap_lambda": round(float(row["arrival_rate_per_s"]), 4), "cap_cv_arrival": round(float(row["cv_arrival"]), 2),
              # a variability of fewer than 2 requests is undefined (None): taken as 1, as the table's prediction
              "cap_cv_service": round(float(row["cv_service"]), 2) if pd.notna(row["cv_service"]) else 1.0,
              "cap_service_as": MEAN,
              "cap_filled_from": f"{model}'s busiest hour, {row['peak_hour']:%Y-%m-%d %H:00} UTC",
              "cap_filled_model": model}
    # what the logs do not carry keeps the calculator's value, said beside the inputs while it stands unedited
    kept = {}
    if pd.notna(row["mean_service_s"]):
        values["cap_service_s"] = round(float(row["mean_service_s"]), 3)
    else:
        kept["cap_service_s"] = st.session_state["cap_service_s"]
    if pd.notna(row["replicas"]):
        values["cap_replicas"] = int(row["replicas"])
    values["cap_slots"] = int(slots or row["slots_per_replica"])
    if pd.notna(row["gpu_hour_usd"]):
        values["cap_gpu_hour_usd"] = float(row["gpu_hour_usd"])
        values["cap_gpus"] = int(row["gpus_per_replica"])
        values["cap_priced_as"] = (f"{model}'s row of the price book" if row["gpu_source"] == "price book"
                                   else f"{row['gpu_source']} of {model} at its busiest hour")
    if pd.notna(row["tokens_per_request"]):
        values["cap_tokens"] = round(float(row["tokens_per_request"]), 1)
    else:
        kept["cap_tokens"] = st.session_state["cap_tokens"]
    values["cap_fill_kept"] = kept
    # a figure of the logs or the price book past what a field takes is set at the field's bound and said (a
    # book's 5,000 slots per replica showed as 1)
    clamped = []
    for key, (lo, hi) in {**LIMITS, **FILL_LIMITS}.items():
        if key in values and not lo <= values[key] <= hi:
            bound = lo if values[key] < lo else hi
            clamped.append(f"{key.removeprefix('cap_')} {values[key]:,} is outside {lo:,} to {hi:,}: {bound:,} is used")
            values[key] = type(values[key])(bound)
    values["cap_fill_clamped"] = clamped
    st.session_state.update(values)
    st.session_state["cap_filled_values"] = {k: v for k, v in values.items() if k in SCENARIO_KEYS}


if FRESH and not observed.empty:
    _busiest = observed.sort_values(["requests_peak_hour", "model"], ascending=[False, True])["model"].iloc[0]
    st.session_state["cap_model"] = _busiest
    _fill(_busiest)
#: how a value the fill kept is named in the warning, and what to enter instead
KEPT_WORDS = {
    "cap_service_s": ("no service time", "mean service time {} s", "the time one request holds a slot, from a load "
                      "test or your serving engine's metrics (its variability is taken as 1 until then)"),
    "cap_tokens": ("no token counts", "tokens per request {}", "the input + output tokens of a typical request"),
}
_kept = {k: v for k, v in (st.session_state.get("cap_fill_kept") or {}).items() if st.session_state.get(k) == v}
if _kept and st.session_state.get("cap_filled_model"):
    st.warning(f"The logs of {st.session_state['cap_filled_model']} carry "
               + " and ".join(KEPT_WORDS[k][0] for k in _kept) + ", so the fill kept the calculator's "
               + "; ".join(KEPT_WORDS[k][1].format(number(v)) for k, v in _kept.items())
               + ": an assumption, not a measurement, and every figure below rests on it. Enter "
               + "; and ".join(KEPT_WORDS[k][2] for k in _kept) + ".", icon=":material/edit_note:")
if st.session_state.get("cap_fill_clamped"):
    st.warning("The logs or the price book gave values the calculator does not take: "
               + "; ".join(st.session_state["cap_fill_clamped"]), icon=":material/tune:")

# ================================================================ calculator
st.header("Queueing calculator")
with st.container(border=True):
    st.markdown("**Fill from my logs**")
    if EMPTY_STORE:
        st.info("The store holds no requests, so there is nothing to fill from: the calculator works from the "
                "inputs below. Load logs on the Data page to measure arrivals per second, service time and replicas.",
                icon=":material/database:")
    elif observed.empty:
        st.info("No self-hosted model (kind self_hosted in the price book) and no logs naming a replica in these "
                "filters: enter the inputs by hand.", icon=":material/dns:")
    else:
        left, mid, right = st.columns([2, 2, 3], vertical_alignment="bottom")
        pick = left.selectbox("Model", list(observed["model"]), key="cap_model")
        row = observed_by_model.loc[pick]
        mid.button(f"Fill the inputs from {pick}", on_click=_fill, args=(pick,), type="primary",
                   icon=":material/download:", key="cap_fill")
        implied = row["implied_servers"]
        if pd.notna(implied) and pd.notna(row["replicas"]) and row["replicas"]:
            per = max(1, round(float(implied) / float(row["replicas"])))
            if per != int(row["slots_per_replica"]):
                right.button(f"Fill with {counted(per, 'slot')} per replica (what the observed waits imply)", on_click=_fill,
                             args=(pick, per), key="cap_fill_implied",
                             help=f"The price book says {int(row['slots_per_replica'])} slots per replica; the "
                                  f"queue wait logged in the busiest hour matches about {counted(implied, 'slot')} in all.")
        # the logs start or end inside the busiest hour: its requests arrived over the part they cover
        part = (f" in the {counted(round(row['peak_hour_covered_s'] / 60), 'minute')} of it the logs cover"
                if row["peak_hour_covered_s"] < 3600 else "")
        st.caption(f"{pick}: busiest hour {row['peak_hour']:%Y-%m-%d %H:00} UTC, {counted(row['requests_peak_hour'], 'served request')}"
                   f"{part} ({number(row['arrival_rate_per_s'])} arrivals per second); replicas from "
                   f"{row['replicas_source']}, slots from {row['slots_source']}. "
                   + ("This store holds hourly rollups, no raw rows: the mean service time is the busy time over the "
                      "requests served in that hour, failed ones included, and both CVs are taken as 1 (Poisson). "
                      if rollup_only() else "") + source_label())

c1, c2, c3, c4 = st.columns(4)
lam = c1.number_input("Arrivals per second", min_value=0.0, max_value=1_000_000.0, step=1.0, format="%.7g", key="cap_lambda", bind="query-params",
                      help="Arrivals per second (λ): requests reaching the fleet at the hour you size for (e.g. the peak hour).")
sla_s = c1.number_input("P99 wait SLA (s)", min_value=0.0, max_value=3_600.0, step=0.5, format="%.4g", key="cap_sla_s", bind="query-params",
                        help="99 % of requests must wait in the queue less than this, in seconds; 0: no wait SLA "
                             "(the target utilisation alone sizes the fleet, as in the plan below).")
service_as = c2.radio("Service given as", [MEAN, RATE], key="cap_service_as")
if service_as == MEAN:
    mean_s = c2.number_input("Mean service time (s)", min_value=0.001, max_value=3_600.0, step=0.1, format="%.4g", key="cap_service_s", bind="query-params",
                             help="Time one request holds a slot (prefill + decode), in seconds.")
else:
    mu = c2.number_input("Requests per second per slot", min_value=0.001, max_value=1_000.0, step=0.1, format="%.4g", key="cap_mu",
                         help="Service rate (μ): requests one slot completes per second, 1 / mean service time.")
    mean_s = 1.0 / mu
cv_s = c3.number_input("Service-time variability (std / mean)", min_value=0.0, max_value=10.0, step=0.1, format="%.3g",
                       key="cap_cv_service", bind="query-params", help="Coefficient of variation (CV) of service time: 1 = exponential (M/M/c); 0 = every request takes the same time.")
cv_a = c3.number_input("Arrival burstiness (std / mean gap)", min_value=0.0, max_value=10.0, step=0.1, format="%.3g",
                       key="cap_cv_arrival", bind="query-params", help="Coefficient of variation (CV) of the gaps between arrivals: 1 = Poisson arrivals; above 1 = bursty.")
replicas = c4.number_input("Replicas", min_value=0, max_value=100_000, step=1, key="cap_replicas", bind="query-params")
slots = c4.number_input("Concurrent slots per replica", min_value=1, max_value=calculator.MAX_SLOTS_PER_REPLICA, step=1, key="cap_slots", bind="query-params",
                        help="Requests one replica serves at once (its batch / max_num_seqs). c = replicas × slots.")
d1, d2 = st.columns(2)
rho_target = d1.slider("Target utilisation", min_value=0.30, max_value=0.95, step=0.01, key="cap_rho", bind="query-params",
                       help="Target utilisation (ρ): 0.6–0.75 is the usual sweet spot, headroom for bursts without paying for idle GPUs.")
redundancy_pct = d2.slider("Redundancy (%)", min_value=0, max_value=100, step=5, key="cap_redundancy_pct", bind="query-params",
                           help="Extra replicas on top of the sizing, for bursts and scale-out delay (20–30 % usual).")

# 0 is no SLA, as in the chart, the plan below and `plan --wait-sla-s 0` (read as "no request may wait", it asked
# for 19 replicas where the plan's rule asks 13)
res = calculator.calculate(lam, mean_s, int(replicas), int(slots), wait_sla_s=sla_s or None, target_utilization=rho_target,
                           redundancy=redundancy_pct / 100, cv_service=cv_s, cv_arrival=cv_a)
q = res.queue
k1, k2, k3, k4, k5 = metric_row(5)
k1.metric("Utilisation", "no servers" if res.state == "no_servers" else f"{q.utilization:,.1%}", border=True,
          help=f"Utilisation (ρ) = arrivals per second (λ) / (slots c × rate per slot μ), with c = {int(replicas):,} × {int(slots):,} = {res.servers:,} slots.")
k2.metric("P(wait)", f"{q.p_wait:.1%}", border=True, help="Share of requests that queue at all (Erlang C).")
k3.metric("Mean wait", format_seconds(q.wq_s), border=True,
          help="Mean queue wait, Allen–Cunneen: the M/M/c mean wait × (ca² + cs²) / 2.")
k4.metric("P99 wait", format_seconds(q.wait_p99_s), border=True,
          help="P99 queue wait, from P(W > t) = C · e^{−(cμ − λ) t} (λ arrivals per second, c slots, μ rate per slot), scaled like the mean for non-exponential service.")
k5.metric("Replicas needed", f"{res.required_replicas_with_redundancy:,}", border=True,
          help=f"{res.required_replicas:,} replicas meet utilisation (ρ) ≤ {rho_target:.0%}" + (" and the P99 wait SLA" if sla_s else "") + ", "
               f"+{redundancy_pct} % redundancy, rounded up.")
need_text = (f"Needed: {res.required_replicas:,} replica{'s' if res.required_replicas != 1 else ''} (held by {BINDING_LABELS[res.binding_constraint]}), "
             f"{res.required_replicas_with_redundancy:,} with {redundancy_pct} % redundancy.")
if not res.stable:
    st.error(f"**{res.message}.** {number(lam)} arrivals per second reach or exceed the fleet's capacity of "
             f"{number(res.capacity_per_s)} req/s, so no wait figure exists. {need_text}", icon=":material/error:")
elif res.state == "no_traffic":
    st.info(f"**{res.message}.** With no arrivals nothing queues. {need_text}", icon=":material/info:")
elif res.wait_sla_met is False:
    st.warning(f"**Stable but over the SLA:** P99 wait {format_seconds(q.wait_p99_s)} > {sla_s:g} s at "
               f"{int(replicas)} replicas. {need_text}", icon=":material/warning:")
else:
    st.success(f"**{res.message}**; P99 wait {format_seconds(q.wait_p99_s)}"
               + (f" within the {sla_s:g} s SLA" if sla_s else ", no P99 wait SLA (0 s)") + f". {need_text}",
               icon=":material/check_circle:")

curve_c = calculator.p99_wait_by_replicas(lam, mean_s, int(slots), (int(replicas), res.required_replicas_with_redundancy),
                                          cv_service=cv_s, cv_arrival=cv_a)
left, right = st.columns(2)
left.altair_chart(charts.beside(charts.p99_wait_vs_replicas(
    curve_c, slots_per_replica=int(slots), chosen_replicas=int(replicas),
    required_replicas=res.required_replicas_with_redundancy, wait_sla_s=sla_s or None,
    title=f"P99 queue wait by replicas, at {number(lam)} arrivals/s")))
if res.servers > 0:
    right.altair_chart(charts.beside(charts.wait_vs_utilization(
        calculator.wait_by_utilization(mean_s, res.servers, cv_service=cv_s, cv_arrival=cv_a),
        current_rho=float(q.utilization), current_wq_s=float(q.wq_s),
        title=f"Mean queue wait against utilisation at c = {res.servers:,} slots")))
else:
    right.info("With 0 replicas there is no fleet to load: set at least one replica to see the wait against utilisation.")
filled = st.session_state["cap_filled_from"]
st.caption(f"Source: {_scenario_origin()}. Waits are queue waits before service, in the unit each axis names.")

st.subheader("What the fleet costs")
e1, e2, e3 = st.columns(3)
gpu_usd = e1.number_input("$ per GPU-hour", min_value=0.0, max_value=calculator.MAX_GPU_HOUR_USD, step=0.1, format="%.3f", key="cap_gpu_hour_usd",
                          help="From the price book when filled from a self-hosted model.")
gpus = e2.number_input("GPUs per replica", min_value=1, max_value=calculator.MAX_GPUS_PER_REPLICA, step=1, key="cap_gpus")
tokens = e3.number_input("Tokens per request (input + output)", min_value=0.0,
                         max_value=calculator.MAX_TOKENS_PER_REQUEST, step=100.0, format="%.8g",
                         key="cap_tokens", help="Filled from the store's served requests when you fill from logs.")
now = calculator.fleet_cost(int(replicas), int(gpus), gpu_usd, lam, tokens, capacity_per_s=res.capacity_per_s)
need = calculator.fleet_cost(res.required_replicas_with_redundancy, int(gpus), gpu_usd, lam, tokens)
# two scenarios side by side, each named once above its two figures (in every label they were cut short)
left, right = st.columns(2)
left.markdown(f"**Your {now.replicas:,} replica{'s' if now.replicas != 1 else ''}**")
right.markdown(f"**The {need.replicas:,} replica{'s' if need.replicas != 1 else ''} needed** (with redundancy)")
m1, m2 = metric_row(2, left)
m3, m4 = metric_row(2, right)
m1.metric("$ per hour", usd(now.cost_per_hour_usd), border=True,
          help=f"{now.replicas:,} replicas × {int(gpus)} GPUs × {usd(gpu_usd)} per GPU-hour, busy or idle.")
m2.metric("$ per 1M tokens", usd(now.cost_per_1m_tokens), border=True,
          help="Projected: a what-if, not the fleet's measured unit cost: cost per hour ÷ (arrivals per second (λ) × 3,600 × "
               "tokens per request) × 1,000,000 at this load; — when no tokens flow. The measured ones (billed, "
               "allocated, fully loaded) are on the Cost page.")
m3.metric("$ per hour", usd(need.cost_per_hour_usd), border=True,
          help="At the replica count the targets need, with redundancy.")
m4.metric("$ per 1M tokens", usd(need.cost_per_1m_tokens), border=True,
          help="Projected: a what-if at the replica count needed; — when no tokens flow (no arrivals or no tokens per request).")
if now.note:
    st.caption(now.note)
st.caption(f"Source: your inputs; $ per GPU-hour and GPUs per replica start from {st.session_state['cap_priced_as']} "
           "(edit the price book or the fleet schedule on the Data page). Tokens per request: " + (
               "your logs' served requests. " if filled else "an illustrative 1,000 until you fill from logs. ")
           + "A self-hosted fleet is paid every hour, busy or idle.")

# ================================================================ prediction vs observed
st.header("Fill from my logs: predicted against observed waits")
if EMPTY_STORE:
    st.info("This table needs request logs: the store is empty. The calculator above still works from your inputs.",
            icon=":material/database:")
elif raw_rows_notice("This table (each request's service time on a replica)"):
    pass
elif (table := query(observed_load, f)).empty:   # the store's (cached, as above), or on a rollup-only store the slice's
    st.info("No self-hosted model and no logs naming a replica in these filters: nothing to compare.",
            icon=":material/dns:")
else:
    MS = st.column_config.NumberColumn
    # the four waits in one unit, seconds once any reaches a second (as the Latency page's tables)
    waits = ["predicted_wq_ms", "observed_queue_mean_ms", "predicted_wait_p99_ms", "observed_queue_p99_ms"]
    table, unit, w = duration_columns(table, waits)
    wait_fmt = "%.3f" if unit == "s" else "%.1f"
    bounded_dataframe(table, sort_by="arrival_rate_per_s", order="the highest arrival rate", what="models",
                      file_name="observed_fleets", placeholder=MISSING, hide_index=True, column_order=(
        "model", "requests_peak_hour", "arrival_rate_per_s", "mean_service_s", "cv_service", "service_samples", "fleet",
        "utilization", *w.values(), "queue_samples", "implied_servers"), column_config={
        "model": st.column_config.TextColumn("Model"),
        "requests_peak_hour": MS("Requests", format="localized", help="Served requests in the busiest hour (cache hits excluded)."),
        "arrival_rate_per_s": MS("Arrivals per second", format="%.4g", help="Arrivals per second (λ): served requests in the busiest hour / the seconds of it the logs cover (3,600 unless they start or end inside it)."),
        "mean_service_s": MS("Service (s)", format="localized", help="Mean time on a slot of completed requests."),
        "cv_service": MS("Service variability", format="%.2f", help="Service-time coefficient of variation (CV): std / mean; "
                         "none under 2 completed requests (the prediction then takes 1)."),
        "service_samples": MS("Completed", format="localized", help="Completed requests with a service time: the "
                              "service time and its variability are over these."),
        "fleet": st.column_config.TextColumn("Replicas × slots", help="Slots in all (c) = replicas × slots per replica"),
        "utilization": percent_column("Utilisation", help="Utilisation (ρ)"),
        w["predicted_wq_ms"]: MS(f"Mean wait, predicted ({unit})", format=wait_fmt,
                              help=f"Predicted mean queue wait at these arrivals (λ) and slots (c), in {unit}."),
        w["observed_queue_mean_ms"]: MS(f"Mean queue, logged ({unit})", format=wait_fmt,
                                     help=f"Mean queue_ms logged in that hour, in {unit}."),
        w["predicted_wait_p99_ms"]: MS(f"P99 wait, predicted ({unit})", format=wait_fmt,
                                    help=f"Predicted P99 queue wait at these arrivals (λ) and slots (c), in {unit}."),
        w["observed_queue_p99_ms"]: MS(f"P99 queue, logged ({unit})", format=wait_fmt,
                                    help=f"P99 of queue_ms logged in that hour (exact), in {unit}."),
        "queue_samples": MS("Waits logged", format="localized", help="Requests of the busiest hour that log a queue "
                            f"wait: the logged waits are over these; under {FIT_MIN_REQUESTS:,} they are too few to judge the slots."),
        "implied_servers": MS("Slots implied", format="%d",
                              help="The slot count (c) whose predicted mean wait is nearest the observed mean queue_ms "
                                   f"(none under {FIT_MIN_REQUESTS:,} waits logged: too few to judge)."),
    })
    for r in table[table["note"] != ""].itertuples(index=False):
        st.markdown(f"- **{r.model}**: {r.note}.")
    st.caption("Each model at its busiest hour in the filters: arrivals per second = served requests (cache hits excluded) / "
               "the seconds of the hour the logs cover (3,600 unless they start or end inside it); "
               "service time = time on a slot of completed requests; predicted waits are Allen–Cunneen at "
               "replicas × slots with the measured variability; observed = the queue wait logged in that same hour. A large "
               "gap says the model's inputs (most often the slots per replica) do not describe this fleet. "
               + source_label())

raw_rows_done()         # on a rollup-only store the sections below read the store again, not a dataset slice

# ================================================================ capacity meets cost
st.header("Capacity meets cost: the plan against the fleet you pay for")
st.caption("Hour by hour, the replicas each self-hosted fleet was billed for (its schedule on the Data page, else "
           "its price book row while it served traffic) against the replicas that hour's traffic needed by the "
           "calculator's rule above: the target utilisation, the P99 wait SLA and the redundancy.")
plan_models = [m for m in observed["model"] if m in set(book["model"])] if not observed.empty else []
if EMPTY_STORE or not plan_models:
    st.info("This needs request logs of a self-hosted model (kind self_hosted in the price book): " + (
        "the store is empty." if EMPTY_STORE else "none in these filters."), icon=":material/database:")
else:
    q1, q2 = st.columns([2, 1])
    plan_model = q1.selectbox("Self-hosted model", plan_models, key="cap_plan_model")
    ahead_days = q2.number_input("And the next days, from the forecast", min_value=0, max_value=MAX_FORECAST_DAYS, value=0, step=1,
                                 key="cap_plan_days", help="0: only the period shown. The forecast takes seconds.")
    # logs with no service time (a Mooncake trace): the calculator's, when it was filled from this model (its
    # warning says every figure below rests on it); the plan said "give a mean service time" with no field to give it
    plan_mean_s = (mean_s if pd.isna(observed_by_model.loc[plan_model, "mean_service_s"])
                   and st.session_state.get("cap_filled_model") == plan_model else None)
    fleet_plan = query(plans.fleet_against_plan, f, plan_model, target_utilization=rho_target,
                       wait_sla_s=sla_s or None, redundancy=redundancy_pct / 100, days_ahead=int(ahead_days),
                       mean_service_s=plan_mean_s)
    if fleet_plan.state != "ok":
        st.info(f"No plan: {fleet_plan.message}.", icon=":material/info:")
    else:
        for part, span in (("past", "over the period"), ("ahead", f"over the next {counted(int(ahead_days), 'day')}")):
            comparison = getattr(fleet_plan, part)
            if comparison is None:
                continue
            # the span named once above the row (in each label it was cut short)
            st.markdown(f"**{span[0].upper() + span[1:]}**")
            if part == "ahead" and fleet_plan.ahead_warning:
                st.warning(f"What the forecast behind this plan cannot know: {fleet_plan.ahead_warning}.",
                           icon=":material/warning:")
            r1, r2, r3, r4 = metric_row(4)
            r1.metric("Replica-hours billed", f"{comparison.replica_hours_billed:,.0f}", border=True,
                      help=f"{span[0].upper() + span[1:]}: {usd(comparison.cost_billed_usd)}, replicas × GPUs × $ per "
                           "GPU-hour of each hour.")
            r2.metric("Replica-hours planned", f"{comparison.replica_hours_planned:,.0f}", border=True,
                      help=f"The replica-hours the plan needs {span}: {usd(comparison.cost_planned_usd)} at the same "
                           "hours' rates.")
            # a negative saving is what meeting the SLA every hour would have cost more: "−$430.00", not "$-430.00"
            r3.metric("Saving (USD)", usd(comparison.saving_usd), border=True,
                      help=f"Saving from the plan: billed less planned (negative: the plan costs more than the fleet billed); trimming the "
                           f"surplus hours alone: {usd(comparison.surplus_usd)}.")
            r4.metric("Hours short", f"{comparison.short_hours:,}", border=True,
                      help=f"Hours the fleet was short of the plan: {comparison.short_replica_hours:,.0f} replica-hours "
                           "under what the SLA needed.")
            say = st.success if comparison.saving_usd > 0 and not comparison.short_hours else st.warning
            say(comparison.sentence(span)[0].upper() + comparison.sentence(span)[1:] + ".", icon=":material/savings:")
            st.altair_chart(charts.billed_vs_planned(comparison.hours, title=f"{plan_model}: replicas billed against "
                                                     f"the plan, per hour ({span})"))
            short = comparison.hours[comparison.hours["short"]]
            if len(short):
                with st.expander(f"The {counted(len(short), 'hour')} the fleet was short ({span})"):
                    bounded_dataframe(short.reset_index(), what="short hours", file_name="short_hours", hide_index=True, column_config={
                        "ts": st.column_config.DatetimeColumn("Hour (UTC)", format="YYYY-MM-DD HH:00"),
                        "qps": st.column_config.NumberColumn("Served (req/s)", format="%.4g"),
                        "replicas_billed": st.column_config.NumberColumn("Replicas billed", format="localized"),
                        "replicas_planned": st.column_config.NumberColumn("Replicas needed", format="%d"),
                        "usd_per_replica_hour": st.column_config.NumberColumn("$ per replica-hour", format="$%,.2f"),
                        "cost_billed_usd": None, "cost_planned_usd": None, "short": None})
        if fleet_plan.ahead_message:
            st.info(f"No forecast ahead: {fleet_plan.ahead_message}.", icon=":material/info:")
        st.caption(f"{plain(plan_model)}: {fleet_plan.billed_by}. One replica = {fleet_plan.slots_per_replica} slots of "
                   f"{number(fleet_plan.mean_service_s)} s ("
                   + ("the calculator's mean service time: the logs carry none" if plan_mean_s is not None else
                      "the hourly rollups' busy time over the requests served in the busiest hour: this store holds "
                      "no raw rows" if rollup_only() else "measured in the busiest hour")
                   + f"), sized for ρ ≤ {rho_target:.0%}"
                   + (f" and a P99 wait under {sla_s:g} s" if sla_s else "") + f", +{redundancy_pct} % redundancy, "
                   "never under 1 replica. The same comparison on the command line: `python -m finops plan "
                   "--model MODEL`. " + source_label())

# ================================================================ load test -> instances
st.header("Load test → instances")
st.caption("The method: load one instance at rising concurrency, find the highest "
           "throughput whose P99 latency stays under the target, then instances = ⌈target QPS ÷ that⌉ plus "
           "20–30 % redundancy. Never size from one request's latency.")
EXAMPLE, RUNS, UPLOAD = ("Illustrative example", "Benchmark runs in the store", "Upload files")
runs = query(loadtests.benchmark_points)
# benchmark runs in the store are what the section opens on: the illustrative example is for a store without any
source = st.radio("Load test", [EXAMPLE, RUNS] + ([UPLOAD] if can("upload") else []), horizontal=True,
                  index=0 if runs.empty else 1, key="cap_lt_source")
points, origin = None, ""
try:
    if source == EXAMPLE:
        points = loadtests.read_loadtest(loadtests.LOADTEST_EXAMPLE)
        origin = (f"illustrative example, not a measurement (`data/{os.path.basename(loadtests.LOADTEST_EXAMPLE)}`: a "
                  "made-up single-instance test for a target of P99 < 2 s at 50 QPS)")
    elif source == RUNS:
        if runs.empty:
            st.info("No benchmark runs in the store. Load a `vllm bench serve` or LLMPerf result on the Data page "
                    "(or `python -m finops ingest FILE`), or upload files here.", icon=":material/speed:")
        else:
            # the model with the most runs first (a curve needs several loads), then by name
            per_model = runs["model"].dropna().value_counts()
            models = sorted(per_model.index, key=lambda m: (-per_model[m], m))
            run_model = st.selectbox("Model of the runs", models, key="cap_lt_model",
                                     format_func=lambda m: f"{m} ({counted(per_model[m], 'run')})")
            points = runs[runs["model"] == run_model]
            origin = (f"your benchmark runs of {run_model} in the store ({counted(len(points), 'run')}, one load point "
                      "each)")
    else:
        u1, u2 = st.columns([3, 1])
        files = u1.file_uploader("vllm bench serve JSON, LLMPerf JSON (per-request or summary), or a CSV of "
                                 "qps/concurrency against p50/p99 latency", type=["json", "csv", "gz"],
                                 accept_multiple_files=True, key="cap_lt_files")
        clients = u2.number_input("Clients of an LLMPerf run without its summary", min_value=0,
                                  max_value=loadtests.MAX_CLIENTS, step=1,
                                  key="cap_lt_clients", help="0 = read it from the file's summary.")
        if files:
            points = pd.concat([loadtests.read_loadtest_bytes(fl.getvalue(), fl.name, concurrency=clients or None)
                                 for fl in files], ignore_index=True)
            origin = f"your uploaded files ({', '.join(fl.name for fl in files)})"
        else:
            st.info("Upload one file per load level (or one CSV with a row per level).", icon=":material/upload_file:")
except InputError as exc:
    st.error(f"Could not read the load test: {exc}", icon=":material/error:")
    points = None

if points is not None:
    t1, t2, t3, t4 = st.columns(4)
    target_qps = t1.number_input("Target QPS (req/s)", min_value=0.0, max_value=calculator.MAX_ARRIVAL_RATE, value=50.0, step=5.0, key="cap_lt_qps")
    p99_target = t2.number_input("P99 latency target (s)", min_value=0.01, max_value=calculator.MAX_TARGET_S, value=2.0, step=0.1, key="cap_lt_p99")
    lt_red = t3.slider("Redundancy (%)", 0, 100, 25, 5, key="cap_lt_red")
    tested = t4.number_input("Instances behind the tested endpoint", min_value=1, max_value=calculator.MAX_INSTANCES, value=1, step=1, key="cap_lt_tested")
    fit = fit_loadtest(points, target_qps=target_qps, p99_target_s=p99_target, redundancy=lt_red / 100,
                                instances_tested=int(tested))
    n1, n2, n3, n4 = metric_row(4)
    n1.metric("Per instance (req/s)", f"{number(fit.per_instance_qps, 3)}" if fit.per_instance_qps else "none", border=True,
              help=f"The most one instance serves with P99 ≤ {p99_target:g} s (interpolated between the loads "
                   "tested); none when no load meets it.")
    n2.metric("In flight there", f"{number(fit.concurrency_at_target, 3)}" if fit.concurrency_at_target else MISSING,
              border=True, help="Requests in flight per instance at that load (interpolated; Little's law where the file has none); — "
                                "when no load meets the target.")
    n3.metric(f"Instances for {number(target_qps)} req/s", f"{fit.instances:,}" if fit.instances is not None else "none",
              border=True, help="⌈target QPS ÷ per-instance QPS⌉")
    n4.metric(f"With {lt_red} % redundancy", f"{fit.instances_with_redundancy:,}"
              if fit.instances_with_redundancy is not None else "none", border=True)
    show = {"ok": st.info, "beyond_range": st.warning, "infeasible": st.error, "no_points": st.error}[fit.state]
    show(fit.message)
    st.altair_chart(charts.loadtest_fit(fit.points, p99_target_s=p99_target, per_instance_qps=fit.per_instance_qps,
                                        title="Load test: end-to-end latency against throughput per instance (s)"))
    with st.expander("The load points"):
        st.dataframe(fit.points, placeholder=MISSING, hide_index=True, column_config={
            "source": "Source", "model": "Model", "concurrency": st.column_config.NumberColumn("Concurrency", format="localized"),
            "qps": st.column_config.NumberColumn("req/s per instance", format="localized"),
            "p50_s": st.column_config.NumberColumn("P50 (s)", format="localized"),
            "p99_s": st.column_config.NumberColumn("P99 (s)", format="localized"),
            "mean_s": st.column_config.NumberColumn("Mean (s)", format="localized"),
            "qps_basis": "QPS from", "meets_target": st.column_config.CheckboxColumn("P99 within target")})
    st.caption(f"Source: {origin}. Latencies are end to end, in seconds.")

# ================================================================ forecast
def _fleet_inputs(model: str) -> dict:
    """The forecast's sizing inputs for ``model``: its measured service time, its book's slots (or the
    calculator's, when it was filled from this model), GPUs and price, unless edited in the forecast
    section (keys per model)."""
    row = observed_by_model.loc[model]
    filled = st.session_state.get("cap_filled_model") == model
    defaults = {"mean_service_s": float(row["mean_service_s"]) if pd.notna(row["mean_service_s"]) else 1.0,
                "slots_per_replica": int(st.session_state["cap_slots"] if filled else row["slots_per_replica"]),
                "gpus_per_replica": int(row["gpus_per_replica"]) if pd.notna(row["gpus_per_replica"]) else 1,
                "gpu_hour_usd": float(row["gpu_hour_usd"]) if pd.notna(row["gpu_hour_usd"]) else None}
    return {k: st.session_state.get(f"cap_fc_{k}_{model}", v) for k, v in defaults.items()}


def _forecast(model: str, days: int):
    return query(plans.forecast_plan, f, model, days, **_fleet_inputs(model),
                 target_utilization=rho_target, redundancy=redundancy_pct / 100)


forecast_box = st.expander("Forecast: hourly QPS ahead and the replicas it needs", key="cap_forecast",
                           on_change="rerun", icon=":material/trending_up:")
with forecast_box:
    if not forecast_box.open:
        pass
    elif EMPTY_STORE or observed.empty:
        st.info("The forecast needs request logs of a self-hosted model: " + (
            "the store is empty." if EMPTY_STORE else "none in these filters."), icon=":material/database:")
    else:
        g1, g2, g3, g4 = st.columns([2, 1, 1, 1])
        fmodel = g1.selectbox("Model", list(observed["model"]), key="cap_fc_model")
        days = g2.slider("Days ahead", 1, MAX_FORECAST_DAYS, 7, key="cap_fc_days")
        own = _fleet_inputs(fmodel)
        g3.number_input("Mean service (s)", min_value=0.001, max_value=calculator.MAX_TARGET_S,
                        value=min(max(own["mean_service_s"], 0.001), calculator.MAX_TARGET_S), format="%.4g",
                        key=f"cap_fc_mean_service_s_{fmodel}",
                        help=("From the hourly rollups (this store holds no raw rows): the busy time over the "
                              "requests served in the model's busiest hour." if rollup_only() else
                              "Measured in the model's busiest hour."))
        g4.number_input("Slots per replica", min_value=1, max_value=calculator.MAX_SLOTS_PER_REPLICA,
                        value=min(own["slots_per_replica"], calculator.MAX_SLOTS_PER_REPLICA),
                        key=f"cap_fc_slots_per_replica_{fmodel}",
                        help="From the price book, or the calculator's when it was filled from this model.")
        own = _fleet_inputs(fmodel)
        measured = observed_by_model.loc[fmodel, "mean_service_s"]
        bound = min(max(measured, 0.001), calculator.MAX_TARGET_S) if pd.notna(measured) else None
        if bound is not None and bound != measured and own["mean_service_s"] == bound:
            # a measured service time past the field's bounds is set at the bound and said (as the calculator's fill)
            st.warning(f"{fmodel}'s mean service time in the logs, {number(measured)} s, is outside what the "
                       f"forecast takes (0.001 to {calculator.MAX_TARGET_S:,.0f} s): {number(bound)} s is used.",
                       icon=":material/tune:")
        fp = _forecast(fmodel, days)
        if fp.state != "ok":
            st.info(f"No forecast: {fp.message}.", icon=":material/info:")
        else:
            fc = fp.forecast
            if fp.message:
                st.warning(f"Short history: {fp.message}.", icon=":material/warning:")
            h1, h2, h3, h4 = metric_row(4)
            h1.metric("Peak forecast (req/s)", f"{number(fp.peak_qps)}", border=True)
            h2.metric("Peak replicas", f"{fp.peak_replicas:,}", border=True,
                      help="The most replicas any forecast hour needs, redundancy included.")
            h3.metric("Backtest error (MAPE)", f"{fc.backtest_mape_pct:.1f} %" if fc.backtest_mape_pct is not None
                      else MISSING, border=True, help="Mean absolute percentage error of the method on the last "
                      "days held out: " + fc.backtest_note)
            h4.metric(f"GPU cost over {counted(days, 'day')}", usd(fp.cost_usd_total), border=True,
                      help="Σ replicas per hour × GPUs per replica × $ per GPU-hour (the model's price-book "
                           "row); — when that row has no GPU price.")
            if fc.backtest_mape_pct is not None and fc.backtest_mape_pct > FORECAST_TRUST_MAPE_PCT:
                st.warning(f"This forecast missed the held-out days by {fc.backtest_mape_pct:.0f} % on average: plan "
                           "on the upper end of its interval, or on the observed peak, not on the line.",
                           icon=":material/warning:")
            st.altair_chart(charts.qps_forecast(fp.history, fp.plan, interval=fc.interval,
                                                title=f"{fmodel}: served requests per second, history and forecast "
                                                      f"({fc.interval:.0%} interval)"))
            st.altair_chart(charts.replica_plan(fp.plan, title=f"{fmodel}: replicas per hour at utilisation ≤ {rho_target:.0%} "
                                                                f"+{redundancy_pct} % redundancy"))
            rate = own["slots_per_replica"] / own["mean_service_s"]
            st.caption(f"Source: your logs ({counted(fp.history.size, 'hour')} of {fmodel}'s served requests). One replica "
                       f"serves {own['slots_per_replica']} slots ÷ {number(own['mean_service_s'])} s = {number(rate)} req/s; "
                       f"target utilisation and redundancy from the calculator above; never fewer than 1 replica (scaling to 0 "
                       f"means a cold start for the next request). Method: {fc.method}. "
                       f"Backtest: {fc.backtest_note}.")

# ================================================================ autoscaling
auto_box = st.expander("Autoscaling: reactive HPA, predictive, warm pool and shedding on a spike", key="cap_autoscale",
                       on_change="rerun", icon=":material/bolt:")


@st.cache_data(show_spinner="Simulating the policies second by second…", max_entries=32)
def _simulate(**kwargs):
    return plans.simulate_policies(**kwargs)


with auto_box:
    if auto_box.open:
        RAMP, FORECAST = "a 30 s ramp to double the load (illustrative)", "the forecast's climb to its peak (your logs)"
        traffic = st.radio("Traffic", [RAMP, FORECAST], horizontal=True, key="cap_as_traffic",
                           disabled=EMPTY_STORE or observed.empty,
                           help="The forecast needs logs of a self-hosted model (see the Forecast section).")
        a1, a2, a3, a4 = st.columns(4)
        kwargs = {"gpus_per_replica": 1, "gpu_hour_usd": None}
        fp = None
        if traffic == FORECAST:
            fmodel = st.session_state.get("cap_fc_model") or observed["model"].iloc[0]
            fp = _forecast(fmodel, st.session_state.get("cap_fc_days", 7))
            if fp.state != "ok":
                st.info(f"No forecast to simulate ({fp.message}): showing the illustrative ramp instead.")
        if fp is not None and fp.state == "ok":
            own = _fleet_inputs(fmodel)
            rate = own["slots_per_replica"] / own["mean_service_s"]
            kwargs.update(traffic="forecast", forecast_qps_hourly=tuple(fp.plan["qps"].round(6)),
                          service_rate_per_replica=rate, slots_per_replica=own["slots_per_replica"],
                          gpus_per_replica=own["gpus_per_replica"], gpu_hour_usd=own["gpu_hour_usd"])
            a1.metric("Requests per second per replica", f"{number(rate)}", help="Service rate (μ) of one replica: slots ÷ mean service time (Forecast section).")
            a2.metric("Slots per replica", f"{own['slots_per_replica']}")
            origin = (f"your logs: {fmodel}'s forecast; one replica = {own['slots_per_replica']} slots of "
                      f"{number(own['mean_service_s'])} s each, priced from the price book")
        else:
            kwargs.update(traffic="ramp",
                          base_qps=a1.number_input("Base arrivals per second", min_value=0.0, max_value=calculator.MAX_ARRIVAL_RATE, value=14.0, key="cap_as_base"),
                          peak_qps=a2.number_input("Peak arrivals per second", min_value=0.0, max_value=calculator.MAX_ARRIVAL_RATE, value=28.0, key="cap_as_peak"),
                          ramp_s=int(a3.number_input("Ramp (s)", min_value=0, max_value=plans.RAMP_RUN_S - plans.RAMP_START_S, value=30,
                                                 key="cap_as_ramp", help=f"Seconds from the base to the peak: the run lasts "
                                                 f"{plans.RAMP_RUN_S} s and the ramp starts at {plans.RAMP_START_S} s.")),
                          service_rate_per_replica=a4.number_input("Requests per second per replica", min_value=0.01, max_value=calculator.MAX_ARRIVAL_RATE, value=2.0,
                                                                   key="cap_as_mu"),
                          gpus_per_replica=int(gpus), gpu_hour_usd=gpu_usd)
            origin = ("illustrative: a fleet sized 70 % busy on 10 replicas whose load doubles "
                      "in 30 s, 90 s cold start), with your edits; GPU price from the cost inputs above")
        b1, b2, b3 = st.columns([1, 1, 3])
        kwargs.update(
            cold_start_s=int(b1.number_input("Cold start (s)", min_value=0, max_value=plans.MAX_COLD_START_S, value=90, key="cap_as_cold")),
            warm_pool_replicas=int(b2.number_input("Warm pool (replicas)", min_value=0, max_value=calculator.MAX_INSTANCES, value=10, key="cap_as_pool")),
            policy_names=tuple(b3.multiselect("Policies", list(plans.POLICY_NAMES), default=list(plans.POLICY_NAMES),
                                              key="cap_as_policies")),
            # 0 is no SLA, as in the calculator above (it was taken as 2 s here, a figure nobody set)
            wait_sla_s=sla_s or None, target_utilization=rho_target)
        if not kwargs["policy_names"]:
            st.info("Pick at least one policy.")
        else:
            run = _simulate(**kwargs)
            if run.note:
                st.warning(run.note, icon=":material/warning:")
            no_sla = kwargs["wait_sla_s"] is None
            st.dataframe(run.summary.drop(columns="sla_violation_s") if no_sla else run.summary,
                         placeholder=MISSING, hide_index=True, column_config={
                "policy": "Policy",
                "sla_violation_s": st.column_config.NumberColumn(f"Seconds over the {number(sla_s)} s P99 SLA",
                                                                 format="%d"),
                "shed_requests": st.column_config.NumberColumn("Shed requests", format="%,.0f"),
                "gpu_hours": st.column_config.NumberColumn("GPU-hours", format="%,.2f"),
                "cost_usd": st.column_config.NumberColumn("GPU cost ($)", format="$%,.2f"),
                "peak_queue_len": st.column_config.NumberColumn("Peak queue (requests)", format="%,.0f"),
                "peak_p99_wait_s": st.column_config.NumberColumn("Peak P99 wait (s)", format="%,.2f"),
                "peak_replicas": st.column_config.NumberColumn("Peak replicas", format="localized")})
            panels = charts.autoscale_timeline(run.timeline, wait_sla_s=kwargs["wait_sla_s"])
            for i in range(0, len(panels), 2):
                cols = st.columns(2)
                for col, chart in zip(cols, panels[i:i + 2], strict=False):
                    col.altair_chart(charts.beside(chart))
            step = f"; the charts show one point per {run.step_s} s" if run.step_s > 1 else ""
            if no_sla:
                st.caption("No P99 wait SLA (the field above is 0): no second is counted as over an SLA, so the "
                           "policies compare on shed requests, queue, peak P99 wait, replicas and GPU cost; enter an "
                           "SLA above to count the seconds each policy spends over it.")
            st.caption(f"Traffic: {run.traffic_label}. Source: {origin}. A 1 s fluid simulation (finops.capacity.autoscale): "
                       f"HPA every 15 s with 10 % tolerance and 300 s scale-down stabilisation; new replicas are ready "
                       f"after the cold start, warm-pool ones after 5 s; predictive policies see a perfect forecast "
                       f"one cold start ahead; shedding drops up to 30 % of arrivals (the lowest tier) when utilisation would "
                       f"pass 1. GPU-hours count ready, starting and warm-pool replicas{step}.")
