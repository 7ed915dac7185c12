"""Cascade: the cost-quality frontier of a small -> large cascade, the cheapest threshold for each
tenant's quality floor, and when an edge request should escalate to the cloud."""
import os
from dataclasses import replace

import pandas as pd
import streamlit as st

from finops import charts, store
from finops.cascade import edge
from finops.cascade import shadow as cascade_store
from finops.cascade import sweep as cascade
from finops.errors import InputError
from finops.fmt import MISSING, duration_ms, export_name, usd
from finops.ingest import uploads
from finops.spend import exports
from views._shared import (
    bounded_dataframe,
    can,
    current_access,
    current_filters,
    cursor,
    data_origin,
    filter_caption,
    metric_row,
    percent_column,
    plain,
    query,
    raw_rows_notice,
    store_path,
)

SOURCES = {
    "store": "Shadow evaluation in the store",
    "upload": "An eval CSV you upload",
    "example": "An illustrative table (editable)",
}
USD = st.column_config.NumberColumn
PCT = st.column_config.NumberColumn
CURVE_COLUMNS = {
    "threshold": USD("Confidence threshold", format="%.4g",
                     help="Confidence threshold (τ): escalate when the small model's confidence is below it."),
    "escalation_rate": percent_column("Escalated (%)", decimals=2),
    "avg_cost": USD("Average cost ($ per 1,000 requests)", format="$%,.3f"),
    "avg_quality": percent_column("Quality (% correct)", decimals=2),
    "marginal_cost_per_point": USD("Marginal ($ per 1,000 requests per quality point)", format="$%,.3f",
                                   help="Money saved per quality point given up, moving from the row above."),
}


def show_baselines(frame: pd.DataFrame, label: str, *, router: bool = False) -> None:
    """The reference policies' table (finops.cascade.sweep.Baselines) and what each is (``router``: random routing
    sends its share straight to the large model)."""
    st.dataframe(frame, placeholder=MISSING, hide_index=True, column_config={
        "name": st.column_config.TextColumn("Policy"),
        "large_call_rate": percent_column("Requests calling the large model (%)", decimals=2),
        "avg_cost": USD("Average cost ($ per 1,000 requests)", format="$%,.3f"),
        "avg_quality": percent_column("Quality (% correct)", decimals=2)})
    st.caption("Small only: never escalate. Direct to large: every request to the large model, no small attempt. "
               "Oracle cascade: escalate exactly the queries the large model gets right and the small one does "
               "not (small attempt paid); oracle router: the same choice made before calling the small model. "
               "Random routing (dotted line on the chart): " + ("send a random share of requests straight to the "
               "large model and the rest to the small one. " if router else "escalate a random share. ") + label)


st.title("Cascade thresholds and edge vs cloud")
st.caption("A cascade sends every request to the small model first and escalates it to the large model when the "
           "small model's confidence is under a threshold. Set the threshold high and cost approaches all-large; set it "
           "low and quality drops.")
f = current_filters()
shadow = query(cascade_store.shadow_eval, f)
raw_rows_notice("The store's shadow evaluation (graded cascade attempts)", from_dataset=False)  # model pairs

# ---------------------------------------------------------------------------------------- data source
st.header("Cost-quality frontier of the cascade")
offered = [s for s in SOURCES if s != "upload" or can("upload")]     # uploading a file is an engineer's
source = st.radio("Data source", offered, format_func=SOURCES.get, horizontal=True, key="source",
                  index=offered.index("store" if shadow.status == "ok" else "example"), bind="query-params")

