"""finops.ops.delivery and acknowledge/snooze: real messages to a local HTTP receiver and a local SMTP server
(aiosmtpd) on 127.0.0.1, parsed back; states and the delivery log survive reopening the store."""
from __future__ import annotations

import email
import logging
import ssl
import subprocess
import time
from datetime import datetime, timedelta
from email import policy

import pandas as pd
import pytest

from finops import store
from finops.cli import main
from finops.errors import InputError
from finops.ops import alerts, delivery
from helpers import ALERT_T0, Receiver, alert_store, free_port

NOW = datetime(2026, 4, 6, 12, 0)


@pytest.fixture()
def receiver():
    r = Receiver()
    yield r
    r.close()


def _http(con, url, **kw):
    delivery.save_targets(con, [{"name": "hook", "kind": "http", "url": url, "timeout_s": 5, **kw}])


# ---------------------------------------------------------------- grouping

def _frame(rows):
    return pd.DataFrame([{"alert_id": f"a{i}", "rule": "r", "tenant": "t", "model": m, "severity": s,
                          "window_start": ALERT_T0 + timedelta(hours=a), "window_end": ALERT_T0 + timedelta(hours=b),
                          "message": f"m{i}"} for i, (m, a, b, s) in enumerate(rows)])


def test_alerts_of_one_model_that_overlap_or_touch_are_one_group():
    groups = delivery.group_alerts(_frame([
        ("x", 0, 1, "warning"), ("x", 1, 2, "critical"),      # touch at 01:00
        ("x", 3, 5, "info"), ("x", 4, 6, "warning"),          # overlap
        ("x", 7, 8, "info"),                                  # apart
        ("y", 0, 1, "warning")]))                             # another model
    spans = [(g.model, g.window_start.hour, g.window_end.hour, g.severity, len(g.alerts)) for g in groups]
    assert spans == [("x", 0, 2, "critical", 2), ("x", 3, 6, "warning", 2), ("y", 0, 1, "warning", 1),
                     ("x", 7, 8, "info", 1)]
    assert groups[0].alerts["alert_id"].tolist() == ["a1", "a0"]      # the most severe first
    assert delivery.group_alerts(_frame([])[[]].assign(model=[])) == []


def test_a_group_of_all_models_is_named_by_what_its_rules_watch():
    """A day of 100 % unpriced traffic was a group titled "1 alert on spend", beside the spend spikes' groups."""
    def title(*rules):
        frame = _frame([(alerts.ALL_MODELS, 0, 24, "warning")] * len(rules)).assign(rule=list(rules))
        return delivery.group_alerts(frame)[0].title
    start = f"{ALERT_T0:%Y-%m-%d %H:%M}"
    assert title("unpriced_share").startswith("warning: 1 alert on unpriced traffic, " + start)
    assert title("spend_spike").startswith("warning: 1 alert on spend, ")
    assert title("spend_spike", "unpriced_share").startswith("warning: 2 alerts on spend and unpriced traffic, ")


def test_the_store_s_alerts_make_three_groups():
    con = alert_store()
    groups = delivery.group_alerts(alerts.open_alerts(con))
    assert [(g.model, g.window_start.hour, len(g.alerts)) for g in groups] == [
        ("gpt-4o", 3, 1), ("gpt-4o", 0, 2), ("gpt-4o-mini", 0, 1)]


# ---------------------------------------------------------------- identity, acknowledge and snooze

