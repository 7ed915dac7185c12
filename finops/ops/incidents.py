"""Incidents: the diagnosis's findings and the alerts of one model whose windows overlap or touch, as one story.

An incident is what an SRE on call reads first::

    title      its root cause in plain words, computed from the evidence (the first cause of
               :data:`CAUSES` that the data shows): "2 of 3 llama-3.1-70b replicas served nothing
               from 13:00 to 15:00", "the slow model saturated: 4 of 6 requests waited 2.70–5.41 s"
    evidence   a few sentences of numbers: the cause, who was hit, the alerts that fired
    action     one thing to do
    timeline   its alerts and findings in time order
    requests   the requests it hurt: failed, over their tier's SLA on the SLA latency (the store's
               setting, else the time to first token where the incident's own requests carry it, else
               total_ms: :data:`OVER_SLA_SQL`), or (a decode finding) over the decode time their output
               predicts by the finding's own cut

Grouping: per model, the alerts (:func:`finops.ops.alerts.open_alerts`) and findings
(:func:`finops.latency.diagnose.diagnose`) sorted by start; one whose window starts at or before the
running end of the current incident joins it (overlap or touch), so the incident spans from its first
start to its last end. Alerts about money (:data:`COST_RULES`: GPU under-use, spend, budgets) are not service: they stay on
the alerts list and never make or stretch an incident.

Severity is scaled by the traffic and the SLA time hit, not by the worst rule::

    impact       = the highest, over the span's hours, of the Wilson 99.9 % lower bound of
                   affected / requests of the model in that hour
    sla_minutes  = minutes covered by the SLA and error-rate alerts of the incident (their union)
    critical     impact >= 10 % and sla_minutes >= 30
    warning      impact >= 1 %, or any SLA minute
    info         otherwise, and an incident that is only decode slower than usual (no alert,
                 no replica out): a batch growing at a peak does that within every SLA

so 6 of 29 requests (lower bound 6.5 %) is a warning, never critical.

Fleet facts (replicas that served nothing, the load behind capacity advice) are read without the
tenant and tier filters: a replica and its queue are shared by every tenant. A login's tenant scope
is kept (:meth:`finops.filters.Filters.fleet`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import duckdb
import numpy as np
import pandas as pd

from finops import sql, store
from finops.filters import Filters
from finops.fmt import duration_ms
from finops.latency import diagnose as diag
from finops.latency.diagnose import Finding
from finops.ops import alerts

SEVERITIES = ("critical", "warning", "info")
#: alerts about money, not service (GPU under-use, spend, budgets, unpriced traffic): never an incident
COST_RULES = ("gpu_util_low", "spend_spike", "budget_forecast", "unpriced_share")
SLA_RULES = ("p99_over_sla", "error_rate")
CRITICAL_IMPACT, CRITICAL_SLA_MIN = 0.10, 30
WARNING_IMPACT = 0.01
OUTAGE_MIN_GAP = timedelta(minutes=10)  # a replica idle at least this long ...
OUTAGE_EXPECTED = 20.0                  # ... while its usual share of the model's starts would have been this many
OUTAGE_CONTEXT = timedelta(hours=3)     # how far around the incident a replica's gaps are looked for
#: how far either side of a gap a replica's usual share is read: a replica's share of its model's traffic moves
#: with the hour (the sample's llama-3.1-8b-r3 takes 2 % of the starts at the evening peak and half of them at
#: dawn), so a share read over the incident's hours would expect of a gap what the replica does at other times
OUTAGE_NEAR = timedelta(hours=1)
REQUEST_LIST_MAX = 500                  # the affected requests listed (all are counted)
LINKED_MAX = 50                         # the worst of them a link opens segment by segment
LAYER_WORDS = {"routing": "cache stopped hitting", "queue": "queue saturated", "prefill": "slow prefill",
               "decode": "slow decode", "tail": "P99 spike"}
RULE_WORDS = alerts.RULE_NAMES         # every rule in plain words


@dataclass(frozen=True)
class Outage:
    replica: str
    idle_from: datetime        # the last start of service before the gap (or the context's start)
    idle_to: datetime          # the first start after it (or the context's end)
    expected: float            # starts its usual share of the model's traffic would have had in the gap


@dataclass
class Incident:
    key: str                   # "model|start|end" (ISO minutes): the incident's address in a link
    model: str
    start: datetime
    end: datetime
    severity: str
    title: str
    cause: str                 # the name of the cause of CAUSES that titled it
    evidence: list[str]
    action: str
    timeline: pd.DataFrame     # at, until, kind (alert / diagnosis), severity, what
    requests: int              # requests of the model in the span (the filters' tenants and tiers)
    affected: int
    failed: int
    over_sla: int
    impact: float              # lower bound of affected / requests in the worst hour
    sla_minutes: int
    fleet_share: float | None  # the model's share of all requests in the span
    tenants: list[str]
    findings: list[Finding] = field(default_factory=list)
    alerts: pd.DataFrame = field(default_factory=pd.DataFrame)
    outages: list[Outage] = field(default_factory=list)
    hit: pd.DataFrame = field(default_factory=pd.DataFrame)   # the affected requests, worst first (a cap of them)
    detailed: bool = True      # False: built without evidence, timeline, listed requests (incidents(detailed=...))

    @property
    def minutes(self) -> int:
        return int((self.end - self.start).total_seconds() // 60)

    def as_dict(self) -> dict:
        return {"key": self.key, "model": self.model, "start": self.start, "end": self.end,
                "severity": self.severity, "title": self.title, "cause": self.cause, "evidence": self.evidence,
                "action": self.action, "requests": self.requests, "affected": self.affected, "failed": self.failed,
                "over_sla": self.over_sla, "impact": self.impact, "sla_minutes": self.sla_minutes,
                "fleet_share": self.fleet_share, "tenants": self.tenants,
                "timeline": self.timeline.to_dict(orient="records"),
                "outages": [o.__dict__ for o in self.outages]}


# ---------------------------------------------------------------- words

def hhmm(start: datetime, end: datetime, seconds: bool = False) -> str:
    """``from 13:00 to 15:00`` (``seconds``: 12:59:48; dates where the span crosses midnight)."""
    unit, clock = ("s", "%H:%M:%S") if seconds else ("min", "%H:%M")
    start, end = pd.Timestamp(start).round(unit), pd.Timestamp(end).round(unit)
    if start.date() == (end - pd.Timedelta(microseconds=1)).date():
        return f"from {start.strftime(clock)} to {end.strftime(clock)}"
    return f"from {start.strftime('%Y-%m-%d ' + clock)} to {end.strftime('%Y-%m-%d ' + clock)}"


def hit_suffix(title: str, affected: int, requests: int) -> str:
    """`` · 48 of 1,440 requests hit`` after an incident's title, or nothing where the title already counts them
    (a failure's: "failed 48 of 1,440 requests").

    >>> hit_suffix("slow queue", 3, 40), hit_suffix("m failed 3 of 40 requests", 3, 40)
    (' · 3 of 40 requests hit', '')
    """
    hit = f"{affected:,} of {requests:,}"
    return "" if hit in title else f" · {hit} requests hit"


def span_text(start: datetime, end: datetime) -> str:
    start, end = pd.Timestamp(start), pd.Timestamp(end)
    if start.date() == (end - pd.Timedelta(microseconds=1)).date():
        return f"{start:%Y-%m-%d %H:%M}–{end:%H:%M} UTC"
    return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"


def minutes_text(minutes: int) -> str:
    h, m = divmod(int(minutes), 60)
    if not h:
        return f"{m} min"
    return f"{h} h" if not m else f"{h} h {m} min"


def _wait(v, cap) -> str:
    return diag._capped(v, cap)


def key_of(model: str, start, end) -> str:
    return f"{model}|{pd.Timestamp(start):%Y-%m-%dT%H:%M}|{pd.Timestamp(end):%Y-%m-%dT%H:%M}"


def parse_key(key: str) -> tuple[str, datetime, datetime] | None:
    """``(model, start, end)`` of an incident key (from a link), or None when it does not read as one."""
    parts = str(key).rsplit("|", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        start, end = (datetime.strptime(p, "%Y-%m-%dT%H:%M") for p in parts[1:])
    except ValueError:
        return None
    return (parts[0], start, end) if start < end else None


def _alert_line(row, rule_units: dict[str, str]) -> str:
    """One alert as a timeline line: its rule in words, who, and its worst value."""
    unit = rule_units.get(row.rule, "")
    replica = alerts.replica_of(row.tenant)
    who = ("" if row.tenant in (alerts.ALL, alerts.FLEET) else f" on replica {replica}" if replica is not None
           else f" for {row.tenant}")
    if unit == "%":
        value = f"{row.value:.1%}"
        worst = f"{value} of requests failed at worst" if row.rule == "error_rate" else f"{value} at worst"
    elif unit == "x SLA":
        worst = f"P99 {row.value:,.1f}× the tier's SLA at worst"
    else:
        worst = f"{row.value:,.1f} requests waiting at worst"
    words = RULE_WORDS.get(row.rule, row.rule)
    return f"{words[:1].upper()}{words[1:]}{who}: {worst}"


def _finding_line(fd: Finding) -> str:
    m = fd.metrics
    if fd.layer == "queue":
        cap = m.get("queue_timeout_cap_ms")
        q95 = m.get("queue_p95_ms")
        text = f"Queue saturated on {fd.model}: {m.get('waited_share', 0):.0%} of {m.get('requests', 0):,} requests waited"
        if q95 is not None and not pd.isna(q95):
            text += f", queue P95 {_wait(q95, cap)}"
        return text
    if fd.layer == "decode":
        return (f"Slow decode on {fd.model}: {m.get('tail_requests', 0):,} of {m.get('requests', 0):,} requests took "
                f"{duration_ms(m.get('excess_ms'))} extra")
    if fd.layer == "routing":
        return (f"Semantic cache on {fd.model} hit {m.get('cache_hit_rate', 0):.1%} "
                f"(usually {m.get('typical_cache_hit_rate', 0):.1%})")
    if fd.layer == "tail":
        return f"P99 spike on {fd.model}: {duration_ms(m.get('total_p99_ms'))} (median {duration_ms(m.get('total_p50_ms'))})"
    return f"Slow prefill on {fd.model}: {m.get('slow_prefill_requests', m.get('slow_requests', 0)):,} requests"


# ---------------------------------------------------------------- fleet facts

def replica_outages(con: duckdb.DuckDBPyConnection, f: Filters, model: str, start, end) -> list[Outage]:
    """Replicas of ``model`` that began serving nothing for a stretch overlapping [start, end) while their
    usual share of the model's starts would have given them at least :data:`OUTAGE_EXPECTED` (a Poisson
    chance of e^-20 of a quiet replica looking so), for at least :data:`OUTAGE_MIN_GAP`.

    Read on the whole fleet (no tenant or tier filter), by when service began (arrival + route + queue): the
    gaps within :data:`OUTAGE_CONTEXT` around the span, the share within :data:`OUTAGE_NEAR` either side of the
    gap (the replica's starts there over the model's), so that a gap is judged by the hours around it whatever
    the span or period it is read in. One span of :func:`outages_of_spans`."""
    return outages_of_spans(con, f, [(model, start, end)])[0]


def _per_span_sql(branch_sql: str, spans: int) -> str:
    """``branch_sql`` (a SELECT whose ``?`` are one span's values) once per span, UNION ALL: one query, in which
    each branch scans only its span's rows (DuckDB skips the rest by their ts bounds; one join of every row
    against a table of spans scans them all, measured 1.4x the CPU of a query per span for a few spans on a
    large store: over :data:`PER_SPAN_UNION_MAX` spans the planning costs more and the join is used). Its
    parameters are each span's values in turn (:func:`_per_span_params`)."""
    return " UNION ALL ".join(branch_sql for _ in range(spans))


