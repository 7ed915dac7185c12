"""Alerts: what fired, who has it, and where it is sent."""
from datetime import datetime, time, timedelta

import streamlit as st

from finops.fmt import MISSING
from finops.ops import alerts, delivery
from views._shared import (
    bounded_dataframe,
    can,
    current_access,
    current_filters,
    cursor,
    filter_caption,
    metric_row,
    no_alert_state,
    plain,
    query,
    rules_not_judged,
    save_edits,
    stop_if_store_empty,
)

MAX_GROUPS = 20
ALERTS_PER_GROUP = 20
ICONS = {"critical": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}
SHOW = ("open", "every alert", "acknowledged or snoozed")
CUSTOM = "until a date and time"



def plural(n: int) -> str:
    return f"{n} alert{'s' if n != 1 else ''}"


def act(action: str, rows, who: str, note: str, until) -> None:
    """Acknowledge, snooze or reopen ``rows`` for ``who``; a refusal is a sentence, a success a toast."""
    if action == "acknowledge":
        save_edits(lambda: alerts.acknowledge(cursor(), rows, who, note), "Acknowledgement",
                   lambda n: f"Acknowledged {plural(n)}.")
    elif action == "snooze":
        save_edits(lambda: alerts.snooze(cursor(), rows, until, who, note), "Snooze",
                   lambda n: f"Snoozed {plural(n)} until {until:%Y-%m-%d %H:%M} UTC.")
    else:
        save_edits(lambda: alerts.reopen(cursor(), rows, who), "Reopening", lambda n: f"Reopened {plural(n)}.")


st.title("Alerts")
st.caption("Alerts of one model whose windows overlap or touch are one group, sent as one message. Acknowledge a "
           "group (or one of its alerts) to stop its delivery, or snooze it until a time. " + filter_caption(
               current_filters()))
stop_if_store_empty("the alerts page")
f = current_filters()
now = alerts.utc_now()

# ---------------------------------------------------------------- what fired
frame = alerts.annotate(query(alerts.open_alerts, f), query(alerts.alert_states), now)
if frame.empty:
    no_alert_state(f)
