"""Cost: where the money goes per token, per request and per GPU hour, and who should be charged for it."""
import streamlit as st

from finops import charts
from finops.errors import InputError
from finops.fmt import MISSING, counted, export_name, usd, usd_column_format
from finops.spend import costviews, exports, fleets, pricing
from finops.spend import report as spend
from finops.spend.costviews import (
    cost_matrix_wide,
    showback_by_tenant,
    token_effect,
    token_mix_long,
)
from views._shared import (
    MAX_PANELS,
    bounded_dataframe,
    current_filters,
    empty_state,
    filter_caption,
    fleet_wide,
    kind_column,
    metric_row,
    nothing_priced_state,
    percent_column,
    plain,
    query,
    raw_rows_done,
    raw_rows_notice,
    source_label,
    stop_if_store_empty,
    top_panels,
    unpriced_banner,
)

st.title("Cost")
f = current_filters()
st.caption(filter_caption(f))
stop_if_store_empty("the cost page")
unpriced_banner(f)
models_as = st.segmented_control(
    "Models", list(costviews.MODEL_NAMES), default="model", format_func=costviews.MODEL_NAMES.get,
    key="showback_models", bind="query-params",
    help="As logged: each name the logs use is its own row. As priced: the names one price applies to are one row "
         "(gpt-4o-mini-2024-07-18 and openai/gpt-4o-mini are gpt-4o-mini), as the Data page's 'How each model is "
         "priced' maps them. Applies to the $ per 1M tokens by model and tenant, the token mix and the showback; "
         "unit costs and the self-hosted fleet are per logged model.") or "model"
MODEL_LABEL = "Model (as priced)" if models_as != "model" else "Model"

sb = query(costviews.showback, f, models=models_as)
if sb.empty:
    empty_state()
    st.stop()
period = query(costviews.period_of, f)
USD = st.column_config.NumberColumn
COUNT = st.column_config.NumberColumn

# ---- $ per 1M tokens, model x tenant
st.subheader("$ per 1M tokens by model and tenant")
matrix = query(costviews.cost_matrix, f, models=models_as)
if matrix["tokens"].sum() == 0:
    empty_state("These requests carry no token counts, so there is no $ per 1M tokens to show.")
else:
    heat, table = st.tabs(["Heatmap", "Table"])
    with heat:
        if (matrix["cost_per_1m_tokens"].fillna(0) > 0).any():
            st.altair_chart(charts.cost_heatmap(matrix, title="$ per 1M tokens (input + output) by model and tenant"))
        else:
            nothing_priced_state(f, "The heatmap")
    wide = cost_matrix_wide(matrix)
    bounded_dataframe(wide, table, sort_by=None, what="models", file_name="cost_per_1m_by_model_tenant",
                      placeholder=MISSING, hide_index=True, column_config={
        "model": st.column_config.TextColumn(MODEL_LABEL),
        **{c: USD(f"{c} ($ per 1M tokens)", format="$%,.3f") for c in wide.columns if c != "model"}})
    st.caption("Spend per 1M tokens the models served (input + output; cache hits reached no model): the *billed* "
               "unit cost of API models, the *allocated* one of self-hosted models (their busy GPU time; idle "
               "capacity is left out). A model nothing prices has none (—, and no cell): its spend counts at $0 and its tokens "
               "are left out of every $ per 1M tokens, as the banner says. " + source_label())
    # the costliest model first, as a finance reader scans it (the query's order is by model name)
    units = query(spend.unit_costs, f).sort_values(["request_cost_usd", "model"], ascending=[False, True],
                                                       kind="stable")
    bounded_dataframe(units, sort_by="request_cost_usd", what="models", file_name="unit_costs", placeholder=MISSING, hide_index=True, column_config={
        # medium: a long model name is cut (whole on hover) rather than push the unit costs off the right edge
        "model": st.column_config.TextColumn("Model", width="medium"),
        "kind": kind_column(help="API: a provider bills tokens; self-hosted: a GPU fleet"),
        "served_tokens": COUNT("Tokens served", format="localized"), "request_cost_usd": USD("Spend on its requests ($)", format=usd_column_format(units["request_cost_usd"]),
                          help="Billed for an API model; for a self-hosted one, the GPU time its requests used (idle "
                               "capacity is apart: the fleet's cost, on the Data page and in the spend by model)."),
        "billed_usd_per_1m": None, "allocated_usd_per_1m": None,
        "usd_per_1m": USD("Billed or allocated, $ per 1M tokens", format="$%,.3f",
                          help=spend.UNIT_COSTS["billed"] + ". " + spend.UNIT_COSTS["allocated"] + ". "
                               + MISSING + ": the model has no price (counted at $0, see the banner)."),
        "fleet_served_tokens": None, "fleet_cost_usd": None,
        "fully_loaded_usd_per_1m": USD("Fully loaded, $ per 1M tokens", format="$%,.3f",
                                       help=spend.UNIT_COSTS["fully_loaded"] + "; an API model's is its billed one")})
    st.caption("The three unit costs, the same on every page and in `python -m finops report --unit-costs`: "
               "billed for API models; for a self-hosted fleet, allocated (busy GPU time only) and fully loaded "
               "(idle included, over every tenant's tokens: the price the Routing page reprices a fleet at).")