def _per_span_params(per_span: list[list]) -> list:
    return [v for values in per_span for v in values]


#: above this many spans, one join of the rows against a table of the spans: a UNION ALL branch costs DuckDB about
#: 3 ms to plan, so 88 spans (a week judged per 15 minutes) spent more planning than scanning (0.16 s against
#: 0.09 s for the join); few spans over a long period scan less one branch each
PER_SPAN_UNION_MAX = 16

#: the spans as a table ``s`` (bound: the positions, models, starts and ends as lists), for the join
SPANS_SQL = ("SELECT unnest(?::BIGINT[]) AS s_i, unnest(?::VARCHAR[]) AS s_model, unnest(?::TIMESTAMP[]) AS s_from, "
             "unnest(?::TIMESTAMP[]) AS s_to")


def _as_table(spans: list[tuple]) -> list:
    """SPANS_SQL's parameters for ``(model, start, end)`` spans, then the envelope (earliest start, latest end)."""
    starts = [pd.Timestamp(a).to_pydatetime() for _, a, _ in spans]
    ends = [pd.Timestamp(b).to_pydatetime() for _, _, b in spans]
    return [list(range(len(spans))), [m for m, _, _ in spans], starts, ends], [min(starts), max(ends)]


def outages_of_spans(con: duckdb.DuckDBPyConnection, f: Filters, spans: list[tuple]) -> list[list[Outage]]:
    """:func:`replica_outages` of each ``(model, start, end)`` of ``spans``, read in one query."""
    if not spans:
        return []
    where, params = diag.fleet_filters(f).where()
    around = [(m, pd.Timestamp(a) - OUTAGE_CONTEXT, pd.Timestamp(b) + OUTAGE_CONTEXT) for m, a, b in spans]
    start_ms = "epoch_us(ts) / 1e3 + coalesce(route_ms, 0) + coalesce(queue_ms, 0) AS start_ms"
    if len(spans) > PER_SPAN_UNION_MAX:
        table, envelope = _as_table(around)
        rows_sql = (f"SELECT s_i AS i, replica, {start_ms} FROM requests JOIN ({SPANS_SQL}) s ON model = s_model "
                    f"AND ts >= s_from AND ts < s_to WHERE {where} AND ts >= ? AND ts < ? AND {sql.SERVED} "
                    f"AND replica IS NOT NULL")
        bind = table + params + envelope
    else:
        branch_sql = (f"SELECT CAST(? AS BIGINT) AS i, replica, {start_ms} FROM requests WHERE {where} AND model = ? "
                      f"AND ts >= ? AND ts < ? AND {sql.SERVED} AND replica IS NOT NULL")
        rows_sql = _per_span_sql(branch_sql, len(spans))
        bind = _per_span_params([[k, *params, m, a, b] for k, (m, a, b) in enumerate(around)])
    cols = con.execute(f"SELECT * FROM ({rows_sql}) ORDER BY i, start_ms", bind).fetchnumpy()
    idx = np.asarray(cols["i"], dtype=np.int64)
    cuts = np.searchsorted(idx, np.arange(len(spans) + 1))
    reps_all = np.asarray(cols["replica"], dtype=object)
    at_all = np.asarray(cols["start_ms"], dtype=float)
    return [_outages(reps_all[cuts[k]:cuts[k + 1]], at_all[cuts[k]:cuts[k + 1]], start, end)
            for k, (_, start, end) in enumerate(spans)]


