"""Alerts that reach someone: delivery targets, grouped messages, the delivery log, the daily digest.

Targets
-------
A target is a :class:`Target` kept as JSON in the ``settings`` table (``alerts.targets``), one of:

``slack``  an incoming webhook (Slack, or anything that takes Slack's ``{"text": ..., "blocks": [...]}``);
           its URL carries a token, so it is never stored: ``url`` names the secret holding it (``$NAME``)
``http``   a generic HTTP endpoint: the alerts as JSON (``{"source": "finops", "kind": "alerts", ...}``);
           ``url`` is the URL, or ``$NAME`` of a secret holding it
``email``  SMTP: ``smtp_host``, ``smtp_port``, ``starttls``, ``sender``, ``recipients``, ``username``, and
           ``password_secret``, the name of the secret holding the password

A secret ``NAME`` is read from the environment, else from ``.streamlit/secrets.toml`` (the project's, then
``~/.streamlit/``; a top-level key or one in a ``[finops]`` table). Secrets are never logged nor stored, and
a page shows a URL only masked (:func:`mask_url`: scheme and host).

Delivery
--------
:func:`deliver` sends each target the *open* alerts (neither acknowledged nor snoozed) of the severities it
takes that it has not been sent yet. Alerts of one model whose windows overlap or touch are one message
(:func:`group_alerts`). Every attempt is a row of ``alert_deliveries`` (target, time, outcome, why): an
alert sent to a target is never sent to it again, nor is the same episode seen through a later period
(:func:`finops.ops.alerts.same_alert`); one that failed is tried again on the next run. Each
attempt waits at most the target's ``timeout_s`` on the network (1 to 60 s).
"""
from __future__ import annotations

import http.client
import json
import logging
import math
import os
import smtplib
import ssl
import tomllib
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import getaddresses
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pandas as pd

from finops import access, store
from finops.errors import InputError
from finops.fmt import usd
from finops.jsonutil import jsonable
from finops.ops import alerts as alerts_mod

log = logging.getLogger("finops")

KINDS = ("slack", "http", "email")
SETTING = "alerts.targets"
TIMEOUT_RANGE_S = (1.0, 60.0)
MAX_ALERTS_IN_MESSAGE = 20       # a message lists this many alerts of its group, then "and N more"
SECRET_FILES = (store.ROOT / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml")


class DeliveryError(Exception):
    """A message could not be delivered; the text says why, without any secret."""


# ---------------------------------------------------------------- secrets

def secret(name: str) -> str | None:
    """The secret ``name`` from the environment, else from a ``secrets.toml`` (see the module docstring)."""
    name = name.lstrip("$").strip()
    if not name:
        return None
    if os.environ.get(name):
        return os.environ[name]
    for path in SECRET_FILES:
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            log.warning("secrets file %s is not readable TOML: skipped", path.name)
            continue
        for table in (data, data.get("finops") if isinstance(data.get("finops"), dict) else {}):
            value = table.get(name)
            if isinstance(value, str) and value:
                return value
    return None


def mask_url(url: str) -> str:
    """A URL as a page may show it: scheme and host, the path (where tokens live) and any credentials hidden.
    A secret's name (``$NAME``) is shown as it is.

    >>> mask_url("https://hooks.slack.com/services/T000/B000/XXXX"), mask_url("$SLACK_URL")
    ('https://hooks.slack.com/…', '$SLACK_URL')
    >>> mask_url("http://user:pw@127.0.0.1:8080/hook?token=1"), mask_url("")
    ('http://127.0.0.1:8080/…', '')
    """
    url = (url or "").strip()
    if not url or url.startswith("$"):
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    tail = "/…" if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme}://{host}{port}{tail}" if parts.scheme else "…"


# ---------------------------------------------------------------- targets