# ---- token mix and its cost effect
st.subheader("Token mix and what it does to cost")
mix = query(costviews.token_mix, f, models=models_as)
tokens_long, cost_long = token_mix_long(mix)
left, right = st.columns(2)
left.altair_chart(charts.beside(charts.token_mix(tokens_long, costviews.TOKEN_CLASS_LABELS,
                                                 title="Token mix by model (share of tokens, %)")))
priced = bool((mix["cost_usd"] > 0).any())        # any spend at all to split
with right:
    if priced:
        st.altair_chart(charts.beside(charts.cost_parts(cost_long, costviews.COST_PART_LABELS,
                                                      title="What each model's spend is made of (USD)")))
    else:
        nothing_priced_state(f, "What each model's spend is made of")
eff = token_effect(mix)
if eff.output_token_share is not None and eff.output_cost_share is not None:
    st.caption(f"On API models, output tokens are {100 * eff.output_token_share:.1f} % of the tokens but "
               f"{100 * eff.output_cost_share:.1f} % of the token cost; prompt caching saved "
               f"{usd(eff.prompt_cache_saving_usd)} against uncached input prices. Self-hosted models are paid "
               "per GPU hour, whatever the mix. " + source_label())
elif priced:
    st.caption("No token-priced API traffic in these filters: self-hosted models are paid per GPU hour, "
               "whatever the mix. " + source_label())
else:
    st.caption("The mix is of the tokens the logs carry; with no price, it moves no cost yet. " + source_label())

# ---- $ per 1M input and output tokens
st.subheader("$ per 1M input and output tokens: self-hosted beside API")
classes = query(costviews.token_class_prices, f)
if not fleet_wide("This table"):           # a shared fleet: tenant filters do not apply
    pass
elif classes.empty and not priced:
    nothing_priced_state(f, "This table")
elif classes.empty:
    empty_state("No priced tokens in these filters.")
