"""Routing: where do requests go, what does the cache and the cascade save, and what if we routed differently?"""
import streamlit as st

from finops import charts, sql, store
from finops.errors import InputError
from finops.fmt import MISSING, counted, duration_ms, usd, usd_column_format
from finops.fmt import share as share_text
from finops.spend import routing
from finops.spend.costviews import format_value
from views._shared import (
    bounded_dataframe,
    current_filters,
    empty_state,
    filter_caption,
    metric_row,
    percent_column,
    plain,
    query,
    raw_rows_done,
    raw_rows_notice,
    source_label,
    stop_if_store_empty,
    unpriced_banner,
)


def _share(v: float | None) -> str:
    return "unknown" if v is None else f"{v:.1%}"


MEASURES = {"spend": "spend_share", "requests": "request_share", "tokens": "token_share"}

st.title("Routing")
f = current_filters()
st.caption(filter_caption(f))
stop_if_store_empty("the routing page")
unpriced_banner(f)              # spend, forecasts and what-ifs count unpriced traffic at $0

# ---------------------------------------------------------------- mix
st.header("Where requests go")
c1, c2 = st.columns(2)
# logs that name no route (a provider's export, a trace) split by model first: by route they are one "(none)"
no_route = set(query(routing.mix, f, "route")["series"]) <= {"(none)"}
dim = c1.segmented_control("Share by", ["route", "model"], default="model" if no_route else "route", key="mix_dim",
                           bind="query-params") or ("model" if no_route else "route")
if dim == "route" and no_route:
    st.info("These logs name no route (the gateway's `route` field), so every request is '(none)' below: "
            "share by model instead.", icon=":material/alt_route:")
measure = c2.segmented_control("Share of", list(MEASURES), default="spend", key="mix_measure",
                               bind="query-params") or "spend"
share = MEASURES[measure]
series_title = dim.capitalize()
lo, hi = query(store.time_span)
mix_total = query(routing.mix, f, dim)
if mix_total.empty or mix_total["requests"].sum() == 0:
    empty_state()
    st.stop()
tab_time, tab_tenant, tab_tier = st.tabs(["Over time", "Per tenant", "Per SLA tier"])
if measure == "spend" and not (mix_total["cost_usd"] > 0).any():
    # a share of $0 is no share (every chart would be empty); the requests and tokens still split
    for tab in (tab_time, tab_tenant, tab_tier):
        tab.info("Nothing in these filters has a price, so there is no share of spend to draw: choose requests "
                 "or tokens above, or add a price or an alias on the Data page.", icon=":material/money_off:")
else:
    with tab_time:
        g = sql.grain_for(f.since or lo, f.until or hi, "spend")
        over = query(routing.mix, f, dim, grain=g)
        st.altair_chart(charts.share_over_time(over, g, share, series_title,
                                               title=f"Share of {measure} by {dim}, per {g}"))
    with tab_tenant:
        per = query(routing.mix, f, dim, split="tenant")
        st.altair_chart(charts.share_by_split(per, "tenant", share, series_title,
                                              title=f"Share of each tenant's {measure} by {dim}"))
    with tab_tier:
        per = query(routing.mix, f, dim, split="sla_tier")
        st.altair_chart(charts.share_by_split(per, "sla_tier", share, series_title,
                                              title=f"Share of each SLA tier's {measure} by {dim}"))
bounded_dataframe(mix_total, sort_by="requests", order="the most requests", what="rows", file_name="routing_mix",
                  placeholder=MISSING, hide_index=True, column_config={
    # a medium column: a long model name is cut with an ellipsis (whole on hover) rather than push the shares
    # off the table's right edge
    "series": st.column_config.TextColumn(series_title, width="medium"),
    "requests": st.column_config.NumberColumn("Requests", format="%,d"),
    "tokens": st.column_config.NumberColumn("Tokens", format="%,d"),
    "cost_usd": st.column_config.NumberColumn("Spend (USD)", format=usd_column_format(mix_total["cost_usd"])),
    "request_share": percent_column("Share of requests", bar=True),
    "token_share": percent_column("Share of tokens", bar=True),
    "spend_share": percent_column("Share of spend", bar=True)})
st.caption("Spend here is what requests cost: idle self-hosted GPU time belongs to no route and is on the Cost "
           "page. " + source_label())

# ---------------------------------------------------------------- cache
st.header("Semantic cache")
cache = query(routing.cache_savings, f)
hits = int(cache["cache_hits"].sum()) if len(cache) else 0
if not hits:
    st.info("No semantic-cache hit in these logs (no row has `cache_hit = true`).", icon=":material/info:")
