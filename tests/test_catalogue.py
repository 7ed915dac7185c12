"""The price catalogue (genai-prices 0.2.3, the version pinned in requirements.txt, data as shipped in
that release) flattened into dated rows: our rows price every request as the catalogue's own
``calc_price`` does, and the hand-worked list prices of issue 13 come out to the cent."""
import random
from datetime import UTC, date, datetime, time
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from finops import catalogue

pytestmark = pytest.mark.skipif(catalogue.catalogue_version() != "0.2.3",
                                reason="hand-worked prices are those of genai-prices 0.2.3")


def _row(provider, model, at, tier="", input_tokens=0):
    rows = [r for r in catalogue.catalogue_rows() if (r.provider, r.model) == (provider, model)]
    live = [r for r in rows if r.service_tier == tier and catalogue.in_force(r, at)] \
        or [r for r in rows if r.service_tier == "" and catalogue.in_force(r, at)]
    return max((r for r in live if r.min_input_tokens < max(input_tokens, 1)), key=lambda r: r.min_input_tokens)


NOV = datetime(2026, 11, 20, 12, tzinfo=UTC)


def test_claude_sonnet_4_with_cache_reads_and_writes():
    # 1,000 uncached input + 2,000 cache-read + 500 cache-write (5 min) + 300 output tokens at
    # $3 / $0.30 / $3.75 / $15 per 1M: $0.003 + $0.0006 + $0.001875 + $0.0045
    assert catalogue.resolve("claude-sonnet-4-20250514") == ("anthropic", "claude-sonnet-4-0")
    row = _row("anthropic", "claude-sonnet-4-0", NOV)
    cost = catalogue.row_cost_usd(row, input_tokens=3_500, cached_input_tokens=2_000, cache_write_tokens=500,
                                  output_tokens=300)
    assert cost == Decimal("0.003") + Decimal("0.0006") + Decimal("0.001875") + Decimal("0.0045")


def test_gemini_2_5_pro_above_200k_input_tokens_is_the_long_context_tier_for_every_token():
    row = _row("google", "gemini-2.5-pro", NOV, input_tokens=250_000)
    assert row.min_input_tokens == 200_000
    cost = catalogue.row_cost_usd(row, input_tokens=250_000, output_tokens=1_000)
    assert cost == Decimal("0.625") + Decimal("0.015")
    short = _row("google", "gemini-2.5-pro", NOV, input_tokens=150_000)
    assert catalogue.row_cost_usd(short, input_tokens=150_000, output_tokens=1_000) == Decimal("0.1975")


def test_an_openai_batch_request_costs_half_its_standard_price():
    standard = _row("openai", "gpt-4o", NOV)
    batch = _row("openai", "gpt-4o", NOV, tier="batch")
    usage = {"input_tokens": 10_000, "output_tokens": 2_000}
    assert catalogue.row_cost_usd(batch, **usage) * 2 == catalogue.row_cost_usd(standard, **usage) == Decimal("0.045")


def test_dated_names_and_provider_prefixes_resolve():
    assert catalogue.resolve("gpt-4o-2024-11-20") == ("openai", "gpt-4o")
    assert catalogue.resolve("openai/gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert catalogue.resolve("gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert catalogue.resolve("acme-private-7b") is None


def test_a_price_change_in_the_catalogue_is_two_dated_rows():
    rows = [r for r in catalogue.catalogue_rows() if (r.provider, r.model, r.service_tier) == ("openai", "gpt-4o", "priority")]
    assert [(r.effective_from, r.effective_to) for r in rows] == [(None, date(2026, 10, 12)), (date(2026, 10, 12), None)]
    assert [r.output_usd_per_1m for r in rows] == [Decimal(10), Decimal(17)]


def test_our_rows_price_every_model_as_the_catalogue_does():
    """Independent check: genai-prices' own calc_price against our flattened rows, every model, random
    usage, dates, context sizes and service tiers (seeded)."""
    rng = random.Random(13)
    by_model: dict = {}
    for r in catalogue.catalogue_rows():
        by_model.setdefault((r.provider, r.model), []).append(r)
    checked = 0
    for (provider, model), _ in sorted(by_model.items()):
        tier = rng.choice(["", "", "batch", "priority", "flex"])
        day = rng.choice([date(2024, 6, 1), date(2025, 6, 1), date(2026, 10, 20), date(2026, 11, 25)])
        inp = rng.choice([10, 5_000, 150_000, 210_000, 300_000, 600_000])
        cached = rng.randint(0, inp // 2)
        write = rng.randint(0, (inp - cached) // 3)
        out = rng.randint(0, 5_000)
        at = datetime.combine(day, time(12), tzinfo=UTC)
        context = catalogue.SERVICE_TIERS.get(tier)
        try:
            ref = calc_price(Usage(input_tokens=inp, cache_read_tokens=cached, cache_write_tokens=write,
                                   output_tokens=out), model_ref=model, provider_id=provider,
                             genai_request_timestamp=at, price_context=dict(context) if context else None)
        except (LookupError, ValueError):        # units we do not price (audio, images) or a model that moved
            continue
        if ref.model.id != model:
            continue
        ours = catalogue.row_cost_usd(_row(provider, model, at, tier, inp), input_tokens=inp, output_tokens=out,
                                      cached_input_tokens=cached, cache_write_tokens=write)
        assert ours == ref.total_price, (provider, model, tier, day, inp, cached, write, out)
        checked += 1
    assert checked > 1_500