@dataclass(frozen=True)
class Target:
    name: str
    kind: str                                   # slack, http, email
    severities: tuple[str, ...] = ("critical", "warning")
    url: str = ""                               # slack / http: $NAME of a secret, or (http only) the URL
    recipients: str = ""                        # email: addresses, comma-separated
    sender: str = ""                            # email: the From address
    smtp_host: str = ""
    smtp_port: int = 587
    starttls: bool = True
    username: str = ""
    password_secret: str = ""                   # email: the name of the secret holding the SMTP password
    timeout_s: float = 10.0
    digest: bool = True                         # also gets the daily digest
    enabled: bool = True

    @property
    def address(self) -> str:
        """Where it delivers, as a page may show it (URLs masked)."""
        if self.kind == "email":
            return f"{self.recipients} via {self.smtp_host}:{self.smtp_port}"
        resolved = secret(self.url) if self.url.startswith("$") else self.url
        if self.url.startswith("$"):
            return f"{self.url} ({mask_url(resolved) if resolved else 'not set'})"
        return mask_url(self.url)


TARGET_COLUMNS = [f.name for f in fields(Target)]


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _text(v) -> str:
    return "" if _blank(v) else " ".join(str(v).split())


def _bool(v, default: bool) -> bool:
    if _blank(v):
        return default
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _number(v, default: float, what: str, row: int, name: str) -> float:
    if _blank(v):
        return default
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{what} {v!r} is not a number", row=row, field=name) from None
    if not math.isfinite(x):
        raise InputError(f"{what} {v!r} is not a number", row=row, field=name)
    return x


def _severities(v, row: int) -> tuple[str, ...]:
    if isinstance(v, (list, tuple)):
        items = [str(x).strip().lower() for x in v]
    else:
        items = [s.strip().lower() for s in _text(v).replace(";", ",").split(",")]
    items = [s for s in items if s]
    bad = [s for s in items if s not in alerts_mod.SEVERITIES]
    if bad:
        raise InputError(f"severity {bad[0]!r}: choose from {', '.join(alerts_mod.SEVERITIES)}", row=row,
                         field="severities")
    if not items:
        raise InputError("a target takes at least one severity", row=row, field="severities")
    return tuple(s for s in alerts_mod.SEVERITIES if s in items)


def _addresses(text: str, row: int, name: str) -> str:
    """The addresses of ``text`` (comma-separated, display names allowed) as ``a@b, c@d``; each is one local
    part, one ``@`` and a domain. ``a@b.c d@e.f`` (a space for a comma) is refused: the parser reads it as
    ``@e.f`` alone, which was saved and then refused by every SMTP server."""
    pairs = getaddresses([text])
    found = [a for _, a in pairs if a]
    if not found or any(a.count("@") != 1 or not all(a.split("@")) or any(c in a for c in " \t\r\n<>")
                        for a in found):
        raise InputError(f"{text!r} is not a list of e-mail addresses (name@example.org, separated by commas)",
                         row=row, field=name)
    return ", ".join(found)


def _target(raw: dict, row: int, old: dict[str, Target]) -> Target:
    name = _text(raw.get("name"))
    if not name:
        raise InputError("a target needs a name", row=row, field="name")
    if len(name) > 80:
        raise InputError("a target's name has at most 80 characters", row=row, field="name")
    kind = _text(raw.get("kind")).lower()
    if kind not in KINDS:
        raise InputError(f"kind {kind or '(blank)'!r}: choose from {', '.join(KINDS)}", row=row, field="kind")
    url = _text(raw.get("url"))
    if name in old and url and url == mask_url(old[name].url):      # the masked form shown: unchanged
        url = old[name].url
    timeout = _number(raw.get("timeout_s"), 10.0, "timeout", row, "timeout_s")
    if not TIMEOUT_RANGE_S[0] <= timeout <= TIMEOUT_RANGE_S[1]:
        raise InputError(f"timeout {timeout:g} s: between {TIMEOUT_RANGE_S[0]:g} and {TIMEOUT_RANGE_S[1]:g} s",
                         row=row, field="timeout_s")
    t = Target(name=name, kind=kind, severities=_severities(raw.get("severities", "critical,warning"), row),
               url=url, timeout_s=timeout, digest=_bool(raw.get("digest"), True),
               enabled=_bool(raw.get("enabled"), True))
    if kind in ("slack", "http"):
        if url.startswith("$"):
            if not url[1:].replace("_", "").isalnum():
                raise InputError(f"{url!r}: a secret's name is letters, digits and _", row=row, field="url")
        elif kind == "slack":
            raise InputError("a webhook URL carries its token: put it in an environment variable or "
                             ".streamlit/secrets.toml and give its name here as $NAME (e.g. $SLACK_WEBHOOK_URL)",
                             row=row, field="url")
        elif urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise InputError("the endpoint is an http:// or https:// URL, or $NAME of a secret holding one",
                             row=row, field="url")
        return t
    port = _number(raw.get("smtp_port"), 587, "port", row, "smtp_port")
    if port != int(port) or not 1 <= port <= 65535:
        raise InputError(f"port {port:g} is not a TCP port", row=row, field="smtp_port")
    host = _text(raw.get("smtp_host"))
    if not host:
        raise InputError("an e-mail target needs its SMTP server", row=row, field="smtp_host")
    password_secret = _text(raw.get("password_secret")).lstrip("$")
    if password_secret and not password_secret.replace("_", "").isalnum():
        raise InputError("the password is read from a secret: give its name (letters, digits and _), never the "
                         "password", row=row, field="password_secret")
    return replace(t, url="", smtp_host=host, smtp_port=int(port), starttls=_bool(raw.get("starttls"), True),
                   sender=_addresses(_text(raw.get("sender")), row, "sender"),
                   recipients=_addresses(_text(raw.get("recipients")), row, "recipients"),
                   username=_text(raw.get("username")), password_secret=password_secret)