else:
    requests_total = int(cache["requests"].sum())
    saved = float(cache["saved_usd"].fillna(0).sum())
    scaled = float(cache["saved_if_fleet_scaled_usd"].fillna(0).sum())
    m = metric_row(3)
    m[0].metric("Cache hit rate", share_text(hits / requests_total), border=True,
                help="Requests served from the semantic cache over all requests.")
    m[1].metric("Cache hits", f"{hits:,}", border=True)
    m[2].metric("Spend the cache saved (API models)", usd(saved), border=True,
                help="Each hit on an API model priced at its price-book token prices.")
    st.altair_chart(charts.cache_savings(cache[cache["cache_hits"] > 0],
                                         title="Semantic-cache hit rate by model, and what the hits saved"))
    if scaled > 0:
        st.caption(f"Hits on self-hosted models save GPU time, not dollars: their fleets are paid by the hour. Priced "
                   f"at each fleet's effective $ per 1M tokens they would be worth {usd(scaled)}, but only if the "
                   "fleets were shrunk to match.")
    st.caption(source_label())

# ---------------------------------------------------------------- cascade
st.header("Cascade")
casc = query(routing.cascade_summary, f)
if not casc.cascade_rows:
    st.info("No cascade in these logs (no row with `strategy = 'cascade'` and an `escalated` flag).",
            icon=":material/info:")
else:
    m = metric_row(3)
    # as the Overview writes it (its KPI "Cascade escalation rate"): the same figure, the same digits
    m[0].metric("Escalation rate", format_value("pct", casc.escalation_rate),
                border=True, help="Escalated small-model attempts per cascade request; — with no cascade requests.")
    m[1].metric("Rejected attempts cost", usd(casc.rejected_attempts_usd), border=True,
                help="What the small-model answers that were rejected (and escalated) cost.")
    m[2].metric("Share of cascade spend", format_value("pct", casc.rejected_share),
                border=True, help="Rejected attempts as a share of cascade spend; — when cascades cost nothing.")
    # the chart, then the quality table under it at full width (beside the chart it was cut to three columns)
    if len(casc.over_time):
        st.altair_chart(charts.escalation_over_time(casc.over_time, "day", title="Escalation rate per day (%)"))
    if casc.quality.empty:
        st.info("No quality label in these logs: the cost of a wrong answer cannot be weighed here.",
                icon=":material/info:")
    else:
        q = casc.quality.assign(escalated=casc.quality["escalated"].map(
            {True: "rejected attempt", False: "answer served"}))
        bounded_dataframe(q, sort_by="labelled", order="the most labelled rows", what="rows",
                          file_name="cascade_quality", placeholder=MISSING, hide_index=True, column_config={
            "model": "Model", "escalated": "Row",
            "labelled": st.column_config.NumberColumn("Labelled", format="%,d"),
            "mean_quality": percent_column("Mean quality (%)", help="The mean of the rows' quality labels (0 to 1, "
                                           "as on the Cascade page), as a percent."),
            "graded_correct_share": percent_column("Graded correct", bar=True)})
        st.caption("A rejected attempt graded correct was an escalation that was not needed.")
    st.caption(source_label())

# ---------------------------------------------------------------- misrouting
st.header("Misrouting candidates")
skip = raw_rows_notice("Misrouting candidates (each request's prompt length)")   # else maybe on a dataset slice
length = query(routing.length_field, f)
raw_scope = query(store.raw_scope, f)
if raw_scope.narrowed and not skip:
    st.info(raw_scope.note(), icon=":material/filter_list:")
if skip:
    pass
elif length is None:
    st.info("These logs carry no prompt length (prompt tokens or characters), so routing by length cannot be "
            "checked.", icon=":material/info:")