else:
    bounded_dataframe(classes, sort_by="input_tokens", order="the most input tokens", what="models",
                      file_name="token_class_prices", placeholder=MISSING, hide_index=True, column_config={
        "model": st.column_config.TextColumn("Model", width="medium"), "kind": kind_column(),
        "input_tokens": COUNT("Input tokens", format="localized"),
        "output_tokens": COUNT("Output tokens", format="localized"),
        "input_usd_per_1m": USD("Input ($ per 1M)", format="$%,.3f"),
        "output_usd_per_1m": USD("Output ($ per 1M)", format="$%,.3f"),
        "input_usd_per_1m_with_idle": USD("Input, idle included ($ per 1M)", format="$%,.3f"),
        "output_usd_per_1m_with_idle": USD("Output, idle included ($ per 1M)", format="$%,.3f"),
        "split_measured_share": percent_column("Split measured (%)", bar=True),
        "basis": st.column_config.TextColumn("How", width="large")})
    st.caption("API models: the cost of their priced tokens at the rows in force (prompt-cache prices, tiers and "
               "dates as billed) per 1M input and per 1M output tokens. Self-hosted models: the GPU time allocated "
               "to requests, split into input and output by prefill against decode time (where the logs time "
               "neither, estimated from the tokens, as the How column says); 'idle included' adds the fleet's idle "
               "GPU time, split the same way. The fleet is shared: tenant and tier filters do not apply. " + source_label())

# ---- cost per request: each request priced from its raw row (the rollups hold sums, not one request's cost),
# so only when the section is opened
st.subheader("Cost of one request")
if raw_rows_notice("The distribution of one request's cost"):
    pass
else:
    box = st.expander("Per model: mean, median, P90, P99 and max of one request's cost, and its histogram",
                      key="cost_dist", bind="query-params", icon=":material/bar_chart:")
    if not box.open:
        st.caption("Open to price each request of the period from its own row (a random sample above "
                   f"{costviews.COST_SAMPLE_ROWS:,} requests), which the hourly rollups cannot answer.")
    else:
        dist = query(costviews.cost_per_request, f)
        with box:
            if dist.summary.empty:
                empty_state("No requests to price.")
            else:
                if dist.histogram.empty:
                    st.info("Every request here costs nothing (cache hits or models missing from the price book).")
                else:
                    st.altair_chart(charts.cost_per_request(dist.histogram,
                                                            title="Cost of one request by model (USD, log scale)"))
                bounded_dataframe(dist.summary, sort_by="requests", order="the most requests", what="models",
                                  file_name="cost_per_request", placeholder=MISSING, hide_index=True, column_config={
                    "model": st.column_config.TextColumn("Model"),
                    "requests": COUNT("Requests", format="localized"),
                    "mean_usd": USD("Mean ($ per request)", format="$%,.6f"),
                    "p50_usd": USD("Median ($)", format="$%,.6f"),
                    "p90_usd": USD("P90 ($)", format="$%,.6f"), "p99_usd": USD("P99 ($)", format="$%,.6f"),
                    "max_usd": USD("Max ($)", format="$%,.6f"),
                    "free_share": percent_column("Free: cache hits (%)", bar=True)})
                sample = (f"Estimated from a random sample of {dist.rows_read:,} requests. " if dist.sampled
                          else f"All {dist.rows_read:,} requests. ")
                st.caption(sample + "Each request costs its recorded cost, else its tokens at book prices; cache hits "
                           "cost nothing; a self-hosted request gets its share of the hour's busy GPU time. "
                           + source_label())
raw_rows_done()         # on a rollup-only store the sections below read the store again, not a dataset slice

# ---- self-hosted fleet
st.subheader("Self-hosted GPU fleet: allocated vs idle")
gpu = query(costviews.gpu_fleet, f)
if not fleet_wide("The self-hosted fleet's cost"):
    pass
elif gpu.summary.empty:
    st.info("No self-hosted model (kind self_hosted in the price book) has traffic in these filters.",
            icon=":material/dns:")