data = None            # per-query EvalData (store or upload)
curve = None           # a hand-made curve (parametric)
origin = ""
ends = (None, None)    # small-only and large-only quality for a parametric table
if source == "store":
    st.caption(filter_caption(f) + " · " + shadow.message)
    if shadow.status != "ok":
        st.info(shadow.message + " Upload an eval CSV or use the illustrative table above; the sample fleet "
                "(`python -m finops demo`) carries shadow-evaluation labels on a sample of cascade requests.",
                icon=":material/science:")
    else:
        pairs = shadow.pairs()
        options = [None, *pairs["small_model"]]
        names = {r.small_model: f"{r.small_model} → {r.large_model} ({r.queries:,} queries)"
                 for r in pairs.itertuples(index=False)}
        small_model = st.selectbox("Cascade pair", options, index=1 if len(pairs) == 1 else 0,
                                   format_func=lambda m: (f"all pairs ({shadow.n_complete:,} queries)" if m is None
                                                          else names[m]),
                                   help="Mixing pairs makes sense with per-query costs; with flat prices pick one.")
        data = shadow.eval_data(small_model=small_model)
        origin = (f"your data: {data.n_queries:,} shadow-evaluated queries"
                  + (f" of {small_model}" if small_model else "")
                  + f" from {data_origin()} in store `{os.path.basename(store_path())}`")
        sources = ", ".join(f"{v:,} from {k}" for k, v in shadow.large_label_sources.items())
        st.caption(f"Large-model labels: {sources}. A query's large-model label is the grade of its linked large "
                   "answer (attrs.parent_id) when production escalated it, else the large model's shadow grade "
                   "kept on the small row (attrs.shadow_large_quality or attrs.large_quality).")
        if shadow.only_escalated:
            st.warning(shadow.message, icon=":material/warning:")
elif source == "upload":
    ups = st.file_uploader("Eval CSV: one row per query", type=["csv"], key="eval_upload", accept_multiple_files=True,
                           help="Columns: the small model's correctness or score, the large model's; optionally the "
                                "small model's confidence (without it, no threshold to sweep: the two models and the "
                                "best any router could do) and per-query costs. Quality cells may be 0/1, "
                                "True/False or any score. Several files with the same columns are read as one (an "
                                "eval split by subject).")
    if not ups:
        st.info("Upload a CSV with one row per evaluated query, for example RouteLLM's GSM8K excerpt in "
                "`tests/data/routellm_gsm8k_cascade.csv` (Mixtral vs GPT-4).", icon=":material/upload_file:")
    else:
        up = ups[0]           # the first file's header offers the columns; every file must have those mapped
        try:
            columns = uploads.eval_csv_columns(up.getvalue())
        except InputError as exc:
            st.error(f"{plain(up.name)}: {plain(exc)}", icon=":material/error:")
            columns = []
        if columns:
            guess = uploads.guess_mapping(columns)
            with st.form("mapping"):
                st.write("**Which column is which?**")
                cols = st.columns(5)
                labels = {"confidence": "Small model's confidence", "small_quality": "Small model right / score",
                          "large_quality": "Large model right / score", "cost_small": "Small cost (USD per query)",
                          "cost_large": "Large cost (USD per query)"}
                helps = {"confidence": "Optional: the small model's own score of each answer. Without it there is "
                                       "no threshold to sweep: the page shows the two models and the best any "
                                       "router could do.",
                         "cost_small": "Optional: else the flat prices below.", "cost_large": "Optional: else the "
                         "flat prices below."}
                mapping = {}
                for i, key in enumerate(uploads.MAPPING_KEYS):
                    optional = key not in uploads.REQUIRED_KEYS
                    options = ([None] if optional else []) + columns
                    default = guess[key] if guess[key] in options else None
                    mapping[key] = cols[i].selectbox(
                        labels[key], options, index=None if default is None and not optional else
                        options.index(default), placeholder="choose a column",
                        format_func=lambda c: "(none)" if c is None else c, help=helps.get(key))
                st.form_submit_button("Use these columns")
            missing = [labels[k] for k in uploads.REQUIRED_KEYS if not mapping[k]]
            if missing:
                st.info("Choose the column for: " + ", ".join(missing) + ", then press 'Use these columns'.",
                        icon=":material/table_chart:")
            else:
                try:
                    chosen = {k: v for k, v in mapping.items() if v or k == "confidence"}
                    names = uploads.files_label([u.name for u in ups])
                    # the file's costs are USD per query; every cost on this page is per 1,000 requests
                    data = uploads.concat_evals([uploads.eval_from_upload(u.getvalue(), u.name, chosen) for u in ups],
                                                names).per_1k_queries()
                    origin = f"your data: {data.n_queries:,} queries in {names}"
                except InputError as exc:
                    st.error(plain(exc), icon=":material/error:")