def _outages(reps: np.ndarray, at: np.ndarray, start, end) -> list[Outage]:
    """The outages of one span from its starts of service (``reps``, ``at`` in ms, sorted by ``at``)."""
    if not len(at):
        return []
    lo, hi = pd.Timestamp(start) - OUTAGE_CONTEXT, pd.Timestamp(end) + OUTAGE_CONTEXT
    lo_ms, hi_ms = lo.value / 1e6, hi.value / 1e6
    s_ms, e_ms = pd.Timestamp(start).value / 1e6, pd.Timestamp(end).value / 1e6
    near_ms = OUTAGE_NEAR.total_seconds() * 1000
    out = []
    for rep in sorted(set(reps)):
        mine = at[reps == rep]
        edges = np.concatenate([[lo_ms], mine, [hi_ms]])
        gaps = np.diff(edges)
        overlap = np.minimum(edges[1:], e_ms) - np.maximum(edges[:-1], s_ms)
        gaps = np.where(overlap > 0, gaps, 0.0)
        k = int(gaps.argmax())
        g0, g1 = edges[k], edges[k + 1]
        if g1 - g0 < OUTAGE_MIN_GAP.total_seconds() * 1000:
            continue
        inside = (at > g0) & (at < g1)
        near = ~inside & (at >= g0 - near_ms) & (at <= g1 + near_ms)
        near_all = int(near.sum())
        share = int((near & (reps == rep)).sum()) / near_all if near_all else 0.0
        expected = share * int(inside.sum())
        if expected >= OUTAGE_EXPECTED:
            out.append(Outage(str(rep), pd.to_datetime(round(g0), unit="ms").to_pydatetime(),
                              pd.to_datetime(round(g1), unit="ms").to_pydatetime(), float(expected)))
    return out


def _replica_count(con, f: Filters, model: str, start, end) -> int:
    where, params = diag.fleet_filters(f).where()
    lo, hi = pd.Timestamp(start) - OUTAGE_CONTEXT, pd.Timestamp(end) + OUTAGE_CONTEXT
    return int(con.execute(f"SELECT count(DISTINCT replica) FROM requests WHERE {where} AND model = ? AND ts >= ? "
                           f"AND ts < ?", params + [model, lo, hi]).fetchall()[0][0])


# ---------------------------------------------------------------- the requests hit

AFFECTED_COLUMNS = ("request_id", "ts", "tenant", "sla_tier", "replica", "queue_ms", "ttft_ms", "total_ms", "status")


def _decode_cut(findings: list[Finding]) -> tuple:
    """(ms per output token, excess over it, window start, window end) by which a decode finding of the incident
    calls a request slow, within its own window; Nones without one."""
    for fd in findings:
        m = fd.metrics
        if fd.layer == "decode" and m.get("mode") == "tpot" and m.get("tpot_baseline_ms") and m.get("tail_cut_ms"):
            return float(m["tpot_baseline_ms"]), float(m["tail_cut_ms"]), m["window_start"], m["window_end"]
    return None, None, None, None


def _affected_sql(where: str) -> str:
    """One span's served requests (bound: the span's position, the SLA of a tier the table lacks, the decode
    cut's ms per token, excess, start and end, ``where``'s values, the model, start and end) with ``i``,
    :data:`AFFECTED_COLUMNS`, whether each failed or decoded slowly, and its tier's SLA (``sla_ms``; judged
    against the span's SLA latency by :data:`OVER_SLA_SQL`)."""
    return f"""
  SELECT CAST(? AS BIGINT) AS i, {', '.join(AFFECTED_COLUMNS)}, NOT ({sql.OK}) AS failed,
         coalesce(t_sla, ?) AS sla_ms,
         coalesce({sql.DECODE_MS} - output_tokens * ? > ? AND ts >= ? AND ts < ?, false) AS slow_decode
  FROM requests LEFT JOIN t ON coalesce(sla_tier, '(none)') = t_tier
  WHERE {where} AND model = ? AND ts >= ? AND ts < ? AND {sql.SERVED}"""


def _affected_join_sql(where: str) -> str:
    """:func:`_affected_sql` for every span at once, a join against the spans' table (bound: the SLA of a tier
    the table lacks, the spans' lists with their decode cuts, ``where``'s values, the envelope's start and end)."""
    return f"""
  SELECT s_i AS i, {', '.join(AFFECTED_COLUMNS)}, NOT ({sql.OK}) AS failed,
         coalesce(t_sla, ?) AS sla_ms,
         coalesce({sql.DECODE_MS} - output_tokens * s_tpot > s_excess AND ts >= s_cut_from AND ts < s_cut_to,
                  false) AS slow_decode
  FROM requests JOIN ({SPANS_SQL}, unnest(?::DOUBLE[]) AS s_tpot, unnest(?::DOUBLE[]) AS s_excess,
                      unnest(?::TIMESTAMP[]) AS s_cut_from, unnest(?::TIMESTAMP[]) AS s_cut_to) s
       ON model = s_model AND ts >= s_from AND ts < s_to
       LEFT JOIN t ON coalesce(sla_tier, '(none)') = t_tier
  WHERE {where} AND ts >= ? AND ts < ? AND {sql.SERVED}"""


