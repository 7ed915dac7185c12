"""Money a finance team can quote (issue 13), through the store: the catalogue prices every token class at
the row in force, a recorded 0 is not free, unpriced traffic is listed, and sums are exact.

Prices are genai-prices 0.2.3's (the version pinned in requirements.txt; its data as shipped in that
release, 2026-11): Claude Sonnet 4 $3 / $0.30 read / $3.75 write (5 min) / $15 per 1M; Gemini 2.5 Pro
$1.25 / $10 up to 200k input tokens and $2.50 / $15 above; GPT-4o $2.50 / $10, batch $1.25 / $5 from
2026-10-14; o3 $2 / $8. The bundled price book (data/prices.csv) prices gpt-4o, gpt-4o-mini and the
sample fleet's models itself, so those tests use names the book does not hold.
"""
import json
from datetime import datetime

import pandas as pd
import pytest

from finops import catalogue, store
from finops.cli import main
from finops.filters import Filters
from finops.ingest import ingest_frame, ingest_path
from finops.spend import pricing
from finops.spend import report as spend

pytestmark = pytest.mark.skipif(catalogue.catalogue_version() != "0.2.3",
                                reason="hand-worked prices are those of genai-prices 0.2.3")

COLS = ["request_id", "ts", "tenant", "model", "provider", "service_tier", "input_tokens", "cached_input_tokens",
        "cache_write_tokens", "output_tokens", "reasoning_tokens", "cost_usd"]
NOV = Filters(since=datetime(2026, 11, 1), until=datetime(2026, 12, 1))


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _load(con, rows, name="frame"):
    frame = pd.DataFrame(rows, columns=COLS)
    for c in ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens"):
        frame[c] = frame[c].astype("Int64")
    frame["cost_usd"] = frame["cost_usd"].astype("float64")
    return ingest_frame(con, frame, name=name)


def _cost(con, f=NOV, by=("model",)):
    return spend.report(con, f, by=list(by), include_idle=False).set_index(list(by))["cost_usd"]


def test_claude_sonnet_4_cache_reads_and_writes_at_list_prices(con):
    # 1,000 uncached + 2,000 cache-read + 500 cache-write (5 min) input tokens (3,500 in all) + 300 output
    _load(con, [("c1", datetime(2026, 11, 20, 10), "t", "claude-sonnet-4-20250514", "anthropic", None,
                 3_500, 2_000, 500, 300, None, None)])
    assert _cost(con)["claude-sonnet-4-20250514"] == pytest.approx(0.003 + 0.0006 + 0.001875 + 0.0045, abs=1e-12)


def test_gemini_2_5_pro_long_context_tier_is_decided_by_the_request(con):
    _load(con, [("g1", datetime(2026, 11, 20, 10), "t", "gemini-2.5-pro", "google", None, 250_000, 0, 0, 1_000,
                 None, None),
                ("g2", datetime(2026, 11, 20, 11), "t", "gemini-2.5-pro", "google", None, 150_000, 0, 0, 1_000,
                 None, None)])
    by_request = spend.report(con, NOV, by=["hour"], include_idle=False)["cost_usd"].tolist()
    assert by_request == pytest.approx([0.625 + 0.015, 0.1875 + 0.010], abs=1e-12)


def test_an_openai_batch_request_costs_half_and_reasoning_is_output(con):
    _load(con, [("s1", datetime(2026, 11, 20, 10), "t", "gpt-4o-2024-11-20", "openai", "default", 10_000, 0, 0,
                 2_000, None, None),
                ("b1", datetime(2026, 11, 20, 10), "t", "gpt-4o-2024-11-20", "openai", "batch", 10_000, 0, 0,
                 2_000, None, None),
                ("o1", datetime(2026, 11, 20, 10), "u", "o3", "openai", None, 1_000, 0, 0, 5_000, 4_000, None)])
    rep = spend.report(con, NOV, by=["model", "service_tier"], include_idle=False).set_index(
        ["model", "service_tier"])["cost_usd"]
    assert rep[("gpt-4o-2024-11-20", "")] == pytest.approx(0.045, abs=1e-12)
    assert rep[("gpt-4o-2024-11-20", "batch")] == pytest.approx(0.0225, abs=1e-12)
    # o3: 1,000 input at $2 + 5,000 output (4,000 of them reasoning) at $8 per 1M
    assert rep[("o3", "")] == pytest.approx(0.002 + 0.040, abs=1e-12)


