"""The maintained price catalogue (the ``genai-prices`` package) as dated price rows, and model resolution.

``genai-prices`` ships the list prices of ~45 providers inside the package (no network at run time):
per model, $ per 1M input, cached-input (cache read), cache-write (5-minute and 1-hour TTL) and
output tokens; context-length tiers ("above 200k input tokens the whole request costs more");
service-tier variants (OpenAI batch, flex, priority; Gemini batch); and price history (a price cut
on a date). :func:`catalogue_rows` flattens all of that into rows the store can join on:

    (provider, model, service_tier, min_input_tokens, effective_from, effective_to) -> $ per 1M of
    input, cached input, cache write, 1-hour cache write, output; $ per request

* ``service_tier`` is ``''`` for the standard price, else ``batch``, ``flex``, ``priority`` or
  ``fast``; a request of a tier the model has no row for is priced at the standard row.
* ``min_input_tokens``: the row applies to a request whose input tokens are *above* it (0 = base);
  the request's own input size picks one tier for all of its tokens, as the providers bill.
* ``effective_from`` / ``effective_to`` (UTC dates, ``to`` exclusive, ``None`` = open): the row is
  in force for requests at or after ``from`` and before ``to``.

Each row is the catalogue's own answer at that point (``ModelInfo.get_prices`` with the tier's
context), so our figures equal ``genai_prices.calc_price`` for the same request; the tests check it
on every model. Time-of-day prices (an off-peak discount) are not modelled: the daytime rate applies.

:func:`resolve` maps a logged model name (``openai/gpt-4o-mini``, ``gpt-4o-2024-11-20``,
``us.anthropic.claude-sonnet-4-20250514-v1:0``) and an optional provider to a catalogue
(provider, model), or ``None``.

>>> resolve("openai/gpt-4o-mini")
('openai', 'gpt-4o-mini')
>>> resolve("gpt-4o-2024-11-20")
('openai', 'gpt-4o')
>>> resolve("acme-private-7b") is None
True
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from decimal import Decimal
from importlib import metadata

CATALOGUE = "genai-prices"

#: our service tier -> the catalogue's request context that selects its variant
SERVICE_TIERS: dict[str, dict[str, str]] = {
    "batch": {"processing": "batch"},
    "flex": {"service_tier": "flex"},
    "priority": {"service_tier": "priority"},
    "fast": {"service_tier": "fast"},
}

#: price fields of a catalogue ModelPrice -> our column ($ per 1M tokens; requests per 1,000)
FIELDS: dict[str, str] = {
    "input_mtok": "input_usd_per_1m",
    "cache_read_mtok": "cached_input_usd_per_1m",
    "cache_write_mtok": "cache_write_usd_per_1m",
    "cache_write_1h_mtok": "cache_write_1h_usd_per_1m",
    "output_mtok": "output_usd_per_1m",
}

#: gateway / LiteLLM prefixes that name a provider under another word
PROVIDER_ALIASES: dict[str, str] = {
    "bedrock": "aws", "amazon": "aws", "vertex_ai": "google", "vertex": "google", "gemini": "google",
    "google_ai_studio": "google", "azure_ai": "azure", "together_ai": "together", "mistralai": "mistral",
    "x-ai": "x-ai", "xai": "x-ai", "fireworks_ai": "fireworks", "meta-llama": "meta",
}

# the catalogue's daytime rate where a price depends on the time of day
_NOON = time(12, 0)


def catalogue_version() -> str:
    """The installed catalogue's version, e.g. ``0.2.3`` (pinned in requirements.txt)."""
    return metadata.version(CATALOGUE)


def catalogue_source() -> str:
    """The ``source`` written on synced rows: ``genai-prices 0.2.3``."""
    return f"{CATALOGUE} {catalogue_version()}"


@functools.lru_cache(maxsize=1)
def _snapshot():
    from genai_prices import data_snapshot
    return data_snapshot.get_snapshot()


@dataclass(frozen=True)
class CatalogueRow:
    provider: str
    model: str
    service_tier: str
    min_input_tokens: int
    effective_from: date | None
    effective_to: date | None
    input_usd_per_1m: Decimal | None
    cached_input_usd_per_1m: Decimal | None
    cache_write_usd_per_1m: Decimal | None
    cache_write_1h_usd_per_1m: Decimal | None
    output_usd_per_1m: Decimal | None
    request_usd: Decimal | None

    def prices(self) -> tuple:
        return (self.input_usd_per_1m, self.cached_input_usd_per_1m, self.cache_write_usd_per_1m,
                self.cache_write_1h_usd_per_1m, self.output_usd_per_1m, self.request_usd)


