"""A price book with several rows for one model (dated, tiered): every view that reads prices costs a request
once, at the row in force, and agrees with the spend report.

Hand-worked fleet (2026): ``api-model`` ($1 / $4 / $0.25 per 1M input / output / cached, $0.001 a request) has a
second row from 2 March with input at $2 per 1M; ``cw-model`` (book, $3 per 1M input, $3.75 per 1M cache writes);
``gpt-4o-mini`` priced by the book ($0.15 / $0.60).

  p1  1 March   api-model   1M input                 1 x 1.0 + 0.001                      = 1.001
  a1  2 March   api-model   1M input                 1 x 2.0 + 0.001                      = 2.001
  w1  2 March   cw-model    1M input, 400k written   0.6 x 3.0 + 0.4 x 3.75               = 3.300
  m1  2 March   gpt-4o-mini 1M input, 1M output      0.15 + 0.60                          = 0.750
"""
from __future__ import annotations

from datetime import date, datetime

import pandas as pd
import pytest

from finops import store
from finops.cascade import shadow as cascade_store
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.spend import costviews, exports, pricing, routing
from finops.spend import report as spend
from helpers import add_test_models, march, run_page

MARCH_2 = Filters(since=datetime(2026, 3, 2), until=datetime(2026, 3, 3))
BOTH_DAYS = Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 3))


def _row(request_id, ts, model, input_tokens, output_tokens=0, **kw):
    return dict(dict(request_id=request_id, ts=ts, tenant="acme", model=model, provider="", input_tokens=input_tokens,
                     output_tokens=output_tokens, cached_input_tokens=0, cache_write_tokens=0, status="ok",
                     cache_hit=False), **kw)


def _build(path: str = ":memory:"):
    c = store.connect(path)
    add_test_models(c)
    book = pricing.price_book(c)
    api = book[book.model == "api-model"].iloc[0].to_dict()
    rows = [dict(api, effective_to=date(2026, 3, 2)), dict(api, effective_from=date(2026, 3, 2), input_usd_per_1m=2.0),
            dict(api, model="cw-model", input_usd_per_1m=3.0, output_usd_per_1m=15.0, cached_input_usd_per_1m=0.3,
                 cache_write_usd_per_1m=3.75, request_usd=None)]
    pricing.save_price_book(c, pd.concat([book[book.model != "api-model"], pd.DataFrame(rows)], ignore_index=True))
    ingest_frame(c, pd.DataFrame([
        _row("p1", march(1, 9), "api-model", 1_000_000),
        _row("a1", march(2, 10, 7), "api-model", 1_000_000),
        _row("w1", march(2, 10, 8), "cw-model", 1_000_000, cache_write_tokens=400_000),
        _row("m1", march(2, 10, 9), "gpt-4o-mini", 1_000_000, 1_000_000),
    ]))
    return c


@pytest.fixture()
def con():
    c = _build()
    yield c
    c.close()


def test_the_report_prices_each_day_at_its_row(con):
    rep = spend.report(con, BOTH_DAYS, by=["model"]).set_index("model")["cost_usd"].astype(float)
    assert rep.to_dict() == pytest.approx({"api-model": 1.001 + 2.001, "cw-model": 3.3, "gpt-4o-mini": 0.75})


def test_token_mix_counts_each_request_once_at_its_row(con):
    mix = costviews.token_mix(con, MARCH_2).set_index("model")
    api = mix.loc["api-model"]
    # one request of 1M input tokens (two price rows must not make it two), at the 2 March row's $2
    assert api.uncached_input_tokens == 1_000_000
    assert (api.input_cost_usd, api.request_fee_usd, api.gpu_time_usd) == pytest.approx((2.0, 0.001, 0.0))
    assert api.cost_usd == pytest.approx(2.001)
    cw = mix.loc["cw-model"]
    assert (cw.uncached_input_tokens, cw.cache_write_tokens) == (600_000, 400_000)
    # the cache writes are a part of their own, not left over as "GPU time"
    assert (cw.input_cost_usd, cw.cache_write_cost_usd, cw.gpu_time_usd) == pytest.approx((1.8, 1.5, 0.0))
    parts = [c for c, _ in costviews.COST_PARTS]
    assert mix[parts].sum(axis=1).to_numpy() == pytest.approx(mix.cost_usd.to_numpy())
    report = spend.report(con, MARCH_2, by=["model"], include_idle=False).set_index("model")["cost_usd"]
    assert mix["cost_usd"].astype(float).to_dict() == pytest.approx(report.astype(float).to_dict())
    tokens_long, _ = costviews.token_mix_long(mix.reset_index())
    assert "input (written to the prompt cache)" in set(tokens_long["token_class"])