def test_an_alert_keeps_its_identity_when_evaluated_again_and_as_more_data_arrives():
    from finops.ingest import ingest_frame
    from helpers import alert_rows

    con = alert_store()
    first = alerts.open_alerts(con).set_index(["model", "tenant", "window_start"])["alert_id"]
    assert alerts.open_alerts(con)["alert_id"].tolist() == alerts.open_alerts(con)["alert_id"].tolist()
    # the failing hour 03:00 goes on failing at 04:00: the same alert, its window longer
    ingest_frame(con, alert_rows(200, ALERT_T0 + timedelta(hours=4), errors=20))
    again = alerts.open_alerts(con)
    row = again[(again.model == "gpt-4o") & (again.window_start == ALERT_T0 + timedelta(hours=3))].iloc[0]
    assert row.window_end == pd.Timestamp(ALERT_T0 + timedelta(hours=5))
    assert row.alert_id == first[("gpt-4o", "acme", pd.Timestamp(ALERT_T0 + timedelta(hours=3)))]


def test_acknowledge_and_snooze_survive_reopening_the_store(tmp_path):
    path = str(tmp_path / "s.duckdb")
    con = alert_store(path)
    a = alerts.open_alerts(con, now=NOW)
    assert set(a["state"]) == {"open"}
    acked, snoozed = a.iloc[[0]], a.iloc[[1]]
    assert alerts.acknowledge(con, acked, "Ada Lovelace", "looking at it", now=NOW) == 1
    assert alerts.snooze(con, snoozed, NOW + timedelta(hours=1), "Grace", now=NOW) == 1
    con.close()

    con = store.connect(path)
    b = alerts.open_alerts(con, now=NOW + timedelta(minutes=30)).set_index("alert_id")
    ra, rs = b.loc[acked.alert_id.iloc[0]], b.loc[snoozed.alert_id.iloc[0]]
    assert (ra.state, ra.state_by, ra.state_note, ra.state_at) == ("acknowledged", "Ada Lovelace", "looking at it",
                                                                   pd.Timestamp(NOW))
    assert (rs.state, rs.state_by, rs.state_until) == ("snoozed", "Grace", pd.Timestamp(NOW + timedelta(hours=1)))
    assert alerts.state_label(rs.state, rs.state_until) == "snoozed until 2026-04-06 13:00 UTC"
    assert (b["state"] == "open").sum() == 2
    # the snooze runs out: open again; the acknowledgement stays
    later = alerts.open_alerts(con, now=NOW + timedelta(hours=2)).set_index("alert_id")
    assert later.loc[snoozed.alert_id.iloc[0], "state"] == "open"
    assert later.loc[acked.alert_id.iloc[0], "state"] == "acknowledged"
    alerts.reopen(con, acked, "Ada Lovelace", now=NOW)
    assert set(alerts.open_alerts(con, now=NOW + timedelta(hours=2))["state"]) == {"open"}


def test_an_episode_seen_through_a_later_period_is_the_same_alert(receiver):
    """gpt-4o fails for acme from 03:00 to 05:00. Judged from 04:00 (a cron run's look-back), the episode starts
    at 04:00 and has another identity; it keeps its acknowledgement and is not sent again."""
    from finops.filters import Filters
    from finops.ingest import ingest_frame
    from helpers import alert_rows

    con = alert_store()
    ingest_frame(con, alert_rows(200, ALERT_T0 + timedelta(hours=4), errors=20))
    _http(con, receiver.url)
    whole = alerts.open_alerts(con)
    later = alerts.open_alerts(con, Filters(since=ALERT_T0 + timedelta(hours=4)))
    [a] = whole[whole.window_start == ALERT_T0 + timedelta(hours=3)].itertuples(index=False)
    [b] = later.itertuples(index=False)
    assert (b.window_start, b.window_end) == (pd.Timestamp(ALERT_T0 + timedelta(hours=4)), a.window_end)
    assert a.alert_id != b.alert_id
    [res] = delivery.deliver(con, whole, now=NOW)
    assert res.alerts == 4
    [again] = delivery.deliver(con, later, now=NOW)
    assert again.line == "http hook: nothing new to send"
    alerts.acknowledge(con, whole[whole.alert_id == a.alert_id], "Ada", now=NOW)
    assert alerts.open_alerts(con, Filters(since=ALERT_T0 + timedelta(hours=4)))["state"].tolist() == ["acknowledged"]
    # reopened through the later view, the stored acknowledgement goes
    alerts.reopen(con, later, "Ada", now=NOW)
    assert set(alerts.open_alerts(con)["state"]) == {"open"}