def test_dated_names_and_provider_prefixes_are_priced(con):
    _load(con, [("d1", datetime(2026, 11, 20, 10), "t", "gpt-4o-2024-11-20", None, None, 1_000_000, 0, 0, 0,
                 None, None),
                ("p1", datetime(2026, 11, 20, 10), "t", "openai/gpt-4o-mini", None, None, 1_000_000, 0, 0, 0,
                 None, None)])
    cost = _cost(con)
    assert cost["gpt-4o-2024-11-20"] == pytest.approx(2.50)       # the catalogue's gpt-4o
    assert cost["openai/gpt-4o-mini"] == pytest.approx(0.15)      # the book's gpt-4o-mini, prefix stripped
    assert pricing.unpriced_models(con).empty


def test_an_unknown_model_is_listed_then_priced_by_an_alias_or_a_row_without_reloading(con, capsys):
    _load(con, [(f"a{i}", datetime(2026, 11, 20, 10), "t", "acme-private-7b", None, None, 1_000, 0, 0, 1_000,
                 None, None) for i in range(3)]
          + [("k1", datetime(2026, 11, 20, 10), "t", "gpt-4o", None, None, 1_000, 0, 0, 1_000, None, None)])
    unpriced = pricing.unpriced_models(con)
    assert unpriced[["model", "requests", "tokens"]].values.tolist() == [["acme-private-7b", 3, 6_000]]
    assert unpriced["share_of_requests"].iloc[0] == pytest.approx(0.75)
    assert _cost(con)["acme-private-7b"] == 0
    # an alias: priced as the book's gpt-4o-mini ($0.15 / $0.60 per 1M)
    pricing.save_aliases(con, pd.DataFrame([{"alias": "acme-private-7b", "model": "gpt-4o-mini", "provider": None}]))
    assert pricing.unpriced_models(con).empty
    assert _cost(con)["acme-private-7b"] == pytest.approx(3 * (1_000 * 0.15 + 1_000 * 0.60) / 1e6, abs=1e-12)
    # or a price book row of its own, which wins over the alias's target
    pricing.save_aliases(con, pd.DataFrame(columns=["alias", "model", "provider"]))
    book = pricing.price_book(con)
    row = {c: None for c in book.columns} | {"model": "acme-private-7b", "kind": "api", "input_usd_per_1m": 1.0,
                                             "output_usd_per_1m": 2.0}
    pricing.save_price_book(con, pd.concat([book, pd.DataFrame([row])], ignore_index=True))
    assert _cost(con)["acme-private-7b"] == pytest.approx(3 * (1_000 * 1.0 + 1_000 * 2.0) / 1e6, abs=1e-12)


def test_the_report_command_warns_about_unpriced_traffic(con, tmp_path, capsys):
    db = tmp_path / "u.duckdb"
    c = store.connect(db)
    _load(c, [("a1", datetime(2026, 11, 20, 10), "t", "acme-private-7b", None, None, 10, 0, 0, 10, None, None)])
    c.close()
    assert main(["report", "--db", str(db), "--json"]) == 0
    err = capsys.readouterr().err
    assert "no price for acme-private-7b (1 request)" in err and "100.0% of requests" in err


def test_a_price_that_changes_mid_period_prices_each_side_at_its_own_row(con):
    _load(con, [("e1", datetime(2026, 11, 10, 10), "t", "house-model", None, None, 1_000_000, 0, 0, 0, None, None),
                ("e2", datetime(2026, 11, 20, 10), "t", "house-model", None, None, 1_000_000, 0, 0, 0, None, None)])
    book = pricing.price_book(con)
    base = {c: None for c in book.columns} | {"model": "house-model", "kind": "api", "output_usd_per_1m": 0.0}
    rows = [base | {"input_usd_per_1m": 4.0, "effective_to": pd.Timestamp("2026-11-15")},
            base | {"input_usd_per_1m": 1.0, "effective_from": pd.Timestamp("2026-11-15")}]
    pricing.save_price_book(con, pd.concat([book, pd.DataFrame(rows)], ignore_index=True))
    by_day = spend.report(con, NOV, by=["day"], include_idle=False)["cost_usd"].tolist()
    assert by_day == pytest.approx([4.0, 1.0])


