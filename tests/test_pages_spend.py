"""AppTest smoke tests of the Overview, Cost, Budgets and Data pages on the demo store and on an empty store,
and the numbers on screen against ``python -m finops report`` for the same filters."""
import json
import re
import shutil
import subprocess
import sys

import duckdb
import pandas as pd
import pytest

from finops.spend.costviews import KPI_SPECS, format_value
from helpers import ROOT, chart_title, run_page, store_of_records, texts

PAGES = ("views/overview.py", "views/cost.py", "views/budgets.py", "views/data.py")
NOTHING = {"tenant": "stark-batch", "model": "gpt-4o"}      # a pair with no traffic in the demo fleet


def _kinds(at) -> dict[str, int]:
    counts: dict[str, int] = {}

    def walk(node):
        for child in getattr(node, "children", {}).values():
            counts[child.type] = counts.get(child.type, 0) + 1
            walk(child)
    walk(at._tree.main)
    return counts


def _subheaders(at) -> list[str]:
    return [s.value for s in at.subheader]


def _cli_report(db: str, tmp_path, *args) -> list[dict]:
    """``python -m finops report --json`` on a copy of the store (DuckDB lets one process write a file)."""
    copy = tmp_path / "cli.duckdb"
    if not copy.exists():
        shutil.copy(db, copy)
    out = subprocess.run([sys.executable, "-m", "finops", "report", "--db", str(copy), "--json", *args],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _table(at, *columns: str):
    """The last dataframe on the page holding ``columns`` (the pages' tables are told apart by their columns)."""
    return next(d.value for d in reversed(at.dataframe) if set(columns) <= set(d.value.columns))


def _period_args(at) -> list[str]:
    f = at.session_state["_filters"]
    return ["--since", f.since.isoformat(), "--until", f.until.isoformat()]


# ---------------------------------------------------------------- the demo store

def test_overview_on_the_demo_store(demo_db):
    at = run_page(demo_db)
    assert not at.exception
    # no fleet-wide P99 (it blends every model): latency is a table per model, in seconds, with its rule
    assert [m.label for m in at.metric][:7] == [s.label for s in KPI_SPECS if s.field != "p99_total_ms"]
    assert _subheaders(at) == ["Latency per model", "Spend over time", "Top tenants by spend", "Incidents"]
    lat = next(d.value for d in at.dataframe if "sla_p99_s" in d.value.columns).set_index("model")
    con = duckdb.connect(demo_db)            # served rows: every status, cache hits left out (as the Latency page)
    exact = con.execute("SELECT model, quantile_cont(ttft_ms, 0.99) / 1000 FROM requests WHERE ttft_ms IS NOT NULL "
                        "AND NOT coalesce(cache_hit, false) GROUP BY 1").fetchall()
    con.close()
    for model, p99_s in exact:                  # the hourly sketch answers within 1 %
        assert lat.loc[model, "sla_p99_s"] == pytest.approx(p99_s, rel=0.011)
    assert (lat["hours_over"] >= 0).all() and lat["hours_over"].max() > 0     # the sample's incident hours
    assert "P99 time to first token is above 1.5 × the tier's SLA" in texts(at) and "premium 2 s" in texts(at)
    assert _kinds(at).get("vega_lite_chart", 0) >= 3
    assert "the sample fleet" in texts(at)
    assert at.toggle(key="idle").value is True


def test_cost_on_the_demo_store(demo_db):
    at = run_page(demo_db, "views/cost.py")
    assert not at.exception
    assert _subheaders(at) == ["$ per 1M tokens by model and tenant", "Token mix and what it does to cost",
                               "$ per 1M input and output tokens: self-hosted beside API", "Cost of one request",
                               "Self-hosted GPU fleet: allocated vs idle", "Recorded cost against list price",
                               "Your logs against the provider's bill", "Showback: spend per tenant and model"]
    kinds = _kinds(at)
    assert kinds["vega_lite_chart"] >= 6 and kinds["download_button"] == 3
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download CSV", "Download Parquet", "Download FOCUS 1.2 CSV"]
    assert any(m.label == "Utilisation (%)" for m in at.metric)
    assert "No billing lines loaded" in texts(at)          # the demo store has none


def test_cost_page_sets_the_bill_beside_the_logs(tmp_path):
    from test_billing import batch_store

    from finops import store
    db = str(tmp_path / "billed.duckdb")
    con = store.connect(db)
    batch_store(con)                       # the batch requests of 4 March 2025 and the cost reports of 4-5 March
    con.close()
    at = run_page(db, "views/cost.py")    # the default period holds the one stored day
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["The provider billed (USD)"] == "$9.01"      # tests/test_billing.py works $9.010056 by hand
    assert "Your logs against the provider's bill" in _subheaders(at)


def test_budgets_on_the_demo_store(demo_db):
    at = run_page(demo_db, "views/budgets.py")
    assert not at.exception
    assert at.selectbox(key="month").value is not None
    assert [m.label for m in at.metric][:2] == ["Forecast over budget", "Tenants at risk"]
    assert at.metric[1].value == "1" and at.metric[0].value.startswith("1 of ")
    assert _subheaders(at)[:2] == ["Forecast against budget", "Burn through the month"]
    assert _kinds(at).get("vega_lite_chart", 0) == 2


def test_data_page_on_the_demo_store(demo_db):
    at = run_page(demo_db, "views/data.py")
    assert not at.exception
    assert _subheaders(at) == ["Load request logs", "Live sources", "Loaded batches", "Price book",
                               "How each model is priced", "Self-hosted fleets"]
    kinds = _kinds(at)
    # a live source, the price book, aliases, the fleet schedule, reservations and the default idle policy
    assert kinds["file_uploader"] == 1 and kinds["form"] == 6
    assert "python -m finops ingest PATH --db" in at.code[0].value
    assert "sample fleet" in texts(at)
    assert re.search(r"\b1 batch, [0-9,]+ requests\.", texts(at))      # one batch, in the singular


@pytest.mark.parametrize("page", PAGES[:3])
def test_filters_matching_nothing_show_an_empty_state(demo_db, page):
    at = run_page(demo_db, page, query_params=NOTHING)
    assert not at.exception
    f = at.session_state["_filters"]
    assert f.tenants == ("stark-batch",) and f.models == ("gpt-4o",)
    if page != "views/budgets.py":
        assert "No requests match these filters" in texts(at)
        assert not at.metric
    else:   # budgets ignore the model filter: the tenant still has its month
        assert "stark-batch" in [r for r in at.dataframe[0].value["tenant"]]


# ---------------------------------------------------------------- an empty store

@pytest.mark.parametrize("page", PAGES)
def test_pages_on_an_empty_store(empty_db, page):
    at = run_page(empty_db, page)
    assert not at.exception
    if page == "views/data.py":
        assert "No batches loaded yet" in texts(at)
        assert _kinds(at)["file_uploader"] == 1
    else:
        assert "holds no requests yet" in texts(at)
        assert not at.metric


# ---------------------------------------------------------------- the same numbers as the CLI

def test_cost_page_showback_matches_the_cli_report(demo_db, tmp_path):
    at = run_page(demo_db, "views/cost.py")
    shown = _table(at, "tenant", "model", "share").set_index(["tenant", "model"])
    cli = _cli_report(demo_db, tmp_path, "--by", "tenant,model", *_period_args(at))
    assert len(cli) == len(shown)
    for row in cli:
        got = shown.loc[(row["tenant"], row["model"])]
        assert got["cost_usd"] == pytest.approx(row["cost_usd"], rel=1e-9, abs=1e-9)
        assert got["requests"] == row["requests"]
        assert got["input_tokens"] == row["input_tokens"] and got["output_tokens"] == row["output_tokens"]
    total = sum(r["cost_usd"] for r in cli)
    per_tenant = _table(at, "tenant", "models").set_index("tenant")["cost_usd"]
    for tenant in per_tenant.index:
        assert per_tenant[tenant] == pytest.approx(sum(r["cost_usd"] for r in cli if r["tenant"] == tenant), rel=1e-9)
    assert [m.value for m in at.metric if m.label == "Total spend in the table (USD)"] == [f"${total:,.2f}"]


def test_overview_kpis_match_the_cli_report(demo_db, tmp_path):
    at = run_page(demo_db)
    cli = _cli_report(demo_db, tmp_path, "--by", "model", *_period_args(at))
    on_screen = {m.label: m.value for m in at.metric}
    assert on_screen["Spend (USD)"] == format_value("usd", sum(r["cost_usd"] for r in cli))
    assert on_screen["Requests"] == format_value("count", sum(r["requests"] for r in cli))
    tokens = sum(r["input_tokens"] + r["output_tokens"] for r in cli)
    assert on_screen["Tokens (input + output)"] == format_value("tokens", tokens)
    spend = sum(r["cost_usd"] for r in cli)
    served = sum(r["served_tokens"] for r in cli)              # cache hits reached no model
    assert on_screen["$ per 1M tokens"] == format_value("usd3", spend / served * 1e6)


def test_filtered_numbers_match_the_cli_report(demo_db, tmp_path):
    at = run_page(demo_db, "views/cost.py", query_params={"tenant": "globex-search", "tier": "standard"})
    f = at.session_state["_filters"]
    assert f.tenants == ("globex-search",) and f.sla_tiers == ("standard",)
    shown = _table(at, "tenant", "model", "share")
    cli = _cli_report(demo_db, tmp_path, "--by", "tenant,model", "--tenant", "globex-search", "--sla-tier", "standard",
                      *_period_args(at))
    assert "(idle capacity)" not in set(shown["tenant"])        # idle is a fleet line: not in a tenant's view
    assert shown["cost_usd"].sum() == pytest.approx(sum(r["cost_usd"] for r in cli), rel=1e-9)
    assert shown["requests"].sum() == sum(r["requests"] for r in cli)


# ---------------------------------------------------------------- writes from the pages

@pytest.fixture()
def demo_copy(demo_db, tmp_path):
    path = tmp_path / "copy.duckdb"
    shutil.copy(demo_db, path)
    return str(path)


def _button(at, label):
    return next(b for b in at.button if b.label == label)


def test_saving_the_price_book_unchanged_reprices_nothing(demo_copy):
    at = run_page(demo_copy, "views/data.py")
    before = run_page(demo_copy, "views/overview.py").metric[0].value
    _button(at, "Save prices").click().run()
    assert not at.exception and not at.error
    assert run_page(demo_copy, "views/overview.py").metric[0].value == before


def test_budgets_form_saves(demo_copy):
    at = run_page(demo_copy, "views/budgets.py")
    n = len(at.dataframe[0].value)
    assert at.metric[0].value == f"1 of {n}" and at.metric[1].value == "1"     # the sample's example budgets
    assert any("examples the sample store" in i.value for i in at.info)
    _button(at, "Save budgets").click().run()
    assert not at.exception and not at.error
    assert at.metric[0].value == f"1 of {n}"            # saved unchanged: the same budgets, now the user's
    assert not any("examples the sample store" in i.value for i in at.info)


# ---------------------------------------------------------------- self-hosted fleets on the pages

def test_cost_page_idle_policy_charges_idle_out_and_keeps_the_total(demo_copy):
    at = run_page(demo_copy, "views/cost.py")
    total = next(m.value for m in at.metric if m.label == "Total spend in the table (USD)")
    assert "(idle capacity)" in set(_table(at, "tenant", "models")["tenant"])
    assert at.selectbox(key="idle_policy").value == "apart"
    at.selectbox(key="idle_policy").set_value("usage").run()
    assert not at.exception
    tenants = _table(at, "tenant", "models")
    assert "(idle capacity)" not in set(tenants["tenant"])
    assert next(m.value for m in at.metric if m.label == "Total spend in the table (USD)") == total
    assert "charged out (spread by usage)" in texts(at)
    at.selectbox(key="idle_policy").set_value("centre").run()
    assert "platform" in set(_table(at, "tenant", "models")["tenant"])


def test_cost_page_says_how_each_fleet_is_billed_and_shows_input_and_output_prices(demo_db):
    at = run_page(demo_db, "views/cost.py")
    body = texts(at)
    # each self-hosted model's metrics sit under its name; the caption below them says how its fleet is billed
    assert "**llama-3.1-70b**" in [m.value for m in at.markdown]
    assert "Billed while the model served traffic; declare the fleet's schedule" in body
    classes = _table(at, "input_usd_per_1m", "output_usd_per_1m").set_index("model")
    assert {"llama-3.1-8b", "llama-3.1-70b", "gpt-4o"} <= set(classes.index)
    # the sample fleet times prefill and decode: its split is measured
    assert classes.loc["llama-3.1-70b", "split_measured_share"] == pytest.approx(1.0)
    assert classes.loc["gpt-4o", "input_usd_per_1m"] <= 2.5 and classes.loc["gpt-4o", "output_usd_per_1m"] == \
        pytest.approx(10.0)


def test_data_page_fleet_schedule_round_trips_and_infers(demo_copy):
    from finops import store
    from finops.spend import fleets

    at = run_page(demo_copy, "views/data.py")
    assert "billed while the model served traffic" in texts(at)
    _button(at, "Infer periods from the logs' replica ids").click().run()
    assert not at.exception and not at.error
    con = store.connect(demo_copy)
    inferred = fleets.schedule(con)
    assert len(inferred) and set(inferred["source"]) == {"inferred"}
    con.close()
    at = run_page(demo_copy, "views/data.py")
    assert "periods inferred from the logs' replica ids" in texts(at)
    _button(at, "Save the schedule").click().run()                    # the editor's table saves back unchanged
    assert not at.exception and not at.error
    con = store.connect(demo_copy)
    assert len(fleets.schedule(con)) == len(inferred)
    con.close()


def test_data_page_sets_the_default_idle_policy(demo_copy):
    from finops import store
    from finops.spend import fleets, pricing

    at = run_page(demo_copy, "views/data.py")
    at.selectbox(key="default_idle_policy").set_value("centre")
    at.text_input(key="default_idle_centre").set_value("ml-platform")
    _button(at, "Save the idle policy").click().run()
    assert not at.exception and not at.error
    con = store.connect(demo_copy)
    assert fleets.default_policy(con) == pricing.IdlePolicy("centre", "ml-platform")
    con.close()
    cost = run_page(demo_copy, "views/cost.py")
    assert cost.selectbox(key="idle_policy").value == "centre"
    assert "ml-platform" in set(_table(cost, "tenant", "models")["tenant"])


def test_one_unpriced_request_in_thousands_is_no_zero_share(tmp_path):
    # 1 request of a model nothing prices among 2,000 priced ones (0.05 %): the banner said "0.0% of all requests"
    # beside the model's count, and the Routing page's cache hit rate read 0.0% with a cache hit counted
    from datetime import datetime, timedelta

    import pandas as pd

    from finops import store
    from finops.ingest import ingest_frame
    t0, n = datetime(2026, 4, 6, 10), 2_000
    db = str(tmp_path / "one_unpriced.duckdb")
    con = store.connect(db)
    rows = [{"request_id": f"r{i}", "ts": t0 + timedelta(seconds=i), "model": "gpt-4o-mini", "tenant": "acme",
             "input_tokens": 100, "output_tokens": 10, "status": "ok", "cache_hit": i == 0} for i in range(n)]
    rows.append({"request_id": "u", "ts": t0, "model": "acme-private-7b", "tenant": "acme", "input_tokens": 100,
                 "output_tokens": 10, "status": "ok", "cache_hit": False})
    ingest_frame(con, pd.DataFrame(rows))
    con.close()
    at = run_page(db, "views/routing.py", query_params={"from": "2026-04-06", "to": "2026-04-06"})
    assert not at.exception, [e.value for e in at.exception]
    assert any("No price for 1 model(s), < 0.1% of the requests in these filters," in w.value for w in at.warning)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Cache hit rate"] == "< 0.1%" and metrics["Cache hits"] == "1"


def test_the_unpriced_banner_speaks_of_the_requests_in_view(tmp_path):
    """acme-private-7b (nothing prices it) has 1 request on 6 April beside 3 of gpt-4o-mini; 7 April has 4 of
    gpt-4o-mini only. The banner read the whole store whatever the filters: "1 model(s), 12.5% of all requests" on
    7 April and under a gpt-4o-mini filter too, where no request in view is unpriced. Now: 1 of 4 requests on
    6 April is 25.0 %, 1 of 8 in April 12.5 %, and nothing on 7 April or for gpt-4o-mini."""
    def rows(model, day, n):
        return [{"request_id": f"{model}-{day}-{i}", "ts": f"2026-04-{day:02d}T10:{i:02d}:00", "model": model,
                 "tenant": "acme", "input_tokens": 1_000, "output_tokens": 100, "status": "ok"} for i in range(n)]
    db = store_of_records(tmp_path, rows("gpt-4o-mini", 6, 3) + rows("acme-private-7b", 6, 1)
                          + rows("gpt-4o-mini", 7, 4))

    def banner(at) -> list[str]:
        assert not at.exception, [e.value for e in at.exception]
        return [w.value for w in at.warning if w.value.startswith("No price for")]

    said = ("No price for 1 model(s), {} of {}, counted at $0.00 in every spend figure here and left out of every "
            "$ per 1M tokens (as $0 they would read as free):")
    day6 = {"from": "2026-04-06", "to": "2026-04-06"}
    assert banner(run_page(db, "views/overview.py", query_params=day6)) == [
        said.format("25.0%", "the requests in these filters")]
    for page in ("views/overview.py", "views/cost.py", "views/routing.py"):
        assert banner(run_page(db, page, query_params={"from": "2026-04-07", "to": "2026-04-07"})) == [], page
        assert banner(run_page(db, page, query_params={"model": "gpt-4o-mini"})) == [], page
    at = run_page(db, "views/cost.py", query_params={"from": "2026-04-06", "to": "2026-04-07"})
    assert banner(at) == [said.format("12.5%", "the requests in these filters")]
    assert "acme-private-7b (1 request)" in [t.value for t in at.text]
    # a budget covers a tenant's month whatever the dates and models: the banner speaks of that month
    assert banner(run_page(db, "views/budgets.py", query_params={"model": "gpt-4o-mini"})) == [
        said.format("12.5%", "the requests of April 2026")]


def test_the_overview_unit_cost_leaves_unpriced_tokens_out_and_says_so(tmp_path):
    """10 requests of gpt-4o-mini (100k input, 50k output: $0.015 + $0.030 each at $0.15 / $0.60 per 1M) beside
    10M tokens of a model nothing prices: the $ per 1M tokens is $0.45 / 1.5M = $0.30, not $0.45 / 11.5M; the
    banner said the unpriced tokens were "counted at $0.00 in every figure", which this one does not do."""
    from datetime import datetime, timedelta

    import pandas as pd

    from finops import store
    from finops.ingest import ingest_frame
    t0 = datetime(2026, 4, 6, 10)
    db = str(tmp_path / "unpriced_tokens.duckdb")
    con = store.connect(db)
    rows = [{"request_id": f"p{i}", "ts": t0 + timedelta(seconds=i), "model": "gpt-4o-mini", "tenant": "acme",
             "input_tokens": 100_000, "output_tokens": 50_000, "status": "ok"} for i in range(10)]
    rows += [{"request_id": f"u{i}", "ts": t0 + timedelta(seconds=i), "model": "acme-private-7b", "tenant": "acme",
              "input_tokens": 1_000_000, "output_tokens": 0, "status": "ok"} for i in range(10)]
    ingest_frame(con, pd.DataFrame(rows))
    con.close()
    at = run_page(db, "views/overview.py", query_params={"from": "2026-04-06", "to": "2026-04-06"})
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m for m in at.metric}
    assert metrics["Spend (USD)"].value == "$0.45" and metrics["Tokens (input + output)"].value == "11.50 M"
    assert metrics["$ per 1M tokens"].value == "$0.30"
    assert "Tokens of a model nothing prices are left out" in metrics["$ per 1M tokens"].help
    assert any("No price for 1 model(s), 50.0% of the requests in these filters, counted at $0.00 in every spend "
               "figure here and "
               "left out of every $ per 1M tokens" in w.value for w in at.warning)


