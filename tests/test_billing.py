"""finops.ingest.billing: the providers' usage and cost reports as billing lines.

Expected amounts and tokens are summed here from the raw files (tests/data/providers/, see its README).
"""
from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from finops import store
from finops.cli import main
from finops.errors import InputError
from finops.fmt import usd
from finops.ingest import billing
from helpers import DATA

P = DATA / "providers"


@pytest.fixture
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _day(v) -> date:
    if isinstance(v, int):
        return datetime.fromtimestamp(v, UTC).date()
    return datetime.fromisoformat(v.replace("Z", "+00:00")).date()


def expected_billed() -> dict:
    """(provider, day, model) -> Decimal USD, from the two cost files."""
    out: dict = defaultdict(Decimal)
    for b in json.loads((P / "openai_costs.json").read_text())["data"]:
        for r in b["results"]:
            item = r["line_item"]
            model = item.rsplit(", ", 1)[0] if ", " in item else None
            out[("openai", _day(b["start_time"]), model)] += Decimal(str(r["amount"]["value"]))
    for b in json.loads((P / "anthropic_cost_report.json").read_text())["data"]:
        for r in b["results"]:
            out[("anthropic", _day(b["starting_at"]), r["model"])] += Decimal(r["amount"]) / 100   # cents
    return dict(out)


def load_all(con):
    return [billing.load_billing_file(con, P / f) for f in
            ("openai_costs.json", "openai_usage_completions.json", "anthropic_cost_report.json",
             "anthropic_usage_report.json")]


def test_billed_by_day_model_equals_the_cost_files(con):
    results = load_all(con)
    assert [r.source for r in results] == ["openai-costs", "openai-usage", "anthropic-cost", "anthropic-usage"]
    got = {(r.provider, r.day.date() if hasattr(r.day, "date") else r.day, None if r.model != r.model else r.model):
           Decimal(str(r.amount_usd)) for r in billing.billed_by_day_model(con).itertuples()}
    assert got == expected_billed()


def test_period_bounds(con):
    load_all(con)
    since = date(2025, 3, 5)
    frame = billing.billed_by_day_model(con, since, date(2025, 3, 6))
    assert sum(Decimal(str(v)) for v in frame.amount_usd) == sum(
        v for (_, d, _), v in expected_billed().items() if d == since)
    assert billing.billed_by_day_model(con, date(2025, 3, 4), date(2025, 3, 4)).empty


def test_usage_lines_carry_tokens_in_the_canonical_convention(con):
    load_all(con)
    lines = con.execute("SELECT * FROM billing_lines WHERE source = 'anthropic-usage' ORDER BY model").df()
    raw = sorted(json.loads((P / "anthropic_usage_report.json").read_text())["data"][0]["results"],
                 key=lambda r: r["model"])
    for line, r in zip(lines.to_dict("records"), raw, strict=True):
        cc = r["cache_creation"]
        assert line["input_tokens"] == (r["uncached_input_tokens"] + r["cache_read_input_tokens"]
                                        + cc["ephemeral_5m_input_tokens"] + cc["ephemeral_1h_input_tokens"])
        assert line["cached_input_tokens"] == r["cache_read_input_tokens"]
        assert line["cache_write_tokens"] == cc["ephemeral_5m_input_tokens"]
        assert line["cache_write_1h_tokens"] == cc["ephemeral_1h_input_tokens"]
        assert (line["output_tokens"], line["requests"]) == (r["output_tokens"], r["requests"])
        assert line["amount_usd"] is None or line["amount_usd"] != line["amount_usd"]
    oa = con.execute("SELECT * FROM billing_lines WHERE source = 'openai-usage' ORDER BY model").df()
    raw = sorted(json.loads((P / "openai_usage_completions.json").read_text())["data"][0]["results"],
                 key=lambda r: r["model"])
    for line, r in zip(oa.to_dict("records"), raw, strict=True):
        assert (line["input_tokens"], line["cached_input_tokens"], line["output_tokens"], line["requests"]) == (
            r["input_tokens"], r["input_cached_tokens"], r["output_tokens"], r["num_model_requests"])
        assert (line["project"], line["api_key_id"]) == (r["project_id"], r["api_key_id"])
        assert (line["service_tier"] if isinstance(line["service_tier"], str) else None) == (
            "batch" if r["batch"] else None)