else:
    st.caption("A common starting point: for each confidence threshold, the share escalated and the quality. Edit it, "
               "add rows or delete them; shares are 0-1 (0.6 = 60 %). With $1 and $8 per 1,000 requests it gives "
               "$5.80, $3.40 and $1.96 per 1,000.")
    table = st.data_editor(cascade.example_table(), num_rows="dynamic", placeholder=MISSING, hide_index=True, key="example_table",
                           column_config={
                               "threshold": USD("Confidence threshold", min_value=0.0, max_value=1.0, step=0.01,
                                                format="%.2f", help="Confidence threshold (τ)"),
                               "escalation_rate": PCT("Escalated (share, 0-1)", min_value=0.0, max_value=1.0,
                                                      step=0.01, format="%.2f"),
                               "avg_quality": PCT("Quality (share correct, 0-1)", min_value=0.0, max_value=1.0,
                                                  step=0.005, format="%.3f")})
    c1, c2 = st.columns(2)
    q_small = c1.number_input("Small model alone: quality (share correct, 0-1)", 0.0, 1.0, value=None, step=0.01,
                              placeholder="unknown", help="Optional: gives APGR, CPT and the small-only baseline.")
    q_large = c2.number_input("Large model alone: quality (share correct, 0-1)", 0.0, 1.0, value=None, step=0.01,
                              placeholder="unknown", help="Optional: gives APGR, CPT and the all-large baseline.")
    ends = (q_small, q_large)
    origin = "the illustrative table, as edited"

# ---------------------------------------------------------------------------------------- costs
st.subheader("Costs per model")
cost_modes = {"flat": "Flat price per model (your inputs)"}
if source == "store" and data is not None and data.cost_small is not None:
    cost_modes["per_query"] = "Per query, from the price book"
if source == "upload" and data is not None and data.cost_small is not None and data.cost_large is not None:
    cost_modes["per_query"] = "Per query, from the file's cost columns (USD per query)"
# keyed by the modes offered: drawn before an upload with "flat" alone, one key kept "flat" once the file's cost
# columns offered "per query", and the page priced the eval at the illustrative $1 and $8
mode = st.radio("Costs", list(cost_modes), format_func=cost_modes.get, horizontal=True,
                key=f"costs_{source}_{'_'.join(cost_modes)}", index=len(cost_modes) - 1, label_visibility="collapsed")
c1, c2 = st.columns(2)
c_small = c1.number_input("Small model ($ per 1,000 requests)", min_value=0.0, max_value=edge.MAX_USD, value=cascade.SEED_COST_SMALL_PER_1K_USD,
                          step=0.1, format="%.3f", disabled=mode != "flat", help="Default: an illustrative $1 per 1,000.")
c_large = c2.number_input("Large model ($ per 1,000 requests)", min_value=0.0, max_value=edge.MAX_USD, value=cascade.SEED_COST_LARGE_PER_1K_USD,
                          step=0.5, format="%.3f", disabled=mode != "flat", help="Default: an illustrative $8 per 1,000.")
if mode == "per_query" and source == "store":
    st.caption("Per query: the small attempt's recorded cost or its tokens at the book's prices; the large answer's "
               "cost when production escalated, else this prompt priced on the large model (an estimate). "
               "Self-hosted models cost an effective $ per request: their fleet's cost over the period (busy and "
               "idle GPU time) / requests served. Shown per 1,000 requests.")
elif source == "store" and shadow.status == "ok" and not shadow.costs_complete:
    st.caption("Per-query costs are not available: " + (
        f"models missing from the price book: {', '.join(shadow.unpriced_models)}." if shadow.unpriced_models
        else "some queries carry neither a recorded cost nor token counts.") + " Using flat prices.")
cost_note = ("per-query costs" if mode == "per_query" else
             f"flat prices {usd(c_small)} and {usd(c_large)} per 1,000 (your inputs)")

