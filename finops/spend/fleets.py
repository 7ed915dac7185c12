"""Self-hosted fleets: when each ran and how big (the fleet schedule), who reserved what, and how idle
GPU time is charged (the idle policy). The cost rules are :mod:`finops.spend.pricing`'s.

* **Schedule** (``fleet_schedule``): periods per self-hosted model, ``starts_at`` (inclusive) to
  ``ends_at`` (exclusive; empty: still running), replicas, GPUs per replica, $ per GPU-hour (empty: the
  price book row's), GPU type and site. Periods of one model at one site may not overlap; periods at
  different sites add up. Edited on the Data page (:func:`save_schedule`), loaded from a CSV
  (:func:`load_schedule_csv`, ``python -m finops fleet load FILE``), listed by ``fleet show``.
  A model with no period is billed while it served traffic (:data:`TRAFFIC_NOTE`).
* **Inferred periods** (:func:`infer_schedule`): the distinct ``replica`` ids each hour's served
  requests name, per model and site, runs of equal counts merged; ``source = 'inferred'``. A replica
  that served nothing in an hour is not seen, so an inferred count can only be too low.
* **Reservations** (``fleet_reservations``): replicas of a fleet a tenant reserved, the weights of the
  ``reservations`` idle policy.
* **Idle policy**: the store's default (:func:`default_policy`, a setting), which every report and
  export uses unless it is given another (:class:`finops.spend.pricing.IdlePolicy`).
"""
from __future__ import annotations

import math
from datetime import datetime

import duckdb
import pandas as pd

from finops import access, sql, store
from finops.errors import InputError
from finops.spend import pricing

SCHEDULE_COLUMNS = tuple(n for n, _ in store.FLEET_COLUMNS)
SOURCES = ("declared", "inferred")
#: how a model's fleet is billed, in words (``billed_by`` of :data:`finops.spend.pricing.FLEET_PERIODS_SQL`)
BILLED_BY = {"declared": "its declared schedule", "inferred": "periods inferred from the logs' replica ids",
             "traffic": "its price book row, while the model served traffic"}
TRAFFIC_NOTE = "billed while the model served traffic; declare the fleet's schedule for exact idle cost"
POLICY_KEY = "fleet.idle_policy"
#: a CSV's column names for the schedule's (the issue's ``from`` and ``to``)
CSV_NAMES = {"from": "starts_at", "to": "ends_at", "gpus": "gpus_per_replica", "usd_per_gpu_hour": "gpu_hour_usd"}


# ---------------------------------------------------------------- the idle policy

def default_policy(con: duckdb.DuckDBPyConnection) -> pricing.IdlePolicy:
    """The store's idle policy (``apart`` until one is set): what reports and exports use by default."""
    text = store.get_setting(con, POLICY_KEY)
    if not text:
        return pricing.KEEP_APART
    try:
        return pricing.IdlePolicy.parse(text)
    except InputError:                 # a setting written by a newer version: keep idle apart
        return pricing.KEEP_APART


def set_default_policy(con: duckdb.DuckDBPyConnection, policy: pricing.IdlePolicy | str) -> pricing.IdlePolicy:
    """Store the default idle policy (an :class:`IdlePolicy` or its text, e.g. ``centre:platform``)."""
    access.require("edit_fleets")
    policy = policy if isinstance(policy, pricing.IdlePolicy) else pricing.IdlePolicy.parse(policy)
    store.set_setting(con, POLICY_KEY, policy.text)
    return policy


# ---------------------------------------------------------------- the schedule

def self_hosted(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The price book's self-hosted models."""
    return [r[0] for r in con.execute("SELECT model FROM prices WHERE kind = 'self_hosted' AND model IS NOT NULL "
                                      "ORDER BY model").fetchall()]


def schedule(con: duckdb.DuckDBPyConnection, model: str | None = None) -> pd.DataFrame:
    """The declared and inferred periods (SCHEDULE_COLUMNS), by model, site and start."""
    return con.execute(f"SELECT {', '.join(SCHEDULE_COLUMNS)} FROM fleet_schedule WHERE ? IS NULL OR model = ? "
                       "ORDER BY model, site NULLS FIRST, starts_at", [model, model]).df()


def _blank(v) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)) or (
        isinstance(v, str) and not v.strip())