def _when(value):
    return None if value is None else pd.Timestamp(value).to_pydatetime()


def affected_requests(con: duckdb.DuckDBPyConnection, f: Filters, model: str, start, end,
                      findings: list[Finding] | None = None, limit: int | None = REQUEST_LIST_MAX,
                      sla: tuple[str, dict] | None = None) -> pd.DataFrame:
    """The requests of ``model`` in [start, end) the incident hurt, slowest first: failed, over their tier's
    SLA on the SLA latency, or slower in decode than a decode finding's cut. Columns: the request's
    (:data:`AFFECTED_COLUMNS`) and ``why``. ``attrs`` carries ``requests``, ``affected``, ``failed``,
    ``over_sla`` and ``tenants`` (all counted, however many are listed). One span of :func:`affected_of_spans`."""
    return affected_of_spans(con, f, [(model, start, end, findings or [])], limit, sla)[0]


def affected_of_spans(con: duckdb.DuckDBPyConnection, f: Filters, spans: list[tuple], limit: int | None = REQUEST_LIST_MAX,
                      sla: tuple[str, dict] | None = None, listed: bool = True) -> list[pd.DataFrame]:
    """:func:`affected_requests` of each ``(model, start, end, findings)`` of ``spans``: two queries in all, the
    counts per span and hour, and the first ``limit`` requests of each span (``listed=False``: the counts only,
    one query, and no request listed). A model's spans never overlap (:func:`_groups` merges them), so a
    request is counted in at most one."""
    if not spans:
        return []
    metric, sla = sla or sla_basis(con, f)
    where, params = f.where()
    fallback = float(sla.get("(none)", alerts.DEFAULT_SLA_P99_MS["(none)"]))
    if len(spans) > PER_SPAN_UNION_MAX:
        rows_sql = _affected_join_sql(where)
        table, envelope = _as_table([(m, a, b) for m, a, b, _ in spans])
        cuts = [_decode_cut(fds) for *_, fds in spans]
        rows_params = ([fallback] + table + [[c[0] for c in cuts], [c[1] for c in cuts], [_when(c[2]) for c in cuts],
                                             [_when(c[3]) for c in cuts]] + params + envelope)
    else:
        rows_sql = _per_span_sql(_affected_sql(where), len(spans))
        rows_params = _per_span_params([[k, fallback, *_decode_cut(fds), *params, m, a, b]
                                        for k, (m, a, b, fds) in enumerate(spans)])
    head_sql = (f"WITH t AS (SELECT unnest(?::VARCHAR[]) AS t_tier, unnest(?::DOUBLE[]) AS t_sla), "
                f"r0 AS ({rows_sql}), r AS ({OVER_SLA_SQL})")
    on_ttft = None if metric is None else metric == "ttft_ms"
    bind = [list(sla), [float(v) for v in sla.values()]] + rows_params + [on_ttft]
    hourly = con.execute(head_sql + f"""
SELECT i, {sql.time_bucket('hour')} AS h, count(*) AS n,
       count(*) FILTER (WHERE failed OR over_sla OR slow_decode) AS k,
       count(*) FILTER (WHERE failed) AS failed, count(*) FILTER (WHERE over_sla AND NOT failed) AS over,
       bool_or(on_ttft) AS on_ttft,
       list(DISTINCT tenant) FILTER (WHERE (failed OR over_sla OR slow_decode) AND tenant IS NOT NULL) AS tenants
FROM r GROUP BY 1, 2 ORDER BY 1, 2""", bind).df()
    by_hour = dict(tuple(hourly.groupby("i", sort=False)))
    if not listed:
        return [_affected_frame(None, by_hour.get(k, hourly.iloc[0:0]), metric) for k in range(len(spans))]
    listed = con.execute(head_sql + """
SELECT * EXCLUDE (sla_ms, on_ttft, sla_latency_ms) FROM r WHERE failed OR over_sla OR slow_decode
QUALIFY row_number() OVER (PARTITION BY i ORDER BY failed DESC, total_ms DESC NULLS LAST, request_id) <= ?
ORDER BY i, failed DESC, total_ms DESC NULLS LAST, request_id""", bind + [int(limit) if limit else 2**62]).df()
    by_span = dict(tuple(listed.groupby("i", sort=False)))
    return [_affected_frame(by_span.get(k, listed.iloc[0:0]), by_hour.get(k, hourly.iloc[0:0]), metric)
            for k in range(len(spans))]


#: the rows ``r0`` of :func:`_affected_sql` with the SLA latency of their span (``sla_latency_ms``) and whether it
#: is over their tier's SLA (``over_sla``). The latency is the store's setting where one is saved (bound: true for
#: ttft_ms, false for total_ms), else, as :func:`finops.ops.alerts.sla_metric` chooses it, the time to first token
#: where the span's own requests carry it, else total_ms: chosen from the incident's requests alone, so that
#: which other models or days the filters hold never changes an incident's count (over the whole period, one
#: model's TTFT judged a model without any on TTFT: none of its requests was over, all were unjudged)
OVER_SLA_SQL = """
  SELECT *, coalesce(sla_latency_ms > sla_ms, false) AS over_sla
  FROM (SELECT r0.*, o.on_ttft, CASE WHEN o.on_ttft THEN ttft_ms ELSE total_ms END AS sla_latency_ms
        FROM r0 JOIN (SELECT i, coalesce(?::BOOLEAN, bool_or(ttft_ms IS NOT NULL)) AS on_ttft FROM r0 GROUP BY i) o
             USING (i))"""


