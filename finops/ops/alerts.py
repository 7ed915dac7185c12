"""Alert rules as data, evaluated per model and tenant per window.

The rules and their default thresholds::

    error rate > 1 %                      per model x tenant x hour (rollups); fires when the 99.9 % lower
                                          confidence bound (Wilson) of the rate is above 1 %, so two
                                          failures among 60 requests are not an alert
    P99 latency > 1.5 x SLA               per model x tenant x tier x hour; SLA per tier, on TTFT where
                                          the logs carry it (interactive SLAs are on the first token),
                                          else on total_ms (``alerts.sla_metric`` overrides); hours and
                                          days from the SLA sketch written at load time (within 0.99 %)
    GPU utilisation > 90 % or < 20 %      per self-hosted model x hour, sustained (pricing.fleet_utilization)
    queue length growing                  per model x 15 min: Little's law L_q = lambda x W_q,
                                          rising over consecutive windows
    daily spend > 2 x its baseline        per tenant x day: the day's spend over the median of the
                                          7 days before it (a day without traffic counts $0; a day
                                          with fewer than 7 days of store before it is not judged)
    budget forecast > 1 x budget          per tenant x month: the month-end forecast of
                                          finops.spend.budgets over the tenant's budget
    unpriced traffic > 5 % of requests    per day: requests no price prices (counted at $0) over all
    KV cache >= 95 %, half a window       per model x vLLM replica x 15 min, from the scraped engine series
                                          (finops.ingest.engine): the usage at least half of the window's
                                          scrapes reached (both metric names), at or above the threshold
    engine queue saturated                per model x vLLM replica x 15 min: requests waiting (more than the
                                          threshold, 0) while the running batch is at its largest observed
                                          size, in at least half of the window's scrapes

The engine rules judge only where vLLM's ``/metrics`` was scraped (``python -m finops scrape vllm``); their
``min_requests`` is the fewest scrapes a window needs. Their alerts are per replica: ``tenant`` is
``(replica NAME)`` (:func:`replica_scope`), as the GPU rules' is ``(fleet)``.

Every alert has an identity that re-evaluation keeps: :func:`alert_id` of its rule, model, tenant and
window start (a run of adjacent windows keeps the start of its first). A person may acknowledge it
or snooze it until a time (:func:`acknowledge`, :func:`snooze`, :func:`reopen`); the ``alert_states``
table keeps who, when, until and a note, and :func:`annotate` gives every alert its state now.

Each rule is an :class:`AlertRule` in :data:`DEFAULT_RULES`; a store may override any field
of a rule (threshold, window, sustained, min_requests, enabled) and the SLA per tier, kept
as JSON in the ``settings`` table (:func:`save_rules`, :func:`save_sla_targets`).

A rule *fires* in a window; ``sustained`` consecutive firing windows make an alert, and
adjacent firing windows merge into one alert with the whole span and its worst value.
:func:`open_alerts` returns the alerts whose windows fall in the filtered period.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, time, timedelta

import duckdb
import numpy as np
import pandas as pd

from finops import access, sql, store
from finops.errors import InputError
from finops.filters import Filters
from finops.fmt import duration_ms, some_of, usd
from finops.ingest import engine
from finops.jsonutil import jsonable
from finops.latency import stats as latency
from finops.spend import pricing
from finops.spend import report as spend

ALL = "(all tenants)"
FLEET = "(fleet)"
ALL_MODELS = "(all models)"      # the model of a spend rule's alert: spend of every model together
REPLICA_SCOPE = "(replica {})"   # the tenant of an engine rule's alert: the vLLM replica it is about
BASELINE_DAYS = 7                # the trailing days whose median is a day's spend baseline
SEVERITIES = ("critical", "warning", "info")
WINDOWS = {"15min": timedelta(minutes=15), "hour": timedelta(hours=1), "day": timedelta(days=1)}
DEFAULT_SLA_P99_MS = {"premium": 2000.0, "standard": 5000.0, "batch": 30000.0, "(none)": 5000.0}
WILSON_Z = 3.09                # one-sided 99.9 %: hundreds of windows are judged, chance must rarely alert
ALERT_COLUMNS = ["rule", "model", "tenant", "window_start", "window_end", "value", "threshold", "severity",
                 "message", "alert_id", "state", "state_by", "state_at", "state_until", "state_note"]
STATES = ("open", "acknowledged", "snoozed")
STATE_COLUMNS = ("state", "state_by", "state_at", "state_until", "state_note")


@dataclass(frozen=True)
class AlertRule:
    name: str
    title: str
    threshold: float
    unit: str              # how value and threshold read: "%", "x SLA", "requests"
    severity: str
    window: str = "hour"
    sustained: int = 1     # consecutive firing windows before it alerts
    min_requests: int = 0  # windows with fewer requests are not judged
    enabled: bool = True


DEFAULT_RULES: tuple[AlertRule, ...] = (
    AlertRule("error_rate", "Error rate above 1 %", 0.01, "%", "critical", min_requests=50),
    AlertRule("p99_over_sla", "P99 latency above 1.5 x the tier's SLA", 1.5, "x SLA", "warning", min_requests=100),
    AlertRule("gpu_util_high", "GPU utilisation above 90 %, sustained", 0.90, "%", "warning", sustained=2),
    AlertRule("gpu_util_low", "GPU utilisation below 20 %, sustained", 0.20, "%", "info", sustained=6),
    AlertRule("queue_growing", "Queue length growing", 1.0, "requests", "warning", window="15min", sustained=3),
    AlertRule("spend_spike", f"Daily spend above 2 x its {BASELINE_DAYS}-day median", 2.0, "x baseline", "warning",
              window="day"),
    AlertRule("budget_forecast", "Tenant forecast to pass its monthly budget", 1.0, "x budget", "warning",
              window="day"),
    AlertRule("unpriced_share", "Unpriced traffic above 5 % of requests", 0.05, "%", "warning", window="day",
              min_requests=100),
    AlertRule("kv_cache_saturated", "KV cache nearly full for half a window or more", 0.95, "%", "warning",
              window="15min", min_requests=3),
    AlertRule("engine_queue_saturated", "Engine queue saturated: batch full and requests waiting for half a window "
              "or more", 0.0, "requests waiting", "warning", window="15min", min_requests=3),
)
ENGINE_RULES = ("kv_cache_saturated", "engine_queue_saturated")
#: the rules that judge each self-hosted fleet's hourly GPU utilisation
GPU_RULES = ("gpu_util_high", "gpu_util_low")
#: rules that read the shared fleet itself (its GPU hours, its engines' scrapes), not tenants' requests: a
#: tenant-scoped login (:attr:`Filters.scoped`) is not shown them
FLEET_RULES = (*GPU_RULES, *ENGINE_RULES)
#: each rule in plain words, for the screen (ids stay in CSV exports and the CLI's --json)
RULE_NAMES = {"error_rate": "error rate", "p99_over_sla": "P99 over the tier's SLA",
              "gpu_util_high": "GPU utilisation high", "gpu_util_low": "GPU utilisation low",
              "queue_growing": "queue growing", "spend_spike": "daily spend spike",
              "budget_forecast": "budget forecast passed", "unpriced_share": "unpriced traffic",
              "kv_cache_saturated": "KV cache full", "engine_queue_saturated": "engine queue saturated"}
#: the latencies an SLA may be on, in plain words
METRIC_NAMES = {"ttft_ms": "time to first token", "total_ms": "total latency"}
WINDOW_NAMES = {"15min": "15 minutes", "hour": "an hour", "day": "a day"}


def rule_name(rule: str) -> str:
    """A rule's plain name (``error_rate`` -> ``error rate``); an unknown id as it is."""
    return RULE_NAMES.get(str(rule), str(rule))


