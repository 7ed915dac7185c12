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


def test_cli_load_and_show(tmp_path, capsys):
    db = str(tmp_path / "b.duckdb")
    assert main(["billing", "load", str(P / "openai_costs.json"), str(P / "anthropic_cost_report.json"),
                 "--db", db]) == 0
    capsys.readouterr()
    assert main(["billing", "show", "--db", db, "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    total = sum(Decimal(str(x["amount_usd"])) for x in lines)
    assert total == sum(expected_billed().values())