def test_overview_idle_banner_neither_rounds_to_all_nor_names_fleets_that_ran_no_hour(tmp_path):
    """A self-hosted model serving one request an hour for two days beside an API model: $479.99 of $480.20 is
    idle GPU capacity, which the banner said was "100.0 %" (all of it); its note named every self-hosted model
    of the price book, llama-3.1-70b too, which served nothing and was billed nothing."""
    from finops import store
    from finops.filters import Filters
    from finops.spend import costviews
    rows = [{"request_id": f"a{h}-{k}", "ts": f"2026-11-{20 + h // 24}T{h % 24:02d}:{k * 2:02d}:00Z",
             "model": "gpt-4o-mini", "input_tokens": 500, "output_tokens": 100, "total_ms": 900.0}
            for h in range(48) for k in range(30)]
    rows += [{"request_id": f"b{h}", "ts": f"2026-11-{20 + h // 24}T{h % 24:02d}:30:00Z", "model": "llama-3.1-8b",
              "input_tokens": 300, "output_tokens": 80, "total_ms": 1200.0} for h in range(48)]
    path = store_of_records(tmp_path, rows)
    con = store.connect(path)
    k = costviews.kpis_with_change(con, Filters())
    fleet = costviews.gpu_fleet(con, Filters()).summary.set_index("model")
    con.close()
    assert 0.9995 < k.idle_share < 1 and k.idle_usd == pytest.approx(fleet.loc["llama-3.1-8b", "idle_usd"])
    at = run_page(path)
    assert not at.exception, [e.value for e in at.exception]
    banner = next(w.value for w in at.warning if "idle self-hosted GPU capacity" in w.value)
    assert "(> 99.9%) of this spend is idle" in banner
    note = next(c.value for c in at.caption if "billed while the model served traffic" in c.value)
    assert note.startswith("llama-3.1-8b: billed while") and "70b" not in note