def judged_rules(con: duckdb.DuckDBPyConnection, filters: Filters | None = None,
                 leave_out: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(judged, turned_off), each rule in plain words: the rules :func:`open_alerts` evaluates with these
    arguments, and those it would evaluate but a person turned off. A sentence saying no alert fired names exactly
    these: the engine rules only where some vLLM scrape exists (without one they judge nothing), the fleet rules
    not for a tenant-scoped login, ``leave_out`` not at all."""
    f = filters or Filters()
    scraped = bool(engine.scraped_models(con))
    judged, off = [], []
    for rule in rules(con):
        if rule.name in leave_out or (f.scoped and rule.name in FLEET_RULES):
            continue
        if not rule.enabled:
            off.append(rule_name(rule.name))
        elif rule.name not in ENGINE_RULES or scraped:
            judged.append(rule_name(rule.name))
    return judged, off


def replica_scope(replica: str) -> str:
    """The ``tenant`` of an engine rule's alert on ``replica``: ``(replica gpu-a)``."""
    return REPLICA_SCOPE.format(replica)


def replica_of(tenant: str) -> str | None:
    """The replica an alert's ``tenant`` names (:func:`replica_scope`), else None."""
    head, tail = REPLICA_SCOPE.split("{}")
    t = str(tenant)
    return t[len(head):-len(tail)] if t.startswith(head) and t.endswith(tail) and len(t) > len(head + tail) else None


def scope_words(tenant: str) -> str:
    """Who an alert is about beyond its model, as words after it: ``""`` (every tenant, the fleet),
    `` on replica gpu-a`` or `` for tenant acme``."""
    if tenant in (ALL, FLEET):
        return ""
    replica = replica_of(tenant)
    return f" on replica {replica}" if replica is not None else f" for tenant {tenant}"
OVERRIDABLE = ("threshold", "window", "sustained", "min_requests", "enabled", "severity")

#: the title of a rule whose threshold is not the default's, from the threshold (a % rule's as a percentage,
#: a multiple as it is): an error rate rule set to 0.05 reads "Error rate above 5 %", never its default's "1 %"
RETITLED = {"error_rate": "Error rate above {pct}", "p99_over_sla": "P99 latency above {x} x the tier's SLA",
            "gpu_util_high": "GPU utilisation above {pct}, sustained",
            "gpu_util_low": "GPU utilisation below {pct}, sustained",
            "spend_spike": f"Daily spend above {{x}} x its {BASELINE_DAYS}-day median",
            "budget_forecast": "Tenant forecast to pass {x} x its monthly budget",
            "unpriced_share": "Unpriced traffic above {pct} of requests",
            "kv_cache_saturated": "KV cache over {pct} full for half a window or more"}


def rule_title(rule: AlertRule) -> str:
    """``rule``'s title naming its threshold: the default's title at the default threshold, else one that says
    the threshold in force.

    >>> rule_title(replace(DEFAULT_RULES[0], threshold=0.05)), rule_title(DEFAULT_RULES[0])
    ('Error rate above 5 %', 'Error rate above 1 %')
    """
    default = next((r for r in DEFAULT_RULES if r.name == rule.name), None)
    if default is None or rule.threshold == default.threshold or rule.name not in RETITLED:
        return rule.title
    t = float(rule.threshold)
    return RETITLED[rule.name].format(pct=f"{100 * t:.4g} %", x=f"{t:.4g}")


def rules(con: duckdb.DuckDBPyConnection) -> list[AlertRule]:
    """The default rules with the store's overrides applied (a changed threshold changes the title too)."""
    overrides = store.get_setting(con, "alerts.rules", {}) or {}
    out = []
    for r in DEFAULT_RULES:
        o = {k: v for k, v in (overrides.get(r.name) or {}).items() if k in OVERRIDABLE}
        r = replace(r, **o)
        out.append(replace(r, title=rule_title(r)))
    return out


#: the most a rule's threshold (a fraction, a multiple of the SLA or requests waiting), windows sustained and
#: fewest requests per window may be; an SLA's P99 target at most an hour
MAX_RULE_THRESHOLD = 1_000_000
MAX_SUSTAINED = 10_000
MAX_MIN_REQUESTS = 1_000_000_000
MAX_SLA_MS = 3_600_000.0


def _rule_number(rule: AlertRule, name: str, lowest: float, highest: float, whole: bool = True, hint: str = ""):
    """The rule's field ``name`` as a number from ``lowest`` to ``highest`` (a whole one when ``whole``)."""
    value = getattr(rule, name)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (lowest <= number <= highest and (not whole or number == int(number))):
        kind = "a whole number" if whole else "a number"
        raise InputError(f"{rule.name}: {name} must be {kind} from {lowest:,} to {highest:,}{hint}, not "
                         f"{'empty' if value is None or value != value else value}", field=name)
    return int(number) if whole else number


def save_rules(con: duckdb.DuckDBPyConnection, changed: list[AlertRule] | pd.DataFrame) -> None:
    """Keep the fields of ``changed`` that differ from the defaults (validated)."""
    access.require("edit_alert_rules")
    if isinstance(changed, pd.DataFrame):
        changed = [AlertRule(**{k: v for k, v in row.items() if k in AlertRule.__dataclass_fields__})
                   for row in changed.to_dict(orient="records")]
    defaults = {r.name: r for r in DEFAULT_RULES}
    stored = {}
    for r in changed:
        if r.name not in defaults:
            raise InputError(f"unknown alert rule {r.name}")
        if r.window not in WINDOWS:
            raise InputError(f"window of {r.name} must be one of {', '.join(WINDOWS)}", field="window")
        if r.severity not in SEVERITIES:
            raise InputError(f"severity of {r.name} must be one of {', '.join(SEVERITIES)}", field="severity")
        # a cell emptied in the page's editor is None or NaN: int() of it stopped the page with a traceback, and a
        # threshold of inf was stored as null
        # a % rule's threshold is a fraction: 5 (meant as 5 %) is 500 %, an error rate never reached and a GPU
        # utilisation always below it
        pct = defaults[r.name].unit == "%"
        r = replace(r, threshold=_rule_number(r, "threshold", 0, 1 if pct else MAX_RULE_THRESHOLD, whole=False,
                                              hint=" (a fraction: 0.05 is 5 %)" if pct else ""),
                    sustained=_rule_number(r, "sustained", 1, MAX_SUSTAINED), min_requests=_rule_number(
                        r, "min_requests", 0, MAX_MIN_REQUESTS))
        diff = {k: jsonable(getattr(r, k)) for k in OVERRIDABLE if getattr(r, k) != getattr(defaults[r.name], k)}
        if diff:
            stored[r.name] = diff
    store.set_setting(con, "alerts.rules", stored)


def sla_targets(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """P99 SLA in ms per SLA tier: the defaults with the store's values on top."""
    return {**DEFAULT_SLA_P99_MS, **(store.get_setting(con, "alerts.sla_p99_ms", {}) or {})}


def save_sla_targets(con: duckdb.DuckDBPyConnection, targets: dict[str, float]) -> None:
    access.require("edit_alert_rules")
    def number(v) -> float:
        try:
            return float(v)
        except (TypeError, ValueError):
            return math.nan
    bad = [t for t, v in targets.items() if not 0 < number(v) <= MAX_SLA_MS]
    if bad:
        raise InputError(f"SLA of tier {bad[0]} must be a number of ms above 0 and at most {MAX_SLA_MS:,.0f} (an "
                         "hour)", field="sla_p99_ms")
    store.set_setting(con, "alerts.sla_p99_ms", {str(k): float(v) for k, v in targets.items()})


def sla_metric(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> str:
    """The latency the SLA is on: the store's setting, else ttft_ms where the logs carry it (on a store of attached
    rollups, where their field counts show one), else total_ms."""
    chosen = saved_sla_metric(con)
    if chosen:
        return chosen
    f = f or Filters()
    if store.rollup_only(con):
        # no raw rows (attached rollups): the served requests' field counts written with them say it
        where, params = f.where(ts_col="hour")
        has_ttft = con.execute("SELECT EXISTS (SELECT 1 FROM coverage_hourly WHERE field = 'ttft_ms' AND n > 0 "
                               f"AND {where})", params).fetchall()[0][0]
        return "ttft_ms" if has_ttft else "total_ms"
    where, params = f.where()
    # EXISTS stops at the first row with a TTFT instead of counting every one
    has_ttft = con.execute(f"SELECT EXISTS (SELECT 1 FROM requests WHERE {where} AND ttft_ms IS NOT NULL)",
                           params).fetchall()[0][0]
    return "ttft_ms" if has_ttft else "total_ms"


def saved_sla_metric(con: duckdb.DuckDBPyConnection) -> str | None:
    """The latency the SLA is on as the store's setting says (``save_sla_metric``), or None where none is saved."""
    chosen = store.get_setting(con, "alerts.sla_metric")
    return sql.column(chosen, sql.SLA_COLUMNS, "SLA latency") if chosen in sql.SLA_COLUMNS else None


def save_sla_metric(con: duckdb.DuckDBPyConnection, metric: str) -> None:
    access.require("edit_alert_rules")
    if metric not in sql.SLA_COLUMNS:
        raise InputError(f"the SLA is on one of {', '.join(sql.SLA_COLUMNS)}")
    store.set_setting(con, "alerts.sla_metric", metric)


def wilson_lower(k, n, z: float = WILSON_Z):
    """One-sided lower confidence bound of a rate ``k / n`` (Wilson score interval), vectorised.

    >>> round(float(wilson_lower(8, 200)), 4)
    0.0142
    """
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    p = np.divide(k, n, out=np.zeros_like(k), where=n > 0)
    denom = 1 + z * z / np.where(n > 0, n, 1)
    centre = p + z * z / (2 * np.where(n > 0, n, 1))
    half = z * np.sqrt(p * (1 - p) / np.where(n > 0, n, 1) + z * z / (4 * np.where(n > 0, n, 1) ** 2))
    return np.where(n > 0, (centre - half) / denom, 0.0)


def configured(con: duckdb.DuckDBPyConnection) -> bool:
    """True when a person has saved alert rules or SLA targets for this store."""
    return store.get_setting(con, "alerts.rules") is not None or store.get_setting(con, "alerts.sla_p99_ms") is not None


# ---------------------------------------------------------------- evaluators: rule -> firing windows
# Each returns a DataFrame: model, tenant, window_start, value, threshold, detail (str)

def _error_windows(con, f: Filters, rule: AlertRule) -> tuple[pd.DataFrame, str, list[dict]]:
    """Requests and errors per model x tenant x window, the window column's name, and :func:`_no_status_rows` of
    the same reading. A window none of whose requests carries a status (a trace of tokens and times) is left
    out: its error rate is unknown, not 0 %."""
    grain = "hour" if rule.window in ("15min", "hour") else "day"
    rep = spend.report(con, f, by=[grain, "model", "tenant"], include_idle=False)
    return rep[rep["status_requests"] > 0].reset_index(drop=True), grain, _no_status_rows(rep, rule)


def _no_status_rows(rep: pd.DataFrame, rule: AlertRule) -> list[dict]:
    """A model none of whose requests in ``rep`` (the error rule's windows) carries a status (ok or error: the Azure
    and Mooncake traces have none) has no error rate to judge: its quiet is not health. One row naming such
    models, or none."""
    per_model = rep.groupby("model", as_index=False)[["requests", "status_requests"]].sum()
    blind = per_model[(per_model["requests"] > 0) & (per_model["status_requests"] == 0)].sort_values(
        ["requests", "model"], ascending=[False, True])
    if blind.empty:
        return []
    requests = int(blind["requests"].sum())
    return [{"rule": rule.name, "title": rule.title, "windows": 0, "requests": requests,
             "min_requests": max(rule.min_requests, 1),
             "why": f"the logs of {some_of(blind['model'])} carry no request status ({requests:,} "
                    "requests): there is nothing to judge", "reason": "no_field"}]


def _no_history_rows(con, f: Filters, rule: AlertRule, only_if_none_judged: bool = False) -> list[dict]:
    """The days of a tenant's traffic in the period that the spend spike rule cannot judge (:func:`_spend_spike`):
    fewer than :data:`BASELINE_DAYS` days of logs before them (a store of one week judges none of its days), or no
    spend in the days before (a median of $0 is no baseline: a tenant's first spend is no spike). One row (reason
    "no_history"), or none; ``only_if_none_judged``: only when no day of any tenant could be judged (the rule
    judged nothing at all)."""
    days, first_day = _spend_days(con, f)
    days = days[days["requests"] > 0]
    blind = days[~(days["baseline"] > 0)]
    if blind.empty or (only_if_none_judged and len(blind) < len(days)):
        return []
    early = blind[blind["baseline"].isna()]
    flat = blind[blind["baseline"].notna()]
    n, requests = len(blind), int(blind["requests"].sum())
    parts = []
    if len(early):
        judged_from = first_day + pd.Timedelta(days=BASELINE_DAYS)
        parts.append(f"{len(early):,} with fewer than {BASELINE_DAYS} days of logs before {'it' if len(early) == 1 else 'them'} "
                     f"(the logs start on {first_day:%Y-%m-%d}; the first day that can be judged is "
                     f"{judged_from:%Y-%m-%d})")
    if len(flat):
        parts.append(f"{len(flat):,} after {BASELINE_DAYS} days with no spend of {'its' if len(flat) == 1 else 'their'} "
                     "tenant (a median of $0 is no baseline)")
    why = (f"{n:,} day{'' if n == 1 else 's'} of a tenant's spend ({requests:,} request{'' if requests == 1 else 's'}) "
           f"could not be judged against the {BASELINE_DAYS} days before: " + "; ".join(parts))
    return [{"rule": rule.name, "title": rule.title, "windows": n, "requests": requests,
             "min_requests": max(rule.min_requests, 1), "why": why, "reason": "no_history"}]


def _pooled_small_windows(rep: pd.DataFrame, grain: str, rule: AlertRule) -> pd.DataFrame:
    """The windows with fewer than ``min_requests`` requests, pooled per model x tenant over the period:
    a fleet that fails all its 20 requests an hour is judged on all its hours together."""
    need = max(rule.min_requests, 1)
    small = rep[rep["requests"] < need]
    if small.empty:
        return pd.DataFrame(columns=["model", "tenant", "first", "last", "windows", "requests", "errors"])
    return (small.groupby(["model", "tenant"], as_index=False)
            .agg(first=(grain, "min"), last=(grain, "max"), windows=(grain, "count"), requests=("requests", "sum"),
                 errors=("errors", "sum")))


def _error_rate(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    rep, grain, _ = _error_windows(con, f, rule)
    if rep.empty:
        return _none()
    need = max(rule.min_requests, 1)
    step = WINDOWS["hour" if grain == "hour" else "day"]
    big = rep[rep["requests"] >= need]
    big = big.assign(lower=wilson_lower(big["errors"], big["requests"]))
    big = big[big["lower"] > rule.threshold]
    pooled = _pooled_small_windows(rep, grain, rule)
    pooled = pooled[pooled["requests"] >= need]
    pooled = pooled.assign(lower=wilson_lower(pooled["errors"], pooled["requests"]))
    pooled = pooled[pooled["lower"] > rule.threshold]
    fired = pd.DataFrame({"model": big["model"], "tenant": big["tenant"], "window_start": big[grain],
                          "window_end": big[grain] + step, "value": big["errors"] / big["requests"],
                          "threshold": rule.threshold, "windows": 1,
                          "detail": [f"{int(e):,} of {n:,} requests failed (99.9% lower bound {lo:.1%})"
                                     for e, n, lo in zip(big["errors"], big["requests"], big["lower"], strict=True)]})
    if pooled.empty:
        return fired
    more = pd.DataFrame({"model": pooled["model"], "tenant": pooled["tenant"], "window_start": pooled["first"],
                         "window_end": pooled["last"] + step, "value": pooled["errors"] / pooled["requests"],
                         "threshold": rule.threshold, "windows": pooled["windows"],
                         "detail": [f"{int(e):,} of {int(n):,} requests failed over {w} {grain}s of fewer than "
                                    f"{need} requests each, judged together (99.9% lower bound {lo:.1%})"
                                    for e, n, w, lo in zip(pooled["errors"], pooled["requests"], pooled["windows"],
                                                           pooled["lower"], strict=True)]})
    return pd.concat([fired, more], ignore_index=True) if len(fired) else more


def _on_quarter(f: Filters) -> bool:
    """Whether ``f``'s period starts and ends on a quarter hour (or is open): what the queue windows answer."""
    return all(t is None or not (t.minute % 15 or t.second or t.microsecond) for t in (f.since, f.until))


def reads_raw_rows(rule: AlertRule, f: Filters) -> bool:
    """Whether judging ``rule`` over ``f`` reads single requests rather than what the load writes: the P99 over
    15-minute windows, the queue rule over a period that is not on quarter hours, and every request rule over
    a period that is not on whole hours. The GPU and engine rules read GPU hours and scrapes, never requests."""
    if rule.name in FLEET_RULES:
        return False
    if rule.name == "queue_growing":
        return not _on_quarter(f)
    if rule.name == "p99_over_sla" and rule.window == "15min":
        return True
    return not store.whole_hours(f)


def _raw_rows_why(rule: AlertRule, f: Filters) -> str:
    """Why ``rule`` is not judged on a store with no raw rows, and what would judge it."""
    if rule.name == "p99_over_sla" and rule.window == "15min" and store.whole_hours(f):
        return ("its 15-minute P99 needs single requests, which this store does not hold (only the hourly rollups "
                "attached from the Spark job): set the rule's window to an hour or a day on the Incidents page")
    grain = "quarter hour" if rule.name == "queue_growing" else "hour"
    return (f"the period does not start and end on the {grain}, and this store holds only the hourly rollups "
            f"attached from the Spark job: pick whole days")


def unjudged(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """Windows a rule could not judge: too few requests in them (``min_requests``), and for the error
    rate too few even pooled over the period (``reason`` "too_few"); on a store of attached rollups with no raw
    rows, the rules these filters would judge over single requests (:func:`reads_raw_rows`; ``reason``
    "raw_rows", ``windows`` and ``requests`` 0). Columns: rule, title, windows, requests, min_requests, why,
    reason. A page shows these beside "no alert fired", so a quiet store is not called healthy; ``why`` says it
    in words.

    The engine rules (:data:`ENGINE_RULES`) judge the models some scrape of vLLM's ``/metrics`` names: their
    windows with served requests but fewer than ``min_requests`` scrapes (the scraper stopped) are listed; a
    store with no scrape at all lists none (its models are not served by a scraped vLLM)."""
    f = filters or Filters()
    out = []
    scraped = None
    no_raw_rows = store.rollup_only(con)
    for rule in rules(con):
        if rule.enabled and no_raw_rows and reads_raw_rows(rule, f):
            out.append({"rule": rule.name, "title": rule.title, "windows": 0, "requests": 0,
                        "min_requests": max(rule.min_requests, 1), "why": _raw_rows_why(rule, f),
                        "reason": "raw_rows"})
            continue
        if rule.enabled and rule.name in ENGINE_RULES:
            scraped = engine.scraped_models(con) if scraped is None else scraped
            row = _engine_unjudged(con, f, rule, scraped)
            if row:
                out.append(row)
            continue
        if rule.name in GPU_RULES:
            continue                # below, both from one reading of the fleets' hours
        if rule.enabled and rule.name == "spend_spike":
            out.extend(_no_history_rows(con, f, rule))
            continue
        if not rule.enabled or rule.name not in ("error_rate", "p99_over_sla"):
            continue
        need = max(rule.min_requests, 1)
        if rule.name == "error_rate":
            rep, grain, blind = _error_windows(con, f, rule)
            out.extend(blind)
            if rep.empty:
                continue
            pooled = _pooled_small_windows(rep, grain, rule)
            pooled = pooled[pooled["requests"] < need]
            windows, requests = int(pooled["windows"].sum()), int(pooled["requests"].sum())
        else:
            metric = sla_metric(con, f)
            out.extend(_no_field_rows(con, f, rule, metric))
            counts = sla_windows(con, f, rule.window, metric)["requests"]
            small = counts[counts < need]
            windows, requests = len(small), int(small.sum())
        if windows:
            out.append({"rule": rule.name, "title": rule.title, "windows": int(windows), "requests": int(requests),
                        "min_requests": need,
                        "why": f"{windows:,} window{'s' if windows != 1 else ''} with {requests:,} "
                               f"request{'s' if requests != 1 else ''} in all (a window needs {need:,})",
                        "reason": "too_few"})
    out.extend(_untimed_fleet_rows(con, f, [r for r in rules(con) if r.enabled and r.name in GPU_RULES]))
    return pd.DataFrame(out, columns=UNJUDGED_COLUMNS)


def not_carried(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """The :func:`unjudged` rows of reason "no_field" alone: the enabled P99 rule where some model's logs carry
    no value of the SLA latency at all (from the field coverage written at load time), the error rate where they
    carry no request status (from the rollups), and the GPU utilisation
    rules over a fleet's hours with no busy time (from the rollups), for a page that shows alerts that did fire,
    without unjudged's windows. Columns: UNJUDGED_COLUMNS."""
    f = filters or Filters()
    enabled = [rule for rule in rules(con) if rule.enabled]
    rows = [row for rule in enabled if rule.name == "p99_over_sla"
            for row in _no_field_rows(con, f, rule, sla_metric(con, f))]
    rows += [row for rule in enabled if rule.name == "error_rate" for row in _error_windows(con, f, rule)[2]]
    rows += [row for rule in enabled if rule.name == "spend_spike"
             for row in _no_history_rows(con, f, rule, only_if_none_judged=True)]
    rows += _untimed_fleet_rows(con, f, [rule for rule in enabled if rule.name in GPU_RULES])
    return pd.DataFrame(rows, columns=UNJUDGED_COLUMNS)


def _untimed_fleet_rows(con, f: Filters, gpu_rules: list[AlertRule]) -> list[dict]:
    """A self-hosted fleet's hours of traffic that carry no busy time (no service or latency time in the logs:
    a trace of arrivals and tokens) have no utilisation, so a GPU utilisation rule cannot judge them: its quiet
    there is not health. One row per rule of ``gpu_rules`` naming such models (the same words), or none."""
    if not gpu_rules:
        return []
    util = pricing.fleet_utilization(con, f.since, f.until)
    if f.models:
        util = util[util["model"].isin(f.models)]
    blind = util[util["utilization"].isna() & (util["served"] > 0) & util["hour"].notna()]
    if blind.empty:
        return []
    by = blind.groupby("model").agg(hours=("hour", "nunique"), requests=("served", "sum")) \
        .sort_values(["requests", "hours"], ascending=False)
    hours, requests = int(by["hours"].sum()), int(by["requests"].sum())
    why = (f"the logs of {some_of(by.index)} carry no service or latency time in {hours:,} hour"
           f"{'s' if hours != 1 else ''} of traffic ({requests:,} request{'s' if requests != 1 else ''}): "
           "the GPU utilisation there is unknown")
    return [{"rule": rule.name, "title": rule.title, "windows": hours, "requests": requests, "min_requests": 1,
             "why": why, "reason": "no_field"} for rule in gpu_rules]


def _no_field_rows(con, f: Filters, rule: AlertRule, metric: str) -> list[dict]:
    """A model whose logs carry no SLA latency at all (a trace of tokens and times only) has no window to judge:
    its quiet is not health. One row naming such models, or none."""
    blind = _without_field(con, f, metric)
    if blind.empty:
        return []
    names = some_of(blind["model"])
    requests = int(blind["requests"].sum())
    return [{"rule": rule.name, "title": rule.title, "windows": 0, "requests": requests,
             "min_requests": max(rule.min_requests, 1),
             "why": f"the logs of {names} carry no {METRIC_NAMES.get(metric, metric)} ({requests:,} requests): "
                    "there is nothing to judge", "reason": "no_field"}]


def _without_field(con, f: Filters, field: str) -> pd.DataFrame:
    """The models with served requests in the filters' hours none of which carries ``field`` (from the field
    coverage written at load time): model, requests."""
    where, params = f.where(ts_col="hour")
    return con.execute(f"""
SELECT model, sum(n) FILTER (WHERE field = 'ts') AS requests FROM coverage_hourly WHERE {where}
GROUP BY model HAVING requests > 0 AND coalesce(sum(n) FILTER (WHERE field = ?), 0) = 0
ORDER BY requests DESC, model""", [*params, field]).df()


UNJUDGED_COLUMNS = ["rule", "title", "windows", "requests", "min_requests", "why", "reason"]


def _engine_unjudged(con, f: Filters, rule: AlertRule, scraped: list[str]) -> dict | None:
    """The windows of scraped models that served requests but have fewer than ``min_requests`` scrapes."""
    models = [m for m in scraped if not f.models or m in f.models]
    if not models:
        return None
    need = max(rule.min_requests, 1)
    served = queue_length(con, replace(f, models=tuple(models)), rule.window)[["model", "window_start", "requests"]]
    counts = engine.scrapes_per_window(con, replace(f, models=tuple(models)), rule.window)
    both = served.merge(counts, on=["model", "window_start"], how="left")
    blind = both[both["scrapes"].fillna(0) < need]
    if blind.empty:
        return None
    windows, requests = len(blind), int(blind["requests"].sum())
    return {"rule": rule.name, "title": rule.title, "windows": windows, "requests": requests, "min_requests": need,
            "why": f"{windows:,} window{'s' if windows != 1 else ''} of {', '.join(sorted(set(blind['model'])))} "
                   f"served {requests:,} request{'s' if requests != 1 else ''} with fewer than {need:,} scrapes of "
                   "vLLM's metrics each (is `python -m finops scrape vllm` still running?)",
            "reason": "too_few"}


def sla_windows(con: duckdb.DuckDBPyConnection, f: Filters, window: str, metric: str) -> pd.DataFrame:
    """Per window x model x tenant x tier: the served requests carrying the SLA latency ``metric`` and its
    P99. Columns: window_start, model, tenant, tier ('(none)' for none), requests, p99; ``attrs['max_rel_error']``.

    Hour and day windows of whole hours come from the SLA sketch written at load time
    (``store.latency_sla_hourly``: within ``store.SKETCH_ALPHA``, 0.99 %, of the exact P99; exact where the
    window's slowest values share a bucket with one value); 15-minute windows and partial hours are exact,
    over the raw rows of ``store.raw_scope``."""
    metric = sql.column(metric, sql.SLA_COLUMNS, "SLA latency")
    cols = ["window_start", "model", "tenant", "tier", "requests", "p99"]
    if window in ("hour", "day") and store.whole_hours(f) and store.derived_ready(con, "latency_sla_hourly"):
        q = latency.sketch_quantiles(con, f, [window, "model", "tenant", "sla_tier"], [metric], (0.99,),
                                     table="latency_sla_hourly")
        out = q.rename(columns={window: "window_start", "sla_tier": "tier", "n": "requests"})[cols]
        out["requests"] = out["requests"].astype("int64")
        out.attrs["max_rel_error"] = store.SKETCH_ALPHA
        return out
    scoped = store.raw_scope(con, f).filters
    where, params = scoped.where()
    out = con.execute(f"""
SELECT {sql.time_bucket(window)} AS window_start, model, tenant, coalesce(sla_tier, '(none)') AS tier,
       count(*) AS requests, quantile_cont({metric}, 0.99) AS p99
FROM requests WHERE {where} AND {sql.SERVED} AND {metric} IS NOT NULL
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4""", params).df()
    out.attrs["max_rel_error"] = 0.0
    return out


def _judged_sla_windows(con, f: Filters, rule: AlertRule, sla: dict, metric: str) -> pd.DataFrame:
    """The :func:`sla_windows` the P99 rule judges: at least ``min_requests`` requests, a tier with an SLA;
    with ``sla_ms``."""
    rows = sla_windows(con, f, rule.window, metric)
    rows = rows[rows["requests"] >= max(rule.min_requests, 1)]
    rows = rows.assign(sla_ms=rows["tier"].map(lambda t: sla.get(t, sla.get("(none)"))))
    return rows[rows["sla_ms"].notna()]


def sla_judged_models(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> set[str]:
    """The models with at least one window the P99 rule judged in ``f``: elsewhere "0 hours over the rule" would
    be a verdict on windows too small to judge (or with no SLA latency at all)."""
    f = f or Filters()
    rule = next(r for r in rules(con) if r.name == "p99_over_sla")
    return set(_judged_sla_windows(con, f, rule, sla_targets(con), sla_metric(con, f))["model"])


def _p99_over_sla(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    metric = sla_metric(con, f)
    rows = _judged_sla_windows(con, f, rule, sla, metric)
    if rows.empty:
        return _none()
    rows = rows.copy()
    rows["ratio"] = rows["p99"] / rows["sla_ms"]
    hit = rows[rows["ratio"] > rule.threshold]
    return pd.DataFrame({"model": hit["model"], "tenant": hit["tenant"], "window_start": hit["window_start"],
                         "value": hit["ratio"], "threshold": rule.threshold,
                         "detail": [f"P99 {METRIC_NAMES.get(metric, metric)} {duration_ms(p)} against the {t} "
                                    f"tier's SLA of {duration_ms(s)}, over {n:,} requests"
                                    for p, t, s, n in zip(hit["p99"], hit["tier"], hit["sla_ms"], hit["requests"],
                                                          strict=True)]})


def _gpu(high: bool):
    def run(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
        util = pricing.fleet_utilization(con, f.since, f.until)
        if f.models:
            util = util[util["model"].isin(f.models)]
        util = util[util["utilization"].notna() & util["hour"].notna()]
        hit = util[util["utilization"] > rule.threshold] if high else util[util["utilization"] < rule.threshold]
        return pd.DataFrame({"model": hit["model"], "tenant": FLEET, "window_start": hit["hour"],
                             "value": hit["utilization"].astype(float), "threshold": rule.threshold,
                             # the places of the alert's own figure ("0.9% ... worst: busy 1%" read as two values)
                             "detail": [f"busy {u:.1%} of paid GPU capacity" for u in hit["utilization"]]})
    return run


def queue_length(con: duckdb.DuckDBPyConnection, f: Filters, window: str = "15min") -> pd.DataFrame:
    """Mean queue length per model and window by Little's law: ``L_q = lambda x W_q``
    (arrivals per second x mean queue_ms / 1000). Windows without traffic count as 0.
    Columns: model, window_start, requests, mean_queue_ms, queue_length.

    Read from the queue windows written at load time (``store.queue_15min``) when the period starts and
    ends on a quarter hour, else from the raw rows."""
    seconds = WINDOWS[window].total_seconds()
    if _on_quarter(f) and store.derived_ready(con, "queue_15min"):
        where, params = f.where(ts_col="window_start")
        df = con.execute(f"""
SELECT model, {sql.time_bucket(window, 'window_start')} AS window_start, CAST(sum(requests) AS BIGINT) AS requests,
       sum(queue_ms_sum) / sum(requests) AS mean_queue_ms
FROM queue_15min WHERE {where} GROUP BY 1, 2 ORDER BY 1, 2""", params).df()
    else:
        where, params = f.where()
        df = con.execute(f"""
SELECT model, {sql.time_bucket(window)} AS window_start, count(*) AS requests, avg(queue_ms) AS mean_queue_ms
FROM requests WHERE {where} AND {sql.SERVED} AND queue_ms IS NOT NULL
GROUP BY 1, 2 ORDER BY 1, 2""", params).df()
    df["queue_length"] = df["requests"] / seconds * df["mean_queue_ms"] / 1000.0
    return df


def _queue_growing(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    """Windows ending ``rule.sustained`` or more rises in a row of a model's mean queue length, at
    ``rule.threshold`` or more. A window with no request counts as a queue of 0, so a run breaks at a
    gap and the first window after one rises from 0; a model's first window rises from nothing.

    Vectorised over every model's windows at once: the work follows the windows that hold requests,
    not the span times the models (a ten-year span of a thousand models took minutes when each
    model's gaps were filled with zero windows and walked in Python)."""
    q = queue_length(con, f, rule.window)
    if q.empty:
        return _none()
    step = pd.Timedelta(WINDOWS[rule.window])
    q = q.sort_values(["model", "window_start"], kind="stable").reset_index(drop=True)
    length = q["queue_length"].astype(float)
    same_model = q["model"].eq(q["model"].shift())
    contiguous = same_model & (q["window_start"] - q["window_start"].shift()).eq(step)
    previous = length.shift().where(contiguous, 0.0)
    rising = (length > previous) & same_model
    run = rising.astype(int).groupby((~(rising & contiguous)).cumsum()).cumsum()
    hit = (run >= rule.sustained) & (length >= rule.threshold)
    fired = q[hit]
    return pd.DataFrame({
        "model": fired["model"].to_numpy(), "tenant": ALL, "window_start": fired["window_start"].to_numpy(),
        "value": length[hit].to_numpy(), "threshold": rule.threshold,
        "detail": [f"{int(r)} rises in a row to {v:,.1f} waiting on average"
                   for r, v in zip(run[hit], length[hit], strict=True)]},
        columns=["model", "tenant", "window_start", "value", "threshold", "detail"])


def _spend_days(con, f: Filters) -> tuple[pd.DataFrame, pd.Timestamp | None]:
    """Per tenant and day of ``f``'s period: cost, requests and the :data:`BASELINE_DAYS`-day median before it (a
    day without traffic counts $0; NaN where the store holds fewer days before it), and the store's first day.
    Columns: tenant, day, cost, requests, baseline."""
    cols = ["tenant", "day", "cost", "requests", "baseline"]
    since = f.since - timedelta(days=BASELINE_DAYS) if f.since is not None else None
    rep = spend.report(con, replace(f, since=since), by=["day", "tenant"], include_idle=False)
    rep = rep[rep["tenant"] != spend.IDLE_TENANT]
    first = store.time_span(con)[0]
    if rep.empty:
        return pd.DataFrame(columns=cols), None
    rep = rep.assign(day=pd.to_datetime(rep["day"]))
    first_day = pd.Timestamp(first).normalize() if first is not None else rep["day"].min()
    days = pd.date_range(max(first_day, rep["day"].min()), rep["day"].max(), freq="D")
    parts = []
    for tenant, g in rep.groupby("tenant"):
        cost = g.set_index("day")["cost_usd"].astype(float).reindex(days, fill_value=0.0)
        requests = g.set_index("day")["requests"].reindex(days, fill_value=0)
        baseline = cost.shift(1).rolling(BASELINE_DAYS, min_periods=BASELINE_DAYS).median()
        parts.append(pd.DataFrame({"tenant": tenant, "day": days, "cost": cost.to_numpy(),
                                   "requests": requests.to_numpy(), "baseline": baseline.to_numpy()}))
    out = pd.concat(parts, ignore_index=True)
    if f.since is not None:
        out = out[out["day"] >= pd.Timestamp(f.since).normalize()]
    return out.reset_index(drop=True), first_day


def _spend_spike(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    """A tenant's spend on a day over the median of its :data:`BASELINE_DAYS` days before (a day without
    traffic counts $0). Judged only on days with that many days of the store before them, and a
    baseline above $0; ``min_requests`` is the day's fewest requests."""
    days, _ = _spend_days(con, f)
    if days.empty:
        return _none()
    out = []
    for r in days.itertuples(index=False):
        c, b, n = r.cost, r.baseline, r.requests
        if not (b > 0) or n < rule.min_requests or c / b <= rule.threshold:
            continue
        out.append((ALL_MODELS, r.tenant, r.day, c / b, rule.threshold,
                    f"{usd(c)} spent on {r.day:%Y-%m-%d} against a {BASELINE_DAYS}-day median of {usd(b)} a day"))
    return pd.DataFrame(out, columns=["model", "tenant", "window_start", "value", "threshold", "detail"])


def _budget_forecast(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    """Tenants whose month-end forecast (:func:`finops.spend.budgets.status`) is above ``threshold`` x their
    budget, for each month of the period. The window is the month, from its start to the last observation."""
    from finops.spend import budgets

    out = []
    for m in budgets.months(con):
        start = datetime.combine(m, time())
        end = datetime.combine(budgets.next_month(m), time())
        if (f.since is not None and end <= f.since) or (f.until is not None and start >= f.until):
            continue
        rep = budgets.status(con, m, Filters(tenants=f.tenants))
        # the Budgets page's caveat of a forecast from under two complete days (one function: the same words)
        if rep.complete_days == 0:
            hours = rep.observed_hours
            span = "an hour" if round(hours) <= 1 else f"{round(hours):,} hours"
            caveat = f"; no complete day yet: the run rate of {span} of logs, {budgets.forecast_caveat(0)}"
        elif rep.complete_days == 1:
            caveat = f"; one complete day: its spend a day, {budgets.forecast_caveat(1)}"
        else:
            caveat = ""
        t = rep.table.dropna(subset=["budget_usd"])
        t = t[(t["budget_usd"] > 0) & (t["forecast_usd"] > rule.threshold * t["budget_usd"])]
        for r in t.itertuples(index=False):
            out.append({"model": ALL_MODELS, "tenant": r.tenant, "window_start": pd.Timestamp(start),
                        "window_end": pd.Timestamp(rep.as_of or end), "value": r.forecast_usd / r.budget_usd,
                        "threshold": rule.threshold,
                        "detail": f"forecast {usd(r.forecast_usd)} for {m:%B %Y} against a budget of "
                                  f"{usd(r.budget_usd)} ({usd(r.spent_usd)} spent so far{caveat})"})
    return pd.DataFrame(out, columns=["model", "tenant", "window_start", "window_end", "value", "threshold", "detail"])


def _unpriced_share(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    """The share of a window's requests that no price book row, alias or catalogue entry prices (counted at
    $0; requests whose source recorded a cost and cache hits are priced)."""
    src, params = spend.rollup_source(f)
    rows = con.execute(f"""
SELECT {sql.time_bucket(rule.window, 'r.hour')} AS window_start, sum(r.requests) AS requests,
       coalesce(sum(r.priced_requests) FILTER (WHERE m.price_source = ''), 0) AS unpriced,
       string_agg(DISTINCT r.model, ', ' ORDER BY r.model) FILTER (WHERE m.price_source = '' AND r.priced_requests > 0)
         AS models
FROM ({src}) r LEFT JOIN model_resolution m ON m.model = r.model AND m.provider = r.provider
GROUP BY 1 HAVING sum(r.requests) >= ? ORDER BY 1""", params + [max(rule.min_requests, 1)]).df()
    if rows.empty:
        return _none()
    rows["share"] = rows["unpriced"] / rows["requests"]
    hit = rows[rows["share"] > rule.threshold]
    return pd.DataFrame({"model": ALL_MODELS, "tenant": ALL, "window_start": hit["window_start"],
                         "value": hit["share"].astype(float), "threshold": rule.threshold,
                         "detail": [f"{int(u):,} of {int(n):,} requests unpriced, counted at $0.00 ({m})"
                                    for u, n, m in zip(hit["unpriced"], hit["requests"], hit["models"], strict=True)]})


def _none() -> pd.DataFrame:
    return pd.DataFrame(columns=["model", "tenant", "window_start", "value", "threshold", "detail"])


def _kv_cache_saturated(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    """Windows of a vLLM replica whose KV-cache usage was at or above ``threshold`` in at least half of their
    scrapes (:func:`finops.ingest.engine.kv_cache_windows`; ``min_requests`` scrapes at least). The value is
    the usage at least half of the scrapes reached."""
    w = engine.kv_cache_windows(con, f, rule.window, rule.threshold)
    w = w[(w["scrapes"] >= max(rule.min_requests, 1)) & (w["held"] >= rule.threshold)]
    return pd.DataFrame({
        "model": w["model"], "tenant": [replica_scope(r) for r in w["replica"]], "window_start": w["window_start"],
        "value": w["held"].astype(float), "threshold": rule.threshold,
        "detail": [f"the KV cache was {rule.threshold:.0%} full or more in {int(h):,} of {int(n):,} scrapes "
                   f"(fullest {p:.1%}); new requests wait for memory and running ones may be preempted"
                   for h, n, p in zip(w["hits"], w["scrapes"], w["peak"], strict=True)]},
        columns=["model", "tenant", "window_start", "value", "threshold", "detail"])


def _engine_queue_saturated(con, f: Filters, rule: AlertRule, sla: dict) -> pd.DataFrame:
    """Windows of a vLLM replica in which, in at least half of their scrapes, more than ``threshold`` requests
    waited while the running batch was at its largest observed size
    (:func:`finops.ingest.engine.queue_saturation_windows`; ``min_requests`` scrapes at least). The value is
    the requests waiting that at least half of the scrapes reached."""
    w = engine.queue_saturation_windows(con, f, rule.window, rule.threshold)
    w = w[(w["scrapes"] >= max(rule.min_requests, 1)) & (w["held"] > rule.threshold)]
    return pd.DataFrame({
        "model": w["model"], "tenant": [replica_scope(r) for r in w["replica"]], "window_start": w["window_start"],
        "value": w["held"].astype(float), "threshold": rule.threshold,
        "detail": [f"in {int(h):,} of {int(n):,} scrapes the batch was full ({b:,.0f} requests running, the most "
                   f"ever scraped from this replica) and requests waited (up to {p:,.0f})"
                   for h, n, b, p in zip(w["hits"], w["scrapes"], w["max_running"], w["peak"], strict=True)]},
        columns=["model", "tenant", "window_start", "value", "threshold", "detail"])


EVALUATORS: dict[str, Callable] = {
    "error_rate": _error_rate,
    "p99_over_sla": _p99_over_sla,
    "gpu_util_high": _gpu(True),
    "gpu_util_low": _gpu(False),
    "queue_growing": _queue_growing,
    "spend_spike": _spend_spike,
    "budget_forecast": _budget_forecast,
    "unpriced_share": _unpriced_share,
    "kv_cache_saturated": _kv_cache_saturated,
    "engine_queue_saturated": _engine_queue_saturated,
}


# ---------------------------------------------------------------- alerts

def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value:.1%}"
    if unit.startswith("x "):
        return f"{value:.2f} {unit}"
    return f"{value:,.1f} {unit}"


def _episodes(rule: AlertRule, fired: pd.DataFrame) -> list[dict]:
    """Merge adjacent firing windows per model and tenant; keep runs of at least ``sustained``
    windows (queue_growing already counts its run)."""
    step = WINDOWS["hour"] if rule.name.startswith("gpu_") else WINDOWS[rule.window]
    need = 1 if rule.name == "queue_growing" else rule.sustained
    worst = max if rule.name != "gpu_util_low" else min
    out = []
    for (model, tenant), g in fired.sort_values("window_start").groupby(["model", "tenant"], sort=True):
        starts = pd.to_datetime(g["window_start"]).tolist()
        # an evaluator may give each row its own end (a pooled span); else a window is one step long
        ends = (pd.to_datetime(g["window_end"]).tolist() if "window_end" in g else [s + step for s in starts])
        values, details = g["value"].tolist(), g["detail"].tolist()
        # the windows each row stands for: one, or a pooled row's count (48 hours judged together were "1 window")
        counts = [int(c) for c in g["windows"]] if "windows" in g else [1] * len(starts)
        run = [0]
        for i in range(1, len(starts) + 1):
            if i < len(starts) and starts[i] == ends[i - 1]:
                run.append(i)
                continue
            if len(run) >= need:
                # the run's own worst window: values.index() found the first equal value of any run (two days
                # of 100 % unpriced traffic named the first day's model in the second day's alert)
                k = worst(run, key=lambda j: values[j])
                start, end = starts[run[0]], ends[run[-1]]
                n = sum(counts[j] for j in run)
                span = f"{n:,} window{'s' if n > 1 else ''} of " + WINDOW_NAMES.get(
                    "hour" if rule.name.startswith("gpu_") else rule.window, rule.window)
                if rule.name == "budget_forecast":
                    span = "the month so far"
                # a money rule's alert is of all models: of their spend, or (unpriced share) of their traffic
                who = (model if model != ALL_MODELS else "all traffic" if rule.name == "unpriced_share"
                       else "spend") + scope_words(tenant)
                out.append({"rule": rule.name, "model": model, "tenant": tenant, "window_start": start,
                            "window_end": end, "value": values[k], "threshold": rule.threshold,
                            "severity": rule.severity,
                            "message": f"{rule.title}: {who}, {_fmt(values[k], rule.unit)} "
                                       f"(threshold {_fmt(rule.threshold, rule.unit)}) from {start:%Y-%m-%d %H:%M} "
                                       f"to {end:%Y-%m-%d %H:%M} UTC, {span}; worst: {details[k]}."})
            run = [i]
    return out


def open_alerts(con: duckdb.DuckDBPyConnection, filters: Filters | None = None,
                now: datetime | None = None, leave_out: tuple[str, ...] = ()) -> pd.DataFrame:
    """Alerts of every enabled rule in the filtered period, most severe and most recent first.

    Columns: rule, model, tenant, window_start, window_end, value, threshold, severity, message, alert_id
    (:func:`alert_id`) and the state at ``now`` (default: the current time; see :func:`annotate`).
    ``tenant`` is ``(all tenants)`` for per-model rules (queue) and ``(fleet)`` for GPU rules; ``model`` is
    ``(all models)`` for the spend rules. Filters scoped to a login's tenants leave out :data:`FLEET_RULES`.
    ``leave_out``: rules a caller does not show, not evaluated (the others' rows are the same as without it:
    each rule is judged on its own); the Overview leaves out the money rules its incidents never read.
    """
    f = filters or Filters()
    sla = sla_targets(con)
    found: list[dict] = []
    no_raw_rows = store.rollup_only(con)
    for rule in rules(con):
        if not rule.enabled or (f.scoped and rule.name in FLEET_RULES) or rule.name in leave_out:
            continue
        if no_raw_rows and reads_raw_rows(rule, f):
            continue        # attached rollups, no request to judge it on: listed by unjudged, never "fine"
        fired = EVALUATORS[rule.name](con, f, rule, sla)
        if len(fired):
            found.extend(_episodes(rule, fired))
    out = pd.DataFrame(found, columns=ALERT_COLUMNS[:9])
    out["alert_id"] = [alert_id(r, m, t, w) for r, m, t, w in
                       zip(out["rule"], out["model"], out["tenant"], out["window_start"], strict=True)]
    if not out.empty:
        out["_sev"] = out["severity"].map({s: i for i, s in enumerate(SEVERITIES)})
        out = out.sort_values(["_sev", "window_end", "rule", "model"], ascending=[True, False, True, True])
        out = out.drop(columns="_sev").reset_index(drop=True)
    return annotate(out, alert_states(con), now)


def rules_frame(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The rules in force, as a table for a page's editor."""
    return pd.DataFrame([asdict(r) for r in rules(con)])


# ---------------------------------------------------------------- identity, acknowledge and snooze

def alert_id(rule: str, model: str, tenant: str, window_start) -> str:
    """An alert's identity, kept when the rules are evaluated again: its rule, model, tenant and window start.

    >>> alert_id("error_rate", "gpt-4o", "acme", datetime(2026, 4, 6))
    '331d9beb4e3dc2fb'
    """
    start = pd.Timestamp(window_start).strftime("%Y-%m-%dT%H:%M:%S")
    return hashlib.sha256("\x1f".join((str(rule), str(model), str(tenant), start)).encode()).hexdigest()[:16]


def utc_now() -> datetime:
    """The current time, naive UTC (as the store keeps times)."""
    return datetime.now(UTC).replace(tzinfo=None)


def alert_states(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The stored state of every alert a person acknowledged or snoozed: alert_id, rule, model, tenant,
    window_start, state (acknowledged / snoozed), actor, acted_at, until (snoozed until), note."""
    try:
        return con.execute("SELECT * FROM alert_states ORDER BY acted_at DESC").df()
    except duckdb.CatalogException:            # a store made before the table, opened read-only
        return pd.DataFrame(columns=["alert_id", "rule", "model", "tenant", "window_start", "window_end", "state",
                                     "actor", "acted_at", "until", "note"])


def same_alert(frame: pd.DataFrame, rows: pd.DataFrame, latest: str) -> pd.DataFrame:
    """For each alert of ``frame``, the row of ``rows`` (stored states or deliveries: alert_id, rule, model,
    tenant, window_start, window_end) that is the same alert, the latest by column ``latest``; indexed as
    ``frame``, alerts without one left out. The same alert is the same identity, or the same rule, model and
    tenant with a window that overlaps or touches: an episode that began before the period judged is seen
    with a later start, and stays the alert a person acknowledged or a target was sent."""
    keys = ["alert_id", "rule", "model", "tenant", "window_start", "window_end"]
    if frame.empty or rows.empty:
        return rows.iloc[0:0]
    f = frame[keys].assign(_i=frame.index)
    r = rows.rename(columns={k: f"{k}_r" for k in ("alert_id", "window_start", "window_end")})
    m = f.merge(r, on=["rule", "model", "tenant"])
    ws, we = pd.to_datetime(m["window_start"]), pd.to_datetime(m["window_end"])
    rs, re_ = pd.to_datetime(m["window_start_r"]), pd.to_datetime(m["window_end_r"])
    same = (m["alert_id"] == m["alert_id_r"]) | ((ws <= re_) & (rs <= we))
    m = m[same.fillna(False).astype(bool)].sort_values(latest, ascending=False, kind="stable")
    return m.drop_duplicates("_i").set_index("_i")


def annotate(frame: pd.DataFrame, states: pd.DataFrame, now: datetime | None = None) -> pd.DataFrame:
    """``frame`` (alerts with ``alert_id``) with its state at ``now``: ``acknowledged``, ``snoozed`` (until a
    time still ahead) or ``open`` (also once a snooze has run out), and who set it, when, until and the note.
    A stored state applies to the same alert (:func:`same_alert`)."""
    now = now or utc_now()
    out = frame.drop(columns=[c for c in STATE_COLUMNS if c in frame.columns])
    match = same_alert(out, states, "acted_at")
    rows = []
    for i in out.index:
        r = match.loc[i] if i in match.index else None
        live = r is not None and (r["state"] == "acknowledged"
                                  or (r["state"] == "snoozed" and pd.Timestamp(r["until"]) > now))
        rows.append((r["state"], r["actor"], r["acted_at"], r["until"], r["note"]) if live
                    else ("open", "", pd.NaT, pd.NaT, ""))
    cols = pd.DataFrame(rows, columns=list(STATE_COLUMNS), index=out.index)
    cols["state_at"] = pd.to_datetime(cols["state_at"])
    cols["state_until"] = pd.to_datetime(cols["state_until"])
    return pd.concat([out, cols], axis=1)


def state_label(state: str, until) -> str:
    """How a state reads beside an alert: ``snoozed until 2026-11-23 15:00 UTC``, ``acknowledged``, ``open``."""
    if state == "snoozed" and not pd.isna(until):
        return f"snoozed until {pd.Timestamp(until):%Y-%m-%d %H:%M} UTC"
    return state


def _person(actor: str, note: str) -> tuple[str, str]:
    who = " ".join(str(actor or "").split())
    if not who:
        raise InputError("say who you are (a name or an e-mail address)")
    if len(who) > 100:
        raise InputError("a name of at most 100 characters")
    text = " ".join(str(note or "").split())
    if len(text) > 500:
        raise InputError("a note of at most 500 characters")
    return who, text


def _set_state(con, alerts_frame: pd.DataFrame, state: str | None, actor: str, note: str, until, now) -> int:
    access.require("ack_alerts")
    who, text = _person(actor, note)
    now = now or utc_now()
    rows = [(r.alert_id, r.rule, r.model, r.tenant, pd.Timestamp(r.window_start).to_pydatetime(),
             pd.Timestamp(r.window_end).to_pydatetime(), state, who, now, until, text)
            for r in alerts_frame.itertuples(index=False)]
    if not rows:
        raise InputError("choose at least one alert")
    # the states this alert had, under its identity or seen through another period (same_alert)
    older = same_alert(alerts_frame, alert_states(con), "acted_at")
    gone = {r[0] for r in rows} | set(older["alert_id_r"]) if len(older) else {r[0] for r in rows}
    with store.transaction(con):
        con.executemany("DELETE FROM alert_states WHERE alert_id = ?", [(a,) for a in sorted(gone)])
        if state is not None:
            con.executemany("INSERT INTO alert_states VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        store.bump_data_version(con)
    return len(rows)


def acknowledge(con: duckdb.DuckDBPyConnection, alerts_frame: pd.DataFrame, by: str, note: str = "",
                now: datetime | None = None) -> int:
    """Acknowledge the alerts of ``alerts_frame`` (rows of :func:`open_alerts`): they are not delivered again.
    Returns how many."""
    return _set_state(con, alerts_frame, "acknowledged", by, note, None, now)


SNOOZES = {"1 hour": timedelta(hours=1), "1 day": timedelta(days=1)}


def snooze(con: duckdb.DuckDBPyConnection, alerts_frame: pd.DataFrame, until: datetime, by: str, note: str = "",
           now: datetime | None = None) -> int:
    """Snooze the alerts until ``until`` (naive UTC, after ``now``): not delivered before then. Returns how many."""
    now = now or utc_now()
    if until is None or pd.isna(until) or pd.Timestamp(until) <= pd.Timestamp(now):
        raise InputError("a snooze ends in the future")
    return _set_state(con, alerts_frame, "snoozed", by, note, pd.Timestamp(until).to_pydatetime(), now)


def reopen(con: duckdb.DuckDBPyConnection, alerts_frame: pd.DataFrame, by: str, now: datetime | None = None) -> int:
    """Clear the acknowledgement or snooze of the alerts. Returns how many."""
    return _set_state(con, alerts_frame, None, by, "", None, now)
