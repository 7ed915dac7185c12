"""The pages on the shapes of real public data: an Azure LLM inference trace (tokens and times, no latency) and
LLMPerf runs against hosted APIs (a few minutes of one model each, on one day). What a finance manager or an SRE
met on them, pinned."""
import json
from datetime import datetime

import pandas as pd
import pytest

from finops import store
from finops.ingest import IngestOptions, ingest_path
from helpers import DATA, run_page, shown

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real_db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("real") / "real.duckdb")
    con = store.connect(path)
    ingest_path(con, DATA / "azure_conv.csv", IngestOptions(format="azure-trace", model="gpt-4o", tenant="chat"))
    for run in ("fireworks_70b", "together_13b"):
        ingest_path(con, DATA / "llmperf" / "individual" / f"{run}.json", IngestOptions())
    con.close()
    return path


def _specs(at) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("vega_lite_chart")]


def _title(spec: dict) -> str:
    title = spec.get("title", "")
    text = title.get("text", "") if isinstance(title, dict) else title
    return " ".join(text) if isinstance(text, list) else str(text)      # a long title is lines (charts._lines)


def test_a_model_seen_on_one_day_draws_points_not_an_empty_panel(real_db):
    # each LLMPerf run lasted two minutes: one point per percentile, which a bare line does not draw
    at = run_page(real_db, "views/percentiles.py")
    assert not at.exception, [e.value for e in at.exception]
    specs = _specs(at)
    assert len(specs) == 2
    assert all(s["mark"]["type"] == "line" and s["mark"]["point"] for s in specs)