def targets(con: duckdb.DuckDBPyConnection) -> list[Target]:
    """The delivery targets saved in the store."""
    out = []
    for raw in store.get_setting(con, SETTING, []) or []:
        known = {k: v for k, v in raw.items() if k in TARGET_COLUMNS}
        known["severities"] = tuple(known.get("severities") or ())
        out.append(Target(**known))
    return out


def save_targets(con: duckdb.DuckDBPyConnection, changed: pd.DataFrame | list) -> int:
    """Replace the targets with ``changed`` (a frame as :func:`targets_frame` gives, or Targets), validated:
    an InputError names the row and field. A URL left in its masked form keeps the stored one. Returns the count."""
    access.require("edit_delivery")
    old = {t.name: t for t in targets(con)}
    if isinstance(changed, pd.DataFrame):
        raws = changed.to_dict(orient="records")
    else:
        raws = [asdict(t) if isinstance(t, Target) else dict(t) for t in changed]
    out, seen = [], set()
    for i, raw in enumerate(raws, start=1):
        if all(_blank(v) or v is False for k, v in raw.items() if k not in ("enabled", "digest", "starttls")):
            continue                                # an empty row the editor added
        t = _target(raw, i, old)
        if t.name in seen:
            raise InputError(f"target {t.name!r} is listed twice", row=i, field="name")
        seen.add(t.name)
        out.append(t)
    store.set_setting(con, SETTING, [jsonable(asdict(t)) for t in out])
    return len(out)