def test_the_cost_page_calls_a_fleets_utilisation_unknown_when_its_logs_carry_no_timing(tmp_path):
    """The Mooncake trace (real rows: arrivals and tokens, no time) served by a self-hosted model: its hour was shown
    as 100.0 % utilised with $0.00 idle. Its cost still goes to its requests by count (the totals agree with every
    page), but the utilisation is unknown and the page says why; the hour's cost is drawn (an area of one hour drew
    nothing)."""
    from helpers import untimed_fleet_store

    db = untimed_fleet_store(tmp_path)
    at = run_page(db, "views/cost.py", query_params={"from": "2025-01-01", "to": "2025-01-01"})
    assert not at.exception, [e.value for e in at.exception]
    m = {x.label: x.value for x in at.metric}
    # 2 replicas × 1 GPU × $2 for the one hour of the excerpt's 300 requests
    assert (m["Fleet cost (USD)"], m["Allocated (USD)"], m["Idle (USD)"]) == ("$4.00", "$4.00", "$0.00")
    assert m["Utilisation (%)"] == "unknown"
    body = texts(at)
    assert "2.0 GPU-hours in 1 hour. 1 hour of traffic ($4.00 of the fleet cost)" in body    # 0 to 102 s
    assert "of the fleet cost) carries no service or latency time: that cost is allocated to the requests by count" in body
    assert any("No utilisation to draw" in i.value for i in at.info)


