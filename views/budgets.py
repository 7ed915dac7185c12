"""Budgets: who will overrun this month? Monthly budgets per tenant, burn so far and a month-end forecast."""
import streamlit as st

from finops import charts
from finops.fmt import MISSING, counted, usd, usd_column_format
from finops.fmt import span as span_text
from finops.spend import budgets
from views._shared import (
    bounded_dataframe,
    can,
    current_filters,
    cursor,
    empty_state,
    metric_row,
    percent_column,
    query,
    save_edits,
    source_label,
    stop_if_store_empty,
    unpriced_banner,
)


def budget_editor(month: str, label: str) -> None:
    """The month's budgets, one row per tenant with traffic or a budget in it (the rows never shift under an
    edit: a new tenant arriving resets the editor, see budgets.editor_key)."""
    if not can("edit_budgets"):
        st.caption("Budgets are set by an admin.")
        return
    table = query(budgets.budget_table, month)
    with st.form("budgets_form"):
        edited = st.data_editor(table, placeholder=MISSING, hide_index=True, num_rows="dynamic",
                                key=budgets.editor_key(table, month), column_config={
                                    "tenant": st.column_config.TextColumn("Tenant", required=True),
                                    "budget_usd": st.column_config.NumberColumn("Monthly budget ($)", min_value=0,
                                                                                max_value=budgets.MAX_BUDGET_USD,
                                                                                format="$%,.2f")})
        saved = st.form_submit_button("Save budgets", type="primary", icon=":material/save:")
    if saved:
        save_edits(lambda: budgets.save_budgets(cursor(), month, edited), "Budgets",
                   lambda stored: f"Saved {stored} budgets for {label}.")
    st.caption("One row per tenant with spend in the month or a budget for it; add a row for a tenant yet to "
               "spend. Leave a budget blank to remove it. Budgets are kept in the store, per month.")


st.title("Budgets")
st.caption("Monthly budgets per tenant. The sidebar's tenant filter applies; its dates, models and tiers do not: "
           "a budget covers all of a tenant's spend in its month.")
stop_if_store_empty("the budget page")
f = current_filters()

months = [m.strftime("%Y-%m") for m in query(budgets.months)]
month = st.selectbox("Month", months, format_func=lambda m: budgets.month_start(m).strftime("%B %Y"), key="month",
                     bind="query-params")
if month is None:
    month = months[0]
# spend and forecasts count the month's unpriced traffic at $0
unpriced_banner(budgets.month_filters(month, f), of=f"the requests of {budgets.month_start(month):%B %Y}"
                + (" of these tenants" if f.tenants else ""))
# not cached: budgets change on this page and must show at once (these queries read the rollups only)
report = query(budgets.status, month, f)
table = report.table
label = budgets.month_start(month).strftime("%B %Y")
is_sample = month in query(budgets.sample_months)
budget_source = ("Budgets: examples the sample store was built with (one tenant forecast over its budget, one at risk), until you save "
                 "your own." if is_sample else "Budgets: your inputs (stored in the store's budgets table).")

if table.empty:
    empty_state(f"No tenant matches the filters in {label}.")
    st.subheader(f"Set budgets for {label}")
    budget_editor(month, label)