def targets_frame(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The targets as a table for a page's editor: severities comma-separated, URLs masked."""
    rows = []
    for t in targets(con):
        d = asdict(t)
        d["severities"] = ", ".join(t.severities)
        d["url"] = mask_url(t.url)
        rows.append(d)
    frame = pd.DataFrame(rows, columns=TARGET_COLUMNS)
    for c in ("starttls", "digest", "enabled"):
        frame[c] = frame[c].astype("bool")
    frame["smtp_port"] = frame["smtp_port"].astype("Int64")
    frame["timeout_s"] = frame["timeout_s"].astype("float64")
    return frame


# ---------------------------------------------------------------- grouping

@dataclass(frozen=True)
class AlertGroup:
    """Alerts of one model whose windows overlap or touch: one message."""
    model: str
    window_start: pd.Timestamp
    window_end: pd.Timestamp
    severity: str                               # the most severe of its alerts
    alerts: pd.DataFrame = field(repr=False)

    @property
    def key(self) -> str:
        """A stable name for the group: its first alert's identity."""
        return str(self.alerts["alert_id"].iloc[0])

    @property
    def title(self) -> str:
        n = len(self.alerts)
        who = self.model
        if self.model == alerts_mod.ALL_MODELS:
            # the rules of all models' money: their spend, and the share of their traffic nothing prices
            rules = set(self.alerts["rule"]) if "rule" in self.alerts else set()
            who = ("unpriced traffic" if rules == {"unpriced_share"} else
                   "spend and unpriced traffic" if "unpriced_share" in rules else "spend")
        return (f"{self.severity}: {n} alert{'s' if n != 1 else ''} on {who}, "
                f"{self.window_start:%Y-%m-%d %H:%M} to {self.window_end:%Y-%m-%d %H:%M} UTC")


def group_alerts(frame: pd.DataFrame) -> list[AlertGroup]:
    """Alerts of the same model whose windows overlap or touch, as one group each; most severe first, then
    the latest. A window touches the next when it ends where the next starts."""
    if frame.empty:
        return []
    rank = {s: i for i, s in enumerate(alerts_mod.SEVERITIES)}
    groups: list[AlertGroup] = []
    f = frame.assign(window_start=pd.to_datetime(frame["window_start"]),
                     window_end=pd.to_datetime(frame["window_end"]))
    for model, g in f.sort_values(["window_start", "window_end"]).groupby("model", sort=True):
        current: list[int] = []
        end = None
        for idx, row in g.iterrows():
            if current and row["window_start"] > end:
                groups.append(_group(model, f.loc[current], rank))
                current = []
            end = row["window_end"] if not current else max(end, row["window_end"])
            current.append(idx)
        groups.append(_group(model, f.loc[current], rank))
    groups.sort(key=lambda gr: (rank.get(gr.severity, 9), -gr.window_end.value, gr.model))
    return groups


def _group(model: str, rows: pd.DataFrame, rank: dict) -> AlertGroup:
    sev = min(rows["severity"], key=lambda s: rank.get(s, 9))
    rows = rows.assign(_r=rows["severity"].map(lambda s: rank.get(s, 9))).sort_values(["_r", "window_start"])
    return AlertGroup(model, rows["window_start"].min(), rows["window_end"].max(), sev,
                      rows.drop(columns="_r").reset_index(drop=True))


# ---------------------------------------------------------------- messages

def _lines(group: AlertGroup) -> list[str]:
    shown = group.alerts.head(MAX_ALERTS_IN_MESSAGE)
    out = [f"[{r.severity}] {r.message}" for r in shown.itertuples(index=False)]
    if len(group.alerts) > len(shown):
        out.append(f"and {len(group.alerts) - len(shown):,} more alerts in this group")
    return out


def slack_payload(title: str, lines: list[str]) -> dict:
    """Slack's incoming-webhook JSON: ``text`` (the notification) and ``blocks`` (a header and one plain-text
    section per line, so a tenant or model name is never read as Slack markup)."""
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}}]
    blocks += [{"type": "section", "text": {"type": "plain_text", "text": line[:3000]}} for line in lines[:45]]
    # the top-level text is read as Slack markup: its control characters are escaped as Slack asks
    text = f"finops {title}"[:3000].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return {"text": text, "blocks": blocks}


def _record(a) -> dict:
    keys = ("alert_id", "rule", "model", "tenant", "severity", "window_start", "window_end", "value", "threshold",
            "message")
    return {k: jsonable(getattr(a, k)) for k in keys}


def http_payload(kind: str, title: str, lines: list[str], alerts: pd.DataFrame | None = None) -> dict:
    """The generic endpoint's JSON: source, kind (alerts, digest, test), title, lines and the alerts' records."""
    rows = [] if alerts is None else [_record(a) for a in alerts.itertuples(index=False)]
    return {"source": "finops", "kind": kind, "title": title, "lines": lines, "alerts": rows}


def email_message(target: Target, title: str, lines: list[str]) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = " ".join(f"[finops] {title}".split())[:250]
    msg["From"] = target.sender
    msg["To"] = target.recipients
    msg.set_content("\n\n".join(lines) + "\n\n-- \nSent by finops alert delivery. Acknowledge or snooze these "
                    "alerts on the dashboard's Alerts page.\n")
    return msg


# ---------------------------------------------------------------- sending

def _post_json(url: str, payload: dict, timeout: float) -> None:
    host = mask_url(url)
    body = json.dumps(jsonable(payload), allow_nan=False).encode("utf-8")
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "finops-alerts"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read(65536)
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"{host} answered HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        raise DeliveryError(f"could not reach {host}: {_reason(exc.reason)}") from None
    except (TimeoutError, OSError) as exc:
        raise DeliveryError(f"could not reach {host}: {_reason(exc)}") from None
    except (ValueError, http.client.HTTPException):  # a URL urllib cannot read, or an answer that is no HTTP
        # (the URL's text may hold the secret: not repeated)
        raise DeliveryError(f"{host} is not a URL that can be reached") from None


