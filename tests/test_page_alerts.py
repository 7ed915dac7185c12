"""AppTest smoke test of the Alerts page: grouped alerts, acknowledge and snooze from the page, "send a test"
against a local HTTP receiver on 127.0.0.1, the delivery log; and the empty store."""
from __future__ import annotations

from datetime import datetime

import pytest

from finops import store
from finops.ops import alerts, delivery
from helpers import Receiver, alert_store, run_page, texts

PAGE = "views/alerts.py"
# the period of the alert store (6 April 2026), as the sidebar's URL gives it
PERIOD = {"from": "2026-04-06", "to": "2026-04-06"}


@pytest.fixture()
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture()
def db(tmp_path, receiver):
    path = str(tmp_path / "alerts.duckdb")
    con = alert_store(path)
    delivery.save_targets(con, [{"name": "o'brien <b>hook</b>", "kind": "http",
                                 "url": receiver.url + "/hook?token=SECRET42"}])
    con.close()
    return path


def _states(path):
    """The alerts' states, read through a connection like the page's (DuckDB shares one instance per file and
    configuration in a process, and the page's stays open)."""
    con = store.connect(path)
    try:
        return alerts.open_alerts(con).set_index("alert_id")
    finally:
        con.close()


def logged_in(user: dict):
    """The app under AppTest as the login ``user`` (its claims: email, groups, tenants), with OIDC configured for a
    provider nobody calls: the test sets the logged-in user itself."""
    from streamlit.testing.v1 import AppTest

    from helpers import APP
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["auth"] = {"client_id": "x", "client_secret": "y", "cookie_secret": "z",
                          "redirect_uri": "http://localhost:8501/oauth2callback",
                          "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}
    at.user = {"is_logged_in": True, **user}
    return at


def test_alerts_page_groups_acknowledges_snoozes_and_sends_a_test(db, receiver):
    con = store.connect(db)
    groups = delivery.group_alerts(alerts.open_alerts(con))
    con.close()
    at = run_page(db, PAGE, query_params=PERIOD)
    assert not at.exception
    shown = texts(at)
    assert [m.value for m in at.metric] == ["4", "0", "0", "0", "0"]      # 4 open critical alerts
    assert len(at.expander) == 3
    assert "critical: 2 alerts on gpt-4o, 2026-04-06 00\\:00 to 2026-04-06 01\\:00 UTC" in at.expander[1].label
    assert "SECRET42" not in shown and "/hook" not in shown
    assert "Nothing delivered yet." in shown

    # send a test: the receiver gets it, the page says so and the log lists it
    at.button(key="test_0").click().run()
    assert not at.exception
    assert [p["json"]["kind"] for p in receiver.posts] == ["test"]
    assert any("test message sent" in s.value for s in at.success)
    log = at.dataframe[-1].value
    assert log[["what", "outcome"]].values.tolist() == [["test", "sent"]]

    # acknowledge the pair of gpt-4o alerts (the second group)
    pair = next(g for g in groups if len(g.alerts) == 2)
    assert at.selectbox(key=f"pick_{pair.key}").options[0] == "all 2 alerts of this group"        # then each
    assert len(at.selectbox(key=f"pick_{pair.key}").options) == 3
    at.text_input(key=f"who_{pair.key}").input("Ada <script>")
    at.text_input(key=f"note_{pair.key}").input("on it")
    next(b for b in at.button if b.label == "Acknowledge" and pair.key in str(b.form_id)).click().run()
    assert not at.exception
    # snooze the gpt-4o-mini alert for a day (a group of one: that alert is the one choice, named)
    mini = next(g for g in groups if g.model == "gpt-4o-mini")
    one = at.selectbox(key=f"pick_{mini.key}")
    assert one.options == [f"this alert: {alerts.rule_name(mini.alerts['rule'].iloc[0])} · "
                           f"{mini.alerts['tenant'].iloc[0]} · {mini.alerts['window_start'].iloc[0]:%Y-%m-%d %H:%M}"]
    at.text_input(key=f"who_{mini.key}").input("Grace")
    at.selectbox(key=f"for_{mini.key}").select("1 day")
    next(b for b in at.button if b.label == "Snooze" and mini.key in str(b.form_id)).click().run()
    assert not at.exception

    states = _states(db)
    assert states.loc[list(pair.alerts["alert_id"]), "state"].tolist() == ["acknowledged"] * 2
    assert states.loc[list(pair.alerts["alert_id"]), "state_by"].tolist() == ["Ada <script>"] * 2
    assert states.loc[mini.key, "state"] == "snoozed"
    at.run()
    assert [m.value for m in at.metric] == ["1", "0", "0", "2", "1"]
    at.segmented_control(key="alerts_show").set_value("acknowledged or snoozed").run()
    assert not at.exception and len(at.expander) == 2
    assert "acknowledged by Ada \\<script> at" in texts(at)

    # deliver now: only the alert still open (gpt-4o for acme at 03:00) goes out
    at.button(key="deliver_now").click().run()
    assert not at.exception
    posts = [p["json"] for p in receiver.posts if p["json"]["kind"] == "alerts"]
    assert [[(a["model"], a["tenant"]) for a in p["alerts"]] for p in posts] == [[("gpt-4o", "acme")]]
    assert any("sent 1 message \\(1 alert\\)" in s.value for s in at.success)


def test_alerts_page_on_an_empty_store(empty_db):
    at = run_page(empty_db, PAGE)
    assert not at.exception
    assert "holds no requests yet" in texts(at)


def test_a_snooze_into_the_past_or_without_a_name_is_a_sentence_not_a_crash(db):
    con = store.connect(db)
    g = delivery.group_alerts(alerts.open_alerts(con))[0]
    con.close()
    at = run_page(db, PAGE, query_params=PERIOD)
    at.selectbox(key=f"for_{g.key}").select("until a date and time")
    at.date_input(key=f"day_{g.key}").set_value(datetime(2020, 1, 1).date())
    at.text_input(key=f"who_{g.key}").input("Ada")
    next(b for b in at.button if b.label == "Snooze" and g.key in str(b.form_id)).click().run()
    assert not at.exception
    assert "Snooze not saved: a snooze ends in the future" in texts(at)
    at.text_input(key=f"who_{g.key}").input("  ")
    next(b for b in at.button if b.label == "Acknowledge" and g.key in str(b.form_id)).click().run()
    assert not at.exception
    assert "Acknowledgement not saved: say who you are" in texts(at)
    assert set(_states(db)["state"]) == {"open"}


def test_the_view_chosen_is_kept_in_the_url(db):
    at = run_page(db, PAGE, query_params={**PERIOD, "alerts_show": "acknowledged or snoozed"})
    assert not at.exception
    assert len(at.expander) == 0
    assert "No alert is acknowledged or snoozed in this period." in texts(at)


def test_a_tenant_scoped_login_sees_only_its_tenants_deliveries(db, monkeypatch):
    """A viewer scoped to tenant beta saw every message of the delivery log (acme's alerts, their count and
    severity): what another tenant did reached a scoped login. Nor does it see the targets' addresses (an e-mail
    target's recipients and mail server were shown)."""


    con = store.connect(db)
    delivery.deliver(con, alerts.open_alerts(con), now=datetime(2026, 4, 7))
    full = delivery.delivery_log(con)
    con.close()
    # three messages: gpt-4o acme+beta 00:00 (2 alerts), gpt-4o acme 03:00, gpt-4o-mini acme 00:00
    assert sorted(full["alerts"]) == [1, 1, 2]
    con = store.connect(db)
    delivery.save_targets(con, [*[vars(t) for t in delivery.targets(con)],
                                {"name": "oncall", "kind": "email", "recipients": "sre@example.org", "sender": "finops@example.org",
                                 "smtp_host": "127.0.0.1", "smtp_port": 8625}])
    con.close()
    monkeypatch.setenv("FINOPS_DB", db)
    at = logged_in({"email": "bea@x", "groups": ["finops-viewer"], "tenants": ["beta"]})
    for k, v in PERIOD.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception
    [log] = [d.value for d in at.dataframe if "outcome" in d.value.columns]
    # beta's one alert, in the one message that carried it
    assert log[["what", "alerts", "severity", "outcome"]].values.tolist() == [["alerts", 1, "critical", "sent"]]
    shown = texts(at)
    assert "**oncall** (email)" in shown and "address shown to the team's own logins" in shown
    assert "sre@example.org" not in shown and "8625" not in shown


def test_a_viewer_is_not_told_to_use_a_table_it_is_not_shown(tmp_path):
    """A viewer read "No delivery target yet: add one in the table above and save it." with no table above."""


    path = str(tmp_path / "alerts.duckdb")
    alert_store(path).close()
    import os
    os.environ["FINOPS_DB"] = path
    at = logged_in({"email": "vic@x", "groups": ["finops-viewer"]})
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception and not at.data_editor
    assert "No delivery target yet: an admin sets them here." in texts(at)
    assert "table above" not in texts(at)


@pytest.mark.parametrize("groups, told, not_told", [
    (["finops-viewer"], "ask an admin to lower the rule's minimum requests per window",
     "lower the rule's minimum requests per window on the Incidents page"),
    (["finops-admin"], "lower the rule's minimum requests per window on the Incidents page", "ask an admin"),
])
def test_too_few_requests_tell_a_viewer_to_ask_an_admin_and_an_admin_where_to_lower_the_minimum(
        tmp_path, monkeypatch, groups, told, not_told):
    """Three failed requests of acme (a window needs 50) leave the error-rate rule unjudged. Only local mode (an
    admin) was tested; a viewer, who cannot edit the rules, is told to ask an admin, and a logged-in admin where to
    lower the minimum."""
    from helpers import failing_store, shown

    db = failing_store(tmp_path)
    monkeypatch.setenv("FINOPS_DB", db)
    at = logged_in({"email": "val@x", "groups": groups})
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    [w] = [shown(w.value) for w in at.warning if "too few requests to judge" in w.value]
    assert "Error rate above 1 %: 1 window with 3 requests in all (a window needs 50)" in w, w
    assert f"Their health is unknown, not fine: widen the period, or {told}" in w, w
    assert not_told not in w