# ---------------------------------------------------------------------------------------- analysis
report = base_frame = random_line = only = None
try:
    if data is not None and data.confidence is None:     # two models' grades, no confidence: the baselines
        per_query = mode == "per_query"
        only = cascade.baselines(data.small_quality, data.large_quality, data.cost_small if per_query else c_small,
                                 data.cost_large if per_query else c_large, router=True)
        base_frame, random_line = only.as_frame(), only.random_routing
    elif data is not None:
        per_query = mode == "per_query"
        report = cascade.analyse(data.confidence, data.small_quality, data.large_quality,
                                 data.cost_small if per_query else c_small, data.cost_large if per_query else c_large)
        base_frame = report.baselines.as_frame()
        random_line = report.baselines.random_routing
    elif source == "example":
        report = cascade.analyse_curve(cascade.parametric_curve(table, c_small, c_large),
                                       quality_small=ends[0], quality_large=ends[1])
        base_frame = cascade_store.parametric_baselines(c_small, c_large, *ends)
        if None not in ends:
            random_line = cascade_store.random_routing(c_small, c_large, *ends)
except InputError as exc:
    st.error(str(exc), icon=":material/error:")

# the floor starts where this data can meet it (a link's floor is kept on arrival); new data, new default
if report is None and base_frame is not None and data is not None:    # no confidence: between the two models
    ends_only = base_frame[base_frame["name"].isin(["small only", "direct to large"])]
    default_floor, _ = cascade.default_floor(ends_only)
    floor_how = ("halfway between the small model alone ({:.1%}) and the large one ({:.1%}), rounded down to 0.5 %"
                 .format(*ends_only["avg_quality"]))
else:
    default_floor, floor_how = cascade.default_floor(report.curve if report is not None else pd.DataFrame())
floor_for = (source, origin, len(report.curve) if report is not None else 0)
if "floor_default_for" not in st.session_state and "floor" in st.query_params:
    st.session_state["floor_default_for"] = floor_for
elif st.session_state.get("floor_default_for") != floor_for:
    st.session_state["floor"] = round(100 * default_floor, 2)
    st.session_state["floor_default_for"] = floor_for
floor_pct = st.number_input("Quality floor for the chart (% correct)", min_value=0.0, max_value=100.0, step=0.5,
                            key="floor", bind="query-params",
                            help="The cheapest confidence threshold whose quality is at least this is marked.")
floor = floor_pct / 100          # the page speaks percent; finops.cascade.sweep takes shares
if abs(floor - default_floor) < 1e-9:
    st.caption(f"Floor chosen for you: {floor_how}. Type your own.")
if report is not None:
    report = replace(report, quality_floor=floor, choice=cascade.cheapest_meeting(report.curve, floor))