def _affected_frame(rows: pd.DataFrame | None, hourly: pd.DataFrame, metric: str | None) -> pd.DataFrame:
    """One span's listed requests with ``why`` (None: none listed), and its counts in ``attrs``; ``metric``: the
    SLA latency saved in the store, None where the span's own requests chose it (:data:`OVER_SLA_SQL`)."""
    own = "ttft_ms" if len(hourly) and bool(hourly["on_ttft"].any()) else "total_ms"
    rows = rows.drop(columns="i").reset_index(drop=True) if rows is not None else pd.DataFrame()
    for c in rows.columns:      # a text column with no value in this span: None, as the span's own query gives
        if pd.api.types.is_string_dtype(rows[c]) and rows[c].dtype != object and len(rows) and rows[c].isna().all():
            rows[c] = pd.Series([None] * len(rows), dtype=object)
    if not rows.empty:
        why = np.where(rows["failed"], "failed (" + rows["status"].fillna("error").astype(str) + ")",
                       np.where(rows["over_sla"], "over its tier's SLA", "slow decode"))
        rows = rows.assign(why=why).drop(columns=["failed", "over_sla", "slow_decode"])
    else:
        rows = pd.DataFrame(columns=[*AFFECTED_COLUMNS, "why"])
    peak = float(alerts.wilson_lower(hourly["k"], hourly["n"]).max()) if len(hourly) else 0.0
    # an hour that hurt no request has no list (NULL: None or pd.NA, as pandas reads it)
    tenants = sorted({t for ts in hourly["tenants"] if isinstance(ts, list | np.ndarray) for t in ts})
    rows.attrs.update(peak_impact=peak, requests=int(hourly["n"].sum()), affected=int(hourly["k"].sum()),
                      failed=int(hourly["failed"].sum()), over_sla=int(hourly["over"].sum()), tenants=tenants,
                      sla_metric=metric or own, sla_metric_own=metric is None)
    return rows


def sla_basis(con: duckdb.DuckDBPyConnection, f: Filters) -> tuple[str | None, dict]:
    """(the latency the SLA is on where the store sets one, else None: each incident's own requests choose it,
    :data:`OVER_SLA_SQL`; the P99 SLA in ms per tier): read once for all the incidents of a period. Not
    :func:`finops.ops.alerts.sla_metric` of ``f``: that reads every model and day of the filters."""
    return alerts.saved_sla_metric(con), alerts.sla_targets(con)


def fleet_requests_of_spans(con, f: Filters, spans: list[tuple]) -> list[int]:
    """The whole fleet's served requests (every model, whatever models the filters choose: the share an
    incident's model carried is of the fleet, not of the models on screen; no tenant or tier filter) in each
    ``(start, end)`` of ``spans``, in one query."""
    if not spans:
        return []
    where, params = replace(diag.fleet_filters(f), models=()).where()
    rows_sql = _per_span_sql(f"SELECT CAST(? AS BIGINT) AS i, count(*) AS n FROM requests WHERE {where} "
                             f"AND ts >= ? AND ts < ? AND {sql.SERVED}", len(spans))
    bind = _per_span_params([[k, *params, a, b] for k, (a, b) in enumerate(spans)])
    got = dict(con.execute(rows_sql, bind).fetchall())
    return [int(got.get(k, 0)) for k in range(len(spans))]


# ---------------------------------------------------------------- causes: the first that the data shows titles it

@dataclass(frozen=True)
class Context:
    model: str
    start: datetime
    end: datetime
    findings: list[Finding]
    alerts: pd.DataFrame
    outages: list[Outage]
    replicas: int
    hit: pd.DataFrame          # affected requests (attrs: the counts)

    def finding(self, layer: str) -> Finding | None:
        return next((fd for fd in self.findings if fd.layer == layer), None)

    def rules(self, *names: str) -> pd.DataFrame:
        return self.alerts[self.alerts["rule"].isin(names)]