else:
    for r in gpu.summary[gpu.summary["model"].isin(top_panels(gpu.summary["model"], "self-hosted models"))].itertuples(
            index=False):
        st.markdown(f"**{plain(r.model)}**")
        c1, c2, c3, c4 = metric_row(4)
        c1.metric("Fleet cost (USD)", usd(r.fleet_cost_usd), border=True,
                  help="Replicas × GPUs per replica × $ per GPU-hour, over the hours the fleet ran in the period.")
        c2.metric("Allocated (USD)", usd(r.allocated_usd), border=True,
                  help="Allocated to requests: the busy share of the fleet cost, charged to the requests that used it.")
        c3.metric("Idle (USD)", usd(r.idle_usd), border=True,
                  help="Paid GPU time no request used: the idle-capacity line of the showback.")
        c4.metric("Utilisation (%)",
                  f"{100 * r.utilization:.1f} %" if r.utilization == r.utilization else "unknown", border=True,
                  help="Busy share of the paid GPU capacity over the period's hours whose busy time the logs give "
                       "(service time, or latency less queue wait); unknown where no hour of traffic has any.")
        unbilled = (f" {r.unbilled_requests:,} of its requests fall in hours its schedule leaves out: they carry no "
                    "GPU cost." if r.unbilled_requests else "")
        if r.untimed_hours:
            one = r.untimed_hours == 1
            unbilled += (f" {counted(r.untimed_hours, 'hour')} of traffic ({usd(r.untimed_fleet_usd)} of the fleet "
                         f"cost) {'carries' if one else 'carry'} no service or latency time: that cost is allocated to "
                         f"the requests by count, none of it idle, and the utilisation leaves {'it' if one else 'them'} "
                         "out.")
        how = r.how if isinstance(r.how, str) and r.how else "not in the price book"
        st.caption(f"{plain(how[:1].upper() + how[1:])}, "
                   f"{r.gpu_hours:,.1f} GPU-hours in {counted(r.hours_billed, 'hour')}.{unbilled}")
    cols = st.columns(min(len(gpu.summary), 2))
    for i, model in enumerate(gpu.summary["model"].head(MAX_PANELS)):
        chart = charts.gpu_cost(gpu.series, gpu.grain, model)
        cols[i % len(cols)].altair_chart(charts.beside(chart) if len(cols) > 1 else chart)
    if gpu.series["utilization"].notna().any():
        st.altair_chart(charts.utilization(gpu.series, gpu.grain, title=f"GPU utilisation per {gpu.grain} (%)"))
    else:
        st.info("No utilisation to draw: no hour of these fleets' traffic has a service or latency time in the logs, "
                "so their busy share of the GPUs is unknown.", icon=":material/timer_off:")
    st.caption("A self-hosted model costs replicas × GPUs per replica × $ per GPU-hour for each hour its fleet ran: "
               "the periods of its schedule (declare them on the Data page), else from its first to its last hour of "
               "traffic. The busy share is allocated to requests by their service time; the rest is idle. Tenant "
               "and tier filters do not apply: the fleet is shared. " + source_label())

# ---- recorded against list price
st.subheader("Recorded cost against list price")
reconciled = query(spend.reconcile, f)
rec = reconciled[(reconciled["recorded_requests"] > 0) | (reconciled["source_unpriced_requests"] > 0)]
if rec.empty:
    st.info("These logs record no cost of their own: every figure on this page is tokens × the price row in force "
            "for each request (price book or catalogue), so there is nothing to reconcile.", icon=":material/info:")
else:
    bounded_dataframe(rec[list(spend.RECONCILE_COLUMNS[:11])], sort_by="list_cost_usd", order="the highest list cost",
                      what="models", file_name="recorded_vs_list", placeholder=MISSING, hide_index=True, column_config={
        "model": st.column_config.TextColumn("Model"), "provider": st.column_config.TextColumn("Provider"),
        "priced_by": st.column_config.TextColumn("List price from"),
        "recorded_requests": COUNT("Requests with a recorded cost", format="localized"),
        "recorded_cost_usd": USD("Recorded by the source ($)", format=usd_column_format(rec["recorded_cost_usd"])),
        "list_cost_usd": USD("Same requests at list price ($)", format=usd_column_format(rec["list_cost_usd"])),
        "difference_usd": USD("Recorded − list ($)", format=usd_column_format(rec["difference_usd"])),
        "difference_pct": USD("Recorded − list (%)", format="%.1f %%"),
        "source_unpriced_requests": COUNT("Source wrote $0 (priced here)", format="localized"),
        "priced_requests": COUNT("Requests priced here", format="localized"),
        "priced_cost_usd": USD("Priced here ($)", format=usd_column_format(rec["priced_cost_usd"]))})
    st.caption("Where the logs carry a cost (LiteLLM's spend, a provider's cost field) it counts as billed; this "
               "table prices the same requests at the list price in force for each, so a source that is off shows. "
               "A source that wrote $0 for a request with tokens could not price it: those requests are priced "
               "here from the price book or the catalogue instead. A self-hosted model's recorded cost is shown but "
               "not counted: its fleet's GPU hours are its cost. " + source_label())