def test_latency_by_prompt_length_draws_the_single_bucket_of_a_fixed_prompt(real_db):
    # LLMPerf sends ~550-token prompts: every model's requests fall in one length bucket
    at = run_page(real_db, "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    by_prompt = [s for s in _specs(at) if _title(s).startswith("Latency by prompt")]
    assert len(by_prompt) == 1 and by_prompt[0]["mark"]["point"]


def test_where_the_time_goes_splits_llmperf_requests_at_their_first_token(real_db):
    # LLMPerf logs the time to first token and the end-to-end latency, no segment: both charts were one grey
    # 'other' bar per row; now the wait for the first token and the rest, named in the legend and the captions
    at = run_page(real_db, "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    for start in ("Where the time goes", "The 15 slowest requests"):
        [spec] = [s for s in _specs(at) if _title(s).startswith(start)]
        assert spec["encoding"]["color"]["scale"]["domain"] == ["to first token", "after first token"], start
    said = [c.value for c in at.caption if "splits at its first token" in c.value]
    assert len(said) == 2


def test_an_unpriced_model_has_no_unit_cost_rather_than_a_free_one(real_db):
    # the LLMPerf runs' models (Fireworks, Together names) are in no price book: counted at $0, said in the banner;
    # their unit cost was "$0.000 per 1M tokens", which a finance manager reads as free
    at = run_page(real_db, "views/cost.py")
    assert not at.exception, [e.value for e in at.exception]
    units = next(d.value for d in at.dataframe if "usd_per_1m" in d.value.columns)
    assert units["request_cost_usd"].is_monotonic_decreasing and units["model"].iloc[0] == "gpt-4o"     # costliest first
    units = units.set_index("model")
    unpriced = ["accounts/fireworks/models/llama-v2-70b-chat", "together_ai/togethercomputer/llama-2-13b-chat"]
    assert units.loc[unpriced, ["usd_per_1m", "billed_usd_per_1m", "fully_loaded_usd_per_1m"]].isna().all().all()
    assert units.loc["gpt-4o", "usd_per_1m"] > 0
    assert "No price for 2 model(s)" in "\n".join(str(w.value) for w in at.warning)


def test_a_month_with_no_complete_day_says_its_forecast_is_a_run_rate_of_hours(real_db):
    # the Together run is the store's only December traffic: two minutes on 19 December, no complete day
    at = run_page(real_db, "views/budgets.py", query_params={"month": "2023-12"})
    assert not at.exception, [e.value for e in at.exception]
    caption = next(c.value for c in at.caption if c.value.startswith("Data through"))
    assert "over the 0 complete days" not in caption and "The store starts on" not in caption
    # over the minutes the run's requests cover, not the 12 hours since midnight (a rate 50 times too low)
    assert caption.startswith("Data through 2023-12-19 11:37 UTC;")
    assert ("No complete day observed yet: the forecast runs each tenant's spend rate over an hour (the logs cover "
            "14 minutes, 2023-12-19 11:23 to 11:37 UTC, counted as an hour) to the month end") in caption
    assert "The store's first request in December 2023 is on 2023-12-19" in caption
    assert at.metric[0].value == "—"      # not "0 of 0" tenants over budget, nor a phrase the card cuts ("no budget…")


def test_the_cli_shows_an_unpriced_models_unit_cost_as_a_dash(real_db):
    # `finops report --unit-costs` printed None and NaN for the models nothing prices
    from finops.commands import report

    con = store.connect(real_db)
    out, _ = report.render(con, report.parse(["--unit-costs"]))
    assert "None" not in out and "NaN" not in out
    row = next(line.split() for line in out.splitlines() if "llama-v2-70b-chat" in line)
    assert row[1] == "api" and row[3] == "0.00" and row.count("—") == 4        # served tokens counted, $0.00, no unit cost
    assert row[2] == "105,077"                 # 82,500 input + 22,577 output tokens, with separators (was 105077)


def test_showback_gives_an_unpriced_tenant_no_dollar_per_1m_and_blends_the_others_on_priced_tokens(real_db):
    # the LLMPerf runs land in tenant "default" on two models nothing prices: its $ per 1M was "$0.000" (free)
    at = run_page(real_db, "views/cost.py")
    assert not at.exception, [e.value for e in at.exception]
    tables = [d.value for d in at.dataframe if "share" in d.value.columns]
    by_tenant = next(t for t in tables if "models" in t.columns).set_index("tenant")
    assert by_tenant.loc["default", "priced_tokens"] == 0 and by_tenant.loc["default", "tokens"] > 0
    assert pd.isna(by_tenant.loc["default", "cost_per_1m_tokens"])
    chat = by_tenant.loc["chat"]
    assert chat["cost_per_1m_tokens"] == pytest.approx(chat["cost_usd"] / chat["priced_tokens"] * 1e6)


def test_percentiles_do_not_blame_an_api_for_a_trace_that_has_no_latency(real_db):
    # the Azure trace (gpt-4o) carries tokens and times only: its missing total latency is no API's doing
    at = run_page(real_db, "views/percentiles.py")
    assert not at.exception, [e.value for e in at.exception]
    captions = "\n".join(c.value for c in at.caption)
    assert "No total latency in the logs of gpt-4o." in captions
    assert "API" not in captions


def test_the_slowest_requests_chart_has_no_axis_title_drawn_over_its_long_labels(real_db):
    at = run_page(real_db, "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    spec = next(s for s in _specs(at) if _title(s).startswith("The 15 slowest requests"))
    assert spec["encoding"]["y"]["title"] is None
    assert " ".join(spec["title"]["subtitle"]) == "Each bar is a request: its rank, arrival (UTC) and model."


def test_a_model_whose_logs_carry_no_sla_latency_is_named_as_not_judged_not_called_healthy(real_db):
    # the SLA is on time to first token (LLMPerf carries it); the Azure trace's gpt-4o carries no latency at all
    from finops.ops import alerts
    con = store.connect(real_db)
    try:
        blind = alerts.unjudged(con)
    finally:
        con.close()
    no_field = blind[blind.reason == "no_field"].set_index("rule")
    row = no_field.loc["p99_over_sla"]
    assert row.requests == 19_366
    assert row.why == "the logs of gpt-4o carry no time to first token (19,366 requests): there is nothing to judge"
    # nor a status: its error rate is unknown too (LLMPerf's runs carry one: judged)
    assert no_field.loc["error_rate", "why"] == ("the logs of gpt-4o carry no request status (19,366 requests): "
                                                 "there is nothing to judge")


def test_overview_gives_a_model_with_no_latency_no_hours_over_the_rule_rather_than_zero(real_db):
    at = run_page(real_db, "views/overview.py")
    assert not at.exception, [e.value for e in at.exception]
    lat = next(d.value for d in at.dataframe if "hours_over" in d.value.columns).set_index("model")
    assert pd.isna(lat.loc["gpt-4o", "hours_over"])                                     # shown as —
    assert lat.loc["together_ai/togethercomputer/llama-2-13b-chat", "hours_over"] >= 0


@pytest.fixture(scope="module")
def unpriced_db(tmp_path_factory) -> str:
    # 300 real Mooncake requests of a model nothing prices: every figure is $0, which is no spend to draw
    path = str(tmp_path_factory.mktemp("unpriced") / "moon.duckdb")
    con = store.connect(path)
    ingest_path(con, DATA / "mooncake_conversation_head300.jsonl",
                IngestOptions(format="mooncake", model="kimi-k1", start=datetime(2025, 1, 1)))
    con.close()
    return path


@pytest.mark.parametrize("page, sections", [
    ("views/overview.py", ["Spend over time has nothing to show", "Tenant spend has nothing to show"]),
    ("views/cost.py", ["The heatmap has nothing to show", "What each model's spend is made of has nothing to show",
                       "This table has nothing to show"]),
])
def test_spend_charts_of_a_store_nothing_prices_say_so_instead_of_drawing_zero(unpriced_db, page, sections):
    at = run_page(unpriced_db, page)
    assert not at.exception, [e.value for e in at.exception]
    said = "\n".join(i.value for i in at.info)
    for section in sections:
        assert section in said
    spend_charts = [s for s in _specs(at) if "(USD)" in _title(s) or _title(s).startswith("$ per 1M")]
    assert spend_charts == []


@pytest.mark.parametrize("page", ["views/budgets.py", "views/routing.py"])
def test_every_page_that_shows_money_says_what_is_counted_at_zero(unpriced_db, page):
    at = run_page(unpriced_db, page)
    assert not at.exception, [e.value for e in at.exception]
    assert any("No price for 1 model(s)" in str(w.value) for w in at.warning)


def test_routing_draws_no_share_of_zero_spend_but_still_the_share_of_requests(unpriced_db):
    at = run_page(unpriced_db, "views/routing.py")
    assert not at.exception, [e.value for e in at.exception]
    assert sum("no share of spend to draw" in i.value for i in at.info) == 3
    assert not [s for s in _specs(at) if _title(s).startswith("Share of")]
    at.segmented_control(key="mix_measure").set_value("requests").run()
    assert not at.exception
    # these logs name no route: the page opens by model (by route they were one band of "(none)")
    assert [s for s in _specs(at) if _title(s).startswith("Share of requests by model")]


def test_showback_names_models_as_priced_on_request(tmp_path):
    # the LiteLLM and OpenRouter fixtures log gpt-4o-mini as "gpt-4o-mini" and "openai/gpt-4o-mini"
    path = str(tmp_path / "eco.duckdb")
    con = store.connect(path)
    for name in ("litellm/spendlogs_v1_74.csv", "providers/openrouter_generations.jsonl"):
        ingest_path(con, DATA / name)
    con.close()
    at = run_page(path, "views/cost.py")
    assert not at.exception, [e.value for e in at.exception]

    def pairs(at):
        tables = [d.value for d in at.dataframe if "share" in d.value.columns and "model" in d.value.columns]
        return next(t for t in tables if "models" not in t.columns)

    logged = pairs(at)
    assert {"gpt-4o-mini", "openai/gpt-4o-mini"} <= set(logged["model"])
    at.segmented_control(key="showback_models").set_value("priced_as").run()
    assert not at.exception, [e.value for e in at.exception]
    priced = pairs(at)
    assert "openai/gpt-4o-mini" not in set(priced["model"])
    mini = logged[logged["model"].isin(["gpt-4o-mini", "openai/gpt-4o-mini"])]
    row = priced[priced["model"] == "gpt-4o-mini"]
    assert row["requests"].sum() == mini["requests"].sum()
    assert row["cost_usd"].sum() == pytest.approx(mini["cost_usd"].sum(), abs=1e-12)
    assert priced["cost_usd"].sum() == pytest.approx(logged["cost_usd"].sum(), abs=1e-12)
    # the $ per 1M tokens table names them so too, its gpt-4o-mini row the blend of both names
    wide = next(d.value for d in at.dataframe if "all tenants" in d.value.columns).set_index("model")
    assert "openai/gpt-4o-mini" not in wide.index
    mini_tokens = row["priced_tokens"].sum()
    assert wide.loc["gpt-4o-mini", "all tenants"] == pytest.approx(row["cost_usd"].sum() / mini_tokens * 1e6)


def test_the_alerts_page_names_the_rule_it_could_not_judge_beside_the_alerts_that_fired(unpriced_db):
    # the Mooncake trace fires the unpriced-traffic alert; its P99 rule has no latency to judge, said beside it
    at = run_page(unpriced_db, "views/alerts.py")
    assert not at.exception, [e.value for e in at.exception]
    said = shown("\n".join(i.value for i in at.info))
    assert "Not judged: " in said and "the logs of kimi-k1 carry no total latency (300 requests)" in said


def test_incidents_do_not_call_a_trace_without_latency_free_of_slow_paths(unpriced_db):
    at = run_page(unpriced_db, "views/incidents.py")
    assert not at.exception, [e.value for e in at.exception]
    assert any("No slow-path diagnosis: these logs carry no latency" in i.value for i in at.info)
    assert not any("And no slow-path finding" in s.value for s in at.success)


def test_overview_spend_over_time_names_models_as_priced_on_request(tmp_path):
    from finops.filters import Filters
    from finops.spend import costviews
    path = str(tmp_path / "eco.duckdb")
    con = store.connect(path)
    for name in ("litellm/spendlogs_v1_74.csv", "providers/openrouter_generations.jsonl"):
        ingest_path(con, DATA / name)
    logged = costviews.spend_over_time(con, Filters())
    priced = costviews.spend_over_time(con, Filters(), models="priced_as")
    con.close()
    assert "openai/gpt-4o-mini" in set(logged["series"]) and "openai/gpt-4o-mini" not in set(priced["series"])
    both = logged[logged["series"].isin(["gpt-4o-mini", "openai/gpt-4o-mini"])].groupby("period")["cost_usd"].sum()
    mini = priced[priced["series"] == "gpt-4o-mini"].set_index("period")["cost_usd"]
    assert mini.astype(float).to_dict() == pytest.approx(both.astype(float).to_dict(), abs=1e-12)
    assert priced["cost_usd"].sum() == pytest.approx(logged["cost_usd"].sum(), abs=1e-12)
    at = run_page(path)
    assert not at.exception, [e.value for e in at.exception]
    at.segmented_control(key="overview_models").set_value("priced_as").run()
    assert not at.exception, [e.value for e in at.exception]
    spend = [s for s in _specs(at) if _title(s).startswith("Spend per")]
    assert spend and "openai/gpt-4o-mini" not in json.dumps(spend)


def test_capacity_rates_the_azure_traces_busiest_hour_over_the_minutes_it_covers(tmp_path):
    """The Azure trace runs from 18:15:46 to 19:14:08: its busiest hour, 18:00, holds 15,606 requests over the 44
    minutes the trace covers of it. The calculator was filled with 15,606 / 3,600 = 4.335 arrivals per second, a
    quarter under the rate they arrived at, so a fleet sized from it queued."""
    db = str(tmp_path / "azure.duckdb")
    con = store.connect(db)
    ingest_path(con, DATA / "azure_conv.csv", IngestOptions(format="azure-trace", model="llama-3.1-70b"))
    con.close()
    trace = pd.read_csv(DATA / "azure_conv.csv", parse_dates=["TIMESTAMP"])
    hour = trace[trace["TIMESTAMP"] < datetime(2023, 11, 16, 19)]
    seconds = (datetime(2023, 11, 16, 19) - trace["TIMESTAMP"].min()).total_seconds()
    assert len(hour) == 15_606 and round(seconds) == 2_653
    at = run_page(db, "views/capacity.py")
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="cap_lambda").value == round(len(hour) / seconds, 4)          # 5.8817
    assert any("busiest hour 2023-11-16 18:00 UTC, 15,606 served requests in the 44 minutes of it the logs cover "
               f"({len(hour) / seconds:.4g} arrivals per second)" in c.value for c in at.caption), \
        [c.value for c in at.caption]


@pytest.fixture(scope="module")
def azure_db(tmp_path_factory) -> str:
    # the Azure conversation trace alone (18:15:46 to 19:14:08 on 16 Nov 2023), served by gpt-4o
    path = str(tmp_path_factory.mktemp("azure") / "azure.duckdb")
    con = store.connect(path)
    ingest_path(con, DATA / "azure_conv.csv", IngestOptions(format="azure-trace", model="gpt-4o", tenant="chat"))
    con.close()
    return path


def test_the_overview_of_a_trace_with_no_status_or_latency_claims_neither(azure_db):
    # it said "Error rate 0.00 %" of logs that record no outcome, drew the last hour's 14 minutes as a fall in spend
    # without a word, called the hourly areas "bars" and explained a grey series that was not there
    at = run_page(azure_db, "views/overview.py")
    assert not at.exception, [e.value for e in at.exception]
    assert next(m.value for m in at.metric if m.label == "Error rate (%)") == "—"
    raw = pd.read_csv(DATA / "azure_conv.csv")
    tokens = int(raw["ContextTokens"].sum() + raw["GeneratedTokens"].sum())
    assert next(m.value for m in at.metric if m.label == "Requests") == f"{len(raw):,}"
    assert next(m.value for m in at.metric if m.label == "Tokens (input + output)") == f"{tokens / 1e6:.2f} M"
    [caption] = [c.value for c in at.caption if "stack each model's spend" in c.value]
    assert caption.startswith("Bars stack each model's spend per hour. The logs start at 2023-11-16 18:15 and end "
                              "at 19:14 UTC, inside the first and the last hour shown: those hours are partly "
                              "covered, so their spend reads low beside whole ones.")
    assert "Grey" not in caption
    said = shown(" ".join(w.value for w in at.warning))
    # the service rules it judges name the two it could not; the spend spike is the Alerts page's
    assert said.endswith("some rules were not judged: error rate: the logs of gpt-4o carry no request status (19,366 "
                         "requests): there is nothing to judge; P99 over the tier's SLA: the logs of gpt-4o carry no "
                         "total latency (19,366 requests): there is nothing to judge.")