def _reason(exc) -> str:
    if isinstance(exc, TimeoutError) or "timed out" in str(exc):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _url(target: Target) -> str:
    if target.url.startswith("$"):
        value = secret(target.url)
        if not value:
            raise DeliveryError(f"secret {target.url[1:]} is not set (environment or .streamlit/secrets.toml)")
        return value
    return target.url


def _send_email(target: Target, msg: EmailMessage) -> None:
    where = f"{target.smtp_host}:{target.smtp_port}"
    password = None
    if target.username:
        password = secret(target.password_secret) if target.password_secret else None
        if password is None:
            raise DeliveryError(f"secret {target.password_secret or '(none named)'} holding the SMTP password is "
                                "not set (environment or .streamlit/secrets.toml)")
    try:
        with smtplib.SMTP(target.smtp_host, target.smtp_port, timeout=target.timeout_s) as smtp:
            if target.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if target.username:
                smtp.login(target.username, password)
            smtp.send_message(msg)
    except smtplib.SMTPAuthenticationError as exc:
        raise DeliveryError(f"{where} refused the login ({exc.smtp_code})") from None
    except smtplib.SMTPNotSupportedError:
        raise DeliveryError(f"{where} does not offer STARTTLS (or AUTH); untick STARTTLS only on a trusted "
                            "network") from None
    except smtplib.SMTPServerDisconnected:
        raise DeliveryError(f"{where} closed the connection") from None
    except smtplib.SMTPResponseException as exc:
        raise DeliveryError(f"{where} answered {exc.smtp_code}") from None
    except smtplib.SMTPException as exc:
        raise DeliveryError(f"{where}: {type(exc).__name__}") from None
    except ssl.SSLError as exc:
        raise DeliveryError(f"TLS with {where} failed: {exc.reason or 'handshake'}") from None
    except OSError as exc:
        raise DeliveryError(f"could not reach {where}: {_reason(exc)}") from None
    except (ValueError, UnicodeError):      # a host name that cannot be looked up (IDNA), an address smtplib refuses
        raise DeliveryError(f"{where} is not a server name that can be reached") from None


def send(target: Target, kind: str, title: str, lines: list[str], alerts: pd.DataFrame | None = None) -> None:
    """Send one message to ``target``; raises DeliveryError with the reason."""
    if target.kind == "slack":
        _post_json(_url(target), slack_payload(title, lines), target.timeout_s)
    elif target.kind == "http":
        _post_json(_url(target), http_payload(kind, title, lines, alerts), target.timeout_s)
    else:
        _send_email(target, email_message(target, title, lines))


# ---------------------------------------------------------------- the log