def test_a_litellm_zero_for_tokens_is_priced_from_the_catalogue_and_reconciled(con, tmp_path):
    # LiteLLM writes spend 0.0 when it cannot price a model; a request it priced keeps its own cost
    rows = [{"request_id": "l1", "startTime": "2026-11-20T10:00:00Z", "endTime": "2026-11-20T10:00:01Z",
             "model": "claude-sonnet-4-20250514", "custom_llm_provider": "anthropic", "spend": 0.0,
             "prompt_tokens": 1_000, "completion_tokens": 1_000, "cache_hit": "None", "team_id": "t"},
            {"request_id": "l2", "startTime": "2026-11-20T10:00:02Z", "endTime": "2026-11-20T10:00:03Z",
             "model": "claude-sonnet-4-20250514", "custom_llm_provider": "anthropic", "spend": 0.02,
             "prompt_tokens": 1_000, "completion_tokens": 1_000, "cache_hit": "False", "team_id": "t"}]
    path = tmp_path / "spend.json"
    path.write_text(json.dumps(rows))
    [r] = ingest_path(con, path)
    assert r.format == "litellm" and r.rows_ingested == 2
    list_cost = (1_000 * 3 + 1_000 * 15) / 1e6                     # $0.018 at list price
    assert _cost(con)["claude-sonnet-4-20250514"] == pytest.approx(0.02 + list_cost, abs=1e-12)
    rec = spend.reconcile(con, NOV).set_index("model").loc["claude-sonnet-4-20250514"]
    assert (rec["recorded_requests"], rec["source_unpriced_requests"], rec["priced_requests"]) == (1, 1, 1)
    assert rec["recorded_cost_usd"] == pytest.approx(0.02)
    assert rec["list_cost_usd"] == pytest.approx(list_cost)
    assert rec["difference_pct"] == pytest.approx((0.02 - list_cost) / list_cost * 100)
    assert rec["priced_cost_usd"] == pytest.approx(list_cost)
    assert rec["priced_by"] == "catalogue: anthropic/claude-sonnet-4-0"


def test_sums_are_exact_decimals_whatever_the_order(con):
    # 0.1 + 0.2 is not 0.3 in floats: a thousand recorded costs of $0.1 sum to exactly $100
    _load(con, [(f"x{i}", datetime(2026, 11, 20, 10, i % 60), "t", "gpt-4o", None, None, 1, 0, 0, 1, None, 0.1)
                for i in range(1_000)])
    total = con.execute(f"SELECT sum(cost_usd) FROM ({spend.costed(con, NOV)[0]})", spend.costed(con, NOV)[1]
                        ).fetchall()[0][0]
    assert str(total) == "100.000000000000"


def test_prices_show_names_how_a_model_is_priced(tmp_path, capsys):
    db = str(tmp_path / "p.duckdb")
    store.connect(db).close()           # a new store: the seed price book and the catalogue (show makes none)
    assert main(["prices", "show", "claude-sonnet-4-20250514", "--db", db]) == 0
    assert "catalogue: anthropic/claude-sonnet-4-0" in capsys.readouterr().out
    assert main(["prices", "show", "acme-private-7b", "--db", db]) == 0
    assert "unpriced" in capsys.readouterr().out
    assert main(["prices", "show", " ", "--db", db]) == 1           # it printed ": unpriced"
    assert capsys.readouterr().err == "error: field model: name the model to show, as the logs name it\n"
    assert main(["prices", "alias", "acme-private-7b", "gpt-4o-mini", "--db", db]) == 0
    assert "alias of gpt-4o-mini, price book" in capsys.readouterr().out
    assert main(["prices", "sync", "--db", db]) == 0
    assert "catalogue rows from genai-prices 0.2.3" in capsys.readouterr().out