def test_acknowledge_needs_a_person_and_a_snooze_a_time_ahead():
    con = alert_store()
    a = alerts.open_alerts(con).head(1)
    with pytest.raises(InputError, match="who you are"):
        alerts.acknowledge(con, a, "   ")
    with pytest.raises(InputError, match="future"):
        alerts.snooze(con, a, NOW - timedelta(hours=1), "Ada", now=NOW)
    with pytest.raises(InputError, match="future"):
        alerts.snooze(con, a, None, "Ada", now=NOW)
    with pytest.raises(InputError, match="at least one"):
        alerts.acknowledge(con, a.iloc[0:0], "Ada")


# ---------------------------------------------------------------- HTTP and Slack-compatible webhooks

def test_http_endpoint_gets_one_message_per_group_once(receiver):
    con = alert_store()
    _http(con, receiver.url + "/alerts")
    frame = alerts.open_alerts(con, now=NOW)
    [res] = delivery.deliver(con, frame, now=NOW)
    assert (res.messages, res.alerts, res.ok) == (3, 4, True)
    assert res.line == "http hook: sent 3 messages (4 alerts)"
    bodies = [p["json"] for p in receiver.posts]
    assert [p["path"] for p in receiver.posts] == ["/alerts"] * 3
    assert [b["kind"] for b in bodies] == ["alerts"] * 3
    assert [len(b["alerts"]) for b in bodies] == [1, 2, 1]
    pair = bodies[1]["alerts"]
    assert {a["tenant"] for a in pair} == {"acme", "beta"}
    assert {a["alert_id"] for b in bodies for a in b["alerts"]} == set(frame["alert_id"])
    assert pair[0]["window_start"] == "2026-04-06T00:00:00" and pair[0]["severity"] == "critical"
    assert "20 of 200 requests failed" in pair[0]["message"]
    # a second run: nothing new
    [again] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    assert again.line == "http hook: nothing new to send" and len(receiver.posts) == 3
    log = delivery.delivery_log(con)
    assert log["outcome"].tolist() == ["sent"] * 3 and sorted(log["alerts"]) == [1, 1, 2]


def test_acknowledged_and_snoozed_alerts_are_not_delivered(receiver):
    con = alert_store()
    _http(con, receiver.url)
    frame = alerts.open_alerts(con)
    pair = frame[frame.tenant == "beta"]
    alerts.acknowledge(con, frame[(frame.model == "gpt-4o-mini")], "Ada", now=NOW)
    alerts.snooze(con, pair, NOW + timedelta(days=1), "Ada", now=NOW)
    [res] = delivery.deliver(con, frame, now=NOW)
    assert (res.messages, res.alerts) == (2, 2)
    sent = {a["alert_id"] for p in receiver.posts for a in p["json"]["alerts"]}
    assert sent == set(frame[(frame.model == "gpt-4o") & (frame.tenant == "acme")]["alert_id"])
    # the snooze ends: the beta alert goes out on the next run, on its own
    [res] = delivery.deliver(con, frame, now=NOW + timedelta(days=2))
    assert (res.messages, res.alerts) == (1, 1)
    assert receiver.posts[-1]["json"]["alerts"][0]["tenant"] == "beta"