if report is None and base_frame is not None and data is not None:    # an eval with no confidence: the baselines
    label = f"Source: {origin}; {cost_note}."
    rows = base_frame.set_index("name")
    small, large, oracle = rows.loc["small only"], rows.loc["direct to large"], rows.loc["oracle router"]
    st.info("This eval has no confidence column, so there is no threshold to sweep. Shown: the two models alone, "
            "routing a random share to the large model, and the best any router could do on these queries (the "
            "oracles, which know each answer's grade). Map a column holding the small model's confidence in each "
            "answer (its own score, for example its mean token log-probability) to see the cascade's thresholds.",
            icon=":material/info:")
    st.markdown(
        f"On these {data.n_queries:,} queries the small model alone scores **{small.avg_quality:.2%}** at "
        f"{usd(small.avg_cost)} per 1,000 requests and the large one **{large.avg_quality:.2%}** at "
        f"{usd(large.avg_cost)}. The large model does better on **{oracle.large_call_rate:.2%}** of them: a router "
        f"sending exactly those to it would score **{oracle.avg_quality:.2%}** at {usd(oracle.avg_cost)} per 1,000, "
        "the ceiling a real router approaches.")
    pick = only.cheapest_meeting(floor)
    if pick is None:
        st.warning(f"Neither model alone reaches the {floor_pct:g} % quality floor. " + (
            f"Only a router that picks better than at random can: the oracle router reaches {oracle.avg_quality:.2%}."
            if only.router_can_reach(floor) else
            f"No router reaches it on these queries: the oracle router's ceiling is {oracle.avg_quality:.2%}."),
            icon=":material/warning:")
    elif pick.name == "random routing":
        st.success(f"Sending a random **{pick.large_call_rate:.1%}** of requests to the large model (the rest to the "
                   f"small one) meets the {floor_pct:g} % floor at **{usd(pick.avg_cost)}** per 1,000 requests: a "
                   "router is worth buying if it meets the floor for less.", icon=":material/check_circle:")
    else:
        st.success(f"The {'small' if pick.name == 'small only' else 'large'} model alone meets the {floor_pct:g} % "
                   f"floor: **{pick.avg_quality:.2%}** at **{usd(pick.avg_cost)}** per 1,000 requests.",
                   icon=":material/check_circle:")
    no_curve = pd.DataFrame(columns=list(cascade.CURVE_COLUMNS), dtype=float)
    st.altair_chart(charts.cascade_frontier(
        no_curve, no_curve, no_curve, quality_floor=floor, baselines=base_frame, random_line=random_line,
        random_pick=vars(pick) if pick is not None and pick.name == "random routing" else None,
        title="Average cost ($ per 1,000 requests) vs quality (% correct) of each policy"))
    st.caption("Diamonds: each policy; dotted line: sending a random share of requests to the large model"
               + ("; red point: the share that meets the floor" if pick is not None and pick.name == "random routing"
                  else "") + "; dashed rule: the quality floor above. " + label)
    show_baselines(base_frame, label, router=True)
elif report is None:
    st.info("No curve to draw yet: choose a data source with data above.", icon=":material/show_chart:")