else:
    rules_not_judged(f)         # what the rules could not judge: no raw rows, or no latency in the logs
    is_open = frame["state"] == "open"
    c = metric_row(5)
    for col, sev in zip(c, alerts.SEVERITIES, strict=False):
        col.metric(f"Open {sev} alerts", f"{int((is_open & (frame['severity'] == sev)).sum()):,}", border=True)
    c[3].metric("Acknowledged", f"{int((frame['state'] == 'acknowledged').sum()):,}", border=True)
    c[4].metric("Snoozed", f"{int((frame['state'] == 'snoozed').sum()):,}", border=True,
                help="A snoozed alert opens again when its snooze ends.")
    show = st.segmented_control("Show", SHOW, default=SHOW[0], key="alerts_show", bind="query-params") or SHOW[0]
    shown = (frame[is_open] if show == SHOW[0] else frame[~is_open] if show == SHOW[2] else frame)
    # on screen each rule by its plain name; the ids stay in the CSV (rule) and in `finops alerts --json`
    shown = shown.assign(state_shown=[alerts.state_label(s, u) for s, u in zip(shown["state"], shown["state_until"],
                                                                               strict=True)],
                         rule_shown=shown["rule"].map(alerts.rule_name))
    groups = delivery.group_alerts(shown)
    if not groups:
        st.info(f"No alert is {show} in this period.", icon=":material/notifications_off:")
    if len(groups) > MAX_GROUPS:
        st.caption(f"Showing the {MAX_GROUPS} most severe and most recent of {len(groups):,} groups.")
    for i, g in enumerate(groups[:MAX_GROUPS]):
        states = g.alerts["state_shown"].value_counts()
        summary = ", ".join(f"{n} {s}" for s, n in states.items())
        with st.expander(f"{plain(g.title)} · {plain(summary)}", icon=ICONS.get(g.severity), expanded=i == 0):
            bounded_dataframe(g.alerts, what="alerts", file_name="alerts", placeholder=MISSING, hide_index=True,
                         column_order=["severity", "state_shown", "tenant", "rule_shown", "window_start", "window_end"],
                         column_config={
                             "severity": st.column_config.TextColumn("Severity"),
                             "state_shown": st.column_config.TextColumn("State"),
                             "tenant": st.column_config.TextColumn("Tenant or replica"),
                             "window_start": st.column_config.DatetimeColumn("From (UTC)", format="YYYY-MM-DD HH:mm"),
                             "window_end": st.column_config.DatetimeColumn("To (UTC)", format="YYYY-MM-DD HH:mm"),
                             "rule_shown": st.column_config.TextColumn("Rule")})
            # the whole sentence of each alert, never cut off by a table cell
            st.markdown("\n".join(f"- **{r.severity}** · {plain(r.message)}"
                                   for r in g.alerts.head(ALERTS_PER_GROUP).itertuples(index=False)))
            if len(g.alerts) > ALERTS_PER_GROUP:
                st.caption(f"and {len(g.alerts) - ALERTS_PER_GROUP:,} more in the table above.")
            handled = g.alerts[g.alerts["state"] != "open"]
            for r in handled.itertuples(index=False):
                st.caption(f"{plain(alerts.state_label(r.state, r.state_until))} by {plain(r.state_by)} at "
                           f"{r.state_at:%Y-%m-%d %H:%M} UTC" + (f": {plain(r.state_note)}" if r.state_note else ""))
            if not can("ack_alerts"):
                continue
            with st.form(f"act_{g.key}"):
                named = {a.alert_id: f"{alerts.rule_name(a.rule)} · {a.tenant} · {a.window_start:%Y-%m-%d %H:%M}"
                         for a in g.alerts.itertuples(index=False)}
                # a group of one alert: that alert, once (not "all 1 alerts of this group" and then it again)
                labels = ({"all": f"this alert: {next(iter(named.values()))}"} if len(named) == 1
                          else {"all": f"all {len(named):,} alerts of this group", **named})
                pick = st.selectbox("Apply to", list(labels), format_func=labels.get, key=f"pick_{g.key}")
                c1, c2 = st.columns(2)
                who = c1.text_input("Your name", value=st.session_state.get("alert_actor", current_access().user),
                                    max_chars=100,
                                    key=f"who_{g.key}")
                note = c2.text_input("Note (optional)", max_chars=500, key=f"note_{g.key}")
                c3, c4, c5 = st.columns(3)
                length = c3.selectbox("Snooze for", [*alerts.SNOOZES, CUSTOM], key=f"for_{g.key}")
                day = c4.date_input("Snooze until, day (UTC)", value=(now + timedelta(days=1)).date(),
                                    key=f"day_{g.key}", help=f"Used with '{CUSTOM}'.")
                at = c5.time_input("Snooze until, time (UTC)", value=time(9, 0), key=f"time_{g.key}",
                                   help=f"Used with '{CUSTOM}'.")
                b1, b2, b3 = st.columns(3)
                ack = b1.form_submit_button("Acknowledge", icon=":material/check:", type="primary")
                snz = b2.form_submit_button("Snooze", icon=":material/snooze:")
                reo = b3.form_submit_button("Reopen", icon=":material/undo:")
            if ack or snz or reo:
                st.session_state["alert_actor"] = who
                rows = g.alerts if pick == "all" else g.alerts[g.alerts["alert_id"] == pick]
                until = (now + alerts.SNOOZES[length] if length in alerts.SNOOZES
                         else datetime.combine(day, at) if day is not None and at is not None else None)
                act("acknowledge" if ack else "snooze" if snz else "reopen", rows, who, note, until)

# ---------------------------------------------------------------- delivery targets
st.header("Delivery targets")
st.caption("Each target gets the open alerts of the severities it takes, once each: a Slack-compatible webhook "
           "(kind slack), a generic HTTP endpoint that takes the alerts as JSON (http), or e-mail over SMTP (email). "
           "Webhook URLs and the SMTP password are secrets: put them in the environment or in "
           ".streamlit/secrets.toml and give their name here (`$SLACK_WEBHOOK_URL`; the password's name without `$`). "
           "URLs are shown masked. `python -m finops alerts --send` in cron delivers new alerts; `--digest` sends "
           "the daily summary.")