@dataclass
class TargetResult:
    """What one run did for one target."""
    target: str
    kind: str
    messages: int = 0
    alerts: int = 0
    failed_messages: int = 0
    failed_alerts: int = 0
    error: str = ""
    previews: list[str] = field(default_factory=list)     # dry run: the titles that would be sent
    note: str = ""                                          # e.g. "digest of 2026-11-30 already sent"

    @property
    def ok(self) -> bool:
        return self.failed_messages == 0

    @property
    def line(self) -> str:
        """One line saying what happened, for cron's mail and the page."""
        head = f"{self.kind} {self.target}: "
        if self.note:
            return head + self.note
        if self.previews:
            return head + f"would send {len(self.previews)} message{'s' if len(self.previews) != 1 else ''}"
        if not self.messages and not self.failed_messages:
            return head + "nothing new to send"
        sent = f"sent {_n(self.messages, 'message')} ({_n(self.alerts, 'alert')})"
        if self.ok:
            return head + sent
        return head + (f"{sent}; {self.failed_messages} failed ({_n(self.failed_alerts, 'alert')}): {self.error}; "
                       "tried again on the next run")


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _log_rows(con, rows: list[tuple]) -> None:
    if not rows:
        return
    with store.transaction(con):
        con.executemany("INSERT INTO alert_deliveries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        store.bump_data_version(con)


def delivery_log(con: duckdb.DuckDBPyConnection, limit: int = 200,
                 tenants: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The latest attempts, one row per message: attempted_at, target, kind, what (alerts, digest, test),
    alerts (count), severity (the worst), outcome (sent / failed), detail.

    With ``tenants`` (a tenant-scoped login's), only the messages that carried an alert of those tenants, each
    counting those alerts alone: another tenant's alerts, the fleet's, digests and tests are not shown."""
    scoped = tenants is not None
    where = "WHERE list_contains(?, tenant)" if scoped else ""
    params = [list(tenants)] if scoped else []
    return con.execute(f"""
SELECT attempted_at, target, kind,
       CASE WHEN alert_id = 'test' THEN 'test' WHEN alert_id LIKE 'digest:%' THEN 'digest' ELSE 'alerts' END AS what,
       count(*) FILTER (WHERE alert_id <> 'test' AND alert_id NOT LIKE 'digest:%') AS alerts,
       arg_min(severity, CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END) AS severity, outcome, any_value(detail) AS detail
FROM alert_deliveries {where} GROUP BY message_id, attempted_at, target, kind, what, outcome
ORDER BY attempted_at DESC, target LIMIT ?""", [*params, int(limit)]).df()


def sent_rows(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every alert delivered: alert_id, rule, model, tenant, window_start, window_end, target, attempted_at."""
    return con.execute("SELECT alert_id, rule, model, tenant, window_start, window_end, target, attempted_at "
                       "FROM alert_deliveries WHERE outcome = 'sent' AND rule <> ''").df()


def sent_pairs(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    """(alert_id, target) of every alert delivered."""
    rows = con.execute("SELECT DISTINCT alert_id, target FROM alert_deliveries WHERE outcome = 'sent'").fetchall()
    return {(a, t) for a, t in rows}


def _attempt(target: Target, kind: str, title: str, lines: list[str], alerts: pd.DataFrame | None
             ) -> tuple[str, str]:
    try:
        send(target, kind, title, lines, alerts)
    except DeliveryError as exc:
        # info, not warning: the run's one line per target reports the failure (cron mails stderr)
        log.info("alert delivery to %s (%s) failed: %s", target.name, target.kind, exc)
        return "failed", str(exc)
    log.info("alert delivery to %s (%s): sent %s", target.name, target.kind, kind)
    return "sent", ""


def deliver(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, now: datetime | None = None,
            dry_run: bool = False) -> list[TargetResult]:
    """Send every enabled target its new open alerts of ``frame`` (rows of :func:`alerts.open_alerts`), a
    message per group (:func:`group_alerts`), and log each attempt. After a target's first failure its other
    messages wait for the next run (a dead endpoint costs one timeout a run, not one per message). With ``dry_run`` nothing is sent or logged:
    each result's ``previews`` lists the messages that would go."""
    access.require("deliver_alerts")
    now = now or alerts_mod.utc_now()
    frame = alerts_mod.annotate(frame, alerts_mod.alert_states(con), now)
    pending = frame[frame["state"] == "open"]
    sent = sent_rows(con)
    results = []
    for t in targets(con):
        if not t.enabled:
            continue
        res = TargetResult(t.name, t.kind)
        # an alert this target was sent, under its identity or seen through another period, is not sent again
        done = alerts_mod.same_alert(pending, sent[sent["target"] == t.name], "attempted_at").index
        todo = pending[pending["severity"].isin(t.severities) & ~pending.index.isin(done)]
        rows: list[tuple] = []
        for g in group_alerts(todo):
            if dry_run:
                res.previews.append(g.title)
                continue
            if res.failed_messages:      # the target failed once this run: the rest waits for the next run
                res.failed_messages += 1
                res.failed_alerts += len(g.alerts)
                continue
            outcome, detail = _attempt(t, "alerts", g.title, _lines(g), g.alerts)
            message_id = uuid.uuid4().hex
            rows += [(a.alert_id, a.rule, a.model, a.tenant, a.window_start.to_pydatetime(),
                      a.window_end.to_pydatetime(), a.severity, t.name, t.kind, message_id, now, outcome, detail)
                     for a in g.alerts.itertuples(index=False)]
            if outcome == "sent":
                res.messages += 1
                res.alerts += len(g.alerts)
            else:
                res.failed_messages += 1
                res.failed_alerts += len(g.alerts)
                res.error = res.error or detail
        _log_rows(con, rows)
        results.append(res)
    return results


def send_test(con: duckdb.DuckDBPyConnection, name: str, now: datetime | None = None) -> TargetResult:
    """Send the target ``name`` a test message now and log it."""
    access.require("edit_delivery")
    now = now or alerts_mod.utc_now()
    t = next((x for x in targets(con) if x.name == name), None)
    if t is None:
        raise InputError(f"no delivery target named {name!r}: save it first")
    title = f"test message to {t.name}"
    lines = [f"This is a test from finops at {now:%Y-%m-%d %H:%M} UTC: alerts of severity "
             f"{', '.join(t.severities)} will be delivered here."]
    outcome, detail = _attempt(t, "test", title, lines, None)
    _log_rows(con, [("test", "", "", "", None, None, "", t.name, t.kind, uuid.uuid4().hex, now, outcome, detail)])
    res = TargetResult(t.name, t.kind)
    if outcome == "sent":
        res.note = "test message sent"
    else:
        res.failed_messages, res.error = 1, detail
        res.note = f"test message failed: {detail}"
    return res


# ---------------------------------------------------------------- the daily digest

@dataclass(frozen=True)
class Digest:
    day: str                       # YYYY-MM-DD, the digest's identity: one a day per target
    title: str
    lines: list[str]
    alerts: pd.DataFrame


def digest(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, spend_usd: float | None = None,
           now: datetime | None = None) -> Digest:
    """A summary of ``frame`` (the alerts of the digest's period): counts per severity and state, failed
    deliveries of the last 24 hours, the groups still open, and the period's spend when given."""
    now = now or alerts_mod.utc_now()
    frame = alerts_mod.annotate(frame, alerts_mod.alert_states(con), now)
    open_ = frame[frame["state"] == "open"]
    by_sev = open_["severity"].value_counts()
    counts = ", ".join(f"{int(by_sev.get(s, 0))} {s}" for s in alerts_mod.SEVERITIES)
    n_ack = int((frame["state"] == "acknowledged").sum())
    n_snz = int((frame["state"] == "snoozed").sum())
    failed = con.execute("SELECT count(DISTINCT message_id) FROM alert_deliveries WHERE outcome = 'failed' "
                         "AND attempted_at >= ?", [now - timedelta(days=1)]).fetchall()[0][0]
    title = f"daily digest {now:%Y-%m-%d}: {len(open_)} open alert{'s' if len(open_) != 1 else ''} ({counts})"
    lines = [f"{len(frame)} alerts in the period: {len(open_)} open ({counts}), {n_ack} acknowledged, "
             f"{n_snz} snoozed."]
    if spend_usd is not None:
        lines.append(f"Spend in the period: {usd(spend_usd)}.")
    if failed:
        lines.append(f"{failed} deliveries failed in the last 24 hours: see the delivery log on the Alerts page.")
    groups = group_alerts(open_)
    for g in groups[:10]:
        lines.append(f"{g.title}: {g.alerts['message'].iloc[0]}")
    if len(groups) > 10:
        lines.append(f"and {len(groups) - 10} more groups of open alerts")
    if not len(frame):
        lines.append("No alert in the period.")
    return Digest(f"{now:%Y-%m-%d}", title, lines, open_)


def deliver_digest(con: duckdb.DuckDBPyConnection, d: Digest, now: datetime | None = None,
                   dry_run: bool = False) -> list[TargetResult]:
    """Send the digest to every enabled target that takes it, once a day each; log each attempt."""
    access.require("deliver_alerts")
    now = now or alerts_mod.utc_now()
    key = f"digest:{d.day}"
    done = sent_pairs(con)
    results = []
    for t in targets(con):
        if not (t.enabled and t.digest):
            continue
        res = TargetResult(t.name, t.kind)
        if (key, t.name) in done:
            res.note = f"digest of {d.day} already sent"
        elif dry_run:
            res.previews.append(d.title)
        else:
            outcome, detail = _attempt(t, "digest", d.title, d.lines, d.alerts)
            _log_rows(con, [(key, "", "", "", None, None, "", t.name, t.kind, uuid.uuid4().hex, now, outcome, detail)])
            if outcome == "sent":
                res.note = f"digest of {d.day} sent"
            else:
                res.failed_messages, res.error = 1, detail
                res.note = f"digest of {d.day} failed: {detail}; tried again on the next run"
        results.append(res)
    return results
