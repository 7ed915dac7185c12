"""The price book and the cost of requests.

Rules
-----
* A request's cost is its recorded ``cost_usd`` where the source really priced it. A source that
  wrote 0 for a request with tokens (LiteLLM when it cannot price a model) recorded nothing: its
  adapter leaves ``cost_usd`` empty, and the request is priced below and counted as
  ``source_unpriced_requests``.
* A self-hosted model's requests cost their share of its fleet's GPU hours (below) and nothing else: a cost
  the source recorded for one (LiteLLM's spend for a model behind a local vLLM, OpenLIT's
  ``gen_ai.usage.cost``) is not added, or the fleet would be paid twice; it is still shown against list
  (:func:`finops.spend.report.reconcile`, priced by :data:`RECORDED_NOT_COUNTED`).
* Otherwise the request is priced at the row in force at its time. Which rows apply to a logged
  model (``model_resolution``, :func:`finops.store.refresh_resolution`): an alias, then the price
  book's own row for the name (ours override the catalogue), then the catalogue (genai-prices, dated
  names and provider prefixes resolved: :mod:`finops.catalogue`). Of those rows, the one for the
  request's service tier (standard where the model has none for it), the context tier its own input
  size reaches (``min_input_tokens``, :data:`finops.sql.INPUT_BANDS`), in force on its day
  (``effective_from`` <= day < ``effective_to``). For a model with token prices (``kind = 'api'``)::

      cost = (uncached * in + cached * cached_in + writes * write + writes_1h * write_1h
              + output * out) / 1e6 + request_usd

  where ``uncached = input - cached - writes - writes_1h`` (``input_tokens`` counts them all; reasoning
  tokens are part of ``output``). A class without a price is billed at ``in`` (a 1-hour write at the
  5-minute write price where only that is known).
* A semantic-cache hit costs nothing unless the source recorded a cost.
* A self-hosted model (``kind = 'self_hosted'``) costs its fleet for the hours the fleet ran:
  ``replicas * gpus_per_replica * gpu_hour_usd`` per hour, summed over the periods of its **fleet
  schedule** (``fleet_schedule``, :mod:`finops.spend.fleets`) in force in that hour, each for the part
  of the hour it covers. A period's empty GPUs per replica or $ per GPU-hour are the price book row's;
  periods at different sites add up. A model with no period declared is billed at its price book row
  from the first to the last hour in which it served a request (``billed_by = 'traffic'``), never
  before or after, nor through a silence of more than :data:`TRAFFIC_GAP_HOURS` hours without a request
  (logs of January and of November bill the hours of each, not the months between); hours outside a
  declared schedule cost nothing (its requests there are counted as unbilled). Each hour its utilisation is ``busy_ms / capacity_ms`` (capped at 1), where ``busy_ms``
  sums the requests' service time and ``capacity_ms`` is ``replicas * slots_per_replica * 3.6e6`` over
  the periods. ``utilisation * fleet cost`` is allocated to that hour's requests by their share of busy
  time; the rest is *idle*. An hour with requests but no timing at all allocates the whole fleet cost
  by request count and leaves utilisation unknown.
* Idle GPU time is charged by the **idle policy** (:class:`IdlePolicy`, chosen per report and export,
  the store's default in its settings): ``apart`` keeps it as its own row, tenant ``(idle capacity)``
  (showback); ``usage`` spreads each model's idle over the tenants (and tiers) by their share of its busy
  time in the period shown (request counts where nothing is timed); ``reservations`` by the replicas each
  tenant reserved (``fleet_reservations``); ``centre`` charges it to one named cost centre. The shares of
  an hour's idle are 12-place decimals and the last takes the rest, so every policy gives the same total
  to the digit. A model nobody can be charged for (no busy time in the period, no reservation) keeps
  its idle apart.
* A model missing from the book costs nothing and is listed by
  :func:`unpriced_models`, so a page can say so.

Costs are computed when queried, from the rollups, the price rows and the fleet schedule, so editing
the book, an alias, a fleet's periods or syncing a newer catalogue reprices everything without
re-ingesting. Every request's cost is a decimal of 12 places before it is summed, so one store gives
one figure to the last digit.

>>> token_cost_usd(1_000_000, 0, 1_000_000, input_usd_per_1m=2.5, output_usd_per_1m=10.0)
12.5
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date

import duckdb
import pandas as pd

from finops import access, sql, store


def token_cost_usd(input_tokens: float, cached_input_tokens: float, output_tokens: float, *,
                   input_usd_per_1m: float, output_usd_per_1m: float,
                   cached_input_usd_per_1m: float | None = None, request_usd: float = 0.0,
                   requests: float = 1.0) -> float:
    """Cost of token-priced usage (the rule above), for hand checks and what-ifs."""
    cached_price = input_usd_per_1m if cached_input_usd_per_1m is None else cached_input_usd_per_1m
    uncached = max(input_tokens - cached_input_tokens, 0)
    return (uncached * input_usd_per_1m + cached_input_tokens * cached_price
            + output_tokens * output_usd_per_1m) / 1e6 + request_usd * requests


#: what an edited price book may hold, per column: (lowest, highest, whole numbers only). Empty cells
#: stay empty (a self-hosted row has no token prices, an API row no GPU fields).
PRICE_LIMITS: dict[str, tuple[float, float, bool]] = {
    "input_usd_per_1m": (0, 10_000, False), "output_usd_per_1m": (0, 10_000, False),
    "cached_input_usd_per_1m": (0, 10_000, False), "cache_write_usd_per_1m": (0, 10_000, False),
    "cache_write_1h_usd_per_1m": (0, 10_000, False), "request_usd": (0, 1_000, False),
    "gpu_hour_usd": (0, 1_000, False), "gpus_per_replica": (1, 64, True), "replicas": (0, 10_000, True),
    "slots_per_replica": (1, 10_000, True),
}


#: what a self-hosted row of the price book must give (its fleet's cost), in words
FLEET_WORDS = {"replicas": "replicas", "gpus_per_replica": "GPUs per replica", "gpu_hour_usd": "$ per GPU-hour"}
FLEET_COLUMNS = tuple(FLEET_WORDS)


def price_book(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.execute("SELECT * FROM prices ORDER BY kind DESC, model").df()


#: one price-book row per model (an API model may have dated, service-tier and context-tier rows): the row in
#: force on the day bound twice (``?``: a DATE), standard tier and base context first, then the latest start
BOOK_ROW_PER_MODEL_SQL = f"""
SELECT * EXCLUDE (_k) FROM (
  SELECT *, row_number() OVER (PARTITION BY model ORDER BY
      ((effective_from IS NULL OR effective_from <= CAST(? AS DATE))
       AND (effective_to IS NULL OR CAST(? AS DATE) < effective_to)) DESC,
      {sql.SERVICE_TIER} = '' DESC, coalesce(min_input_tokens, 0), effective_from DESC NULLS LAST) AS _k
  FROM prices WHERE model IS NOT NULL) WHERE _k = 1"""


def book_row_per_model(con: duckdb.DuckDBPyConnection, day: date | None = None) -> pd.DataFrame:
    """The price book with one row per model (:data:`BOOK_ROW_PER_MODEL_SQL`): the standard-tier, base-context row
    in force on ``day`` (None: the row with no end date), where a model has several."""
    day = day or date.max
    return con.execute(f"{BOOK_ROW_PER_MODEL_SQL} ORDER BY kind DESC, model", [day, day]).df()


def save_price_book(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> int:
    """Replace the price book with an edited table. Rows without a model are dropped."""
    access.require("edit_prices")
    from finops.errors import InputError

    cols = [n for n, _ in store.PRICE_COLUMNS]
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise InputError(f"price book lacks columns: {', '.join(missing)}")
    frame = frame[cols].copy()
    frame = frame[frame["model"].notna() & (frame["model"].astype(str).str.strip() != "")]
    key = pd.DataFrame({"model": frame["model"], "tier": frame["service_tier"].fillna("").astype(str).str.lower(),
                        "band": pd.to_numeric(frame["min_input_tokens"], errors="coerce").fillna(0),
                        "from": frame["effective_from"].astype(str)})
    dupes = frame["model"][key.duplicated()].tolist()
    if dupes:
        raise InputError(f"price book lists a model twice for the same tier and date: "
                         f"{', '.join(map(str, dupes))}", field="model")
    bands = pd.to_numeric(frame["min_input_tokens"], errors="coerce").dropna()
    off = bands[~bands.isin(sql.INPUT_BANDS)]
    if len(off):
        raise InputError(f"min_input_tokens {off.iloc[0]:,.0f} is not a context tier boundary; use one of "
                         f"{', '.join(f'{b:,}' for b in sql.INPUT_BANDS)}", field="min_input_tokens")
    fleets = frame[frame["kind"] == "self_hosted"]["model"]
    if fleets.duplicated().any():
        raise InputError(f"a self-hosted model has one row: {fleets[fleets.duplicated()].iloc[0]}", field="model")
    bad = frame[~frame["kind"].isin(["api", "self_hosted"])]
    if len(bad):
        raise InputError(f"kind must be api or self_hosted (model {bad['model'].iloc[0]})", field="kind")
    # a self-hosted row's fleet is billed from these where no schedule is declared: a cell emptied here made the
    # fleet's GPU cost vanish ($3,360 of the sample's llama-3.1-8b), and the model was listed nowhere as unpriced
    for i, row in enumerate(frame.itertuples(index=False), start=1):
        if row.kind != "self_hosted":
            continue
        for c in FLEET_COLUMNS:
            if pd.isna(getattr(row, c)):
                raise InputError(f"the self-hosted model {row.model} needs its {FLEET_WORDS[c]}: its fleet is billed "
                                 "from them", row=i, field=c)
    for i, row in enumerate(frame.itertuples(index=False), start=1):
        for c, (lo, hi, whole) in PRICE_LIMITS.items():
            raw = getattr(row, c)
            if raw is None or (isinstance(raw, float) and math.isnan(raw)) or raw is pd.NA or raw is pd.NaT:
                continue
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise InputError(f"{c} {raw!r} of model {row.model} is not a number", row=i, field=c) from None
            if not math.isfinite(value) or value < lo or value > hi or (whole and value != int(value)):
                kind = "a whole number" if whole else "a number"
                raise InputError(f"{c} {raw!r} of model {row.model} must be {kind} from {lo:,} to {hi:,}",
                                 row=i, field=c)
    con.register("_prices_in", frame)
    try:
        with store.transaction(con):
            con.execute("DELETE FROM prices")
            casts = ", ".join(f"CAST({n} AS {t}) AS {n}" for n, t in store.PRICE_COLUMNS)
            con.execute(f"INSERT INTO prices SELECT {casts} FROM _prices_in")
            store.refresh_resolution(con)
            store.bump_data_version(con)
    finally:
        con.unregister("_prices_in")
    return len(frame)


UNPRICED_COLUMNS = ("model", "provider", "requests", "tokens", "share_of_requests")


def unpriced_models(con: duckdb.DuckDBPyConnection, source: str = "SELECT * FROM rollup_hourly",
                    params: list | None = None) -> pd.DataFrame:
    """Models with traffic to price (requests without a recorded cost) that no price book row, alias or
    catalogue entry prices, among the rollup rows of ``source`` (by default the whole store;
    :func:`finops.spend.report.unpriced_models` gives a filters' rows): model, provider, requests, tokens, share
    of the requests in ``source``."""
    return con.execute(f"""
WITH r AS ({source})
SELECT r.model, r.provider, sum(r.priced_requests) AS requests,
       sum(r.priced_uncached_input_tokens + r.priced_cached_input_tokens + r.priced_cache_write_tokens
           + r.priced_cache_write_1h_tokens + r.priced_output_tokens) AS tokens,
       sum(r.priced_requests) / (SELECT nullif(sum(requests), 0) FROM r) AS share_of_requests
FROM r JOIN model_resolution m ON m.model = r.model AND m.provider = r.provider
WHERE m.price_source = '' GROUP BY 1, 2 HAVING sum(r.priced_requests) > 0 ORDER BY requests DESC, 1""",
                       list(params or [])).df()


def resolution(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """How each logged model is priced: model, provider, price_source (book, catalogue or '' unpriced),
    price_provider, price_model and ``how`` in words."""
    return con.execute("SELECT * FROM model_resolution ORDER BY model, provider").df()


def reset_price_book(con: duckdb.DuckDBPyConnection) -> int:
    """Replace the price book with the bundled list prices (``data/prices.csv``); reprices at once."""
    access.require("edit_prices")
    return store.load_price_book(con, store.PRICES_CSV)


def aliases(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The alias table: a private or deployment name (alias) priced as another model."""
    return con.execute("SELECT alias, model, provider FROM model_aliases ORDER BY alias").df()


def save_aliases(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> int:
    """Replace the alias table (rows without an alias or a model are dropped); reprices at once."""
    access.require("edit_aliases")
    from finops.errors import InputError
    rows = []
    for i, r in enumerate(frame.itertuples(index=False), start=1):
        alias, model = (str(v).strip() if isinstance(v, str) else "" for v in (r.alias, r.model))
        if not alias and not model:
            continue
        if not alias or not model:
            raise InputError("an alias needs both the logged name and the model it is priced as", row=i,
                             field="alias" if not alias else "model")
        provider = str(r.provider).strip() if isinstance(r.provider, str) and r.provider.strip() else None
        rows.append((alias, model, provider))
    fleets = {r[0] for r in con.execute("SELECT model FROM prices WHERE kind = 'self_hosted'").fetchall()}
    for i, (alias, model, _) in enumerate(rows, start=1):
        if model in fleets:
            raise InputError(f"{model} is a self-hosted fleet, billed by its GPU hours, not by name: log "
                             f"{alias}'s requests under {model}, or give {alias} a price book row", row=i,
                             field="model")
    names = [a for a, _, _ in rows]
    if len(set(names)) != len(names):
        raise InputError(f"an alias is listed twice: {sorted(n for n in names if names.count(n) > 1)[0]}",
                         field="alias")
    # one step only (catalogue.price_key): an alias of an alias would be priced as the middle name, not the last
    targets = {a: m for a, m, _ in rows}
    for i, (alias, model, provider) in enumerate(rows, start=1):
        if model == alias and provider is None:
            raise InputError(f"{alias} is priced as itself, which changes nothing: name the model it is "
                             "priced as, or a provider to price it at", row=i, field="model")
        if model != alias and model in targets:
            raise InputError(f"{model} is itself an alias (of {targets[model]}), and aliases do not chain: "
                             f"price {alias} as {targets[model]} directly", row=i, field="model")
    with store.transaction(con):
        con.execute("DELETE FROM model_aliases")
        if rows:
            con.executemany("INSERT INTO model_aliases VALUES (?, ?, ?)", rows)
        store.refresh_resolution(con)
        store.bump_data_version(con)
    return len(rows)


def explain(con: duckdb.DuckDBPyConnection, model: str, provider: str | None = None) -> dict:
    """How a logged name is priced (the resolution rule of the module docstring) and every price row that
    can apply to it (tiers, dates): ``{model, provider, price_source, price_provider, price_model, how, rows}``."""
    from finops import catalogue
    source, price_provider, price_model, how = catalogue.price_key(model, provider, *store.price_names(con))
    rows = con.execute(f"""
SELECT * EXCLUDE (price_source) FROM ({PRICE_ROWS_SQL})
WHERE price_source = ? AND model = ? AND (? = 'book' OR provider = ?)
ORDER BY service_tier, min_input_tokens, effective_from NULLS FIRST""",
                       [source, price_model, source, price_provider]).df()
    return {"model": model, "provider": provider, "price_source": source, "price_provider": price_provider,
            "price_model": price_model, "how": how, "rows": rows}


def catalogue_status(con: duckdb.DuckDBPyConnection) -> dict:
    """The synced catalogue: ``source`` (e.g. genai-prices 0.2.3), ``rows`` and ``providers``."""
    rows, providers = con.execute("SELECT count(*), count(DISTINCT provider) FROM catalogue_prices").fetchall()[0]
    return {"source": store.get_setting(con, "catalogue.source", "not synced"), "rows": int(rows),
            "providers": int(providers)}


# Every price row in one shape: the price book's (source 'book', keyed by the logged name) and the
# catalogue's (keyed by provider and model), prices as 9-place decimals.
_PRICE_FIELDS = ("input_usd_per_1m", "cached_input_usd_per_1m", "cache_write_usd_per_1m",
                 "cache_write_1h_usd_per_1m", "output_usd_per_1m", "request_usd")
PRICE_ROWS_SQL = f"""
SELECT 'book' AS price_source, '' AS provider, model, coalesce(kind, 'api') AS kind,
       {sql.SERVICE_TIER} AS service_tier, coalesce(min_input_tokens, 0) AS min_input_tokens,
       effective_from, effective_to, {", ".join(f"CAST({c} AS DECIMAL(18,9)) AS {c}" for c in _PRICE_FIELDS)}
FROM prices
UNION ALL
SELECT 'catalogue', provider, model, 'api', service_tier, min_input_tokens, effective_from, effective_to,
       {", ".join(_PRICE_FIELDS)}
FROM catalogue_prices"""


def picked_prices_sql(keys_sql: str) -> str:
    """For each key of ``keys_sql`` (a relation with model, provider, service_tier, input_band, day), the one
    price row that applies (see the module rules): its kind and prices, and ``how`` it was found."""
    return f"""
SELECT k.model, k.provider, k.service_tier, k.input_band, k.day, m.how, m.price_source, m.price_model,
       p.kind, p.service_tier AS price_tier, p.min_input_tokens, p.effective_from, {", ".join(f"p.{c}" for c in _PRICE_FIELDS)}
FROM ({keys_sql}) k
JOIN model_resolution m ON m.model = k.model AND m.provider = k.provider
JOIN ({PRICE_ROWS_SQL}) p ON p.price_source = m.price_source AND p.model = m.price_model
     AND (m.price_source = 'book' OR p.provider = m.price_provider)
     AND p.service_tier IN (k.service_tier, '') AND p.min_input_tokens <= k.input_band
     AND (p.effective_from IS NULL OR p.effective_from <= k.day) AND (p.effective_to IS NULL OR k.day < p.effective_to)
QUALIFY row_number() OVER (PARTITION BY k.model, k.provider, k.service_tier, k.input_band, k.day
                           ORDER BY p.service_tier = k.service_tier DESC, p.min_input_tokens DESC,
                                    p.effective_from DESC NULLS LAST) = 1"""


def class_prices_sql(fields_sql: str = "p.") -> dict[str, str]:
    """SQL of the $ per 1M each token class is billed at, an API model's, from the price fields named
    ``<fields_sql><field>`` (``p.input_usd_per_1m``; a costed row's ``c.list_input_usd_per_1m``): a cache read
    without a price of its own at the input price, a 1-hour cache write at the 5-minute one, else the input
    price. Keys: the rollup's class names (``uncached_input``, ``cached_input``, ``cache_write``,
    ``cache_write_1h``, ``output``) and ``request`` (the fee)."""
    inp = f"{fields_sql}input_usd_per_1m"
    return {"uncached_input": f"coalesce({inp}, 0)",
            "cached_input": f"coalesce({fields_sql}cached_input_usd_per_1m, {inp}, 0)",
            "cache_write": f"coalesce({fields_sql}cache_write_usd_per_1m, {inp}, 0)",
            "cache_write_1h": f"coalesce({fields_sql}cache_write_1h_usd_per_1m, {fields_sql}cache_write_usd_per_1m, {inp}, 0)",
            "output": f"coalesce({fields_sql}output_usd_per_1m, 0)",
            "request": f"coalesce({fields_sql}request_usd, 0)"}


def _input_cost(prefix: str) -> str:
    """SQL of the token-price cost of a rollup row's ``<prefix>_*`` input classes (``r``) at prices ``p``,
    an API model's (uncached, cached, cache writes of 5 minutes and of an hour), times 1e6."""
    prefix = sql.column(prefix, ("priced", "recorded"), "token class prefix")
    price = class_prices_sql()
    return "(" + "\n     + ".join(f"r.{prefix}_{c}_tokens * {price[c]}"
                                 for c in ("uncached_input", "cached_input", "cache_write", "cache_write_1h")) + ")"


def _output_cost(prefix: str) -> str:
    """The output class's cost, times 1e6 (see :func:`_input_cost`)."""
    prefix = sql.column(prefix, ("priced", "recorded"), "token class prefix")
    return f"(r.{prefix}_output_tokens * {class_prices_sql()['output']})"


def _classes_cost(prefix: str, requests_sql: str) -> str:
    """SQL of the token-price cost of a rollup row's ``<prefix>_*`` token classes (``r``) at prices ``p``."""
    return f"""(CASE WHEN coalesce(p.kind, 'api') = 'api' THEN
    ({_input_cost(prefix)}
     + {_output_cost(prefix)}) / 1e6
    + {requests_sql} * {class_prices_sql()['request']} ELSE 0 END)"""


#: an API model's priced input and output classes at the prices in force, in $ (the per-class view)
PRICED_INPUT_COST_SQL = f"({_input_cost('priced')} / 1e6)"
PRICED_OUTPUT_COST_SQL = f"({_output_cost('priced')} / 1e6)"


# SQL fragments over a rollup-shaped relation ``r`` joined to its picked prices ``p``.
TOKEN_COST_SQL = _classes_cost("priced", "r.priced_requests")
# the recorded cost a request's cost counts: all of it, but for a self-hosted model, whose GPU hours are its cost
COUNTED_RECORDED_SQL = "(CASE WHEN p.kind = 'self_hosted' THEN 0 ELSE r.recorded_cost_usd END)"
#: the ``priced_by`` of a self-hosted model whose logs record a cost (:func:`finops.spend.report.reconcile`)
RECORDED_NOT_COUNTED = "price book (fleet GPU hours counted, not the recorded cost)"
# what the requests whose cost was recorded cost at list prices (the reconciliation view)
LIST_COST_OF_RECORDED_SQL = _classes_cost("recorded", "r.recorded_served_requests")

# what the cache hits would have cost on their model (token-priced models only)
CACHE_SAVED_SQL = """(CASE WHEN coalesce(p.kind, 'api') = 'api' THEN
    (r.cache_uncached_input_tokens * coalesce(p.input_usd_per_1m, 0)
     + r.cache_cached_input_tokens * coalesce(p.cached_input_usd_per_1m, p.input_usd_per_1m, 0)
     + r.cache_output_tokens * coalesce(p.output_usd_per_1m, 0)) / 1e6
    + r.cache_hits * coalesce(p.request_usd, 0) ELSE 0 END)"""

# the key a rollup row is priced by, and the join from ``r`` to its picked prices ``p``
PRICE_KEYS_SQL = "SELECT DISTINCT model, provider, service_tier, input_band, CAST(hour AS DATE) AS day FROM r"
PRICE_JOIN_SQL = ("p.model = r.model AND p.provider = r.provider AND p.service_tier = r.service_tier "
                  "AND p.input_band = r.input_band AND p.day = CAST(r.hour AS DATE)")


def allocated_sql(busy_sql: str, served_sql: str) -> str:
    """SQL of the part of an hour's allocated GPU cost (``alloc`` row ``a``) that busy time ``busy_sql``
    and served requests ``served_sql`` carry: by busy time, by request count in an hour with no timing."""
    return (f"(CASE WHEN a.busy_ms > 0 THEN a.allocated_usd * {busy_sql} / a.busy_ms "
            f"WHEN a.served > 0 THEN a.allocated_usd * {served_sql} / a.served END)")


@dataclass(frozen=True)
class IdlePolicySpec:
    """One idle policy: its key, what it is called and what it does (its weights: :data:`IDLE_WEIGHTS_SQL`)."""
    key: str
    label: str
    help: str


IDLE_POLICIES: tuple[IdlePolicySpec, ...] = (
    IdlePolicySpec("apart", "keep idle apart (showback)",
                   "Idle GPU time is its own row, tenant (idle capacity): no tenant pays for it."),
    IdlePolicySpec("usage", "spread by usage",
                   "Each model's idle is shared by the tenants by their share of its busy time in the period."),
    IdlePolicySpec("reservations", "spread by reservations",
                   "Each model's idle is shared by the tenants by the replicas they reserved of it."),
    IdlePolicySpec("centre", "charge to a cost centre",
                   "All idle GPU time is charged to one named cost centre (e.g. the platform team)."),
)
#: the weights each spreading policy splits a model's idle by: ``model, tenant, sla_tier, weight``; they
#: may read the ``alloc`` relation (the fleet's paid hours, :func:`alloc_sql`); ``centre``'s ``?`` is the
#: cost centre. A policy without an entry keeps idle apart.
IDLE_WEIGHTS_SQL: dict[str, str] = {
    # busy time (whole microseconds) of each tenant and tier in the model's paid hours; request counts
    # where the model has no timing at all
    "usage": f"""
SELECT b.model, b.tenant, b.sla_tier,
       CASE WHEN sum(sum(CAST(round(b.busy_ms * 1000) AS BIGINT))) OVER (PARTITION BY b.model) > 0
            THEN sum(CAST(round(b.busy_ms * 1000) AS BIGINT)) ELSE sum({sql.served_requests('b')}) END AS weight
FROM rollup_hourly b SEMI JOIN alloc a ON a.model = b.model AND a.hour = b.hour
GROUP BY 1, 2, 3""",
    "reservations": """
SELECT model, tenant, '' AS sla_tier, replicas AS weight FROM fleet_reservations
WHERE model IS NOT NULL AND tenant IS NOT NULL""",
    "centre": "SELECT DISTINCT model, CAST(? AS VARCHAR) AS tenant, '' AS sla_tier, 1 AS weight FROM alloc",
}
IDLE_POLICY_KEYS = tuple(p.key for p in IDLE_POLICIES)
_POLICY_BY_KEY = {p.key: p for p in IDLE_POLICIES}


@dataclass(frozen=True)
class IdlePolicy:
    """How idle GPU time is charged (the module rules): ``kind`` one of :data:`IDLE_POLICY_KEYS`, and the
    cost centre for ``centre``.

    >>> IdlePolicy.parse("centre:platform"), IdlePolicy.parse("usage").text
    (IdlePolicy(kind='centre', cost_centre='platform'), 'usage')
    """
    kind: str = "apart"
    cost_centre: str = ""

    def __post_init__(self):
        from finops.errors import InputError
        if self.kind not in _POLICY_BY_KEY:
            raise InputError(f"unknown idle policy {self.kind!r}; choose from {', '.join(IDLE_POLICY_KEYS)} "
                             "(centre:NAME for a cost centre)", field="idle_policy")
        if self.kind == "centre" and not self.cost_centre.strip():
            raise InputError("name the cost centre that pays for idle GPU time (centre:NAME)", field="idle_policy")

    @classmethod
    def parse(cls, text: str) -> IdlePolicy:
        """``apart``, ``usage``, ``reservations`` or ``centre:NAME``."""
        kind, _, centre = str(text).strip().partition(":")
        return cls(kind.strip().lower(), centre.strip())

    @property
    def text(self) -> str:
        return f"centre:{self.cost_centre}" if self.kind == "centre" else self.kind

    @property
    def spec(self) -> IdlePolicySpec:
        return _POLICY_BY_KEY[self.kind]

    @property
    def label(self) -> str:
        return f"charge to {self.cost_centre}" if self.kind == "centre" else self.spec.label

    @property
    def spreads(self) -> bool:
        return self.kind in IDLE_WEIGHTS_SQL

    def weights_sql(self) -> tuple[str, list]:
        """The weights relation of a spreading policy and its parameters (:data:`IDLE_WEIGHTS_SQL`)."""
        return IDLE_WEIGHTS_SQL[self.kind], ([self.cost_centre] if self.kind == "centre" else [])


KEEP_APART = IdlePolicy()

#: what a costed row is: a request's ``usage``, ``idle`` GPU time kept apart, or an ``idle_share`` charged out
CHARGES = ("usage", "idle", "idle_share")


def costed_rollup_sql(source: str, hours_sql: str, weights_sql: str | None = None) -> str:
    """Rollup rows with ``cost_usd`` (recorded + token-priced + allocated GPU time), ``cache_saved_usd``,
    ``gpu_hour_usd`` (the fleet's rate that hour) and ``charge`` (:data:`CHARGES`), plus the idle GPU time
    of each self-hosted model and hour. ``recorded_counted_usd`` is the part of ``recorded_cost_usd`` that
    ``cost_usd`` counts (:data:`COUNTED_RECORDED_SQL`: none of a self-hosted model's).

    ``source`` is a rollup-shaped relation already filtered; ``hours_sql`` the period's hours
    (:func:`hours_sql`: the fleet is paid for those it ran in, for the part of each the period covers). The allocation uses each hour's busy
    time of *all* traffic of the model, so a tenant filter does not inflate its share. Without
    ``weights_sql`` idle is one row per model and hour (tenant ``(idle capacity)``, ``is_idle``); with it
    (an idle policy's, :meth:`IdlePolicy.weights_sql`) it is split over the weights' tenants as
    ``idle_share`` rows, of every tenant (filter them by tenant afterwards). Parameters: the source's,
    the hours', the weights'.
    """
    usage = f"""
SELECT r.*, 'usage' AS charge, false AS is_idle,
       CAST({COUNTED_RECORDED_SQL} + {TOKEN_COST_SQL}
            + coalesce({allocated_sql('r.busy_ms', sql.served_requests('r'))}, 0) AS DECIMAL(38,12)) AS cost_usd,
       CAST({COUNTED_RECORDED_SQL} AS DECIMAL(38,12)) AS recorded_counted_usd,
       CAST({CACHE_SAVED_SQL} AS DECIMAL(38,12)) AS cache_saved_usd,
       CAST({LIST_COST_OF_RECORDED_SQL} AS DECIMAL(38,12)) AS list_cost_of_recorded_usd,
       a.gpu_hour_usd, p.how AS priced_by, p.kind AS price_kind,
       coalesce(nullif(p.price_model, ''), r.model) AS priced_as,
       {", ".join(f"p.{c} AS list_{c}" for c in _PRICE_FIELDS)}
FROM r LEFT JOIN p ON {PRICE_JOIN_SQL}
       LEFT JOIN alloc a ON a.model = r.model AND a.hour = {sql.time_bucket('hour', 'r.hour')}"""
    idle_row = f"""
SELECT a.hour, a.model, {sql.IDLE_LABEL} AS tenant, '' AS route, '' AS sla_tier, '' AS status,
       '' AS provider, '' AS service_tier, a.model AS priced_as, 'idle' AS charge, true AS is_idle,
       CAST(a.fleet_cost_usd - a.allocated_usd AS DECIMAL(38,12)) AS cost_usd,
       CAST(0 AS DECIMAL(38,12)) AS cache_saved_usd, a.gpu_hour_usd, 'price book (idle GPU time)' AS priced_by
FROM alloc a WHERE a.fleet_cost_usd - a.allocated_usd > 0"""
    head = f"""
WITH r AS ({source}),
p AS ({picked_prices_sql(PRICE_KEYS_SQL)}),
alloc AS MATERIALIZED ({alloc_sql(hours_sql)})"""
    if weights_sql is None:
        return f"{head}{usage}\nUNION ALL BY NAME{idle_row}\n"
    # an hour's idle split by the weights: 12-place shares, the last one (by tenant, tier) takes the rest
    return f"""{head},
w AS ({weights_sql}),
wn AS (SELECT model, tenant, sla_tier, weight / sum(weight) OVER (PARTITION BY model) AS share
       FROM w WHERE weight > 0),
parts AS (
  SELECT i.hour, i.model, wn.tenant, wn.sla_tier, i.gpu_hour_usd,
         CAST(i.fleet_cost_usd - i.allocated_usd AS DECIMAL(38,12)) AS idle_usd,
         CAST(CAST(i.fleet_cost_usd - i.allocated_usd AS DECIMAL(38,12)) * wn.share AS DECIMAL(38,12)) AS part,
         row_number() OVER (PARTITION BY i.model, i.hour ORDER BY wn.tenant, wn.sla_tier) AS k,
         count(*) OVER (PARTITION BY i.model, i.hour) AS n
  FROM alloc i JOIN wn ON wn.model = i.model WHERE i.fleet_cost_usd - i.allocated_usd > 0)
{usage}
UNION ALL BY NAME
SELECT * FROM ({idle_row}) WHERE model NOT IN (SELECT model FROM wn)
UNION ALL BY NAME
SELECT hour, model, tenant, '' AS route, sla_tier, '' AS status, '' AS provider, '' AS service_tier,
       model AS priced_as, 'idle_share' AS charge, false AS is_idle,
       CAST(CASE WHEN k = n THEN idle_usd - (sum(part) OVER (PARTITION BY model, hour) - part) ELSE part END
            AS DECIMAL(38,12)) AS cost_usd,
       CAST(0 AS DECIMAL(38,12)) AS cache_saved_usd, gpu_hour_usd, 'idle GPU time charged out' AS priced_by
FROM parts
"""


#: the longest run of hours without a served request that a fleet billed by its traffic is taken to have
#: run through (a night, a quiet day); a longer silence ends its period: no log shows it ran
TRAFFIC_GAP_HOURS = 24

#: the periods each self-hosted model's fleet is billed for (the module rules): its declared schedule
#: (empty GPUs and rates from the price book), else the price book's fleet from the first hour in which
#: the model served a request to the end of the last, each silence over TRAFFIC_GAP_HOURS ending one period
#: and the next request starting another; ``billed_by`` declared, inferred or traffic
FLEET_PERIODS_SQL = f"""
SELECT s.model, s.starts_at, s.ends_at, s.replicas,
       coalesce(s.gpus_per_replica, p.gpus_per_replica) AS gpus_per_replica,
       coalesce(s.gpu_hour_usd, p.gpu_hour_usd) AS gpu_hour_usd, p.slots_per_replica,
       coalesce(nullif(s.source, ''), 'declared') AS billed_by, coalesce(s.site, '') AS site
FROM fleet_schedule s JOIN prices p ON p.model = s.model AND p.kind = 'self_hosted'
WHERE s.starts_at IS NOT NULL
UNION ALL
SELECT p.model, t.first_hour, t.last_hour + INTERVAL 1 HOUR, p.replicas, p.gpus_per_replica, p.gpu_hour_usd,
       p.slots_per_replica, 'traffic', ''
FROM prices p JOIN (
  SELECT model, min(hour) AS first_hour, max(hour) AS last_hour FROM (
    SELECT model, hour, count(*) FILTER (WHERE gap) OVER (PARTITION BY model ORDER BY hour) AS run FROM (
      SELECT model, hour, coalesce(hour - lag(hour) OVER (PARTITION BY model ORDER BY hour)
                                   > INTERVAL {TRAFFIC_GAP_HOURS + 1} HOUR, true) AS gap
      FROM rollup_hourly WHERE {sql.served_requests()} > 0 GROUP BY model, hour))
  GROUP BY model, run) t ON t.model = p.model
WHERE p.kind = 'self_hosted'
  AND p.model NOT IN (SELECT model FROM fleet_schedule WHERE model IS NOT NULL AND starts_at IS NOT NULL)"""

#: how many hours of the paid part [starts, ends) of an hour ``h`` (:func:`hours_sql`) a period ``s`` covers (1.0 for
#: a whole hour)
_OVERLAP_H = ("date_diff('microsecond', greatest(s.starts_at, h.starts), "
              "least(coalesce(s.ends_at, h.ends), h.ends)) / 3.6e9")
#: an hour of :func:`hours_sql` the period covers only part of (it starts or ends inside it)
_PART_HOUR = "(h.starts > h.hour OR h.ends < h.hour + INTERVAL 1 HOUR)"


def alloc_sql(hours_sql: str) -> str:
    """Per self-hosted model and hour of ``hours_sql`` (:func:`hours_sql`) in which its fleet ran
    (:data:`FLEET_PERIODS_SQL`): fleet_cost_usd, gpu_hours, gpu_hour_usd (its rate, or the blend of its periods'
    rates), replicas (replica-hours in the hour), billed_by (declared before inferred before traffic), busy_ms,
    served, utilization, allocated_usd. Of an hour the period covers in part, only that part is paid for, and
    its busy time and served requests are those of the part (read from the raw rows), so the requests of the
    period carry the whole allocated cost and the rest is idle: nothing is lost at the period's edges."""
    return f"""
WITH periods AS MATERIALIZED ({FLEET_PERIODS_SQL}),
h AS MATERIALIZED ({hours_sql}),
covered AS (
  SELECT h.hour, s.*, {_OVERLAP_H} AS hours
  FROM h JOIN periods s
    ON s.starts_at < h.ends AND (s.ends_at IS NULL OR s.ends_at > h.starts)),
fleet AS (
  SELECT hour, model, sum(replicas * gpus_per_replica * gpu_hour_usd * hours) AS fleet_cost_usd,
         sum(replicas * slots_per_replica * 3.6e6 * hours) AS capacity_ms,
         sum(replicas * gpus_per_replica * hours) AS gpu_hours, sum(replicas * hours) AS replicas,
         CASE WHEN min(gpu_hour_usd) = max(gpu_hour_usd) THEN min(gpu_hour_usd)
              ELSE sum(replicas * gpus_per_replica * gpu_hour_usd * hours)
                   / nullif(sum(replicas * gpus_per_replica * hours), 0) END AS gpu_hour_usd,
         min(billed_by) AS billed_by
  FROM covered WHERE hours > 0 GROUP BY 1, 2),
busy AS (
  -- busy_ms of a rollup row is whole microseconds / 1000: summed as integers, the same every run
  SELECT b.hour, b.model, sum(CAST(round(b.busy_ms * 1000) AS BIGINT)) / 1000.0 AS busy_ms,
         sum({sql.served_requests('b')}) AS served
  FROM rollup_hourly b WHERE b.model IN (SELECT model FROM periods)
    AND b.hour NOT IN (SELECT h.hour FROM h WHERE {_PART_HOUR}) GROUP BY ALL
  UNION ALL
  -- the part of an hour the period covers: its own requests, as the rollup rows of the part are read (raw rows)
  SELECT h.hour, coalesce(q.model, '') AS model,
         coalesce(sum(CAST(round({sql.BUSY_MS} * 1000) AS BIGINT)) FILTER (WHERE {sql.SERVED}), 0) / 1000.0 AS busy_ms,
         count(*) FILTER (WHERE {sql.SERVED}) AS served
  FROM requests q JOIN h ON q.ts >= h.starts AND q.ts < h.ends
  WHERE {_PART_HOUR} AND q.model IN (SELECT model FROM periods) GROUP BY ALL)
SELECT f.hour, f.model, f.fleet_cost_usd, f.gpu_hours, f.gpu_hour_usd, f.replicas, f.billed_by, b.busy_ms,
       coalesce(b.served, 0) AS served,
       CASE WHEN coalesce(b.busy_ms, 0) > 0 THEN least(b.busy_ms / f.capacity_ms, 1.0)
            WHEN coalesce(b.served, 0) = 0 THEN 0.0 END AS utilization,
       CASE WHEN coalesce(b.busy_ms, 0) > 0 THEN f.fleet_cost_usd * least(b.busy_ms / f.capacity_ms, 1.0)
            WHEN coalesce(b.served, 0) > 0 THEN f.fleet_cost_usd ELSE 0 END AS allocated_usd
FROM fleet f LEFT JOIN busy b ON b.hour = f.hour AND b.model = f.model"""


#: the store's span in whole hours (``lo``, ``hi``: the first and the last hour): its traffic's, widened to
#: the declared fleet periods (their start, and their last hour where they end), which are billed too
SPAN_SQL = f"""
SELECT min(lo) AS lo, max(hi) AS hi FROM (
  SELECT min(hour) AS lo, max(hour) AS hi FROM rollup_hourly
  UNION ALL
  SELECT {sql.time_bucket('hour', 'starts_at')},
         {sql.time_bucket('hour', 'coalesce(ends_at - INTERVAL 1 MICROSECOND, starts_at)')}
  FROM fleet_schedule WHERE starts_at IS NOT NULL AND model IN (SELECT model FROM prices WHERE kind = 'self_hosted'))"""


def store_span(con: duckdb.DuckDBPyConnection):
    """(first hour, last hour) of the store (:data:`SPAN_SQL`), or (None, None) when it is empty."""
    return tuple(con.execute(SPAN_SQL).fetchall()[0])


def hours_sql(since=None, until=None) -> tuple[str, list]:
    """The paid hours of a period: each ``hour`` of [since, until) floored to hours (else of the store's span,
    :data:`SPAN_SQL`) with the part of it the period covers, [``starts``, ``ends``): the whole hour but where
    ``since`` or ``until`` falls inside it."""
    lo = sql.time_bucket("hour", "CAST(? AS TIMESTAMP)") if since is not None else f"(SELECT lo FROM ({SPAN_SQL}))"
    hi = (sql.time_bucket("hour", "CAST(? AS TIMESTAMP) - INTERVAL 1 MICROSECOND") if until is not None
          else f"(SELECT hi FROM ({SPAN_SQL}))")
    starts = "greatest(hour, CAST(? AS TIMESTAMP))" if since is not None else "hour"
    ends = "least(hour + INTERVAL 1 HOUR, CAST(? AS TIMESTAMP))" if until is not None else "hour + INTERVAL 1 HOUR"
    params = [v for v in (since, until) if v is not None]
    return (f"SELECT hour, {starts} AS starts, {ends} AS ends FROM ("
            f"SELECT unnest(generate_series({lo}, {hi}, INTERVAL 1 HOUR)) AS hour "
            f"WHERE {lo} IS NOT NULL AND {hi} IS NOT NULL)"), params + params + params


def fleet_utilization(con: duckdb.DuckDBPyConnection, since=None, until=None) -> pd.DataFrame:
    """Per self-hosted model and hour: fleet cost, allocated and idle $, utilisation (None = unknown)."""
    hours, params = hours_sql(since, until)
    return con.execute(f"SELECT *, fleet_cost_usd - allocated_usd AS idle_usd FROM ({alloc_sql(hours)}) "
                       f"ORDER BY model, hour", params).df()