def test_cost_per_request_prices_each_request_once_at_its_row(con):
    d = costviews.cost_per_request(con, BOTH_DAYS)
    s = d.summary.set_index("model")
    assert d.rows_read == 4
    assert s.loc["api-model", "requests"] == 2
    assert (s.loc["api-model", "max_usd"], s.loc["api-model", "mean_usd"]) == pytest.approx((2.001, 1.501))
    assert s.loc["cw-model", "max_usd"] == pytest.approx(3.3)
    total = float(spend.report(con, BOTH_DAYS, by=[], include_idle=False)["cost_usd"].sum())
    assert float((s["mean_usd"] * s["requests"]).sum()) == pytest.approx(total)


def test_routing_reads_one_row_a_model(con):
    fm = routing.fleet_models(con, MARCH_2).set_index("model")
    assert fm.loc["api-model", "requests"] == 1 and fm.index.is_unique
    eff = routing.effective_prices(con, MARCH_2).set_index("model")
    assert eff.index.is_unique
    assert eff.loc["api-model", "input_usd_per_1m"] == 2.0
    assert eff.loc["api-model", "basis"] == "price book (its standard row from 2026-03-02)"
    # a period ending on 1 March replays at the row in force then
    first = routing.effective_prices(con, Filters(since=datetime(2026, 3, 1), until=datetime(2026, 3, 2)))
    row = first.set_index("model").loc["api-model"]
    assert (row.input_usd_per_1m, row.basis) == (1.0, "price book (its standard row to 2026-03-02)")
    assert eff.loc["gpt-4o-mini", "basis"] == "price book"


def test_book_row_per_model_prefers_the_row_in_force_then_the_open_one(con):
    assert pricing.book_row_per_model(con, date(2026, 3, 1)).set_index("model").loc["api-model",
                                                                                    "input_usd_per_1m"] == 1.0
    latest = pricing.book_row_per_model(con).set_index("model")
    assert latest.index.is_unique and latest.loc["api-model", "input_usd_per_1m"] == 2.0


def test_focus_export_bills_what_the_report_does(con):
    focus = exports.focus_frame(con, BOTH_DAYS)
    assert exports.check_focus(focus) == []
    billed = focus.groupby("SkuId")["BilledCost"].sum().astype(float)
    rep = spend.report(con, BOTH_DAYS, by=["model"]).set_index("model")["cost_usd"].astype(float)
    assert billed.to_dict() == pytest.approx(rep.to_dict())


def test_the_shadow_evaluation_prices_a_model_with_dated_rows(con):
    ingest_frame(con, pd.DataFrame([
        _row("q1", march(2, 11), "api-model", 1000, 100, strategy="cascade", confidence=0.9, quality=1.0,
             attrs='{"shadow_large_quality": 1.0}'),
    ]))
    done = cascade_store.shadow_eval(con, MARCH_2).complete()
    # 1000 input at the 2 March row's $2, 100 output at $4, the $0.001 request fee
    assert done["cost_small_usd"].tolist() == pytest.approx([(1000 * 2.0 + 100 * 4.0) / 1e6 + 0.001])


@pytest.mark.parametrize("page", ["views/overview.py", "views/cost.py", "views/routing.py", "views/cascade.py",
                                  "views/budgets.py"])
def test_pages_render_on_a_book_with_dated_rows(tmp_path, page):
    path = str(tmp_path / "dated.duckdb")
    _build(path).close()
    at = run_page(path, page)
    assert not at.exception, [e.value for e in at.exception]


def test_the_cost_page_charts_colour_every_token_class_and_cost_part(con):
    """A label missing from a chart's colour domain is drawn as nothing (the cache writes' $1.50 of cw-model):
    the charts colour the view's labels, and every label the view's data carries is one of them."""
    from finops import charts
    tokens_long, cost_long = costviews.token_mix_long(costviews.token_mix(con, MARCH_2))
    for chart, labels, data in ((charts.token_mix(tokens_long, costviews.TOKEN_CLASS_LABELS),
                                 costviews.TOKEN_CLASS_LABELS, tokens_long["token_class"]),
                                (charts.cost_parts(cost_long, costviews.COST_PART_LABELS),
                                 costviews.COST_PART_LABELS, cost_long["part"])):
        scale = chart.to_dict()["encoding"]["color"]["scale"]
        assert scale["domain"] == list(labels) and len(scale["range"]) == len(labels)
        assert len(set(scale["range"])) == len(labels)          # each label its own colour
        assert set(data) <= set(labels) and data.notna().all()
    assert "cache write tokens" in set(cost_long.loc[cost_long["cost_usd"] > 0, "part"])