def test_loading_twice_adds_nothing_and_counts_one_version(con):
    load_all(con)
    n, version = con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0], store.data_version(con)
    again = load_all(con)
    assert all(r.already_loaded for r in again)
    assert con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0] == n
    assert store.data_version(con) == version


def test_a_newer_report_replaces_the_same_lines(con, tmp_path):
    billing.load_billing_file(con, P / "openai_costs.json")
    doc = json.loads((P / "openai_costs.json").read_text())
    doc["data"][1]["results"][0]["amount"]["value"] = 0.5        # the day closed: its final figure
    f = tmp_path / "costs_later.json"
    f.write_text(json.dumps(doc))
    res = billing.load_billing_file(con, f)
    total_lines = sum(len(b["results"]) for b in doc["data"])
    assert (res.lines_added, res.lines_replaced) == (0, total_lines)
    frame = billing.billed_by_day_model(con, date(2025, 3, 5))
    assert [float(v) for v in frame.amount_usd] == [0.5]


def test_a_refused_file_changes_nothing(con, tmp_path):
    doc = json.loads((P / "anthropic_cost_report.json").read_text())
    doc["data"][1]["results"][0]["amount"] = "lots"
    f = tmp_path / "cost.json"
    f.write_text(json.dumps(doc))
    version = store.data_version(con)
    with pytest.raises(InputError, match=r"file cost.json, row 2, field results\[0\].amount: 'lots' is not an amount"):
        billing.load_billing_file(con, f)
    assert con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0] == 0
    assert store.data_version(con) == version


def test_not_a_report_is_refused(con):
    with pytest.raises(InputError, match="helicone_requests.json, row 1, field results"):
        billing.load_billing_file(con, P / "helicone_requests.json")


def test_a_binary_a_folder_or_a_huge_file_is_refused_in_a_sentence(con, tmp_path, monkeypatch):
    """A binary file stopped with UnicodeDecodeError's traceback, a folder was 'no such file', and any file was
    read whole into memory twice (its hash, its text) whatever its size."""
    binary = tmp_path / "report.json"
    binary.write_bytes(b'{"data": [\xd0\xff]}')
    with pytest.raises(InputError, match="file report.json: not a text file .*the byte at offset 10 is not UTF-8"):
        billing.load_billing_file(con, binary)
    with pytest.raises(InputError, match="is a folder: give the report files in it"):
        billing.load_billing_file(con, tmp_path)
    monkeypatch.setattr(billing, "MAX_BILLING_BYTES", 1_000)      # a sparse file past the real limit: same test
    big = tmp_path / "big.json"
    with big.open("wb") as out:
        out.truncate(1_001)
    with pytest.raises(InputError, match="file big.json: is 0 MiB, over the 0 MiB"):
        billing.load_billing_file(con, big)
    assert con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0] == 0