else:
    unit = "prompt tokens" if length == "input_tokens" else "prompt characters"
    lmin, lp99, lmax = query(routing.length_range, f, length)
    default = query(routing.default_threshold, f, length)
    top = max(lp99, default + 1, 10)
    threshold = st.slider(f"Prompt-length threshold ({unit})", 0, int(top), int(min(default, top)),
                          key="mis_threshold", bind="query-params",
                          help="A simple gateway rule: longer than this goes to the large model, else the small "
                               f"one (a common starting point: {routing.LEN_THRESHOLD} characters).")
    mis = query(routing.misrouting, f, threshold, length)
    if len(mis.by_length):
        st.altair_chart(charts.prompt_lengths(mis.by_length, threshold, unit,
                                              title=f"Requests by prompt length ({unit}) and model size"))
    # a model of no size class (none in the price book) is neither small nor large: no request of it is judged
    unsized = mis.by_length[~mis.by_length["size_class"].isin(["small", "large"])].groupby("model")["requests"].sum()
    not_judged = (f"{counted(len(unsized), 'model')} with no size class in the price book, "
                  f"{counted(int(unsized.sum()), 'request')}: {', '.join(plain(m) for m in unsized.index[:5])}"
                  + (f" and {len(unsized) - 5:,} more" if len(unsized) > 5 else ""))
    if len(mis.by_length) and len(unsized) == mis.by_length["model"].nunique():
        st.info(f"No request can be called misrouted: {not_judged}. A model's size class (small or large) is set "
                "in its price book row on the Data page.", icon=":material/help:")
    elif mis.summary.empty:
        st.success(f"No candidate at {threshold:,} {unit}: every short prompt went to a small model and every long "
                   "one to a large model." + (f" Not judged: {not_judged}." if len(unsized) else ""),
                   icon=":material/check_circle:")
    else:
        if len(unsized):
            st.caption(f"Not judged: {not_judged}.")
        bounded_dataframe(mis.summary, what="models", file_name="misrouted", placeholder=MISSING, hide_index=True, column_config={
            "kind": "Candidate", "model": "Served by",
            "requests": st.column_config.NumberColumn("Requests", format="%,d"),
            "share_of_model": percent_column("Share of the model's requests", bar=True),
            "actual_usd": st.column_config.NumberColumn("Cost as served (USD)", format=usd_column_format(mis.summary["actual_usd"])),
            "on_right_size_usd": st.column_config.NumberColumn("On the other size (USD)", format=usd_column_format(mis.summary["on_right_size_usd"])),
            "right_size_model": "Other-size model"})
    st.caption("Size classes come from the price book. 'On the other size' reprices the same tokens on the busiest "
               "model of the other size (self-hosted at its effective $ per 1M tokens). Length alone is a crude "
               "signal: check quality before moving traffic. " + source_label())

raw_rows_done()         # on a rollup-only store the sections below read the store again, not a dataset slice

# ---------------------------------------------------------------- what-if
st.header("What if we routed differently?")
models = query(routing.fleet_models, f)
d_small, d_large = query(routing.default_targets, f)
smalls = [m for m, s in zip(models["model"], models["size_class"], strict=True) if s == "small"] or list(models["model"])
larges = [m for m, s in zip(models["model"], models["size_class"], strict=True) if s == "large"] or list(models["model"])
if not smalls or not larges:
    st.info("The replay needs a small and a large model in the price book's size classes.", icon=":material/info:")
    st.stop()
c1, c2, c3 = st.columns(3)
policy = c1.radio("Policy", list(routing.POLICIES), format_func=lambda p: f"{p}: {routing.POLICIES[p]}",
                  key="wi_policy", bind="query-params")
# the replay moves traffic onto a model at its price book row: without a size class, the busiest model that has one
book = query(routing.effective_prices, f)
replayable = set(book.loc[book["input_usd_per_1m"].notna(), "model"])


def _first(options: list[str], preferred: str | None) -> int:
    if preferred in options:
        return options.index(preferred)
    return next((i for i, m in enumerate(options) if m in replayable), 0)


small = c2.selectbox("Small model", smalls, index=_first(smalls, d_small), key="wi_small")
large = c3.selectbox("Large model", larges, index=_first(larges, d_large), key="wi_large")
if not replayable & set(models["model"]) and not (d_small and d_large):
    st.info("No model served here has a size class or a row in the price book, and the replay moves traffic onto a "
            "model at its price book row: add the models you would route to (with their size class) on the Data "
            "page.", icon=":material/help:")
    st.stop()
kwargs = {"small_model": small, "large_model": large}
if policy in ("threshold", "per-tier") and length is not None:
    kwargs["threshold"] = st.slider(f"Threshold for the threshold rule ({unit})", 0, int(top),
                                    int(min(default, top)), key="wi_threshold", bind="query-params")
if policy == "per-tier":
    tiers = query(store.distinct_values, "sla_tier") or ["(none)"]
    cols = st.columns(len(tiers))
    choice = {}
    for col, tier in zip(cols, tiers, strict=True):
        opts = list(routing.TIER_STRATEGIES)
        pre = routing.DEFAULT_TIER_STRATEGIES.get(tier, "actual")
        choice[tier] = col.selectbox(f"{tier} tier", opts, index=opts.index(pre), key=f"wi_tier_{tier}",
                                     help="; ".join(f"{k}: {v}" for k, v in routing.TIER_STRATEGIES.items()))
    kwargs["tier_strategies"] = tuple(sorted(choice.items()))
    casc_obs = casc.escalation_rate
    kwargs["escalation_rate"] = st.slider(
        "Escalation rate of a cascade (%)", 0, 100, int(round(100 * (casc_obs if casc_obs is not None
                                                                   else routing.DEFAULT_ESCALATION_RATE))),
        key="wi_esc", help="Share of cascade requests the small model passes on to the large one. Starts at the "
                           "rate observed in these logs.") / 100