def test_a_declared_fleet_idle_beside_untimed_traffic_is_not_shown_as_zero_utilisation(tmp_path):
    """The same trace on a fleet declared from 00:00 to 02:00: the second hour served nothing. The card read
    "Utilisation 0.0 %" (the idle hour's, the only one whose busy time is known) beside $4.00 allocated, and the
    chart drew the two hours as a ramp from allocated to idle; now unknown, and one bar an hour."""
    from finops import store
    from finops.spend import fleets
    from helpers import untimed_fleet_store

    db = untimed_fleet_store(tmp_path)
    con = store.connect(db)
    fleets.save_schedule(con, pd.DataFrame([{"model": "gpu-model", "starts_at": "2025-01-01 00:00",
                                             "ends_at": "2025-01-01 02:00", "replicas": 2}]))
    con.close()
    at = run_page(db, "views/cost.py", query_params={"from": "2025-01-01", "to": "2025-01-01"})
    assert not at.exception, [e.value for e in at.exception]
    m = {x.label: x.value for x in at.metric}
    assert (m["Fleet cost (USD)"], m["Allocated (USD)"], m["Idle (USD)"]) == ("$8.00", "$4.00", "$4.00")
    assert m["Utilisation (%)"] == "unknown"
    [gpu] = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")
             if "allocated vs idle" in chart_title(c)]
    assert gpu["mark"]["type"] == "bar"
    # the idle hour's 0 % is drawn on a 0 to 100 % axis (a [0, 0] domain labelled it "0.000000")
    [util] = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart") if "utilisation per" in c.proto.spec]
    assert util["encoding"]["y"]["scale"] == {"domain": [0, 100]}
    assert util["mark"]["point"]                # its one known hour: a line of one point draws nothing
    over = run_page(db, query_params={"from": "2025-01-01", "to": "2025-01-01"})
    assert [list(x.proto.chart_data) for x in over.metric if x.label == "Spend (USD)"] == [[4.0, 4.0]]