if can("edit_delivery"):
    with st.form("targets_form"):
        edited = st.data_editor(
            query(delivery.targets_frame), placeholder=MISSING, hide_index=True, num_rows="dynamic", key="targets_editor",
            column_config={
                "name": st.column_config.TextColumn("Name", required=True, max_chars=80),
                "kind": st.column_config.SelectboxColumn("Kind", options=list(delivery.KINDS), required=True),
                "severities": st.column_config.TextColumn("Severities", default="critical, warning",
                                                          help="Comma-separated: critical, warning, info."),
                "url": st.column_config.TextColumn("URL or $SECRET", help="slack: `$NAME` of the secret holding the "
                                                   "webhook URL. http: the URL, or `$NAME` of a secret holding it."),
                "recipients": st.column_config.TextColumn("E-mail to"),
                "sender": st.column_config.TextColumn("E-mail from"),
                "smtp_host": st.column_config.TextColumn("SMTP server"),
                "smtp_port": st.column_config.NumberColumn("SMTP port", min_value=1, max_value=65535, step=1,
                                                           default=587),
                "starttls": st.column_config.CheckboxColumn("STARTTLS", default=True),
                "username": st.column_config.TextColumn("SMTP user"),
                "password_secret": st.column_config.TextColumn("Password secret", help="The name of the environment "
                                                               "variable or secrets.toml key holding the SMTP password."),
                "timeout_s": st.column_config.NumberColumn("Timeout (s)", min_value=1.0, max_value=60.0, default=10.0),
                "digest": st.column_config.CheckboxColumn("Daily digest", default=True),
                "enabled": st.column_config.CheckboxColumn("Enabled", default=True)})
        saved = st.form_submit_button("Save targets", type="primary", icon=":material/save:")
    if saved:
        save_edits(lambda: delivery.save_targets(cursor(), edited), "Delivery targets",
                   lambda n: f"Saved {n} delivery target{'s' if n != 1 else ''}.")

saved_targets = query(delivery.targets)
if not saved_targets:
    st.info("No delivery target yet: add one in the table above and save it." if can("edit_delivery") else
            "No delivery target yet: an admin sets them here.", icon=":material/send:")
# a tenant-scoped login sees that a target exists and what it takes, not the team's addresses and mail servers
hide_addresses = current_access().scoped
for i, t in enumerate(saved_targets):
    c1, c2 = st.columns([4, 1], vertical_alignment="center")
    c1.markdown(f"**{plain(t.name)}** ({t.kind}{'' if t.enabled else ', disabled'}): "
                + ("address shown to the team's own logins" if hide_addresses else plain(t.address)) + " · "
                f"{', '.join(t.severities)}")
    if can("edit_delivery") and c2.button("Send a test", key=f"test_{i}", icon=":material/send:"):
        result = delivery.send_test(cursor(), t.name)
        (st.success if result.ok else st.error)(plain(result.line),
                                                icon=":material/check:" if result.ok else ":material/error:")
if saved_targets and not frame.empty and can("deliver_alerts"):
    if st.button("Deliver this period's new open alerts now", icon=":material/outgoing_mail:", key="deliver_now"):
        for result in delivery.deliver(cursor(), frame, now):
            (st.success if result.ok else st.error)(plain(result.line))

# ---------------------------------------------------------------- delivery log
st.header("Delivery log")
log = query(delivery.delivery_log, tenants=current_access().tenants)    # a scoped login: its tenants' alerts only
if log.empty:
    st.info("Nothing delivered yet.", icon=":material/history:")
else:
    st.dataframe(log, placeholder=MISSING, hide_index=True, column_config={
        "attempted_at": st.column_config.DatetimeColumn("When (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        "target": st.column_config.TextColumn("Target"), "kind": st.column_config.TextColumn("Kind"),
        "what": st.column_config.TextColumn("Message"), "alerts": st.column_config.NumberColumn("Alerts"),
        "severity": st.column_config.TextColumn("Severity"), "outcome": st.column_config.TextColumn("Outcome"),
        "detail": st.column_config.TextColumn("Why it failed", width="large")})
    st.caption("The latest 200 messages. A failed message is tried again on the next delivery run.")