def _start_dates(model, tier: str) -> list[date]:
    """The dates on which the model's price for ``tier`` may change."""
    from genai_prices import types
    dates: set[date] = set()
    if isinstance(model.prices, list):
        dates |= {c.constraint.start_date for c in model.prices
                  if isinstance(c.constraint, types.StartDateConstraint)}
    context = SERVICE_TIERS.get(tier)
    for v in model.price_variants or ():
        if context and all(context.get(k) == val for k, val in v.when.items()) \
                and isinstance(v.constraint, types.StartDateConstraint):
            dates.add(v.constraint.start_date)
    return sorted(dates)


def _has_variant(model, tier: str) -> bool:
    context = SERVICE_TIERS[tier]
    return any(all(context.get(k) == val for k, val in v.when.items()) and any(
        p is not None for p in vars(v.prices).values()) for v in model.price_variants or ())


def _tier_prices(model_price, start: int) -> tuple:
    """Each field's price for a request of more than ``start`` input tokens."""
    from genai_prices import types
    out = []
    for field in FIELDS:
        value = getattr(model_price, field, None)
        if isinstance(value, types.TieredPrices):
            chosen = value.base
            for tier in value.tiers:                 # ascending: the last one passed applies
                if start >= tier.start:
                    chosen = tier.price
            value = chosen
        out.append(value)
    requests = getattr(model_price, "requests_kcount", None)
    out.append(None if requests is None else requests / 1000)
    return tuple(out)


def _tier_starts(model_price) -> list[int]:
    from genai_prices import types
    starts = {0}
    for field in FIELDS:
        value = getattr(model_price, field, None)
        if isinstance(value, types.TieredPrices):
            # a row for "more than t tokens" is the tier that begins after t
            starts |= {t.start for t in value.tiers}
    return sorted(starts)


def _model_rows(provider_id: str, model) -> list[CatalogueRow]:
    rows: list[CatalogueRow] = []
    for tier in ("", *SERVICE_TIERS):
        if tier and not _has_variant(model, tier):
            continue
        context = SERVICE_TIERS.get(tier)
        dates = _start_dates(model, tier)
        bounds: list[date | None] = [None, *dates]
        for i, lo in enumerate(bounds):
            hi = bounds[i + 1] if i + 1 < len(bounds) else None
            at = datetime.combine(lo or date(2000, 1, 1), _NOON, tzinfo=UTC)
            price = model.get_prices(at, context)
            for start in _tier_starts(price):
                prices = _tier_prices(price, start)
                if all(p is None for p in prices):
                    continue
                rows.append(CatalogueRow(provider_id, model.id, tier, start, lo, hi, *prices))
    return _merge_unchanged(rows)


def _merge_unchanged(rows: list[CatalogueRow]) -> list[CatalogueRow]:
    """Join consecutive date intervals of one tier whose prices are equal (a date that changed nothing)."""
    last: dict[tuple[str, int], int] = {}
    out: list[CatalogueRow] = []
    for r in rows:
        key = (r.service_tier, r.min_input_tokens)
        k = last.get(key)
        if k is not None and out[k].effective_to == r.effective_from and out[k].prices() == r.prices():
            out[k] = replace(out[k], effective_to=r.effective_to)
            continue
        last[key] = len(out)
        out.append(r)
    return out


@functools.lru_cache(maxsize=1)
def catalogue_rows() -> tuple[CatalogueRow, ...]:
    """Every model of every provider in the catalogue, flattened (see the module docstring)."""
    rows: list[CatalogueRow] = []
    for provider in _snapshot().providers:
        for model in provider.models:
            rows.extend(_model_rows(provider.id, model))
    return tuple(rows)


def _split_prefix(name: str) -> tuple[str | None, str]:
    """``openai/gpt-4o-mini`` -> ('openai', 'gpt-4o-mini'); a name without a known provider prefix is kept."""
    if "/" not in name:
        return None, name
    head, rest = name.split("/", 1)
    provider = PROVIDER_ALIASES.get(head.lower(), head.lower())
    ids = {p.id for p in _snapshot().providers}
    return (provider, rest) if provider in ids else (None, name)