@dataclass(frozen=True)
class Cause:
    name: str
    applies: Callable[[Context], bool]
    title: Callable[[Context], str]
    action: Callable[[Context], str]


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def idle_span(outages: list[Outage]) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The stretch every one of ``outages`` began no service in, rounded inwards to 5 minutes (so the words
    "served nothing from 13:00 to 15:00" hold for all of it); their union where they do not overlap."""
    lo, hi = max(o.idle_from for o in outages), min(o.idle_to for o in outages)
    if lo >= hi:
        lo, hi = min(o.idle_from for o in outages), max(o.idle_to for o in outages)
    a, b = pd.Timestamp(lo).ceil("5min"), pd.Timestamp(hi).floor("5min")
    return (a, b) if a < b else (pd.Timestamp(lo), pd.Timestamp(hi))


def _outage_title(c: Context) -> str:
    lo, hi = idle_span(c.outages)
    return f"{len(c.outages)} of {c.replicas} {c.model} replicas served nothing {hhmm(lo, hi)}"


def _outage_action(c: Context) -> str:
    q = c.finding("queue")
    need = q.metrics.get("slots_needed_at_rho_0_7") if q else None
    more = f"; the load needs about {need} slots in all for a utilisation (ρ) of 0.7" if need else ""
    them = "it" if len(c.outages) == 1 else "them"
    return (f"Bring {_names([o.replica for o in c.outages])} back (or replace {them}){more}; until then shed "
            "low-tier and long requests from this model.")


def _queue_title(c: Context) -> str:
    m = primary(c).metrics
    if m.get("burst_requests"):
        waited = m["burst_requests"] - m["burst_no_wait"]
        return (f"The {c.model} model saturated: {waited} of {m['burst_requests']} requests waited "
                f"{diag._range(m['burst_wait_min_ms'], m['burst_wait_max_ms'])}")
    cap = m.get("queue_timeout_cap_ms")
    text = (f"Queue saturated on {c.model} {hhmm(m['window_start'], m['window_end'])}: {m['waited_share']:.0%} of "
            f"{m['requests']:,} requests waited, "
            f"P95 {_wait(m['queue_p95_ms'], cap)}")
    if m.get("queue_timeouts"):
        text += f", {m['queue_timeouts']:,} gave up"
    return text


def _decode_title(c: Context) -> str:
    m = primary(c).metrics
    return (f"Slow decode on {c.model} {hhmm(m['window_start'], m['window_end'])}: {m['tail_requests']:,} of "
            f"{m['requests']:,} requests took {duration_ms(m['excess_ms'])} extra")


def _error_title(c: Context) -> str:
    a = c.hit.attrs
    return f"{c.model} failed {a['failed']:,} of {a['requests']:,} requests {hhmm(c.start, c.end)}"


def _sla_title(c: Context) -> str:
    hit = c.hit
    over = hit[hit["why"] == "over its tier's SLA"] if len(hit) else hit
    tiers = sorted(set((over if len(over) else hit)["sla_tier"].dropna())) if len(hit) else []
    metric = "time to first token" if hit.attrs.get("sla_metric") == "ttft_ms" else "latency"
    tier = f"{_names(tiers)} SLA" if tiers else "SLA"
    tier = tier[:1].upper() + tier[1:]
    failed = f" ({hit.attrs['failed']:,} requests failed)" if hit.attrs["failed"] and not hit.attrs["over_sla"] else ""
    return f"{tier} on {metric} broken on {c.model} {hhmm(c.start, c.end)}{failed}"


def _engine_replicas(c: Context, rule: str) -> list[str]:
    return sorted({r for r in map(alerts.replica_of, c.rules(rule)["tenant"]) if r is not None})


def _engine_title(c: Context) -> str:
    """The engine rules' alerts (vLLM's own series) as the cause: which replicas, and what filled up."""
    kv, queue = _engine_replicas(c, "kv_cache_saturated"), _engine_replicas(c, "engine_queue_saturated")
    what = ([f"its KV cache full on {_names(kv)}"] if kv else []) + (
        [f"its batch full with requests waiting on {_names(queue)}"] if queue else [])
    return f"The {c.model} engine saturated {hhmm(c.start, c.end)}: {' and '.join(what)}"


def _engine_action(c: Context) -> str:
    if _engine_replicas(c, "kv_cache_saturated"):
        return (f"Add {c.model} replicas, or give each more KV-cache memory (vLLM's gpu_memory_utilization, a "
                "shorter max_model_len); until then shed long prompts from this model.")
    return (f"Add {c.model} replicas; if the KV cache has room, a larger batch (vLLM's max_num_seqs) serves more "
            "at once.")


def primary(c: Context) -> Finding | None:
    """The finding that titles an incident: the most severe, then the earliest; a warning only where it covers
    at least half the incident (a one-hour queue warning does not title a six-hour SLA breach)."""
    if not c.findings:
        return None
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    fd = min(c.findings, key=lambda x: (rank[x.severity], x.metrics["window_start"]))
    covered = pd.Timestamp(fd.metrics["window_end"]) - pd.Timestamp(fd.metrics["window_start"])
    if fd.severity != "critical" and covered * 2 < pd.Timestamp(c.end) - pd.Timestamp(c.start) \
            and c.hit.attrs["over_sla"] + c.hit.attrs["failed"] > 0:
        return None
    return fd


FINDING_TITLES: dict[str, Callable[[Context], str]] = {
    "queue": _queue_title, "decode": _decode_title,
    **{layer: (lambda c: _finding_line(primary(c))) for layer in ("prefill", "routing", "tail")},
}


CAUSES: tuple[Cause, ...] = (
    Cause("replica_outage", lambda c: bool(c.outages), _outage_title, _outage_action),
    Cause("diagnosis", lambda c: primary(c) is not None, lambda c: FINDING_TITLES[primary(c).layer](c),
          lambda c: primary(c).action),
    Cause("errors", lambda c: not c.rules("error_rate").empty and c.hit.attrs["failed"] > 0, _error_title,
          lambda c: f"Read the errors of {c.model} in these hours (status and error type) and the provider's or "
                    "replica's health; retry or fail over to another model while it lasts."),
    Cause("sla", lambda c: not c.rules("p99_over_sla").empty and c.hit.attrs["affected"] > 0, _sla_title,
          lambda c: f"Add {c.model} capacity for these hours or move the tier's traffic to a faster model; the "
                    "Latency page breaks the time down by layer."),
    Cause("engine_saturated", lambda c: not c.rules(*alerts.ENGINE_RULES).empty, lambda c: _engine_title(c),
          lambda c: _engine_action(c)),
    Cause("queue_growing", lambda c: not c.rules("queue_growing").empty,
          lambda c: f"The {c.model} queue kept growing {hhmm(c.start, c.end)}",
          lambda c: f"Add {c.model} replicas before the queue reaches the tier's patience."),
    Cause("alerts", lambda c: True,
          lambda c: f"Alerts on {c.model} {hhmm(c.start, c.end)}: "
                    f"{_names(sorted({RULE_WORDS.get(r, r) for r in c.alerts['rule']}) or ['none'])}",
          lambda c: f"Check {c.model}'s replicas and provider for these hours."),
)


# ---------------------------------------------------------------- severity

def severity(impact: float, sla_minutes: int) -> str:
    """The severity of an incident from its impact (the Wilson 99.9 % lower bound of the share of requests hit,
    in its worst hour) and the minutes its SLA and error-rate alerts cover.

    >>> severity(float(alerts.wilson_lower(6, 29)), 60), severity(0.45, 120), severity(0.0, 0)
    ('warning', 'critical', 'info')
    """
    if impact >= CRITICAL_IMPACT and sla_minutes >= CRITICAL_SLA_MIN:
        return "critical"
    if impact >= WARNING_IMPACT or sla_minutes > 0:
        return "warning"
    return "info"


def _only_slower_decode(fds: list[Finding], al: pd.DataFrame) -> bool:
    """Whether an incident is only decode running slower than usual (a batch growing at a peak does that) while
    no alert fired: the SLA and error-rate rules, which allow their tiers' share of slow or failed requests,
    found nothing broken. Worth knowing (info), not a warning someone must look at."""
    return bool(fds) and all(fd.layer == "decode" for fd in fds) and al.empty


def union_span(spans) -> timedelta:
    """The time covered by (start, end) spans, overlaps counted once."""
    total, cur = timedelta(0), None
    for a, b in sorted(spans):
        if cur and a <= cur[1]:
            cur = (cur[0], max(cur[1], b))
            continue
        if cur:
            total += cur[1] - cur[0]
        cur = (a, b)
    if cur:
        total += cur[1] - cur[0]
    return total


def _union_minutes(spans: list[tuple]) -> int:
    return int(union_span(spans).total_seconds() // 60)


# ---------------------------------------------------------------- grouping

def _groups(findings: list[Finding], found: pd.DataFrame) -> list[dict]:
    """Per model, items whose windows overlap or touch, merged: dicts with model, start, end, findings, alerts."""
    items = [(fd.model, pd.Timestamp(fd.metrics["window_start"]), pd.Timestamp(fd.metrics["window_end"]), "f", fd)
             for fd in findings]
    items += [(r.model, pd.Timestamp(r.window_start), pd.Timestamp(r.window_end), "a", i)
              for i, r in enumerate(found.itertuples(index=False))]
    items.sort(key=lambda t: (t[0], t[1], t[2]))
    out: list[dict] = []
    for model, start, end, kind, item in items:
        g = out[-1] if out and out[-1]["model"] == model and start <= out[-1]["end"] else None
        if g is None:
            g = {"model": model, "start": start, "end": end, "findings": [], "alerts": []}
            out.append(g)
        g["end"] = max(g["end"], end)
        (g["findings"] if kind == "f" else g["alerts"]).append(item)
    return out


def _timeline(fds: list[Finding], al: pd.DataFrame, units: dict[str, str]) -> pd.DataFrame:
    rows = [{"at": pd.Timestamp(fd.metrics["window_start"]), "until": pd.Timestamp(fd.metrics["window_end"]),
             "kind": "diagnosis", "severity": fd.severity, "what": _finding_line(fd)} for fd in fds]
    rows += [{"at": pd.Timestamp(r.window_start), "until": pd.Timestamp(r.window_end), "kind": "alert",
              "severity": r.severity, "what": _alert_line(r, units)} for r in al.itertuples(index=False)]
    t = pd.DataFrame(rows, columns=["at", "until", "kind", "severity", "what"])
    return t.sort_values(["at", "until", "kind"]).reset_index(drop=True)


def _alert_summary(al: pd.DataFrame) -> str | None:
    if al.empty:
        return None
    parts = []
    for rule, g in al.groupby("rule", sort=False):
        n = len(g)
        tenants = sorted({t for t in g["tenant"] if t not in (alerts.ALL, alerts.FLEET) and alerts.replica_of(t) is None})
        replicas = sorted({r for r in map(alerts.replica_of, g["tenant"]) if r is not None})
        named = tenants + [f"replica {r}" for r in replicas]
        who = f" ({', '.join(named)})" if named else ""
        parts.append(f"{n} {RULE_WORDS.get(rule, rule)} alert{'s' if n != 1 else ''}{who}")
    return "Alerts: " + "; ".join(parts) + "."


@dataclass(frozen=True)
class _Judged:
    """What a group's incident is, before its evidence: its context, cause, severity and SLA minutes."""
    ctx: Context
    cause: Cause
    severity: str
    sla_minutes: int