def test_a_failed_delivery_is_retried_on_the_next_run(receiver):
    con = alert_store()
    _http(con, receiver.url)
    receiver.fail = 1
    [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    assert not res.ok
    assert res.line == (f"http hook: sent 0 messages (0 alerts); 3 failed (4 alerts): {receiver.url}/… answered "
                        "HTTP 500; tried again on the next run".replace(f"{receiver.url}/…", delivery.mask_url(
                            receiver.url + "/")))
    assert receiver.posts == []
    [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW + timedelta(minutes=5))
    assert (res.ok, res.messages, res.alerts) == (True, 3, 4)
    log = delivery.delivery_log(con)
    assert log["outcome"].tolist() == ["sent"] * 3 + ["failed"]
    assert "HTTP 500" in log["detail"].iloc[-1]


def test_a_slow_endpoint_times_out_within_its_bound(receiver):
    con = alert_store()
    _http(con, receiver.url + "/slow", timeout_s=1)
    t0 = time.monotonic()
    [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    assert time.monotonic() - t0 < 10          # one attempt of 1 s, the rest wait for the next run
    assert not res.ok and "timed out" in res.error and res.failed_messages == 3


def test_slack_webhook_gets_text_and_blocks_and_its_secret_url_is_never_shown(receiver, monkeypatch, caplog):
    con = alert_store()
    secret_url = receiver.url + "/services/T000/B000/TOKEN123"
    monkeypatch.setenv("FINOPS_TEST_SLACK_URL", secret_url)
    delivery.save_targets(con, [{"name": "ops", "kind": "slack", "url": "$FINOPS_TEST_SLACK_URL",
                                 "severities": "critical"}])
    with caplog.at_level(logging.DEBUG, logger="finops"):
        [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    assert res.line == "slack ops: sent 3 messages (4 alerts)"
    body = receiver.posts[1]["json"]
    assert set(body) == {"text", "blocks"}
    assert body["text"] == "finops critical: 2 alerts on gpt-4o, 2026-04-06 00:00 to 2026-04-06 01:00 UTC"
    assert body["blocks"][0] == {"type": "header", "text": {"type": "plain_text", "text": body["text"][7:]}}
    assert [b["text"]["type"] for b in body["blocks"][1:]] == ["plain_text", "plain_text"]
    assert body["blocks"][1]["text"]["text"].startswith("[critical] Error rate above 1 %: gpt-4o for tenant ")
    shown = " ".join([caplog.text, res.line, delivery.targets_frame(con).to_string(),
                      delivery.delivery_log(con).to_string(), *(t.address for t in delivery.targets(con)),
                      str(store.get_setting(con, delivery.SETTING))])
    assert "TOKEN123" not in shown
    assert delivery.targets(con)[0].address == f"$FINOPS_TEST_SLACK_URL ({receiver.url}/…)"


def test_a_slack_url_is_refused_unless_it_comes_from_a_secret():
    con = store.connect(":memory:")
    with pytest.raises(InputError, match=r"\$NAME"):
        delivery.save_targets(con, [{"name": "ops", "kind": "slack", "url": "https://hooks.slack.com/services/x"}])
    with pytest.raises(InputError) as err:
        delivery.save_targets(con, [{"name": "a", "kind": "http", "url": "http://h/x"},
                                    {"name": "a", "kind": "http", "url": "http://h/y"}])
    assert err.value.row == 2
    with pytest.raises(InputError, match="severity"):
        delivery.save_targets(con, [{"name": "a", "kind": "http", "url": "http://h/x", "severities": "urgent"}])
    with pytest.raises(InputError, match="timeout"):
        delivery.save_targets(con, [{"name": "a", "kind": "http", "url": "http://h/x", "timeout_s": 600}])


def test_a_missing_secret_is_a_failure_that_names_it_and_secrets_toml_is_read(receiver, monkeypatch, tmp_path):
    con = alert_store()
    monkeypatch.delenv("FINOPS_TEST_HOOK", raising=False)
    monkeypatch.setattr(delivery, "SECRET_FILES", (tmp_path / "secrets.toml",))
    delivery.save_targets(con, [{"name": "h", "kind": "http", "url": "$FINOPS_TEST_HOOK"}])
    [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    assert "secret FINOPS_TEST_HOOK is not set" in res.line
    (tmp_path / "secrets.toml").write_text(f'[finops]\nFINOPS_TEST_HOOK = "{receiver.url}/from-toml"\n')
    [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    assert res.ok and receiver.posts[0]["path"] == "/from-toml"


@pytest.mark.parametrize("recipients", ["sre@example.org oncall@example.org", "sre@@example.org",
                                        "sre@example.org\toncall@example.org", "sre@example.org, @example.org"])
def test_a_mangled_recipient_list_is_refused_naming_the_field(recipients):
    """A space for a comma (``a@b.c d@e.f``) was saved as the one address ``@e.f``: the page said "Saved", and
    every delivery then failed at the SMTP server."""
    con = store.connect(":memory:")
    with pytest.raises(InputError, match=r"row 1, field recipients: .* is not a list of e-mail addresses "
                                         r"\(name@example.org, separated by commas\)") as err:
        delivery.save_targets(con, [{"name": "oncall", "kind": "email", "smtp_host": "127.0.0.1",
                                     "sender": "finops@example.org", "recipients": recipients}])
    assert err.value.field == "recipients" and delivery.targets(con) == []
    delivery.save_targets(con, [{"name": "oncall", "kind": "email", "smtp_host": "127.0.0.1",
                                 "sender": "Finops <finops@example.org>",
                                 "recipients": "SRE <sre@example.org>; oncall@example.org,"}])
    [t] = delivery.targets(con)
    assert (t.sender, t.recipients) == ("finops@example.org", "sre@example.org, oncall@example.org")


@pytest.mark.parametrize("target", [
    {"kind": "http", "url": "http://exa mple.org/hook"},
    {"kind": "http", "url": "http://" + "a" * 80 + ".example/hook"},
    {"kind": "email", "smtp_host": "b" * 80 + ".example", "sender": "a@b.c", "recipients": "d@e.f"},
    {"kind": "email", "smtp_host": "smtp..example", "sender": "a@b.c", "recipients": "d@e.f", "smtp_port": 25},
], ids=["space", "long-label", "long-smtp-label", "empty-label"])
def test_an_address_that_cannot_be_reached_is_a_failure_not_a_crash(target):
    con = alert_store()
    delivery.save_targets(con, [{"name": "t", "timeout_s": 2, **target}])
    res = delivery.send_test(con, "t", now=NOW)
    assert not res.ok and res.line.startswith(f"{target['kind']} t: test message failed: ")


def test_the_editor_keeps_a_masked_url():
    con = store.connect(":memory:")
    delivery.save_targets(con, [{"name": "h", "kind": "http", "url": "http://127.0.0.1:9000/hook?token=abc"}])
    frame = delivery.targets_frame(con)
    assert frame["url"].tolist() == ["http://127.0.0.1:9000/…"]
    delivery.save_targets(con, frame)
    assert delivery.targets(con)[0].url == "http://127.0.0.1:9000/hook?token=abc"


# ---------------------------------------------------------------- e-mail over SMTP (aiosmtpd)

class _Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos),
                              email.message_from_bytes(envelope.content, policy=policy.default)))
        return "250 OK"


def _smtp(**kw):
    from aiosmtpd.controller import Controller

    inbox = _Inbox()
    ctl = Controller(inbox, hostname="127.0.0.1", port=free_port(), **kw)
    ctl.start()
    return ctl, inbox


def _email_target(con, port, **kw):
    delivery.save_targets(con, [{"name": "oncall", "kind": "email", "smtp_host": "127.0.0.1", "smtp_port": port,
                                 "starttls": False, "sender": "finops@example.org",
                                 "recipients": "sre@example.org, boss@example.org", "timeout_s": 5, **kw}])


def test_email_is_delivered_one_message_per_group():
    ctl, inbox = _smtp()
    try:
        con = alert_store()
        _email_target(con, ctl.port)
        [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    finally:
        ctl.stop()
    assert res.line == "email oncall: sent 3 messages (4 alerts)"
    assert len(inbox.messages) == 3
    mail_from, rcpts, msg = inbox.messages[1]
    assert mail_from == "finops@example.org" and rcpts == ["sre@example.org", "boss@example.org"]
    assert msg["Subject"] == "[finops] critical: 2 alerts on gpt-4o, 2026-04-06 00:00 to 2026-04-06 01:00 UTC"
    body = msg.get_content()
    assert body.count("[critical] Error rate above 1 %: gpt-4o for tenant") == 2
    assert "tenant beta" in body and "tenant acme" in body


def _authenticator(server, session, envelope, mechanism, auth_data):
    from aiosmtpd.smtp import AuthResult

    return AuthResult(success=auth_data.login == b"finops" and auth_data.password == b"s3cret", handled=False)


def test_email_logs_in_with_the_password_from_the_environment(monkeypatch):
    ctl, inbox = _smtp(authenticator=_authenticator, auth_require_tls=False)
    try:
        con = alert_store()
        _email_target(con, ctl.port, username="finops", password_secret="FINOPS_TEST_SMTP_PASSWORD",
                      severities="critical")
        monkeypatch.setenv("FINOPS_TEST_SMTP_PASSWORD", "wrong")
        [bad] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
        monkeypatch.setenv("FINOPS_TEST_SMTP_PASSWORD", "s3cret")
        [good] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    finally:
        ctl.stop()
    assert not bad.ok and f"127.0.0.1:{ctl.port} refused the login (535)" in bad.line and "wrong" not in bad.line
    assert good.ok and len(inbox.messages) == 3


def test_email_over_starttls(tmp_path, monkeypatch):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    ctl, inbox = _smtp(tls_context=ctx, require_starttls=True)
    try:
        con = alert_store()
        _email_target(con, ctl.port, severities="critical")
        [plain_res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)       # STARTTLS off: refused
        assert not plain_res.ok and "answered 530" in plain_res.error
        _email_target(con, ctl.port, severities="critical", starttls=True)
        [untrusted] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)       # a certificate we do not trust
        assert not untrusted.ok and "TLS with 127.0.0.1" in untrusted.error
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        [res] = delivery.deliver(con, alerts.open_alerts(con), now=NOW)
    finally:
        ctl.stop()
    assert res.ok and len(inbox.messages) == 3


# ---------------------------------------------------------------- tests, digest and the CLI

def test_send_test_reaches_the_target_and_is_logged(receiver):
    con = alert_store()
    _http(con, receiver.url)
    res = delivery.send_test(con, "hook", now=NOW)
    assert res.ok and res.line == "http hook: test message sent"
    body = receiver.posts[0]["json"]
    assert (body["kind"], body["title"], body["alerts"]) == ("test", "test message to hook", [])
    log = delivery.delivery_log(con)
    assert log[["what", "alerts", "outcome"]].values.tolist() == [["test", 0, "sent"]]
    with pytest.raises(InputError):
        delivery.send_test(con, "nobody")


def test_digest_is_sent_once_a_day(receiver):
    con = alert_store()
    _http(con, receiver.url)
    frame = alerts.open_alerts(con)
    alerts.acknowledge(con, frame.head(1), "Ada", now=NOW)
    d = delivery.digest(con, frame, spend_usd=1234.5, now=NOW)
    assert d.title == "daily digest 2026-04-06: 3 open alerts (3 critical, 0 warning, 0 info)"
    assert d.lines[:2] == ["4 alerts in the period: 3 open (3 critical, 0 warning, 0 info), 1 acknowledged, 0 snoozed.",
                           "Spend in the period: $1,234.50."]
    [res] = delivery.deliver_digest(con, d, now=NOW)
    assert res.line == "http hook: digest of 2026-04-06 sent"
    assert receiver.posts[0]["json"]["kind"] == "digest" and len(receiver.posts[0]["json"]["alerts"]) == 3
    [again] = delivery.deliver_digest(con, d, now=NOW + timedelta(hours=1))
    assert again.line == "http hook: digest of 2026-04-06 already sent" and len(receiver.posts) == 1


def test_cli_send_dry_run_then_send_then_nothing_new(receiver, tmp_path, capsys):
    db = str(tmp_path / "cli.duckdb")
    con = alert_store(db)
    _http(con, receiver.url)
    con.close()
    assert main(["alerts", "--send", "--dry-run", "--db", db]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "http hook: would send 3 messages" and len(out) == 4 and receiver.posts == []
    assert main(["alerts", "--send", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines() == ["http hook: sent 3 messages (4 alerts)"]
    assert main(["alerts", "--send", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines() == ["http hook: nothing new to send"]
    assert main(["alerts", "--digest", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("http hook: digest of ")
    con = store.connect(db)
    _http(con, receiver.url, digest=False)
    con.close()
    assert main(["alerts", "--digest", "--db", db]) == 1
    assert capsys.readouterr().out.strip() == ("no enabled delivery target takes the digest: enable one on the Alerts "
                                               "page of the dashboard")
    assert main(["alerts", "--db", db]) == 0
    assert capsys.readouterr().out.count("[critical]") == 4


def test_cli_send_exits_1_on_a_failure_and_without_targets(tmp_path, capsys):
    db = str(tmp_path / "cli.duckdb")
    con = alert_store(db)
    con.close()
    assert main(["alerts", "--send", "--db", db]) == 1
    assert capsys.readouterr().out.strip() == "no delivery target is set: add one on the Alerts page of the dashboard"
    port = free_port()
    con = store.connect(db)
    _http(con, f"http://127.0.0.1:{port}/gone")
    con.close()
    assert main(["alerts", "--send", "--db", db]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"http hook: sent 0 messages (0 alerts); 3 failed (4 alerts): could not reach http://127.0.0.1:{port}/…: "
        "Connection refused; tried again on the next run"]


@pytest.mark.parametrize("hours", ["1e9", "0", "-5", "nan"])
def test_cli_lookback_beyond_a_year_or_not_positive_is_refused(tmp_path, capsys, hours):
    """``alerts --send --lookback-hours 1e9`` reached back past year 1 and stopped with OverflowError's traceback."""
    db = str(tmp_path / "cli.duckdb")
    alert_store(db).close()
    assert main(["alerts", "--send", "--dry-run", "--lookback-hours", hours, "--db", db]) == 1
    assert capsys.readouterr().err == ("error: --lookback-hours must be a positive number of hours, at most a year "
                                       "(8,784)\n")


def test_cli_acknowledges_snoozes_and_reopens_by_id(tmp_path, capsys):
    import json

    db = str(tmp_path / "cli.duckdb")
    alert_store(db).close()
    assert main(["alerts", "--json", "--db", db]) == 0
    ids = [a["alert_id"] for a in json.loads(capsys.readouterr().out)]
    assert main(["alerts", "--ack", ids[0], ids[1], "--db", db]) == 1           # no --by
    assert "say who you are" in capsys.readouterr().err
    assert main(["alerts", "--ack", ids[0], ids[1], "--by", "Ada", "--note", "on it", "--db", db]) == 0
    assert capsys.readouterr().out.strip() == "2 alerts acknowledged"
    assert main(["alerts", "--snooze", ids[2], "--hours", "2", "--by", "Ada", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("1 alert snoozed until ")
    assert main(["alerts", "--ack", "0000000000000000", "--by", "Ada", "--db", db]) == 1
    assert "no alert 0000000000000000" in capsys.readouterr().err
    assert main(["alerts", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert listed.count("(acknowledged)") == 2 and listed.count("(snoozed until ") == 1
    assert main(["alerts", "--reopen", ids[0], "--by", "Ada", "--db", db]) == 0
    assert capsys.readouterr().out.strip() == "1 alert reopened"
