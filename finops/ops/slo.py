"""Latency per model against the rule it is judged by: what the Overview shows instead of one P99 of the
whole fleet (a P99 over an 8B model, a 70B model and API models together describes none of them).

:func:`model_latency` gives each model's P99 of the latency its SLA is on (TTFT where the logs carry it,
see :func:`finops.ops.alerts.sla_metric`) and of the end-to-end latency, with the sentence of the rule;
:func:`hours_over_rule` counts, from the open alerts, the hours in which a model broke that rule.
"""
from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from finops.filters import Filters
from finops.latency import stats
from finops.ops import alerts, incidents

RULE = "p99_over_sla"


@dataclass(frozen=True)
class ModelLatency:
    table: pd.DataFrame    # model, requests, sla_requests / total_requests (those carrying it), sla_p99_ms, total_p99_ms
    metric: str            # the latency the SLA is on: ttft_ms or total_ms
    rule: str              # the rule in one sentence, with its numbers
    enabled: bool



WINDOW_WORDS = {"15min": "15 minutes", "hour": "hour", "day": "day"}
METRIC_NAMES = {"ttft_ms": "time to first token", "total_ms": "total latency"}


def model_latency(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> ModelLatency:
    """Per model: served requests, the requests carrying the SLA latency (its P99 is over these), P99 of the SLA
    latency and P99 of total latency (ms), busiest first."""
    f = f or Filters()
    metric = alerts.sla_metric(con, f)
    fields = tuple(dict.fromkeys((metric, "total_ms")))
    p = stats.percentiles(con, f, by=("model",), fields=fields)
    table = pd.DataFrame({"model": p["model"], "requests": p["requests"].astype("int64"),
                          "sla_requests": p[f"requests_with_{metric}"].astype("int64"),
                          "total_requests": p["requests_with_total_ms"].astype("int64"),
                          "sla_p99_ms": p[f"{metric}_p99"], "total_p99_ms": p["total_ms_p99"]})
    table = table[table["requests"] > 0].sort_values(["requests", "model"], ascending=[False, True],
                                                      kind="stable").reset_index(drop=True)
    rule = next(r for r in alerts.rules(con) if r.name == RULE)
    sla = alerts.sla_targets(con)
    targets = ", ".join(f"{tier} {ms / 1000:g} s" for tier, ms in sla.items() if tier != "(none)")
    window = WINDOW_WORDS.get(rule.window, rule.window)
    text = (f"Judged per SLA tier and {window}: an alert when, in one {window}, the P99 "
            f"{METRIC_NAMES.get(metric, metric)} is above {rule.threshold:g} × the tier's SLA ({targets}; "
            f"untiered {sla.get('(none)', 0) / 1000:g} s), over at least {rule.min_requests:,} requests.")
    return ModelLatency(table, metric, text, rule.enabled)


def hours_over_rule(open_alerts: pd.DataFrame) -> dict[str, float]:
    """Model -> hours covered by its open P99-over-SLA alerts (overlapping tenants' alerts counted once)."""
    if open_alerts is None or open_alerts.empty:
        return {}
    a = open_alerts[open_alerts["rule"] == RULE]
    return {str(model): incidents.union_span(zip(pd.to_datetime(grp["window_start"]), pd.to_datetime(grp["window_end"]),
                                                 strict=True)) / pd.Timedelta(hours=1)
            for model, grp in a.groupby("model")}


def overview_table(lat: ModelLatency, open_alerts: pd.DataFrame, judged: set[str] | None = None) -> pd.DataFrame:
    """The Overview's table: model, requests, sla_requests, total_requests, sla_p99_s, total_p99_s (seconds) and hours_over (the hours
    of open P99 alerts on the model; none where no hour of the model was judged: its logs carry no SLA latency,
    or no window had the rule's fewest requests, ``judged`` naming the models with one,
    :func:`finops.ops.alerts.sla_judged_models`; None: every model with a P99)."""
    over = hours_over_rule(open_alerts)
    t = lat.table
    return pd.DataFrame({"model": t["model"], "requests": t["requests"], "sla_requests": t["sla_requests"],
                         "total_requests": t["total_requests"],
                         "sla_p99_s": t["sla_p99_ms"] / 1000,
                         "total_p99_s": t["total_p99_ms"] / 1000,
                         "hours_over": [over.get(m, 0.0) if pd.notna(p99) and (judged is None or m in judged)
                                        else None for m, p99 in zip(t["model"], t["sla_p99_ms"], strict=True)]})