def _time(v, row: int, field: str) -> datetime | None:
    if _blank(v):
        return None
    try:
        t = pd.Timestamp(v)
    except (TypeError, ValueError):
        raise InputError(f"{field} {v!r} is not a date or date and time (ISO, UTC)", row=row, field=field) from None
    if t.tzinfo is not None:
        t = t.tz_convert("UTC").tz_localize(None)
    return t.to_pydatetime()


def _number(v, row: int, field: str, lo: float, hi: float, whole: bool) -> float | None:
    if _blank(v):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{field} {v!r} is not a number", row=row, field=field) from None
    if not math.isfinite(x) or x < lo or x > hi or (whole and x != int(x)):
        raise InputError(f"{field} {v!r} must be {'a whole number' if whole else 'a number'} from {lo:,} to {hi:,}",
                         row=row, field=field)
    return int(x) if whole else x


def _text(v) -> str | None:
    return None if _blank(v) else str(v).strip()


def check_schedule(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> list[tuple]:
    """The rows of an edited or loaded schedule, checked, as tuples in SCHEDULE_COLUMNS order; an
    InputError names the first bad row and field. Rows with neither a model nor a start are dropped."""
    missing = [c for c in ("model", "starts_at", "replicas") if c not in frame.columns]
    if missing:
        raise InputError(f"a fleet schedule needs the columns model, from (starts_at) and replicas; missing: "
                         f"{', '.join(missing)}")
    from finops.ingest.loader import timestamp_window

    known = set(self_hosted(con))
    limits = pricing.PRICE_LIMITS
    window = timestamp_window()
    rows = []
    for i, r in enumerate(frame.to_dict("records"), start=1):
        model = _text(r.get("model"))
        if model is None and _blank(r.get("starts_at")):
            continue
        if model is None:
            raise InputError("a period needs the model whose fleet it describes", row=i, field="model")
        if model not in known:
            raise InputError(f"{model} is not a self-hosted model of the price book: add it there (kind self_hosted) "
                             "first", row=i, field="model")
        starts = _time(r.get("starts_at"), i, "from")
        if starts is None:
            raise InputError(f"the period of {model} needs a start (from)", row=i, field="from")
        ends = _time(r.get("ends_at"), i, "to")
        for field_, t in (("from", starts), ("to", ends)):
            if t is not None and not window[0] <= t <= window[1]:
                # a typo of a year (2206 for 2026) billed every hour to it and stretched every page's period
                raise InputError(f"the period of {model} {'starts' if field_ == 'from' else 'ends'} "
                                 f"{t:%Y-%m-%d %H:%M}, outside {window[0]:%Y-%m-%d} to {window[1]:%Y-%m-%d}, the "
                                 "times the store takes (set FINOPS_TS_MIN / FINOPS_TS_MAX to widen)",
                                 row=i, field=field_)
        if ends is not None and ends <= starts:
            raise InputError(f"the period of {model} ends ({ends:%Y-%m-%d %H:%M}) before it starts "
                             f"({starts:%Y-%m-%d %H:%M})", row=i, field="to")
        replicas = _number(r.get("replicas"), i, "replicas", *limits["replicas"])
        if replicas is None:
            raise InputError(f"the period of {model} needs its number of replicas", row=i, field="replicas")
        gpus = _number(r.get("gpus_per_replica"), i, "gpus_per_replica", *limits["gpus_per_replica"])
        rate = _number(r.get("gpu_hour_usd"), i, "gpu_hour_usd", *limits["gpu_hour_usd"])
        source = _text(r.get("source")) or "declared"
        if source not in SOURCES:
            raise InputError(f"source must be {' or '.join(SOURCES)}, not {source!r}", row=i, field="source")
        rows.append((model, starts, ends, replicas, gpus, rate, _text(r.get("gpu_type")), _text(r.get("site")) or "",
                     source))
    by_place: dict[tuple[str, str], list[tuple]] = {}
    for row in rows:
        by_place.setdefault((row[0], row[7]), []).append(row)
    for (model, site), periods in by_place.items():
        periods.sort(key=lambda p: p[1])
        for a, b in zip(periods, periods[1:], strict=False):
            if a[2] is None or b[1] < a[2]:
                where = f" at site {site}" if site else ""
                raise InputError(f"two periods of {model}{where} overlap: the one from {a[1]:%Y-%m-%d %H:%M} "
                                 f"{'is open-ended' if a[2] is None else f'runs to {a[2]:%Y-%m-%d %H:%M}'} and the "
                                 f"next starts {b[1]:%Y-%m-%d %H:%M}; end the first, or give them different sites",
                                 field="from")
    return rows


def _write(con: duckdb.DuckDBPyConnection, rows: list[tuple], models: list[str] | None) -> None:
    """Replace the periods of ``models`` (every model when None) with ``rows``."""
    with store.transaction(con):
        if models is None:
            con.execute("DELETE FROM fleet_schedule")
        elif models:
            con.execute(f"DELETE FROM fleet_schedule WHERE model IN ({', '.join('?' for _ in models)})", list(models))
        if rows:
            con.executemany(f"INSERT INTO fleet_schedule ({', '.join(SCHEDULE_COLUMNS)}) "
                            f"VALUES ({', '.join('?' for _ in SCHEDULE_COLUMNS)})", rows)
        store.bump_data_version(con)


def save_schedule(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> int:
    """Replace the whole schedule with an edited table (checked: :func:`check_schedule`); reprices at once."""
    access.require("edit_fleets")
    rows = check_schedule(con, frame)
    _write(con, rows, None)
    return len(rows)


def read_schedule_csv(path) -> pd.DataFrame:
    """A schedule CSV (columns model, from, to, replicas, gpus_per_replica, gpu_hour_usd, gpu_type, site;
    ``starts_at``/``ends_at`` for from/to also read) as a frame of SCHEDULE_COLUMNS."""
    from finops.ingest.uploads import read_csv

    # a missing file or a folder in a sentence naming it, as every other file flag's (it printed "[Errno 2] ...")
    frame = read_csv(path, dtype=str, keep_default_na=False)
    frame.columns = [CSV_NAMES.get(c.strip().lower(), c.strip().lower()) for c in frame.columns]
    return frame


def load_schedule_csv(con: duckdb.DuckDBPyConnection, path) -> int:
    """Load a schedule CSV (:func:`read_schedule_csv`): its periods replace those of the models it names,
    so loading the same file twice changes nothing. Returns the periods loaded."""
    try:
        rows = check_schedule(con, read_schedule_csv(path))
    except InputError as exc:
        raise exc.in_file(str(path)) from None
    if not rows:
        raise InputError("the fleet schedule file holds no periods", file=str(path))
    models = sorted({r[0] for r in rows})
    kept = [r for r in check_schedule(con, schedule(con)) if r[0] not in models]
    check_schedule(con, pd.DataFrame(kept + rows, columns=list(SCHEDULE_COLUMNS)))
    _write(con, rows, models)
    return len(rows)


def infer_schedule(con: duckdb.DuckDBPyConnection, models: list[str] | None = None) -> pd.DataFrame:
    """Periods inferred from the replica ids in the logs: per self-hosted model, site and hour, the
    distinct ``replica`` values of its served requests; consecutive hours of the same count make one
    period. GPUs and $ per GPU-hour are left to the price book; ``source = 'inferred'``."""
    names = models if models is not None else self_hosted(con)
    if not names:
        return pd.DataFrame(columns=list(SCHEDULE_COLUMNS))
    hours = con.execute(f"""
SELECT model, coalesce(site, '') AS site, {sql.time_bucket('hour')} AS hour, count(DISTINCT replica) AS replicas
FROM requests WHERE replica IS NOT NULL AND {sql.SERVED} AND model IN ({', '.join('?' for _ in names)})
GROUP BY ALL ORDER BY 1, 2, 3""", list(names)).df()
    rows = []
    for (model, site), g in hours.groupby(["model", "site"], sort=True):
        start = prev = None
        count = None
        for h, n in zip(g["hour"], g["replicas"], strict=True):
            if start is not None and (n != count or h != prev + pd.Timedelta(hours=1)):
                rows.append((model, start, prev + pd.Timedelta(hours=1), count, site))
                start = None
            if start is None:
                start, count = h, n
            prev = h
        if start is not None:
            rows.append((model, start, prev + pd.Timedelta(hours=1), count, site))
    out = pd.DataFrame([{"model": m, "starts_at": a, "ends_at": b, "replicas": int(n), "gpus_per_replica": None,
                         "gpu_hour_usd": None, "gpu_type": None, "site": s, "source": "inferred"}
                        for m, a, b, n, s in rows], columns=list(SCHEDULE_COLUMNS))
    return out


def apply_inferred(con: duckdb.DuckDBPyConnection) -> int:
    """Replace the inferred periods with those the logs give now, for every self-hosted model that has no
    declared period (a declared schedule is never overwritten). Returns the periods written."""
    access.require("edit_fleets")
    current = schedule(con)
    declared = set(current.loc[current["source"].fillna("declared") == "declared", "model"])
    todo = [m for m in self_hosted(con) if m not in declared]
    inferred = infer_schedule(con, todo)
    rows = check_schedule(con, inferred)
    _write(con, rows, todo)
    return len(rows)


def billing_basis(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """How each self-hosted model of the price book is billed: model, billed_by (declared, inferred or
    traffic), periods (declared or inferred), how (in words; :data:`TRAFFIC_NOTE` for traffic)."""
    rows = con.execute("""
SELECT p.model, count(s.model) AS periods, string_agg(DISTINCT coalesce(s.source, 'declared'), ', ') AS sources
FROM prices p LEFT JOIN fleet_schedule s ON s.model = p.model AND s.starts_at IS NOT NULL
WHERE p.kind = 'self_hosted' GROUP BY 1 ORDER BY 1""").df()
    billed = ["traffic" if n == 0 else "declared" if "declared" in str(s) else "inferred"
              for n, s in zip(rows["periods"], rows["sources"], strict=True)]
    how = [TRAFFIC_NOTE if b == "traffic" else f"billed by {BILLED_BY[b]} ({int(n)} period{'s' if n != 1 else ''})"
           for b, n in zip(billed, rows["periods"], strict=True)]
    return pd.DataFrame({"model": rows["model"], "billed_by": billed, "periods": rows["periods"].astype("int64"),
                         "how": how})


def unbilled_requests(con: duckdb.DuckDBPyConnection, since=None, until=None) -> pd.DataFrame:
    """Served requests of self-hosted models in hours their declared schedule leaves out (no fleet ran,
    so they carry no GPU cost): model, requests."""
    hours, params = pricing.hours_sql(since, until)
    return con.execute(f"""
WITH alloc AS ({pricing.alloc_sql(hours)}), h AS ({hours})
SELECT r.model, sum({sql.served_requests('r')}) AS requests
FROM rollup_hourly r
WHERE r.model IN (SELECT model FROM prices WHERE kind = 'self_hosted') AND r.hour IN (SELECT hour FROM h)
  AND NOT EXISTS (SELECT 1 FROM alloc a WHERE a.model = r.model AND a.hour = r.hour)
GROUP BY 1 HAVING sum({sql.served_requests('r')}) > 0 ORDER BY 1""", params + params).df()


# ---------------------------------------------------------------- reservations

def reservations(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The reservations: model, tenant, replicas (the weight of the ``reservations`` idle policy)."""
    return con.execute("SELECT model, tenant, replicas FROM fleet_reservations ORDER BY model, tenant").df()


def save_reservations(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> int:
    """Replace the reservations (rows without a model and a tenant are dropped); reprices at once."""
    access.require("edit_fleets")
    known = set(self_hosted(con))
    rows, seen = [], set()
    for i, r in enumerate(frame.to_dict("records"), start=1):
        model, tenant = _text(r.get("model")), _text(r.get("tenant"))
        if model is None and tenant is None:
            continue
        if model is None or tenant is None:
            raise InputError("a reservation needs a model and a tenant", row=i, field="tenant" if model else "model")
        if model not in known:
            raise InputError(f"{model} is not a self-hosted model of the price book", row=i, field="model")
        replicas = _number(r.get("replicas"), i, "replicas", 0, 10_000, False)
        if not replicas:
            raise InputError(f"the reservation of {tenant} on {model} needs a number of replicas above 0", row=i,
                             field="replicas")
        if (model, tenant) in seen:
            raise InputError(f"{tenant} reserves {model} twice", row=i, field="tenant")
        seen.add((model, tenant))
        rows.append((model, tenant, replicas))
    with store.transaction(con):
        con.execute("DELETE FROM fleet_reservations")
        if rows:
            con.executemany("INSERT INTO fleet_reservations VALUES (?, ?, ?)", rows)
        store.bump_data_version(con)
    return len(rows)