def _judge(con, f: Filters, g: dict, found: pd.DataFrame, outages: list[Outage], hit: pd.DataFrame) -> _Judged:
    """The cause (the first of :data:`CAUSES` the data shows) and severity of the group ``g``'s incident. Both
    read ``hit``'s counts (``attrs``) only; the title of the ``sla`` cause also reads its listed requests."""
    model, start, end = g["model"], g["start"].to_pydatetime(), g["end"].to_pydatetime()
    fds = g["findings"]
    al = found.iloc[g["alerts"]].reset_index(drop=True) if g["alerts"] else found.iloc[0:0]
    replicas = _replica_count(con, f, model, start, end) if outages else 0
    ctx = Context(model, start, end, fds, al, outages, replicas, hit)
    cause = next(c for c in CAUSES if c.applies(ctx))
    sla_minutes = _union_minutes([(pd.Timestamp(r.window_start), pd.Timestamp(r.window_end))
                                  for r in al.itertuples(index=False) if r.rule in SLA_RULES])
    sev = severity(hit.attrs["peak_impact"], sla_minutes)
    if sev == "warning" and not outages and _only_slower_decode(fds, al):
        sev = "info"
    return _Judged(ctx, cause, sev, sla_minutes)


#: the causes whose title reads the requests listed, not only their counts
TITLE_READS_REQUESTS = ("sla",)


def _build(con, f: Filters, g: dict, found: pd.DataFrame, units: dict[str, str], outages: list[Outage],
           hit: pd.DataFrame, fleet_n: int) -> Incident:
    """One incident of the group ``g``, from its outages, its requests hit and the fleet's requests in its span
    (read for every group at once by :func:`incidents`)."""
    j = _judge(con, f, g, found, outages, hit)
    ctx, cause, sev, sla_minutes = j.ctx, j.cause, j.severity, j.sla_minutes
    model, start, end, fds, al = ctx.model, ctx.start, ctx.end, ctx.findings, ctx.alerts
    a = hit.attrs
    impact = a["peak_impact"]
    fleet_share = a["requests"] / fleet_n if fleet_n else None
    evidence = []
    if outages:
        evidence.append("; ".join(f"{o.replica} began no request {hhmm(o.idle_from, o.idle_to, seconds=True)} (its last and next "
                                  "starts of service) where its usual "
                                  f"share of the traffic is about {o.expected:,.0f} requests" for o in outages) + ".")
    if a["requests"]:
        parts = []
        if a["failed"]:
            parts.append(f"{a['failed']:,} failed")
        if a["over_sla"]:
            # on total latency by default only where none of the incident's requests carries a time to first token
            latency = alerts.METRIC_NAMES.get(a["sla_metric"], a["sla_metric"])
            parts.append(f"{a['over_sla']:,} answered over their tier's SLA on {latency}"
                         + (" (none carries a time to first token)" if a["sla_metric_own"]
                            and a["sla_metric"] == "total_ms" else ""))
        slow = a["affected"] - a["failed"] - a["over_sla"]
        if slow > 0:
            parts.append(f"{slow:,} decoded slowly")
        of_fleet = (f"; {model} carried {fleet_share:.0%} of the fleet's requests in those hours"
                    if fleet_share is not None else "")
        evidence.append(f"{a['affected']:,} of {a['requests']:,} requests to {model} were hit "
                        f"({a['affected'] / a['requests']:.0%}{of_fleet})"
                        + (f": {', '.join(parts)}" if parts else "") + (f"; tenants: {', '.join(a['tenants'])}"
                                                                      if a["tenants"] else "") + ".")
    if sla_minutes:
        evidence.append(f"SLA or error-rate alerts covered {minutes_text(sla_minutes)} of the "
                        f"{minutes_text(int((end - start).total_seconds() // 60))}.")
    summary = _alert_summary(al)
    if summary:
        evidence.append(summary)
    evidence += [fd.evidence for fd in fds]
    title = cause.title(ctx)
    return Incident(key=key_of(model, start, end), model=model, start=start, end=end, severity=sev,
                    title=title, cause=cause.name, evidence=evidence, action=cause.action(ctx),
                    timeline=_timeline(fds, al, units), requests=a["requests"], affected=a["affected"],
                    failed=a["failed"], over_sla=a["over_sla"], impact=impact, sla_minutes=sla_minutes,
                    fleet_share=fleet_share, tenants=a["tenants"], findings=fds, alerts=al, outages=outages,
                    hit=hit)


ORDERS = ("worst first", "newest first")