@functools.lru_cache(maxsize=4096)
def resolve(model: str, provider: str | None = None) -> tuple[str, str] | None:
    """The catalogue's (provider, model) for a logged model name, or ``None`` when it knows none.

    The provider, where given (the log's ``provider`` column) or named by a prefix, narrows the match;
    when the provider is not in the catalogue (a private gateway's name), the model alone decides.
    """
    if not model:
        return None
    hint, ref = _split_prefix(model.strip())
    given = PROVIDER_ALIASES.get(provider.lower(), provider.lower()) if provider else None
    ids = {p.id for p in _snapshot().providers}
    for pid in [p for p in (given, hint) if p in ids] + [None]:
        try:
            p, m = _snapshot().find_provider_model(ref, None, pid, None)
        except LookupError:
            continue
        return p.id, m.id
    return None


def in_force(row: CatalogueRow, at: datetime) -> bool:
    """Whether a row is in force at ``at`` (UTC): ``from <= date(at) < to``."""
    d = at.date()
    return (row.effective_from is None or row.effective_from <= d) and (row.effective_to is None or d < row.effective_to)


def row_cost_usd(row: CatalogueRow, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0,
                 cache_write_tokens: int = 0, cache_write_1h_tokens: int = 0, requests: int = 1) -> Decimal:
    """One request's (or a group's) cost at a row's prices, in the store's token convention.

    ``input_tokens`` counts every prompt token, cache reads and writes included; ``output_tokens``
    every generated one, reasoning included. A class the row has no price for is billed at the input
    price (the catalogue's rule), a 1-hour cache write at the 5-minute price where only that is known::

        cost = (input - cached - writes - writes_1h) × in + cached × cached_in + writes × write
               + writes_1h × write_1h + output × out, all / 1e6, + requests × request_usd

    >>> r = CatalogueRow("p", "m", "", 0, None, None, Decimal(3), Decimal("0.3"), Decimal("3.75"),
    ...                  Decimal(6), Decimal(15), None)
    >>> row_cost_usd(r, input_tokens=3500, cached_input_tokens=2000, cache_write_tokens=500, output_tokens=300)
    Decimal('0.009975')
    """
    base = row.input_usd_per_1m or Decimal(0)
    cached = row.cached_input_usd_per_1m if row.cached_input_usd_per_1m is not None else base
    write = row.cache_write_usd_per_1m if row.cache_write_usd_per_1m is not None else base
    write_1h = row.cache_write_1h_usd_per_1m if row.cache_write_1h_usd_per_1m is not None else write
    uncached = input_tokens - cached_input_tokens - cache_write_tokens - cache_write_1h_tokens
    total = (uncached * base + cached_input_tokens * cached + cache_write_tokens * write
             + cache_write_1h_tokens * write_1h + output_tokens * (row.output_usd_per_1m or Decimal(0)))
    return total / Decimal(1_000_000) + requests * (row.request_usd or Decimal(0))


def price_key(model: str, provider: str | None, book: set[str],
              aliases: dict[str, tuple[str, str | None]]) -> tuple[str, str, str, str]:
    """How a logged (model, provider) is priced: ``(price_source, price_provider, price_model, how)``.

    An alias first (a private or deployment name priced as another model), then the price book's own
    row for the name (our rows override the catalogue: self-hosted fleets, negotiated prices), then the
    catalogue (:func:`resolve`), else unpriced (``price_source`` ``''``).

    >>> price_key("acme-7b", None, {"llama-3.1-8b"}, {"acme-7b": ("llama-3.1-8b", None)})
    ('book', '', 'llama-3.1-8b', 'alias of llama-3.1-8b, price book')
    >>> price_key("gpt-4o-2024-11-20", "openai", set(), {})
    ('catalogue', 'openai', 'gpt-4o', 'catalogue: openai/gpt-4o')
    >>> price_key("openai/gpt-4o-mini", None, {"gpt-4o-mini"}, {})
    ('book', '', 'gpt-4o-mini', 'price book (gpt-4o-mini)')
    >>> price_key("acme-private-7b", None, set(), {})
    ('', '', '', 'unpriced')
    """
    name, hint, via = model, provider, ""
    if model in aliases:
        name, alias_provider = aliases[model]
        hint = alias_provider or provider
        via = f"alias of {name}, "
    if name in book:
        return "book", "", name, f"{via}price book"
    prefix, bare = _split_prefix(name)
    if prefix and bare in book:                     # openai/gpt-4o-mini where the book names gpt-4o-mini
        return "book", "", bare, f"{via}price book ({bare})"
    found = resolve(name, hint)
    if found:
        return "catalogue", found[0], found[1], f"{via}catalogue: {found[0]}/{found[1]}"
    return "", "", "", f"{via}unpriced".replace(", unpriced", ": unpriced") if via else "unpriced"