st.subheader("Your logs against the provider's bill")
if reconciled.empty:
    st.info("No requests and no billing lines in this period.", icon=":material/info:")
elif reconciled["billing"].isin([spend.NO_BILLING]).all():
    st.info("No billing lines loaded: load the provider's cost report (OpenAI's `GET /v1/organization/costs`, "
            "Anthropic's cost report) with `python -m finops billing load FILE` to set what the provider billed "
            "beside what the logs say.", icon=":material/info:")
elif reconciled["billing"].isin([spend.BILLING_PER_ORGANISATION]).all():
    st.info("Billing lines are per organisation, not per tenant or tier: clear the tenant and tier filters to set "
            "the provider's bill beside the logs.", icon=":material/info:")
else:
    billed = reconciled.dropna(subset=["billed_usd"])
    if len(billed):
        logs_usd, billed_usd = float(billed["logs_cost_usd"].sum()), float(billed["billed_usd"].sum())
        b1, b2, b3 = metric_row(3)
        b1.metric("Your logs say (USD)", usd(logs_usd), border=True,
                  help="Every request of the billed models in the period, as every page counts it.")
        b2.metric("The provider billed (USD)", usd(billed_usd), border=True,
                  help="The cost lines of the stored billing reports for the period's days.")
        b3.metric("Logs − bill (USD)", usd(logs_usd - billed_usd), border=True,
                  help="Positive: the logs count more than the provider billed.")
    st.dataframe(reconciled[["model", "provider", "billed_model", "logs_cost_usd", "billed_usd",
                             "billed_difference_usd", "billed_difference_pct", "billing"]],
                 placeholder=MISSING, hide_index=True, column_config={
        "model": st.column_config.TextColumn("Model (logged)"), "provider": st.column_config.TextColumn("Provider"),
        "billed_model": st.column_config.TextColumn("Billed as"),
        "logs_cost_usd": USD("Your logs say ($)", format=usd_column_format(reconciled["logs_cost_usd"])),
        "billed_usd": USD("The provider billed ($)", format=usd_column_format(reconciled["billed_usd"])),
        "billed_difference_usd": USD("Logs − bill ($)", format=usd_column_format(reconciled["billed_difference_usd"])),
        "billed_difference_pct": USD("Logs − bill (% of bill)", format="%.1f %%"),
        "billing": st.column_config.TextColumn("Billing lines")})
    st.caption("The provider's bill comes from its usage and cost reports (`python -m finops billing load`): daily "
               "lines per model, so a period that starts or ends inside a day counts that whole day's bill. A logged "
               "name and a billed name are one model where the catalogue says so (a dated snapshot and its alias). "
               "A billed model with no request in the logs, and a line that names no model (tool calls), are rows "
               "of their own, so the billed column adds up to the provider's bill. " + source_label())

# ---- showback / chargeback
st.subheader("Showback: spend per tenant and model")
POLICIES = {p.key: p for p in pricing.IDLE_POLICIES}
stored_policy = query(fleets.default_policy)
p1, p2 = st.columns([2, 3])
policy_key = p1.selectbox("Idle GPU capacity", list(POLICIES), index=list(POLICIES).index(stored_policy.kind),
                          format_func=lambda k: POLICIES[k].label, key="idle_policy", bind="query-params",
                          help=" ".join(f"{p.label}: {p.help}" for p in pricing.IDLE_POLICIES)
                          + " The default is set on the Data page.")