def ordered(items: list[Incident], order: str = "worst first") -> list[Incident]:
    """Worst first (severity, then requests hit, then newest) or newest first (by end, then severity)."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    if order == "newest first":
        return sorted(items, key=lambda i: (-i.end.timestamp(), rank[i.severity], -i.affected))
    return sorted(items, key=lambda i: (rank[i.severity], -i.affected, -i.end.timestamp()))


def service_alerts(found: pd.DataFrame) -> pd.DataFrame:
    """The open alerts (:func:`finops.ops.alerts.open_alerts`) that make incidents: all but :data:`COST_RULES`."""
    return found[~found["rule"].isin(COST_RULES)].reset_index(drop=True)


def incidents(con: duckdb.DuckDBPyConnection, f: Filters | None = None, window: str = "hour",
              open_alerts: pd.DataFrame | None = None, detailed: tuple[str, ...] | None = None,
              first_of: tuple[str, ...] = ()) -> list[Incident]:
    """The incidents of the filtered period, worst first (:func:`ordered`); ``window`` is the diagnosis's.

    ``open_alerts``: :func:`finops.ops.alerts.open_alerts` of ``f`` where the caller holds it already (a page
    that shows them too), else read here. ``detailed``: the keys of the incidents built in full (evidence,
    timeline, the requests hit listed, the fleet's share); the others carry their title, cause, severity,
    window and counts only, as :func:`summary` gives them (a page that shows their details only when opened).
    None: every incident in full. ``first_of``: orders of :data:`ORDERS` whose first incident is built in full
    too (the one a page opens first; the page asks for both orders, so that switching order reads nothing). The raw rows are read for all the incidents together, a few
    queries however many there are.

    A period holding more than ``store.RAW_ROW_BUDGET`` requests is judged over its latest hours
    (``store.raw_scope``), alerts included (``open_alerts`` of the whole period is then read again for them): the
    diagnosis reads those hours only, and an alert's span of the whole period would send its outage and request
    reads over every row of it (at 100M rows, out of memory)."""
    f = f or Filters()
    scope = store.raw_scope(con, f)
    if scope.narrowed:
        f, open_alerts = scope.filters, None
    found, groups, spans, outages = _grouped(con, f, window, open_alerts)
    if not groups:
        return []
    basis = sla_basis(con, f)
    keys = [key_of(m, a, b) for m, a, b in spans]
    if detailed is None:
        full = list(range(len(groups)))
        judged = None
    else:
        counts = affected_of_spans(con, f, _hit_spans(spans, groups), sla=basis, listed=False)
        judged = [_judge(con, f, g, found, o, h) for g, o, h in zip(groups, outages, counts, strict=True)]
        wanted = set(detailed)
        if first_of:            # the order reads severity, counts and times only: the lines' titles do not matter
            lines = [_short(j) for j in judged]
            wanted |= {ordered(lines, order)[0].key for order in first_of}
        full = [k for k in range(len(groups)) if keys[k] in wanted]
    # the requests hit, listed, of the incidents built in full and of those whose title names them
    listed = sorted(set(full) | ({k for k, j in enumerate(judged) if j.cause.name in TITLE_READS_REQUESTS}
                                 if judged is not None else set()))
    hits = dict(zip(listed, affected_of_spans(con, f, _hit_spans([spans[k] for k in listed],
                                                                 [groups[k] for k in listed]), sla=basis),
                    strict=True)) if listed else {}
    # a scoped login's incident does not say what share of the fleet (every tenant's requests) it carried
    fleet = ([0] * len(full) if f.scoped else
             fleet_requests_of_spans(con, f, [(spans[k][1], spans[k][2]) for k in full]))
    units = {r.name: r.unit for r in alerts.rules(con)}
    built = {k: _build(con, f, groups[k], found, units, outages[k], hits[k], n)
             for k, n in zip(full, fleet, strict=True)}
    if judged is None:
        return ordered(list(built.values()))
    return ordered([built[k] if k in built else
                    _short(replace(j, ctx=replace(j.ctx, hit=hits[k])) if k in hits else j)
                    for k, j in enumerate(judged)])


def _short(j: _Judged) -> Incident:
    """The incident of a judged group without its evidence, timeline, listed requests or fleet share."""
    a = j.ctx.hit.attrs
    return Incident(key=key_of(j.ctx.model, j.ctx.start, j.ctx.end), model=j.ctx.model, start=j.ctx.start,
                    end=j.ctx.end, severity=j.severity, title=j.cause.title(j.ctx), cause=j.cause.name, evidence=[],
                    action="", timeline=pd.DataFrame(), requests=a["requests"], affected=a["affected"],
                    failed=a["failed"], over_sla=a["over_sla"], impact=a["peak_impact"], sla_minutes=j.sla_minutes,
                    fleet_share=None, tenants=[], detailed=False)


def _grouped(con, f: Filters, window: str, open_alerts: pd.DataFrame | None):
    """The service alerts, the groups of findings and alerts (:func:`_groups`), their spans and outages."""
    findings = diag.diagnose(con, f, window=window)
    found = service_alerts(alerts.open_alerts(con, f, leave_out=COST_RULES) if open_alerts is None
                           else open_alerts)
    groups = _groups(findings, found)
    spans = [(g["model"], g["start"].to_pydatetime(), g["end"].to_pydatetime()) for g in groups]
    return found, groups, spans, outages_of_spans(con, f, spans) if groups else []


def _hit_spans(spans: list[tuple], groups: list[dict]) -> list[tuple]:
    return [(*sp, g["findings"]) for sp, g in zip(spans, groups, strict=True)]


def find(con: duckdb.DuckDBPyConnection, f: Filters, key: str, window: str = "hour") -> Incident | None:
    """The incident a link names (its key), among those of the filtered period, built in full."""
    return next((i for i in incidents(con, f, window, detailed=(key,)) if i.key == key), None)


SUMMARY_COLUMNS = ("key", "severity", "title", "cause", "model", "start", "end", "minutes", "affected", "requests",
                   "sla_minutes")


def summary(con: duckdb.DuckDBPyConnection, f: Filters | None = None, window: str = "hour",
            open_alerts: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per incident of :func:`incidents` (the same ones, in the same order, with the same fields):
    :data:`SUMMARY_COLUMNS`, for the Overview's short list: :func:`incidents` with none built in full.
    ``open_alerts`` as for :func:`incidents`."""
    items = incidents(con, f, window, open_alerts, detailed=())
    return pd.DataFrame([{c: getattr(i, c) for c in SUMMARY_COLUMNS} for i in items], columns=list(SUMMARY_COLUMNS))


REQUEST_TABLE = (("request_id", "request_id"), ("ts", "ts"), ("tenant", "tenant"), ("sla_tier", "sla_tier"),
                 ("replica", "replica"), ("queue_s", "queue_ms"), ("ttft_s", "ttft_ms"), ("total_s", "total_ms"),
                 ("why", "why"))


def requests_table(hit: pd.DataFrame) -> pd.DataFrame:
    """The affected requests for a page: times in seconds (``*_s``), in the order of :data:`REQUEST_TABLE`."""
    out = pd.DataFrame({name: hit[src] / 1000.0 if name.endswith("_s") else hit[src]
                        for name, src in REQUEST_TABLE if src in hit})
    return out.reset_index(drop=True)