def test_a_model_with_too_few_requests_an_hour_has_no_hours_over_the_rule_rather_than_zero(tmp_path):
    # the real tools' fixtures loaded together (a handful of requests per model) showed "0.00" hours over the P99
    # rule for models none of whose hours reached its 100 requests: a verdict on hours nothing judged
    rows = [{"request_id": f"{m}{i}", "ts": f"2026-03-02T10:{i * 59 // n:02d}:00Z", "model": m, "input_tokens": 10,
             "output_tokens": 5, "ttft_ms": 200.0, "total_ms": 900.0, "status": "ok"}
            for m, n in (("busy", 120), ("quiet", 20)) for i in range(n)]
    at = run_page(store_of_records(tmp_path, rows), query_params={"from": "2026-03-02", "to": "2026-03-02"})
    assert not at.exception, [e.value for e in at.exception]
    lat = next(d.value for d in at.dataframe if "hours_over" in d.value.columns).set_index("model")
    assert lat.loc["busy", "hours_over"] == 0.0 and pd.isna(lat.loc["quiet", "hours_over"])
    assert lat.loc["quiet", "sla_p99_s"] == pytest.approx(0.2)         # its P99 is still shown


def test_a_spend_column_shows_sub_cent_amounts_rather_than_zero(tmp_path):
    # the real tools' fixtures cost fractions of a cent each: the unit-cost table read "Spend ($) $0.00" beside a
    # "$3.221 per 1M tokens"; the column keeps its numbers (it sorts) with enough decimals for the smallest spend
    rows = [{"request_id": "t", "ts": "2026-03-02T10:00:00Z", "model": "tiny", "input_tokens": 100, "output_tokens": 10,
             "cost_usd": 0.0043, "status": "ok"},
            {"request_id": "b", "ts": "2026-03-02T10:05:00Z", "model": "big", "input_tokens": 100_000,
             "output_tokens": 10_000, "cost_usd": 12.5, "status": "ok"}]
    at = run_page(store_of_records(tmp_path, rows), "views/cost.py",
                  query_params={"from": "2026-03-02", "to": "2026-03-02"})
    assert not at.exception, [e.value for e in at.exception]
    units = next(d for d in at.dataframe if "served_tokens" in d.value.columns)
    assert json.loads(units.proto.columns)["request_cost_usd"]["type_config"]["format"] == "$%,.4f"
    assert units.value.set_index("model").loc["tiny", "request_cost_usd"] == pytest.approx(0.0043)