try:
    wi = query(routing.whatif, f, policy, **kwargs)
except InputError as exc:
    st.warning(plain(exc))
    st.stop()
if wi is None:
    empty_state("No request served by a model matches these filters.")
    st.stop()
m = metric_row(3)
m[0].metric("Today's routing (repriced)", usd(wi.actual_usd), border=True,
            help="The logged routing priced as the bill prices it (self-hosted at its effective price).")
m[1].metric("Answers graded correct today", _share(wi.actual_quality), border=True,
            help="Estimated from the graded requests in these logs; unknown where a model has none.")
m[2].metric("Mean latency today", duration_ms(wi.actual_mean_ms), border=True,
            help="Mean time a caller waited for an answer: an escalated cascade request counts its small attempt and "
                 "its large answer. — when no request in these filters records a latency.")
m = metric_row(3)
m[0].metric(f"Spend under {policy}", usd(wi.counterfactual_usd),
            delta=None if wi.delta_pct is None or policy == "as-logged" else
            f"{wi.delta_pct:+.1f}% ({'−' if wi.delta_usd < 0 else '+'}{usd(abs(wi.delta_usd))})",
            delta_color="off", border=True)
q_delta = (None if wi.actual_quality is None or wi.counterfactual_quality is None or policy == "as-logged"
           else f"{100 * (wi.counterfactual_quality - wi.actual_quality):+.1f} points")
m[1].metric(f"Graded correct, {policy}", _share(wi.counterfactual_quality), delta=q_delta,
            border=True, help="The quality cost of the policy; unknown where a target model has no graded answer.")
m[2].metric(f"Mean latency, {policy} (est.)", duration_ms(wi.counterfactual_mean_ms), border=True,
            help="Estimated from each target model's observed per-token rates; — where a target has no token counts.")
st.caption(plain(wi.quality_note))
if policy != "as-logged" and wi.delta_usd < 0:
    st.info("A saving here is real only if the answers stay good enough (quality above) and, for self-hosted "
            "models, the fleets shrink with the tokens moved off them: a fleet is paid by the hour.",
            icon=":material/info:")
st.altair_chart(charts.whatif_by_model(wi.by_model, title=f"Spend by model: actual vs {policy}"))
if policy == "per-tier":
    bounded_dataframe(wi.by_tier, what="tiers", file_name="whatif_by_tier", placeholder=MISSING, hide_index=True, column_config={
        "sla_tier": "SLA tier", "strategy": "Strategy",
        "actual_usd": st.column_config.NumberColumn("Actual (USD)", format=usd_column_format(wi.by_tier["actual_usd"])),
        "counterfactual_usd": st.column_config.NumberColumn("What-if (USD)", format=usd_column_format(wi.by_tier["counterfactual_usd"]))})
picked = bool(f.tenants or f.sla_tiers)
gap_usd = wi.billed_usd - wi.actual_usd
if round(wi.billed_usd, 2) == round(wi.actual_usd, 2):
    gap = ", the same as today's routing repriced"
else:
    gap = f", {usd(abs(gap_usd))} {'more' if gap_usd > 0 else 'less'} than today's routing repriced"
    if round(wi.cache_hits_usd, 2):
        gap += (f": it counts the {usd(wi.cache_hits_usd)} the logs recorded for "
                f"{counted(wi.cache_hits_recorded, 'semantic-cache hit')}, which the replay leaves out")
st.caption(f"The bill for these filters is {usd(wi.billed_usd)}"
           + (" (idle GPU time included)" if not picked else " (idle GPU time not included: tenants or tiers are "
              "picked)") + gap
           + ". Repricing self-hosted traffic at its effective $ per 1M tokens spreads each fleet's cost, idle "
             "time included, over its tokens"
           + (", so the repriced figure carries idle time the bill leaves out" if picked else "")
           + "; moving tokens off a fleet saves money only if the fleet shrinks with them.")
st.markdown("**Assumptions**\n" + "\n".join(f"- {plain(a)}" for a in wi.assumptions))
st.caption(f"{counted(wi.requests, 'request')} replayed. " + source_label())