else:
    # ---- headline
    n = table["status"].value_counts()
    budgeted = table.dropna(subset=["budget_usd"])
    if budgeted.empty:
        st.info(f"No budgets are set for {label} yet: set them under \"Set budgets\" below. Until then the "
                "forecasts run without a limit to compare with.", icon=":material/savings:")
    elif is_sample:
        st.info("These budgets are examples the sample store was built with; set your own under \"Set budgets\".",
                icon=":material/info:")
    c = metric_row(4)
    already = int(n.get("over budget", 0))
    c[0].metric("Forecast over budget",
                f"{sum(int(n.get(s, 0)) for s in budgets.FORECAST_OVER)} of {len(budgeted)}" if len(budgeted) else MISSING,
                help="Tenants whose forecast month-end spend is above their budget, of those with a budget this month; — when "
                     "no tenant has one. Status \"over budget\": already spent more than it"
                     + (f" ({counted(already, 'tenant')})" if len(budgeted) else "")
                     + "; \"forecast over budget\": not yet, but on course to.", border=True)
    c[1].metric("Tenants at risk", f"{int(n.get('at risk', 0))}", border=True,
                help=f"Forecast within budget, but the upper end of the {100 * report.confidence:.0f} % "
                     "interval above it.")
    c[2].metric("Spent so far (USD)", usd(table['spent_usd'].sum()), border=True,
                help=f"Spent in {label} so far, by all tenants shown, idle GPU capacity excluded.")
    c[3].metric("Forecast (USD)", usd(table['forecast_usd'].sum()), border=True,
                help=f"Forecast spend at the end of {label}: spent so far plus the mean daily spend times the days left.")
    if report.as_of is not None:
        if report.complete_days == 0:
            hours = report.observed_hours
            start, end = report.observed_from, report.observed_to
            when = f"{span_text(start, end)} UTC"
            if hours >= 1:
                span = counted(round(hours), "hour") if hours >= 2 else counted(round(hours * 60), "minute")
                over = f"the {span} the logs cover ({when})"
            elif round(hours * 60) >= 1:
                over = f"an hour (the logs cover {counted(round(hours * 60), 'minute')}, {when}, counted as an hour)"
            else:
                over = f"an hour (the logs hold one moment, {start:%Y-%m-%d %H:%M} UTC, counted as an hour)"
            method = (f"No complete day observed yet: the forecast runs each tenant's spend rate over {over} to the "
                      f"month end, {budgets.forecast_caveat(0)}. ")
        elif report.complete_days == 1:
            method = ("The forecast runs each tenant's spend on the one complete day observed to the month end, "
                      f"{budgets.forecast_caveat(1)}. ")
        else:
            method = (f"The forecast runs each tenant's mean daily spend over the {report.complete_days} complete "
                      f"days observed to the month end; the interval is a {100 * report.confidence:.0f} % "
                      "prediction interval (t-quantile × daily standard deviation × √(d + d²/n) for d days left "
                      "after n days). ")
        if report.first_day_partial:
            method += (f"{report.first_day:%Y-%m-%d} is counted in the spend so far but not as a complete day: the "
                       f"logs begin at {report.observed_from:%H:%M} that day, later than on the days after it. ")
        st.caption(f"Data through {report.observed_to or report.as_of:%Y-%m-%d %H:%M} UTC; {report.days_left:.1f} days left in {label}. "
                   + method
                   + (f"The store's first request in {label} is on {report.first_day:%Y-%m-%d}: the days of the "
                      "month before it are not in the store and not counted. "
                      if report.first_day and report.first_day.day > 1 else "")
                   + (f"Idle GPU capacity ({usd(report.idle_usd)} this month) is a fleet cost in no tenant's "
                      "budget." if report.idle_usd > 0 else ""))

    if can("edit_budgets"):
        with st.expander(f"Set budgets for {label}", expanded=budgeted.empty, icon=":material/edit:"):
            budget_editor(month, label)

    # ---- status of every tenant
    st.subheader("Forecast against budget")
    st.altair_chart(charts.budget_status(table, title=f"Month-end forecast against budget, {label} (USD)"))
    bounded_dataframe(table, sort_by="forecast_usd", order="the highest forecast", what="tenants",
                      file_name="budget_status", placeholder=MISSING, hide_index=True, column_order=[
        "tenant", "status", "budget_usd", "spent_usd", "used_share", "forecast_usd", "forecast_low_usd",
        "forecast_high_usd", "forecast_share", "mean_daily_usd"], column_config={
        "tenant": st.column_config.TextColumn("Tenant"), "status": st.column_config.TextColumn("Status"),
        "budget_usd": st.column_config.NumberColumn("Budget ($)", format="$%,.2f"),
        "spent_usd": st.column_config.NumberColumn("Spent so far ($)", format=usd_column_format(table["spent_usd"])),
        "used_share": percent_column("Budget used (%)", bar=True),
        "forecast_usd": st.column_config.NumberColumn("Forecast month end ($)", format=usd_column_format(table["forecast_usd"])),
        "forecast_low_usd": st.column_config.NumberColumn("Forecast low ($)", format=usd_column_format(table["forecast_low_usd"])),
        "forecast_high_usd": st.column_config.NumberColumn("Forecast high ($)", format=usd_column_format(table["forecast_high_usd"])),
        "forecast_share": percent_column("Forecast / budget (%)"),
        "mean_daily_usd": st.column_config.NumberColumn("Mean daily spend ($ per day)", format=usd_column_format(table["mean_daily_usd"]))})
    st.caption(budget_source + " " + source_label())

    # ---- one tenant's burn
    st.subheader("Burn through the month")
    tenant = st.selectbox("Tenant", list(table["tenant"]), key="budget_tenant")
    curve = budgets.burn_curve(report, tenant)
    if curve.empty:
        empty_state(f"{tenant} has no spend in {label}.")
    else:
        st.altair_chart(charts.budget_burn(curve, title=f"{tenant}: cumulative spend in {label} (USD), "
                                                        "with forecast and budget"))
        st.caption("Solid: spend so far. Dashed with band: forecast and its interval. Red line: the budget. "
                   + source_label())