def test_the_data_page_gives_a_batchs_span_once_for_one_day_or_one_minute(tmp_path):
    # "2025-06-01 12:00 to 2025-06-01 12:00" for a batch of one moment; the date twice for one day
    rows = [{"request_id": "a", "ts": "2026-03-02T10:00:05Z", "model": "m", "input_tokens": 1, "output_tokens": 1},
            {"request_id": "b", "ts": "2026-03-02T10:05:00Z", "model": "m", "input_tokens": 1, "output_tokens": 1}]
    at = run_page(store_of_records(tmp_path, rows), "views/data.py")
    assert not at.exception, [e.value for e in at.exception]
    assert "2026-03-02 10:00 to 10:05" in [m.value for m in at.markdown]


def test_the_overview_says_how_many_requests_its_error_rate_knows(tmp_path):
    """An Azure trace (no status) loaded beside gateway logs showed "Error rate 0.06 %": the trace's requests count
    as ok. The rate keeps that definition (its help says so) and the caption now gives the split. Hand-counted:
    10 requests with no status, 4 with one of which 1 failed: 1 / 14 = 7.14 % shown, 1 of 4 = 25.0 % among known."""
    rows = [{"request_id": f"r{i}", "ts": f"2026-03-02T10:{i:02d}:00", "model": "gpt-4o", "input_tokens": 10,
             "output_tokens": 5, **({"status": status} if status else {})}
            for i, status in enumerate(["ok", "ok", "error", "ok", *[None] * 10])]
    at = run_page(store_of_records(tmp_path, rows), "views/overview.py")
    assert not at.exception, [e.value for e in at.exception]
    rate = next(m for m in at.metric if m.label == "Error rate (%)")
    assert rate.value == "7.14 %"
    assert ("Error rate: 10 of the 14 requests carry no status (a trace of tokens and times) and count as ok; of the "
            "4 that carry one, 1 failed (25.0%).") in texts(at)