def test_the_focus_export_charges_catalogue_prices_per_token_class(con):
    from finops.spend import exports
    _load(con, [("c1", datetime(2026, 11, 20, 10), "t", "claude-sonnet-4-20250514", "anthropic", None,
                 3_500, 2_000, 500, 300, None, None)])
    focus = exports.focus_frame(con, NOV).set_index("SkuMeter")
    assert list(focus.index) == ["Input Tokens", "Cached Input Tokens", "Cache Write Tokens", "Output Tokens"]
    assert focus["ListUnitPrice"].tolist() == [3.0, 0.3, 3.75, 15.0]
    assert focus["ConsumedQuantity"].tolist() == [1_000, 2_000, 500, 300]
    assert focus["BilledCost"].tolist() == pytest.approx([0.003, 0.0006, 0.001875, 0.0045], abs=1e-15)
    assert exports.check_focus(focus.reset_index()) == []
    assert focus["BilledCost"].sum() == pytest.approx(_cost(con)["claude-sonnet-4-20250514"], abs=1e-12)


def test_an_alias_cannot_name_a_self_hosted_fleet(con):
    from finops.errors import InputError
    with pytest.raises(InputError, match="self-hosted fleet") as exc:
        pricing.save_aliases(con, pd.DataFrame([{"alias": "acme-7b", "model": "llama-3.1-8b", "provider": None}]))
    assert exc.value.field == "model"
    assert pricing.aliases(con).empty


def test_aliases_do_not_chain_or_name_themselves_and_a_refused_table_keeps_the_old_one(con):
    from finops.errors import InputError
    pricing.save_aliases(con, pd.DataFrame([{"alias": "acme-mini", "model": "gpt-4o-mini", "provider": None}]))
    chained = pd.DataFrame([{"alias": "acme-mini", "model": "gpt-4o-mini", "provider": None},
                            {"alias": "acme-mini-eu", "model": "acme-mini", "provider": None}])
    with pytest.raises(InputError, match=r"acme-mini is itself an alias \(of gpt-4o-mini\).*price acme-mini-eu "
                                         r"as gpt-4o-mini directly") as exc:
        pricing.save_aliases(con, chained)
    assert (exc.value.row, exc.value.field) == (2, "model")
    with pytest.raises(InputError, match="priced as itself") as exc:
        pricing.save_aliases(con, pd.DataFrame([{"alias": "gpt-4o", "model": "gpt-4o", "provider": None}]))
    assert (exc.value.row, exc.value.field) == (1, "model")
    assert pricing.aliases(con)["alias"].tolist() == ["acme-mini"]
    # the same name with a provider pins where it is priced: kept
    assert pricing.save_aliases(con, pd.DataFrame([{"alias": "gpt-4o", "model": "gpt-4o", "provider": "azure"}])) == 1


def test_prices_list_and_show_write_dollars_and_no_none(tmp_path, capsys):
    # the seed price book: gpt-4o $2.50 / $1.25 cached / $10.00 output per 1M; the sample fleet's GPU-hour $2.50;
    # the reference gateway's "fast" $0.001 a request. A price the row does not set is blank, never None or <NA>
    db = str(tmp_path / "p.duckdb")
    store.connect(db).close()
    assert main(["prices", "list", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "<NA>" not in out and "NaN" not in out
    row = next(line.split() for line in out.splitlines() if line.split()[:2] == ["gpt-4o", "OpenAI"])
    assert row[5:8] == ["$2.50", "$10.00", "$1.25"]
    assert "$0.0010" in next(line for line in out.splitlines() if line.split()[0] == "fast")
    assert main(["prices", "show", "gpt-4o", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "<NA>" not in out
    assert [v for v in out.splitlines()[2].split() if v.startswith("$")] == ["$2.50", "$1.25", "$10.00"]


def test_prices_list_of_no_rows_is_a_sentence(tmp_path, capsys):
    # a provider with no catalogue rows printed pandas' "Empty DataFrame / Columns: [...] / Index: []"
    db = str(tmp_path / "p.duckdb")
    store.connect(db).close()
    assert main(["prices", "list", "--source", "catalogue", "--provider", "no-such-provider", "--db", db]) == 0
    assert capsys.readouterr().out == "no catalogue price rows for provider no-such-provider\n"