def test_cli_load_and_show(tmp_path, capsys):
    db = str(tmp_path / "b.duckdb")
    assert main(["billing", "load", str(P / "openai_costs.json"), str(P / "anthropic_cost_report.json"),
                 "--db", db]) == 0
    capsys.readouterr()
    assert main(["billing", "show", "--db", db, "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    total = sum(Decimal(str(x["amount_usd"])) for x in lines)
    assert total == sum(expected_billed().values())


# ---------------------------------------------------------------- beside the reconciliation view
# The two batch files (requests of 4 March 2025) against the cost reports above. The logs are priced at
# round price-book rows so every figure below is worked by hand from the raw files' usage:
#   gpt-4o-mini-2024-07-18 ($1 in, $0.5 cached, $4 out per 1M): batch_req_a1 176 uncached + 1,024 cached + 300 out
#     = 176 + 512 + 1,200 = 1,888 micro-$; batch_req_a6 2,048 cached + 17 out = 1,024 + 68 = 1,092 -> $0.002980
#   o3-mini-2025-01-31 ($2 in, $8 out): 500 in + 900 out = 1,000 + 7,200 -> $0.008200
#   claude-sonnet-4-20250514 ($3 in, $0.3 cached, $3.75 5-min write, $6 1-h write, $15 out): 12 uncached, 4,000
#     read, 1,000 + 500 written, 250 out = 36 + 1,200 + 3,750 + 3,000 + 3,750 -> $0.011736
#   claude-3-5-haiku-20241022 ($0.8 in, $4 out): 800 in + 64 out = 640 + 256 -> $0.000896
# Billed on 4 March (openai_costs.json bucket 1, anthropic_cost_report.json bucket 1, cents / 100):
#   gpt-4o-mini 0.39 + 0.1536 + 1.2 = $1.7436; o3-mini $4.40; the web-search line (no model) $0.25;
#   sonnet (1.8 + 60 + 187.5) / 100 = $2.493; haiku 12.3456 / 100 = $0.123456; in all $9.010056.
BOOK = {"gpt-4o-mini-2024-07-18": (1, 0.5, None, None, 4), "o3-mini-2025-01-31": (2, None, None, None, 8),
        "claude-sonnet-4-20250514": (3, 0.3, 3.75, 6, 15), "claude-3-5-haiku-20241022": (0.8, None, None, None, 4)}
HAND = {  # model -> (logs_cost_usd, billed_usd)
    "gpt-4o-mini-2024-07-18": ("0.002980", "1.7436"), "o3-mini-2025-01-31": ("0.008200", "4.40"),
    "claude-sonnet-4-20250514": ("0.011736", "2.493"), "claude-3-5-haiku-20241022": ("0.000896", "0.123456")}


def batch_store(con, with_billing=True):
    import pandas as pd

    from finops.ingest import IngestOptions, ingest_path
    from finops.spend import pricing
    ingest_path(con, P / "openai_batch_output.jsonl", IngestOptions(model="gpt-4o-mini-2024-07-18"))
    ingest_path(con, P / "anthropic_batch_results.jsonl", IngestOptions(start=datetime(2025, 3, 4, 15)))
    book = pricing.price_book(con)
    base = {c: None for c in book.columns} | {"kind": "api"}
    rows = [base | {"model": m, "input_usd_per_1m": i, "cached_input_usd_per_1m": c, "cache_write_usd_per_1m": w,
                    "cache_write_1h_usd_per_1m": w1h, "output_usd_per_1m": o}
            for m, (i, c, w, w1h, o) in BOOK.items()]
    pricing.save_price_book(con, pd.concat([book, pd.DataFrame(rows)], ignore_index=True))
    if with_billing:
        load_all(con)


def march_4():
    from finops.filters import filters_for
    return filters_for(date(2025, 3, 4), date(2025, 3, 4))


def test_reconcile_sets_the_bill_beside_the_logs_by_hand(con):
    from finops.spend import report
    batch_store(con)
    rec = report.reconcile(con, march_4())
    by = rec.set_index("model", drop=False)
    for model, (logs, billed) in HAND.items():
        r = by.loc[model]
        assert (r["billing"], r["billed_model"]) == ("billed", model)
        assert Decimal(str(r["logs_cost_usd"])) == Decimal(logs)
        assert Decimal(str(r["billed_usd"])) == Decimal(billed)
        assert Decimal(str(round(r["billed_difference_usd"], 12))) == Decimal(logs) - Decimal(billed)
        assert r["billed_difference_pct"] == pytest.approx(float((Decimal(logs) - Decimal(billed)) / Decimal(billed) * 100))
    # the embedding request is priced (catalogue) but the provider's bill has no line for it: billed $0
    emb = by.loc["text-embedding-3-small"]
    assert (emb["billing"], emb["billed_usd"]) == ("not on the provider's bill", 0.0)
    assert emb["billed_difference_usd"] == emb["logs_cost_usd"] and emb["billed_difference_pct"] != emb["billed_difference_pct"]
    # the web-search line names no model: a row of its own, so the column sums to the bill
    [tools] = rec[rec["model"].isna()].to_dict("records")
    assert (tools["provider"], tools["billed_usd"], tools["logs_cost_usd"], tools["recorded_requests"]) == (
        "openai", 0.25, 0.0, 0)
    billed_total = sum(Decimal(str(v)) for v in rec["billed_usd"].dropna())
    own = sum(v for (_, d, _), v in expected_billed().items() if d == date(2025, 3, 4))
    assert billed_total == own == Decimal("9.010056")         # to the cent, and to the last digit


def test_reconcile_says_when_there_is_nothing_to_compare(con):
    from finops.filters import Filters
    from finops.spend import report
    batch_store(con, with_billing=False)
    rec = report.reconcile(con, march_4())
    assert set(rec["billing"]) == {report.NO_BILLING} and rec["billed_usd"].isna().all()
    assert rec["logs_cost_usd"].notna().all()
    billing.load_billing_file(con, P / "anthropic_cost_report.json")
    rec = report.reconcile(con, march_4()).set_index("model")
    assert rec.loc["claude-sonnet-4-20250514", "billing"] == "billed"
    assert rec.loc["o3-mini-2025-01-31", "billing"] == report.NO_BILLING
    load_all(con)
    per_tenant = report.reconcile(con, Filters(tenants=("anyone",)))
    assert per_tenant.empty or set(per_tenant["billing"]) == {report.BILLING_PER_ORGANISATION}
    tenants = con.execute("SELECT DISTINCT tenant FROM requests").fetchall()
    rec = report.reconcile(con, Filters(tenants=tuple(t for (t,) in tenants)))
    assert set(rec["billing"]) == {report.BILLING_PER_ORGANISATION} and rec["billed_usd"].isna().all()


def test_requests_of_days_the_bill_does_not_cover(con):
    from finops.filters import filters_for
    from finops.ingest import IngestOptions, ingest_path
    from finops.spend import report
    ingest_path(con, P / "anthropic_batch_results.jsonl", IngestOptions(start=datetime(2025, 4, 1, 15)))
    billing.load_billing_file(con, P / "anthropic_cost_report.json")          # 4 and 5 March only
    rec = report.reconcile(con, filters_for(date(2025, 4, 1), date(2025, 4, 1)))
    assert set(rec["billing"]) == {report.NO_BILLING_IN_PERIOD} and rec["billed_usd"].isna().all()


def test_a_dated_and_an_undated_name_are_one_billed_model(con, tmp_path):
    from finops.ingest import IngestOptions, ingest_path
    from finops.spend import report
    batch_store(con)
    lines = (P / "openai_batch_output.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    doc["id"], doc["response"]["request_id"] = "batch_req_b1", "req_b1"
    doc["response"]["body"]["model"] = "gpt-4o-mini"                    # the undated alias
    f = tmp_path / "undated.jsonl"
    f.write_text(json.dumps(doc) + "\n")
    ingest_path(con, f, IngestOptions())
    rec = report.reconcile(con, march_4()).set_index("model")
    dated, undated = rec.loc["gpt-4o-mini-2024-07-18"], rec.loc["gpt-4o-mini"]
    # the undated request's cost is counted in the dated row alone: listed in both, the column summed it twice
    # by hand: the book prices the dated name only; the alias takes the catalogue's gpt-4o-mini, $0.15 / $0.075
    # cached / $0.60 per 1M: 176 x 0.15 + 1,024 x 0.075 + 300 x 0.60 = $0.0002832
    own = 0.0002832
    assert undated["billing"] == f"compared in gpt-4o-mini-2024-07-18's row, which counts its {usd(own)}"
    assert undated["billed_usd"] != undated["billed_usd"] and undated["logs_cost_usd"] != undated["logs_cost_usd"]
    assert dated["logs_cost_usd"] == pytest.approx(0.002980 + own, abs=1e-12)
    # every request of the day once: the hand-worked four, the alias, and the embedding no bill line names
    logged = sum(float(c) for c, _ in HAND.values()) + own + rec.loc["text-embedding-3-small", "logs_cost_usd"]
    assert rec["logs_cost_usd"].sum() == pytest.approx(logged, abs=1e-12)
    assert Decimal(str(dated["billed_usd"])) == Decimal("1.7436")


def test_cli_reconcile_prints_the_bill(tmp_path, capsys):
    db = str(tmp_path / "r.duckdb")
    c = store.connect(db)
    batch_store(c)
    c.close()
    assert main(["report", "--reconcile", "--since", "2025-03-04", "--until", "2025-03-04", "--db", db, "--json"]) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    assert Decimal(str(rows["o3-mini-2025-01-31"]["billed_usd"])) == Decimal("4.4")
    assert rows["o3-mini-2025-01-31"]["billing"] == "billed"
    assert main(["report", "--reconcile", "--since", "2025-03-04", "--until", "2025-03-04", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "your logs say $0.0082, the provider billed $4.40" in out       # fmt.usd: $0.0082, not $0.01


@pytest.mark.parametrize(("field", "value", "kind"), [("description", ["a", "b"], "an array"),
                                                      ("model", {"id": "claude"}, "an object"),
                                                      ("workspace_id", True, "true")])
def test_a_report_text_field_of_another_type_refuses_the_file_naming_it(con, tmp_path, field, value, kind):
    """Anthropic's cost report with a result's description a list, its model an object, its workspace true: the
    file refused naming bucket and field (a list stopped the load with 'unhashable type'; an object reached the
    store as a dict's text), billing_lines as they were. A number is kept as its text."""
    doc = json.loads((DATA / "providers" / "anthropic_cost_report.json").read_text())
    doc["data"][0]["results"][1][field] = value
    f = tmp_path / "cost.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        billing.load_billing_file(con, f)
    assert (err.value.row, err.value.field) == (1, f"results[1].{field}")
    assert f"{field} is a text, found {kind}" in str(err.value)
    assert con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0] == 0
    doc["data"][0]["results"][1][field] = 42
    f.write_text(json.dumps(doc))
    billing.load_billing_file(con, f)
    column = {"description": "line_item", "workspace_id": "project"}.get(field, field)
    assert con.execute(f"SELECT count(*) FROM billing_lines WHERE {column} LIKE '%42%'").fetchall()[0][0] == 1


@pytest.mark.parametrize("count", [float("inf"), float("nan"), 2 ** 63, 1e300])
def test_a_report_count_past_any_count_refuses_the_file_naming_it(con, tmp_path, count):
    """An Anthropic usage result's output_tokens of infinity, NaN, 2^63 or 1e300: refused naming bucket and field
    (OverflowError, ValueError, or DuckDB's BIGINT conversion error stopped the load), billing_lines as they were."""
    doc = json.loads((DATA / "providers" / "anthropic_usage_report.json").read_text())
    doc["data"][0]["results"][0]["output_tokens"] = count
    f = tmp_path / "usage.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        billing.load_billing_file(con, f)
    assert (err.value.row, err.value.field) == (1, "results[0].output_tokens")
    assert "is not a count of tokens or requests" in str(err.value)
    assert con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0] == 0


def test_cli_show_writes_billed_money_in_cents(tmp_path, capsys):
    # the two cost reports' lines (openai_costs.json, anthropic_cost_report.json) per day, provider and model:
    # haiku's 12.3456 cents are $0.12, sonnet's 249.3 cents $2.49, and the $11.585056 of it all $11.59; the text
    # wrote every amount to the micro-dollar ($2.493000), unlike every other money figure of the CLI and the pages
    db = str(tmp_path / "b.duckdb")
    assert main(["billing", "load", str(P / "openai_costs.json"), str(P / "anthropic_cost_report.json"),
                 "--db", db]) == 0
    capsys.readouterr()
    assert main(["billing", "show", "--db", db]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == ["2025-03-04", "anthropic", "claude-3-5-haiku-20241022", "$0.12"]
    assert lines[1] == ["2025-03-04", "anthropic", "claude-sonnet-4-20250514", "$2.49"]
    assert lines[4][-1] == "$0.25" and lines[6][-1] == "$0.075"
    assert lines[-1] == ["total", "$11.59"]