else:
    label = f"Source: {origin}; {cost_note}."
    pts = cascade_store.slider_points(report.curve, keep=[report.choice.threshold] if report.choice else [])
    thresholds = pts["threshold"].tolist()
    start = (thresholds.index(report.choice.threshold) if report.choice is not None
             else len(thresholds) // 2)
    i = st.select_slider("Confidence threshold: escalate when the small model's confidence is below it",
                         options=range(len(thresholds)), value=start,
                         format_func=lambda j: f"{thresholds[j]:.4g} (escalate {pts['escalation_rate'].iloc[j]:.0%})",
                         help="Confidence threshold (τ); starts at the cheapest one meeting the quality floor.")
    point = cascade.CascadePoint(*(float(pts[c].iloc[i]) for c in cascade.CURVE_COLUMNS))
    m1, m2, m3, m4 = metric_row(4)
    m1.metric("Confidence threshold", f"{point.threshold:.4g}", border=True, help="Confidence threshold (τ)")
    m2.metric("Escalated", f"{point.escalation_rate:.1%}", border=True,
              help="Share of requests escalated to the large model at this threshold.")
    m3.metric("$ per 1,000 requests", usd(point.avg_cost), border=True, help="Average cost of 1,000 requests at this threshold.")
    m4.metric("Quality (% correct)", f"{point.avg_quality:.2%}", border=True)
    if report.choice is None:
        st.warning(f"No threshold reaches the {floor_pct:g} % quality floor: the best is "
                   f"{report.curve['avg_quality'].max():.2%}.", icon=":material/warning:")
    else:
        c = report.choice
        st.success(f"Cheapest confidence threshold meeting the {floor_pct:g} % floor: **{c.threshold:.4g}**, escalating "
                   f"{c.escalation_rate:.1%}, {usd(c.avg_cost)} per 1,000 requests at {c.avg_quality:.2%} quality.",
                   icon=":material/check_circle:")
    st.altair_chart(charts.cascade_frontier(
        report.curve, report.frontier, report.hull, chosen=point.as_dict(), quality_floor=floor,
        baselines=base_frame, random_line=random_line,
        title="Average cost ($ per 1,000 requests) vs quality (% correct), one point per confidence threshold"))
    st.caption(f"Faint points: every threshold ({len(report.curve):,}); line: the Pareto frontier "
               f"({len(report.frontier):,} points no other threshold beats on both cost and quality); dashed: its "
               f"convex hull ({len(report.hull):,} corners; points under it are beaten by mixing two corners at "
               "random). " + label)

    st.subheader("Thresholds, escalation, cost, quality, marginal $ per point")
    example_form, which = cascade_store.example_form_table(report)
    st.dataframe(example_form, hide_index=True, column_config=CURVE_COLUMNS, placeholder=MISSING)
    st.caption(f"Rows: {which}, from the highest threshold down. Marginal: money saved per quality point given up "
               f"against the row above (e.g. $2.40 saved for 3 points ≈ $0.80 per point). {label}")
    st.download_button("Download the whole curve (CSV)", exports.safe_csv(report.curve),
                       file_name=f"{export_name(f'cascade_curve_{source}', f)}.csv", mime="text/csv", icon=":material/download:",
                       on_click="ignore")

    st.subheader("Routing metrics and baselines")
    m = report.metrics
    k1, k2, k3 = metric_row(3)
    k1.metric("Quality gap recovered (APGR)", MISSING if m.apgr is None else f"{m.apgr:.3f}", border=True,
              help="Average performance gap recovered over all escalation rates (RouteLLM): 0.5 = random routing, "
                   "1 = perfect.")
    k2.metric("CPT 50 %", MISSING if m.cpt50 is None else f"{m.cpt50:.1%}", border=True,
              help="Large-model calls for half the gap: the share of requests sent to the large model to recover half the "
                   "small-large quality gap.")
    k3.metric("CPT 80 %", MISSING if m.cpt80 is None else f"{m.cpt80:.1%}", border=True,
              help="Large-model calls for 80 % of the gap: the share of requests sent to the large model to recover 80 % "
                   "of the gap.")
    if m.note:
        st.caption(f"Metrics not computed: {m.note}." + (" Enter the small-only and large-only qualities above."
                                                          if source == "example" else ""))
    if base_frame is not None and len(base_frame):
        show_baselines(base_frame, ("The oracles need per-query data. " if source == "example" else "") + label)

    # ------------------------------------------------------------------------------------ floors per tenant
    st.subheader("Quality floors per tenant")
    tenants = current_access().visible_tenants(query(store.distinct_values, "tenant"))
    version = st.session_state.get("floors_version", 0)
    if can("edit_quality_floors"):
        with st.form(f"floors_{version}"):
            edited = st.data_editor(query(cascade_store.floors_table, tuple(tenants)), num_rows="dynamic", hide_index=True,
                                    key=f"floors_editor_{version}", placeholder="no floor", column_config={
                                        "tenant": st.column_config.TextColumn("Tenant", required=True),
                                        "floor_pct": USD("Quality floor (% correct)", min_value=0.0, max_value=100.0,
                                                         step=0.5, format="%.1f %%")})
            saved = st.form_submit_button("Save floors", icon=":material/save:")
        if saved:
            try:
                cascade_store.save_floors_table(cursor(), edited)
                st.session_state["floors_version"] = version + 1
                st.rerun()
            except InputError as exc:
                st.error(str(exc), icon=":material/error:")
    floors = {t: v for t, v in query(cascade_store.quality_floors).items() if t in tenants or not current_access().scoped}
    if not floors:
        st.info("No tenant has a quality floor yet" + (": type one (e.g. premium 95) and save." if
                can("edit_quality_floors") else " (an admin sets them)."), icon=":material/flag:")
    else:
        own = {}
        if source == "store" and data is not None:
            own = cascade_store.tenant_curves(shadow, None if mode == "per_query" else c_small,
                                              None if mode == "per_query" else c_large, small_model)
        choices = cascade_store.floor_choices(report.curve, floors, own)
        bounded_dataframe(choices, what="tenants", file_name="floor_choices", hide_index=True, column_config={
            "tenant": st.column_config.TextColumn("Tenant"),
            "floor": percent_column("Floor (% correct)", decimals=2),
            "curve": st.column_config.TextColumn("Curve used"),
            **{k: v for k, v in CURVE_COLUMNS.items() if k != "marginal_cost_per_point"},
            "meets": st.column_config.CheckboxColumn("Floor reachable")}, placeholder=MISSING)
        st.caption("The cheapest confidence threshold whose average quality meets each tenant's floor (empty when none does). "
                   f"Floors are stored in the store's settings. A tenant with {cascade_store.MIN_TENANT_QUERIES}+ "
                   "shadow-evaluated queries is answered on its own queries, others on all of them. " + label)

# ---------------------------------------------------------------------------------------- edge vs cloud
st.header("Edge vs cloud: when does escalating a request pay?")
st.caption("Escalate a low-confidence edge request to the cloud iff the quality gained, in "
           "money, beats the extra inference and network cost plus the extra latency, in money.")
st.markdown("**Escalate when** value of a right answer × quality gained  >  extra inference cost + network cost "
            "+ value of a second × (round trip + cloud time − edge time)")
d0 = edge.EdgeInputs()
e1, e2, e3 = st.columns(3)
dq = e1.number_input("Quality gained (share of answers made right, ΔQ)", -1.0, 1.0, d0.quality_gain, 0.01,
                     help="For example 80 % → 95 % right: ΔQ = 0.15.")
vq = e1.number_input("Value of one wrong answer made right ($, V_q)", 0.0, edge.MAX_USD, d0.value_usd, 0.05)
q_edge = e1.number_input("Edge model quality (share right, for expected quality)", 0.0, 1.0, d0.edge_quality, 0.01)
dc = e2.number_input("Extra inference cost, cloud minus edge ($ per request, ΔC_infer)", 0.0, edge.MAX_USD, d0.infer_cost_diff_usd,
                     0.001, format="%.4f", help="For example ($8 − $1) per 1,000 = $0.007.")
cnet = e2.number_input("Network cost up and down ($ per request, C_net)", 0.0, edge.MAX_USD, d0.network_cost_usd, 0.001,
                       format="%.4f", help="For example inference difference + traffic ≈ $0.01, so $0.003.")
vlat = e2.number_input("Value of a second of latency ($ per second, V_lat)", 0.0, edge.MAX_USD, d0.latency_value_usd_per_s, 0.005,
                       format="%.4f", help="For example 80 ms RTT + 300 ms cloud time worth ≈ $0.03: "
                                           "0.03 / 0.38 = $0.0789 per second.")
rtt = e3.number_input("Network round trip (ms, RTT)", 0.0, edge.MAX_RTT_MS, d0.rtt_ms, 10.0, key="rtt_ms")
t_cloud = e3.number_input("Cloud inference time (ms, T_cloud)", 0.0, edge.MAX_RTT_MS, d0.cloud_ms, 10.0)
t_edge = e3.number_input("Edge time saved by escalating (ms, T_edge)", 0.0, edge.MAX_RTT_MS, d0.edge_ms, 10.0,
                         help="0 by default: the edge attempt is already spent.")
inputs = edge.EdgeInputs(dq, vq, dc, cnet, rtt, t_cloud, t_edge, vlat, q_edge)
try:
    decision = edge.decide(inputs)
except InputError as exc:
    st.error(str(exc), icon=":material/error:")
    decision = None
if decision is not None:
    be = decision.break_even
    d1, d2, d3, d4 = metric_row(4)
    d1.metric("Gain worth ($/request)", usd(decision.benefit_usd), border=True)
    d2.metric("Escalating ($/request)", usd(decision.cost_usd), border=True,
              help=f"Cost of escalating one request: inference + network {usd(decision.money_cost_usd)}, latency {usd(decision.latency_cost_usd)}.")
    d3.metric("Decision at this RTT", "Escalate" if decision.escalate else "Stay on the edge", border=True)
    d4.metric("Break-even RTT (ms)", "none" if be.rtt_ms is None else duration_ms(be.rtt_ms), border=True,
              help=be.note)
    (st.success if decision.escalate else st.warning)(decision.verdict[0].upper() + decision.verdict[1:] + ".")
    st.caption(
        f"{be.note[0].upper() + be.note[1:]}. With the default numbers the break-even is about 523 ms: a congested "
        "link at 1.5 s RTT has clearly flipped the decision (cost $0.15 against a $0.075 gain), but the crossing "
        "comes much earlier. Source: your inputs (defaults: a common starting point, 80 ms RTT and 300 ms in the "
        "cloud).")

    st.subheader("Network jitter: how often does escalation pay?")
    r1, r2, r3, r4 = st.columns(4)
    kind = r1.selectbox("RTT distribution", ["lognormal", "normal"] + (["uploaded samples"] if can("upload") else []),
                        help="Lognormal has the long right tail of congested networks; normal is clipped at 0 ms.")
    samples = None
    if kind == "uploaded samples":
        rtt_file = r2.file_uploader("RTT samples (CSV, ms)", type=["csv"],
                                    help="A column rtt_ms, or a single column, one RTT per request.")
        if rtt_file is not None:
            try:
                samples = uploads.rtt_samples_from_upload(rtt_file.getvalue(), rtt_file.name,
                                                          max_ms=edge.MAX_RTT_MS)
                rtt_origin = f"your RTT samples ({rtt_file.name}, {len(samples):,} requests)"
            except InputError as exc:
                st.error(str(exc), icon=":material/error:")
    else:
        mean_ms = r2.number_input("Mean RTT (ms)", 0.0, edge.MAX_RTT_MS, rtt, 10.0, key="rtt_mean")
        jitter_ms = r3.number_input("Jitter: standard deviation (ms)", 0.0, edge.MAX_RTT_MS, 150.0, 10.0,
                                    help="Your input. 150 ms around an 80 ms mean is a congested link.")
        try:
            samples = edge.RttDistribution(kind, mean_ms, jitter_ms).sample(100_000, 0)   # a fixed draw
            rtt_origin = f"100,000 draws of a {kind} RTT, mean {mean_ms:g} ms, jitter {jitter_ms:g} ms (your inputs)"
        except InputError as exc:
            st.error(str(exc), icon=":material/error:")
    max_rtt = r4.number_input("Chart RTT up to (ms)", 100.0, edge.MAX_RTT_MS, 2000.0, 100.0,
                              help=f"Up to {duration_ms(edge.MAX_RTT_MS)} (ten minutes).")
    if samples is None:
        st.info("Upload RTT samples to see the share of requests for which escalation pays.",
                icon=":material/upload_file:")
    else:
        comparison = edge.compare_policies(inputs, samples)
        st.metric("Requests for which escalation pays", f"{comparison.share_pays:.1%}", border=True, width="content")
        st.dataframe(comparison.as_frame(), placeholder=MISSING, hide_index=True, column_config={
            "policy": st.column_config.TextColumn("Policy"),
            "escalation_share": percent_column("Escalated", decimals=2),
            "expected_quality": percent_column("Quality (% right)", decimals=2),
            "money_cost_usd": USD("Inference + network ($)", format="$%,.4f"),
            "latency_cost_usd": USD("Latency ($)", format="$%,.4f"),
            "extra_latency_ms": USD("Extra latency (ms)", format="%,.0f"),
            "net_benefit_usd": USD("Net benefit vs never ($)", format="$%,.4f")})
        st.caption("Expected values per request ($ per request, mean extra latency), averaged over the RTT draws. "
                   "'When it pays' feeds each request's live RTT into the inequality. Source: " + rtt_origin + ".")
        left, right = st.columns(2)
        left.altair_chart(charts.beside(charts.edge_net_benefit(
            edge.net_benefit_curve(inputs, max_rtt_ms=max_rtt), break_even_ms=be.rtt_ms,
            markers=[(rtt, f"your RTT {duration_ms(rtt)}"), (1500.0, "congested 1.5 s")],
            title="Net benefit of escalating one request ($) by RTT (ms)")))
        right.altair_chart(charts.beside(charts.rtt_histogram(
            samples, be.rtt_ms, always_pays=be.always_pays, max_rtt_ms=max_rtt,
            title="Share of requests by RTT (ms): green where escalation pays")))
        st.caption("Left: the inequality's two sides as RTT grows; green above zero (escalate), red below (stay on "
                   "the edge). Right: the RTT distribution, split at the break-even. Source: your inputs; " +
                   rtt_origin + ".")
