"""Exports: CSV that spreadsheets cannot execute, Parquet, and a FOCUS-shaped CSV."""
from __future__ import annotations

import io
import json

import pandas as pd

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    """Prefix a quote to text cells that a spreadsheet would run as a formula.

    >>> neutralise("=HYPERLINK(1)"), neutralise("-3 apples"), neutralise(-3), neutralise("acme")
    ("'=HYPERLINK(1)", "'-3 apples", -3, 'acme')
    """
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def safe_csv(frame: pd.DataFrame) -> str:
    """CSV text of ``frame`` with formula-like text cells neutralised (numbers are left as numbers)."""
    out = frame.copy()
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
    frame.to_parquet(buf, index=False, engine="pyarrow")
    return buf.getvalue()


# ---------------------------------------------------------------- FOCUS 1.2

# (column, FOCUS data type, feature level, nulls allowed). The columns of FOCUS 1.2 we can fill
# honestly from request logs and the price book: every Mandatory one, plus the Recommended
# ChargeFrequency / ServiceSubcategory and the Conditional ConsumedQuantity/Unit, SkuId and Tags.
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
    ("InvoiceIssuerName", "String", "Mandatory", False),
    ("ListCost", "Decimal", "Mandatory", False),
    ("PricingQuantity", "Decimal", "Mandatory", True),
    ("PricingUnit", "String", "Mandatory", True),
    ("ProviderName", "String", "Mandatory", False),
    ("PublisherName", "String", "Mandatory", False),
    ("ServiceCategory", "String", "Mandatory", False),
    ("ServiceName", "String", "Mandatory", False),
    ("ServiceSubcategory", "String", "Recommended", False),
    ("SkuId", "String", "Conditional", True),
    ("Tags", "JSON", "Conditional", True),
    ("x_Requests", "Decimal", "Custom", False),
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


def _focus_time(ts) -> str:
    return pd.Timestamp(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def focus_frame(con, f, billing_account: tuple[str, str] = DEFAULT_ACCOUNT) -> pd.DataFrame:
    """The spend of ``f`` as FOCUS 1.2 cost-and-usage rows: one row per UTC day x tenant x model x SLA tier.

    * BilledCost = EffectiveCost = ContractedCost = ListCost = the row's cost from ``spend.report`` (the
      book holds list prices and no negotiated or commitment discounts are known; a cost recorded by
      the logs is taken as billed).
    * ChargePeriodStart/End: the UTC day, clipped to the filter's range; BillingPeriod: its calendar month.
    * ChargeCategory "Usage", ChargeClass null, ChargeFrequency "Usage-Based", BillingCurrency USD,
      ServiceCategory "AI and Machine Learning", ServiceSubcategory "Generative AI".
    * ProviderName / PublisherName / InvoiceIssuerName from the price book (provider, publisher);
      ServiceName "<provider> API" for API models, "Self-hosted LLM inference" for GPU fleets.
    * SkuId = model. ConsumedQuantity = input + output tokens, ConsumedUnit "Tokens"; PricingUnit
      "1M Tokens" (PricingQuantity = tokens / 1e6) for API models, "GPU-Hours" (the cost / $ per GPU-hour)
      for self-hosted ones. Idle self-hosted capacity is its own row (Tags tenant "(idle capacity)")
      consuming GPU-Hours, so the file adds up to the whole bill.
    * Tags: JSON with tenant and sla_tier. BillingAccountId/Name: this fleet's showback account
      (``billing_account``), since request logs carry no provider account.
    """
    from finops.spend import costviews, pricing
    from finops.spend import report as spend
    period = costviews.period_of(con, f)
    rep = spend.report(con, period, by=["day", "tenant", "model", "sla_tier"])
    book = pricing.price_book(con).set_index("model")
    rows = []
    for r in rep.itertuples(index=False):
        day = pd.Timestamp(r.day)
        start = max(day, pd.Timestamp(period.since)) if period.since is not None else day
        end = min(day + pd.Timedelta(days=1), pd.Timestamp(period.until)) if period.until is not None \
            else day + pd.Timedelta(days=1)
        bstart = day.replace(day=1)
        bend = bstart + pd.offsets.MonthBegin(1)
        p = book.loc[r.model] if r.model in book.index else None
        kind = p["kind"] if p is not None else "api"
        provider = (p["provider"] if p is not None and isinstance(p["provider"], str) else None) or "unknown (not in price book)"
        publisher = (p["publisher"] if p is not None and isinstance(p["publisher"], str) else None) or provider
        idle = r.tenant == spend.IDLE_TENANT
        tokens = int(r.input_tokens) + int(r.output_tokens)
        cost = float(r.cost_usd)
        if kind == "self_hosted":
            gpu_hour = float(p["gpu_hour_usd"]) if p is not None and pd.notna(p["gpu_hour_usd"]) else None
            unit, qty = "GPU-Hours", (cost / gpu_hour if gpu_hour else None)
            service = "Self-hosted LLM inference"
        else:
            unit, qty = "1M Tokens", tokens / 1e6
            service = f"{provider} API"
        tags = {"tenant": r.tenant}
        if r.sla_tier:
            tags["sla_tier"] = r.sla_tier
        desc = (f"Idle GPU capacity of {r.model} (paid for, used by no request)" if idle
                else f"{r.model} inference for tenant {r.tenant}" + (f" ({r.sla_tier} tier)" if r.sla_tier else ""))
        rows.append({
            "BilledCost": cost, "BillingAccountId": billing_account[0], "BillingAccountName": billing_account[1],
            "BillingCurrency": "USD", "BillingPeriodEnd": _focus_time(bend), "BillingPeriodStart": _focus_time(bstart),
            "ChargeCategory": "Usage", "ChargeClass": None, "ChargeDescription": desc,
            "ChargeFrequency": "Usage-Based", "ChargePeriodEnd": _focus_time(end),
            "ChargePeriodStart": _focus_time(start),
            "ConsumedQuantity": qty if idle else float(tokens), "ConsumedUnit": "GPU-Hours" if idle else "Tokens",
            "ContractedCost": cost, "EffectiveCost": cost, "InvoiceIssuerName": provider, "ListCost": cost,
            "PricingQuantity": qty, "PricingUnit": unit, "ProviderName": provider, "PublisherName": publisher,
            "ServiceCategory": SERVICE_CATEGORY, "ServiceName": service, "ServiceSubcategory": SERVICE_SUBCATEGORY,
            "SkuId": r.model, "Tags": json.dumps(tags, sort_keys=True), "x_Requests": int(r.requests)})
    return pd.DataFrame(rows, columns=[c for c, *_ in FOCUS_COLUMNS])


def focus_csv(frame: pd.DataFrame) -> str:
    """A FOCUS frame as CSV text (formula-like cells neutralised like every other export)."""
    return safe_csv(frame)


def check_focus(frame: pd.DataFrame) -> list[str]:
    """Problems of a FOCUS frame (built here or read back from CSV as text): missing mandatory columns,
    nulls where FOCUS forbids them, values not of the column's type, values outside the allowed ones.
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
    if {"ChargePeriodStart", "ChargePeriodEnd"} <= set(frame.columns) and len(frame):
        if (frame["ChargePeriodStart"].astype(str) >= frame["ChargePeriodEnd"].astype(str)).any():
            problems.append("ChargePeriodStart is not before ChargePeriodEnd on some rows")
    return problems
