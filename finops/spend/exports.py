"""Exports: CSV that spreadsheets cannot execute, Parquet, and a FOCUS-shaped CSV."""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from decimal import Decimal

import pandas as pd

from finops import sql
from finops.fmt import round_costs

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    """Prefix a quote to text cells that a spreadsheet would run as a formula.

    >>> neutralise("=HYPERLINK(1)"), neutralise("-3 apples"), neutralise(-3), neutralise("acme")
    ("'=HYPERLINK(1)", "'-3 apples", -3, 'acme')
    """
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def safe_csv(frame: pd.DataFrame, round_money: bool = True) -> str:
    """CSV text of ``frame`` with formula-like text cells neutralised (numbers are left as numbers, costs
    rounded to micro-dollars: :func:`finops.fmt.round_costs`, unless ``round_money`` is false)."""
    out = round_costs(frame) if round_money else frame.copy()
    for c in out.columns:
        if out[c].dtype == object or pd.api.types.is_string_dtype(out[c]):
            out[c] = out[c].map(neutralise)
    out.columns = [neutralise(str(c)) for c in out.columns]
    buf = io.StringIO()
    out.to_csv(buf, index=False)
    return buf.getvalue()


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as a Parquet file (pyarrow, no index), for downloads."""
    buf = io.BytesIO()
    round_costs(frame).to_parquet(buf, index=False, engine="pyarrow")      # costs to micro-dollars
    return buf.getvalue()


# ---------------------------------------------------------------- FOCUS 1.2

# (column, FOCUS data type, feature level, nulls allowed). The columns of FOCUS 1.2 we can fill
# honestly from request logs and the price book: every Mandatory one, plus the Recommended
# ChargeFrequency / InvoiceId / ServiceSubcategory and the Conditional ConsumedQuantity/Unit,
# ListUnitPrice, SkuId / SkuMeter / SkuPriceId and Tags.
FOCUS_COLUMNS: tuple[tuple[str, str, str, bool], ...] = (
    ("BilledCost", "Decimal", "Mandatory", False),
    ("BillingAccountId", "String", "Mandatory", False),
    ("BillingAccountName", "String", "Mandatory", True),
    ("BillingCurrency", "String", "Mandatory", False),
    ("BillingPeriodEnd", "DateTime", "Mandatory", False),
    ("BillingPeriodStart", "DateTime", "Mandatory", False),
    ("ChargeCategory", "String", "Mandatory", False),
    ("ChargeClass", "String", "Mandatory", True),
    ("ChargeDescription", "String", "Mandatory", True),
    ("ChargeFrequency", "String", "Recommended", False),
    ("ChargePeriodEnd", "DateTime", "Mandatory", False),
    ("ChargePeriodStart", "DateTime", "Mandatory", False),
    ("ConsumedQuantity", "Decimal", "Conditional", True),
    ("ConsumedUnit", "String", "Conditional", True),
    ("ContractedCost", "Decimal", "Mandatory", False),
    ("EffectiveCost", "Decimal", "Mandatory", False),
    ("InvoiceId", "String", "Recommended", True),
    ("InvoiceIssuerName", "String", "Mandatory", False),
    ("ListCost", "Decimal", "Mandatory", False),
    ("ListUnitPrice", "Decimal", "Conditional", True),
    ("PricingQuantity", "Decimal", "Mandatory", True),
    ("PricingUnit", "String", "Mandatory", True),
    ("ProviderName", "String", "Mandatory", False),
    ("PublisherName", "String", "Mandatory", False),
    ("ServiceCategory", "String", "Mandatory", False),
    ("ServiceName", "String", "Mandatory", False),
    ("ServiceSubcategory", "String", "Recommended", False),
    ("SkuId", "String", "Conditional", True),
    ("SkuMeter", "String", "Conditional", True),
    ("SkuPriceId", "String", "Conditional", True),
    ("Tags", "JSON", "Conditional", True),
)
FOCUS_MANDATORY = tuple(c for c, _, level, _ in FOCUS_COLUMNS if level == "Mandatory")
CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")
SERVICE_CATEGORY = "AI and Machine Learning"
SERVICE_CATEGORIES = ("AI and Machine Learning", "Analytics", "Business Applications", "Compute", "Databases",
                      "Developer Tools", "Multicloud", "Identity", "Integration", "Internet of Things",
                      "Management and Governance", "Media", "Migration", "Mobile", "Networking", "Security",
                      "Storage", "Web", "Other")
SERVICE_SUBCATEGORY = "Generative AI"
DEFAULT_ACCOUNT = ("llm-fleet", "LLM inference fleet (finops showback)")


@dataclass(frozen=True)
class Meter:
    """One SkuMeter: what a charge row counts and the price-book column it is charged at.

    ``served_sql`` is its quantity over costed rollup rows (what a model served: cache hits excluded),
    ``priced_sql`` the part of it the price book prices (requests with no recorded cost). ``prices``
    are price-book columns, the first non-null one is the list price (the fallback the cost rules
    use); ``per`` units make one PricingUnit. A ``book_only`` meter is emitted only for models whose
    book has that price (a per-request fee), or to carry a recorded cost nothing else can carry.
    """
    key: str
    name: str
    served_sql: str
    priced_sql: str
    prices: tuple[str, ...]
    per: int
    pricing_unit: str
    consumed_unit: str
    book_only: bool = False


# Table-driven: a new token class is one more entry here. Prices are the ``list_*`` columns of the costed
# rows: the price row in force for each request (book or catalogue, its tier and date), first non-null.
_UNCACHED_SERVED = ("input_tokens - cached_input_tokens - cache_write_tokens - cache_write_1h_tokens "
                    "- cache_uncached_input_tokens")
API_METERS: tuple[Meter, ...] = (
    Meter("input", "Input Tokens", _UNCACHED_SERVED, "priced_uncached_input_tokens", ("list_input_usd_per_1m",),
          1_000_000, "1000000 Tokens", "Tokens"),
    Meter("cached_input", "Cached Input Tokens", "cached_input_tokens - cache_cached_input_tokens",
          "priced_cached_input_tokens", ("list_cached_input_usd_per_1m", "list_input_usd_per_1m"), 1_000_000,
          "1000000 Tokens", "Tokens"),
    Meter("cache_write", "Cache Write Tokens", "cache_write_tokens", "priced_cache_write_tokens",
          ("list_cache_write_usd_per_1m", "list_input_usd_per_1m"), 1_000_000, "1000000 Tokens", "Tokens"),
    Meter("cache_write_1h", "Cache Write Tokens (1 hour)", "cache_write_1h_tokens", "priced_cache_write_1h_tokens",
          ("list_cache_write_1h_usd_per_1m", "list_cache_write_usd_per_1m", "list_input_usd_per_1m"), 1_000_000,
          "1000000 Tokens", "Tokens"),
    Meter("output", "Output Tokens", "output_tokens - cache_output_tokens", "priced_output_tokens",
          ("list_output_usd_per_1m",), 1_000_000, "1000000 Tokens", "Tokens"),
    Meter("request", "Requests", sql.served_requests(), "priced_requests", ("list_request_usd",), 1,
          "Requests", "Requests", book_only=True),
)
REQUEST_METER = API_METERS[-1]
# self-hosted fleets: GPU time, the allocated busy share of a tenant or the idle rest
GPU_METER = Meter("gpu_hour", "GPU-Hours", "0", "0", ("gpu_hour_usd",), 1, "GPU-Hours", "GPU-Hours")
GPU_HOURS_DECIMALS = 9        # GPU-hours are rounded to 3.6 us; the cost is then hours x rate exactly
SHARE_DECIMALS = 12           # a recorded cost's shares, the last one taking the remainder


def _focus_time(ts) -> str:
    return pd.Timestamp(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dec(x) -> Decimal:
    """A float as the decimal it prints as (0.075 -> Decimal('0.075')), so products are exact."""
    return Decimal(repr(float(x)))


def invoice_id(account_id: str, provider: str, billing_period_start) -> str:
    """The InvoiceId of a charge: one provisional invoice per showback account, issuer and calendar month.

    >>> invoice_id("llm-fleet", "Acme AI", "2026-03-01")
    'finops-llm-fleet-acme-ai-2026-03'
    """
    issuer = re.sub(r"[^a-z0-9]+", "-", provider.lower()).strip("-") or "unknown"
    return f"finops-{account_id}-{issuer}-{pd.Timestamp(billing_period_start):%Y-%m}"


def _usage_sql(con, period, idle_policy=None) -> tuple[str, list]:
    """Costed rollup rows summed per UTC day, tenant, model, tier, charge and GPU rate, with each meter's
    served and priced quantity (one implementation of the costs: ``spend.report.costed``); ``recorded_cost_usd``
    is the recorded cost the bill counts (none of a self-hosted model's: its GPU hours are its cost)."""
    from finops.spend import report as spend
    costed_sql, params = spend.costed(con, period, idle_policy=idle_policy)
    meters = ", ".join(f"coalesce(sum({m.served_sql}), 0) AS served_{m.key}, "
                       f"coalesce(sum({m.priced_sql}), 0) AS priced_{m.key}" for m in API_METERS)
    prices = ", ".join(f"list_{c}" for c in ("input_usd_per_1m", "cached_input_usd_per_1m", "cache_write_usd_per_1m",
                                              "cache_write_1h_usd_per_1m", "output_usd_per_1m", "request_usd"))
    return (f"SELECT {sql.time_bucket('day', 'hour')} AS day, tenant, model, sla_tier, is_idle, charge, gpu_hour_usd, "
            f"price_kind, {prices}, "
            f"coalesce(sum(cost_usd), 0) AS cost_usd, coalesce(sum(recorded_counted_usd), 0) AS recorded_cost_usd, "
            f"{meters} FROM ({costed_sql}) GROUP BY ALL ORDER BY 1, 2, 3, 4", params)


def _book_price(p, meter: Meter) -> Decimal | None:
    """The list price of ``meter`` in a row ``p`` (a price-book row, or a usage row's ``list_*`` columns)."""
    for col in meter.prices:
        value = p.get(col) if isinstance(p, dict) else (p[col] if p is not None and col in p else None)
        if value is not None and pd.notna(value):
            return _dec(value)
    return None


def _split(total: Decimal, weights: list[Decimal]) -> list[Decimal]:
    """``total`` in proportion to ``weights`` (rounded to SHARE_DECIMALS; the last share takes the rest)."""
    whole = sum(weights)
    step = Decimal(1).scaleb(-SHARE_DECIMALS)
    shares = [(total * w / whole).quantize(step) for w in weights[:-1]]
    return [*shares, total - sum(shares)]


def _charges(g, p, kind: str) -> list[tuple[Meter, Decimal, Decimal, Decimal, Decimal]]:
    """(meter, PricingQuantity, ListUnitPrice, ListCost, BilledCost) of one day x tenant x model x tier."""
    recorded = _dec(g.recorded_cost_usd)
    rows: list[list] = []
    if kind == "self_hosted":
        # the fleet's rate in those hours (its schedule's), else the book's
        rate = _dec(g.gpu_hour_usd) if pd.notna(g.gpu_hour_usd) else _book_price(p, GPU_METER) or Decimal(0)
        gpu_usd = _dec(g.cost_usd) - recorded                  # allocated busy share, or the idle rest
        hours = (gpu_usd / rate).quantize(Decimal(1).scaleb(-GPU_HOURS_DECIMALS)) if rate else Decimal(0)
        if hours > 0:
            rows.append([GPU_METER, hours, rate, hours * rate, hours * rate, Decimal(0)])
    else:
        listed = g._asdict()
        for m in API_METERS:
            price = _book_price(listed, m)
            served, priced = int(getattr(g, f"served_{m.key}")), int(getattr(g, f"priced_{m.key}"))
            if served <= 0 or (m.book_only and price is None):
                continue
            price = price or Decimal(0)
            qty = Decimal(served) / m.per
            unrecorded = Decimal(min(priced, served)) * price / m.per
            rows.append([m, qty, price, qty * price, unrecorded, qty * price - unrecorded])
    if recorded:
        weights = [r[5] for r in rows if r[0] is not GPU_METER]
        if not any(weights):                 # nothing at list price to split over: the Requests meter carries it
            carrier = next((r for r in rows if r[0] is REQUEST_METER), None)
            if carrier is None:
                price = _book_price(g._asdict(), REQUEST_METER) or Decimal(0)
                qty = Decimal(max(int(g.served_request), 0))
                carrier = [REQUEST_METER, qty, price, qty * price, Decimal(0), Decimal(0)]
                rows.append(carrier)
            carrier[5] = Decimal(1)
        carriers = [r for r in rows if r[0] is not GPU_METER and r[5]]
        for r, share in zip(carriers, _split(recorded, [r[5] for r in carriers]), strict=True):
            r[4] += share
    return [(m, qty, price, list_cost, billed) for m, qty, price, list_cost, billed, _w in rows]


def focus_frame(con, f, billing_account: tuple[str, str] = DEFAULT_ACCOUNT, idle_policy=None) -> pd.DataFrame:
    """The spend of ``f`` as FOCUS 1.2 cost-and-usage rows: one charge row per UTC day x tenant x model
    x SLA tier x meter (``SkuMeter``), that passes the FinOps Foundation's ``focus-validator``.

    * Meters of API models (``API_METERS``): "Input Tokens" (uncached input), "Cached Input Tokens",
      "Output Tokens", each emitted where its quantity > 0, and "Requests" where the book has a
      per-request fee. Tokens of semantic-cache hits never reached a model and are on no row.
      PricingUnit "1000000 Tokens", PricingQuantity = tokens / 1e6, ListUnitPrice = the book's $ per 1M
      (cached input falls back to the input price, as the cost rules do; a model missing from the book
      is priced 0), ConsumedQuantity = tokens, ConsumedUnit "Tokens".
    * Self-hosted fleets: one "GPU-Hours" row per tenant (its busy-time share of the fleet) and the idle
      GPU time as ``idle_policy`` (the store's default when None) charges it: one row of tenant
      "(idle capacity)" kept apart, or a "GPU-Hours" row of idle per tenant charged (SkuPriceId
      "<model>/gpu_hour_idle", Tags ``charge: idle_share``), so that under a spreading policy the file has no
      idle row and still adds up to the fleet bill. PricingUnit and ConsumedUnit "GPU-Hours",
      ListUnitPrice = the fleet's $ per GPU-hour in those hours (its schedule's, else the book's); the
      hours are rounded to 1e-9 so that the cost is hours x rate exactly.
    * ListCost = ListUnitPrice x PricingQuantity exactly (decimal arithmetic), as the validator checks.
      BilledCost = EffectiveCost = ContractedCost: the list cost of the tokens the book prices, plus
      the cost the logs recorded. A recorded cost is split over the row's meters in proportion to
      the list cost of its requests' tokens on each meter (the last share takes the rounding rest),
      not carried as one "Recorded Cost" meter: FOCUS needs a PricingQuantity and a ListUnitPrice
      whose product is the ListCost on every row, which only real meters have, and this keeps one row
      per token class whose ListCost - BilledCost is the discount (or markup) the provider gave. A
      recorded cost with nothing at list price to split over (an unpriced model) is carried on the
      "Requests" meter. A self-hosted model's recorded cost is not billed: its GPU hours are its cost
      (:mod:`finops.spend.pricing`). The file's BilledCost adds up to ``spend.report``'s total.
    * ChargePeriodStart/End: the UTC day, clipped to the filter's range; BillingPeriod: its calendar month.
    * InvoiceId: ``finops-<account>-<issuer>-<YYYY-MM>`` (:func:`invoice_id`), a provisional invoice per
      showback account, invoice issuer and billing month, stable across exports.
    * ChargeCategory "Usage", ChargeClass null, ChargeFrequency "Usage-Based", BillingCurrency USD,
      ServiceCategory "AI and Machine Learning", ServiceSubcategory "Generative AI".
    * ProviderName / PublisherName / InvoiceIssuerName from the price book (provider, publisher);
      ServiceName "<provider> API" for API models, "Self-hosted LLM inference" for GPU fleets.
    * SkuId = model, SkuPriceId = "<model>/<meter key>" (e.g. "gpt-4o/cached_input").
    * Tags: JSON with tenant, provider and sla_tier. BillingAccountId/Name: this fleet's showback
      account (``billing_account``), since request logs carry no provider account.
    """
    from finops.spend import costviews, pricing
    period = costviews.period_of(con, f)
    sql, params = _usage_sql(con, period, idle_policy)
    usage = con.execute(sql, params).df()
    # the model's provider, publisher and kind (the same on each of its rows); prices come from the costed rows
    book = pricing.book_row_per_model(con).set_index("model")
    rows = []
    for g in usage.itertuples(index=False):
        day = pd.Timestamp(g.day)
        start = max(day, pd.Timestamp(period.since)) if period.since is not None else day
        end = min(day + pd.Timedelta(days=1), pd.Timestamp(period.until)) if period.until is not None \
            else day + pd.Timedelta(days=1)
        bstart = day.replace(day=1)
        bend = bstart + pd.offsets.MonthBegin(1)
        p = book.loc[g.model] if g.model in book.index else None
        kind = p["kind"] if p is not None else (g.price_kind if isinstance(g.price_kind, str) else "api")
        provider = (p["provider"] if p is not None and isinstance(p["provider"], str) else None) or "unknown (not in price book)"
        publisher = (p["publisher"] if p is not None and isinstance(p["publisher"], str) else None) or provider
        service = "Self-hosted LLM inference" if kind == "self_hosted" else f"{provider} API"
        tags = {"tenant": g.tenant, "provider": provider}
        if g.sla_tier:
            tags["sla_tier"] = g.sla_tier
        shared = g.charge == "idle_share"
        if shared:
            tags["charge"] = "idle_share"
        whom = f"tenant {g.tenant}" + (f" ({g.sla_tier} tier)" if g.sla_tier else "")
        for meter, qty, price, list_cost, billed in _charges(g, p, kind):
            desc = (f"Idle GPU capacity of {g.model} (paid for, used by no request)" if g.is_idle
                    else f"Idle GPU capacity of {g.model} charged to {whom}" if shared
                    else f"{g.model} {meter.name} for {whom}")
            rows.append({
                "BilledCost": float(billed), "BillingAccountId": billing_account[0],
                "BillingAccountName": billing_account[1], "BillingCurrency": "USD",
                "BillingPeriodEnd": _focus_time(bend), "BillingPeriodStart": _focus_time(bstart),
                "ChargeCategory": "Usage", "ChargeClass": None, "ChargeDescription": desc,
                "ChargeFrequency": "Usage-Based", "ChargePeriodEnd": _focus_time(end),
                "ChargePeriodStart": _focus_time(start),
                "ConsumedQuantity": float(qty * meter.per), "ConsumedUnit": meter.consumed_unit,
                "ContractedCost": float(billed), "EffectiveCost": float(billed),
                "InvoiceId": invoice_id(billing_account[0], provider, bstart), "InvoiceIssuerName": provider,
                "ListCost": float(list_cost), "ListUnitPrice": float(price), "PricingQuantity": float(qty),
                "PricingUnit": meter.pricing_unit, "ProviderName": provider, "PublisherName": publisher,
                "ServiceCategory": SERVICE_CATEGORY, "ServiceName": service,
                "ServiceSubcategory": SERVICE_SUBCATEGORY, "SkuId": g.model, "SkuMeter": meter.name,
                "SkuPriceId": f"{g.model}/{meter.key}{'_idle' if shared else ''}", "Tags": json.dumps(tags, sort_keys=True)})
    return pd.DataFrame(rows, columns=[c for c, *_ in FOCUS_COLUMNS])


def focus_csv(frame: pd.DataFrame) -> str:
    """A FOCUS frame as CSV text (formula-like cells neutralised like every other export). Costs keep every
    digit: FOCUS checks ListCost = ListUnitPrice × PricingQuantity exactly, which a micro-dollar rounding of
    a 9-decimal GPU-hour quantity would break."""
    return safe_csv(frame, round_money=False)


# FOCUS UnitFormat, as focus-validator 2.2.1 checks it: a count unit ("Tokens", "API Requests"), optionally
# "<n> " before it ("1000000 Tokens"), "-<plural time unit>" after it ("GPU-Hours") or "/<time unit>".
_COUNT_UNIT = r"[A-Za-z][A-Za-z0-9]*(?:\s+[A-Za-z][A-Za-z0-9]*)*"
_PLURAL_TIME = r"(?:Years|Months|Days|Hours|Minutes|Seconds)"
UNIT_FORMAT = re.compile(rf"{_COUNT_UNIT}|{_COUNT_UNIT}-{_PLURAL_TIME}|{_COUNT_UNIT}/(?:Year|Month|Day|Hour|Minute|Second)"
                         rf"|[0-9]+ {_COUNT_UNIT}|{_COUNT_UNIT}/[0-9]+ {_PLURAL_TIME}")
PRODUCT_TOLERANCE = 1e-9     # the validator's: |price x quantity - cost| <= 1e-9 x max(|cost|, 1)


def check_focus(frame: pd.DataFrame) -> list[str]:
    """Problems of a FOCUS frame (built here or read back from CSV as text): missing mandatory columns,
    nulls where FOCUS forbids them, values not of the column's type, values outside the allowed ones,
    units not in UnitFormat, and ListUnitPrice x PricingQuantity not matching ListCost.
    An empty list means the check passed.
    """
    problems: list[str] = []
    missing = [c for c in FOCUS_MANDATORY if c not in frame.columns]
    if missing:
        problems.append("missing mandatory columns: " + ", ".join(missing))
    for col, ftype, _level, nullable in FOCUS_COLUMNS:
        if col not in frame.columns:
            continue
        s = frame[col]
        nulls = s.isna() | (s.astype(str).str.strip() == "")
        if not nullable and nulls.any():
            problems.append(f"{col}: {int(nulls.sum())} null values (not allowed)")
        v = s[~nulls]
        if ftype == "Decimal":
            bad = pd.to_numeric(v, errors="coerce").isna()
            if bad.any():
                problems.append(f"{col}: not a decimal: {v[bad].iloc[0]!r}")
        elif ftype == "DateTime":
            text = v.astype(str)
            bad = ~text.str.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
            if bad.any():
                problems.append(f"{col}: not an ISO 8601 UTC date/time: {text[bad].iloc[0]!r}")
        elif ftype == "JSON":
            for x in v:
                try:
                    ok = isinstance(json.loads(x), dict)
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    problems.append(f"{col}: not a JSON object: {x!r}")
                    break
    checks = (("ChargeCategory", CHARGE_CATEGORIES), ("ServiceCategory", SERVICE_CATEGORIES),
              ("ChargeClass", ("Correction",)), ("ChargeFrequency", ("One-Time", "Recurring", "Usage-Based")))
    for col, allowed in checks:
        if col in frame.columns:
            v = frame[col].dropna()
            v = v[v.astype(str).str.strip() != ""]
            bad = ~v.isin(allowed)
            if bad.any():
                problems.append(f"{col}: {v[bad].iloc[0]!r} is not an allowed value")
    if "BillingCurrency" in frame.columns and not frame["BillingCurrency"].astype(str).str.fullmatch(r"[A-Z]{3}").all():
        problems.append("BillingCurrency: not an ISO 4217 code")
    for col in ("PricingUnit", "ConsumedUnit"):
        if col in frame.columns:
            bad = [u for u in frame[col].dropna().astype(str) if u.strip() and not UNIT_FORMAT.fullmatch(u)]
            if bad:
                problems.append(f"{col}: {bad[0]!r} is not in FOCUS UnitFormat")
    if {"ListUnitPrice", "PricingQuantity", "ListCost"} <= set(frame.columns) and len(frame):
        price, qty, cost = (pd.to_numeric(frame[c].replace("", None), errors="coerce")
                            for c in ("ListUnitPrice", "PricingQuantity", "ListCost"))
        off = (price * qty - cost).abs() > PRODUCT_TOLERANCE * cost.abs().clip(lower=1)
        if off.any():
            i = off.idxmax()
            problems.append(f"ListCost is not ListUnitPrice x PricingQuantity on {int(off.sum())} rows, "
                            f"e.g. {price[i]!r} x {qty[i]!r} != {cost[i]!r}")
    if {"ChargePeriodStart", "ChargePeriodEnd"} <= set(frame.columns) and len(frame):
        if (frame["ChargePeriodStart"].astype(str) >= frame["ChargePeriodEnd"].astype(str)).any():
            problems.append("ChargePeriodStart is not before ChargePeriodEnd on some rows")
    return problems