centre = (p2.text_input("Cost centre that pays for idle GPU time", value=stored_policy.cost_centre or "platform",
                        key="idle_centre", bind="query-params") if policy_key == "centre" else "")
try:
    policy = pricing.IdlePolicy(policy_key, centre)
except InputError as exc:
    st.warning(f"{plain(exc)}: idle is kept apart until one is named.", icon=":material/warning:")
    policy = pricing.KEEP_APART
if policy != stored_policy:          # the default policy's showback is the one read above
    sb = query(costviews.showback, f, idle_policy=policy, models=models_as)
total = float(sb["cost_usd"].sum())
st.metric("Total spend in the table (USD)", usd(total), border=False)
COLUMNS = {
    "tenant": st.column_config.TextColumn("Tenant"), "model": st.column_config.TextColumn(MODEL_LABEL),
    "models": COUNT("Models used"),
    "requests": COUNT("Requests", format="localized"),
    "input_tokens": COUNT("Input tokens", format="localized"),
    "output_tokens": COUNT("Output tokens", format="localized"),
    "cached_input_tokens": COUNT("Cached input tokens", format="localized"),
    "tokens": COUNT("Tokens (in + out)", format="localized"),
    "priced_tokens": COUNT("Tokens priced", format="localized",
                           help="The $ per 1M tokens divides by these: the tokens a model served (a cache hit "
                                "reached none), less those of models nothing prices (counted at $0, see the banner)"),
    "cost_usd": USD("Spend ($)", format=usd_column_format(sb["cost_usd"])),
    "cost_per_1m_tokens": USD("$ per 1M tokens", format="$%,.3f",
                              help="Spend / tokens priced × 1M. " + MISSING + ": no token here has a price"),
    "share": percent_column("Share of total (%)", bar=True)}
by_tenant, by_pair = st.tabs(["Per tenant", "Per tenant and model"])
bounded_dataframe(showback_by_tenant(sb), by_tenant, sort_by="cost_usd", what="tenants", file_name="showback_tenants",
                  placeholder=MISSING, hide_index=True, column_config=COLUMNS)
bounded_dataframe(sb, by_pair, sort_by="cost_usd", what="tenant and model rows", file_name="showback",
                  placeholder=MISSING, hide_index=True, column_config=COLUMNS)
name = export_name("showback", period)
# the files are made when a button is pressed (a FOCUS export of a big store takes seconds), not on each render
c1, c2, c3 = st.columns(3)
c1.download_button("Download CSV", lambda: exports.safe_csv(sb), file_name=f"{name}.csv", mime="text/csv",
                   icon=":material/download:", on_click="ignore")
c2.download_button("Download Parquet", lambda: exports.parquet_bytes(sb), file_name=f"{name}.parquet",
                   mime="application/vnd.apache.parquet", icon=":material/download:", on_click="ignore")
c3.download_button("Download FOCUS 1.2 CSV",
                   lambda: exports.focus_csv(query(exports.focus_frame, f, idle_policy=policy)),
                   file_name=f"{name}_focus.csv", mime="text/csv", icon=":material/download:", on_click="ignore",
                   help="FinOps FOCUS 1.2 cost-and-usage rows: one per day, tenant, model, SLA tier and meter "
                        "(input, cached input and output tokens, requests, GPU-hours).")
idle_text = ("Idle self-hosted capacity is the row '(idle capacity)', so the table adds up to the whole bill "
             "(it is left out when tenants or tiers are filtered)." if not policy.spreads else
             f"Idle self-hosted capacity is charged out ({policy.label}): it is in the tenants' rows, which add up to "
             "the whole bill; a fleet nobody used in the period keeps its idle as '(idle capacity)'.")
st.caption(idle_text + " The downloads carry the same allocation. In the CSV exports, cells that begin with "
           "=, +, - or @ are prefixed with ' so spreadsheets do not run them. " + source_label())
