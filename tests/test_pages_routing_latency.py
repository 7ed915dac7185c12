"""AppTest smoke tests of the Routing and Latency pages on the sample fleet, an empty store and a gateway log."""
import pytest

from finops import store
from finops.ingest import IngestOptions, ingest_path
from helpers import DATA, chart_title, run_page, store_of_records, texts

pytestmark = pytest.mark.slow
PAGES = ("views/routing.py", "views/latency.py")


@pytest.fixture(scope="module")
def gateway_db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("gw") / "gateway.duckdb")
    con = store.connect(path)
    for name in ("seed_gateway_injected.log", "seed_gateway_verbatim.log"):
        ingest_path(con, DATA / name, IngestOptions(format="gateway-log"))
    con.close()
    return path


@pytest.mark.parametrize("page", PAGES)
def test_page_on_the_demo_store(demo_db, page):
    at = run_page(demo_db, page, timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    text = texts(at)
    if page.endswith("latency.py"):
        assert "Queue time" in text and "Where the time goes" in text and "The slowest requests" in text
        assert "Diagnosis" not in text and "Production readiness" not in text   # on their own pages now
    else:
        assert "What if we routed differently?" in text and "Assumptions" in text
        assert "Misrouting candidates" in text


@pytest.mark.parametrize("page", PAGES)
def test_page_on_an_empty_store(empty_db, page):
    at = run_page(empty_db, page)
    assert not at.exception, [e.value for e in at.exception]
    assert "holds no requests" in texts(at)


def test_latency_page_on_the_seed_gateway_log(gateway_db):
    at = run_page(gateway_db, "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    text = texts(at)
    assert "these logs carry no" in text.lower() and "time to first token" in text


def test_routing_page_on_the_seed_gateway_log(gateway_db):
    at = run_page(gateway_db, "views/routing.py")
    assert not at.exception, [e.value for e in at.exception]
    at.radio(key="wi_policy").set_value("threshold").run()
    assert not at.exception, [e.value for e in at.exception]
    text = texts(at)
    assert "No semantic-cache hit" in text and "No cascade" in text
    assert "Assumptions" in text and "Threshold: prompt characters > 40" in text


def test_latency_page_filters_and_controls(demo_db):
    at = run_page(demo_db, "views/latency.py", timeout=300, query_params={"q_scale": "linear", "lat_by": "sla_tier"})
    assert not at.exception, [e.value for e in at.exception]
    at.slider(key="slow_n").set_value(30).run()
    assert not at.exception, [e.value for e in at.exception]


def test_readiness_tick_is_stored(tmp_path, demo_db):
    import shutil

    from finops.ops import readiness
    db = str(tmp_path / "copy.duckdb")
    shutil.copy(demo_db, db)
    at = run_page(db, "views/readiness.py", timeout=300)
    check = readiness.checklist(store.connect(db))
    by_store = int((check["status"] == "pass").sum())
    # the count says which items the store proves (their boxes stay unticked: a box is a person's confirmation)
    progress = at.get("progress")[0].proto.text
    assert progress == f"{by_store} of {len(check)} items done: {by_store} judged from the store, 0 ticked by a person"
    at.checkbox(key="ready_canary").check().run()
    assert not at.exception, [e.value for e in at.exception]
    assert readiness.ticks(store.connect(db))["canary"]["ticked"]
    assert at.get("progress")[0].proto.text.endswith("1 ticked by a person")


def test_the_latency_pages_say_failed_requests_count_and_their_percentiles_include_them(tmp_path):
    """The percentiles count every request a model served, a failure's time too (what its caller waited), and
    leave cache hits out; neither page said which requests it counted."""
    import json

    import numpy as np
    rows = [{"request_id": f"r{i}", "ts": f"2026-03-02T10:0{i}:00", "model": "gpt-4o", "input_tokens": 10,
             "output_tokens": 5, "total_ms": ms, "status": status, "cache_hit": hit}
            for i, (ms, status, hit) in enumerate([(100.0, "ok", False), (200.0, "ok", False),
                                                   (5000.0, "error", False), (1.0, "ok", True)])]
    path = store_of_records(tmp_path, rows)
    at = run_page(path, "views/percentiles.py")
    assert not at.exception, [e.value for e in at.exception]
    assert "failed and timed-out ones too" in texts(at) and "cache hits are not" in texts(at)
    table = next(d.value for d in at.dataframe if "requests" in d.value.columns)
    p99 = next(c for c in table.columns if c.endswith("p99"))
    assert table["requests"].iloc[0] == 3
    assert table[p99].iloc[0] == pytest.approx(np.percentile([100.0, 200.0, 5000.0], 99) / 1000, rel=0.01)  # s
    assert "carry no total latency" not in texts(at)        # said only where a group has no figure to show
    latency = run_page(path, "views/latency.py")
    assert not latency.exception and "failed and timed-out ones too" in texts(latency)
    con = store.connect(path)
    (tmp_path / "more.jsonl").write_text(json.dumps({"request_id": "x", "ts": "2026-03-02T10:09:00", "model": "llama",
                                                     "input_tokens": 1, "output_tokens": 1}) + "\n")
    ingest_path(con, tmp_path / "more.jsonl", IngestOptions())
    con.close()
    assert "—: that group's logs carry no total latency" in texts(run_page(path, "views/percentiles.py"))


def test_percentiles_say_how_many_requests_they_are_over(tmp_path):
    """A model whose logs time only some requests (an Azure trace of 19,366 untimed requests beside 4 timed
    LiteLLM calls of the same model) showed "Requests 19,370" beside a P50 of 4 requests, and no small-sample
    warning: the count was every request served. Now each table says how many carry the latency. Hand-worked:
    10 requests served, 4 timed (0, 54, 1,503, 1,503 ms): P50 = 54 + 0.5 x (1,503 - 54) = 778.5 ms."""
    rows = [{"request_id": f"r{i}", "ts": f"2026-03-02T10:0{i}:00", "model": "gpt-4o", "input_tokens": 10,
             "output_tokens": 5, **({"total_ms": ms} if ms is not None else {})}
            for i, ms in enumerate([0.0, 54.0, 1503.0, 1503.0, *[None] * 6])]
    path = store_of_records(tmp_path, rows)
    at = run_page(path, "views/percentiles.py")
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "requests" in d.value.columns)
    row = table.set_index("model").loc["gpt-4o"]
    assert (row["requests"], row["requests_with_total_ms"]) == (10, 4)
    assert row["total_s_p50"] == pytest.approx(0.7785)      # seconds: the P99 reaches 1,000 ms
    body = texts(at)
    assert "In 1 of the groups only some requests carry a total latency" in body
    assert "A P99 over fewer than 100 requests" in body and "(1 of the 1 groups here)" in body
    overview = run_page(path, "views/overview.py")
    assert not overview.exception, [e.value for e in overview.exception]
    latency = next(d.value for d in overview.dataframe if "sla_requests" in d.value.columns)
    assert latency[["requests", "sla_requests"]].values.tolist() == [[10, 4]]
    assert "A P99 over fewer than 100 requests is at or near the slowest of them, not a tail (1 model here)." \
        in texts(overview)


def test_logs_that_name_no_route_are_shared_by_model_first(tmp_path, gateway_db):
    """Logs with no route drew "Share of spend by route" as one 100 % band of '(none)'; they open by model, and
    by route they say why the band is one. Logs that name routes still open by route."""
    rows = [{"request_id": f"r{i}", "ts": f"2026-03-02T10:0{i}:00", "model": m, "input_tokens": 100,
             "output_tokens": 10} for i, m in enumerate(["gpt-4o", "gpt-4o-mini", "gpt-4o"])]
    path = store_of_records(tmp_path, rows)
    at = run_page(path, "views/routing.py")
    assert not at.exception and at.segmented_control(key="mix_dim").value == "model"
    assert "These logs name no route" not in texts(at)
    by_route = run_page(path, "views/routing.py", query_params={"mix_dim": "route"})
    assert not by_route.exception and "These logs name no route" in texts(by_route)
    routed = run_page(gateway_db, "views/routing.py")
    assert not routed.exception and routed.segmented_control(key="mix_dim").value == "route"


def test_misrouting_judges_no_model_without_a_size_class(tmp_path):
    """The LLMPerf fleet (19 models, none with a size class in the price book) read "No candidate: every short
    prompt went to a small model and every long one to a large model", of models that are neither."""
    def rows(model, n, tokens):
        return [{"request_id": f"{model}-{i}", "ts": f"2026-04-06T10:{i:02d}:00", "model": model, "tenant": "acme",
                 "input_tokens": tokens, "output_tokens": 10, "status": "ok"} for i in range(n)]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    unsized = store_of_records(tmp_path / "a", rows("acme-a", 3, 100) + rows("acme-b", 2, 3000))
    mixed = store_of_records(tmp_path / "b", rows("gpt-4o-mini", 4, 100) + rows("acme-a", 5, 3000))
    query = {"from": "2026-04-06", "to": "2026-04-06", "mis_threshold": "500"}
    at = run_page(unsized, "views/routing.py", query_params=query)
    assert not at.exception, [e.value for e in at.exception]
    assert not [s.value for s in at.success if "No candidate" in s.value]
    assert any(i.value.startswith("No request can be called misrouted: 2 models with no size class in the price "
                                  "book, 5 requests: acme-a, acme-b.") for i in at.info), [i.value for i in at.info]
    # nor can a what-if move their traffic: it said "model acme-a is not in the price book" of the first one offered
    assert any(i.value.startswith("No model served here has a size class or a row in the price book") for i in at.info)
    assert not [w.value for w in at.warning if "is not in the price book" in w.value]
    at = run_page(mixed, "views/routing.py", query_params=query)
    assert not at.exception, [e.value for e in at.exception]
    assert [s.value for s in at.success if "No candidate" in s.value] == [
        "No candidate at 500 prompt tokens: every short prompt went to a small model and every long one to a large "
        "model. Not judged: 1 model with no size class in the price book, 5 requests: acme-a."]
    # no large model: every model is offered as one, the busiest with a price book row chosen (acme-a, the busiest,
    # stopped the replay)
    assert at.selectbox(key="wi_large").value == "gpt-4o-mini"
    assert not [w.value for w in at.warning if "is not in the price book" in w.value]


def test_decode_speed_with_too_few_requests_per_level_says_so_instead_of_an_empty_chart(tmp_path):
    # the real tools' fixtures: one request per model in service at a time drew an empty chart with a "0.000000"
    # axis (levels of fewer than 5 requests are left out of it)
    rows = [{"request_id": f"r{i}", "ts": f"2026-03-02T10:0{i}:00Z", "model": "m", "input_tokens": 100,
             "output_tokens": 50, "ttft_ms": 200.0, "total_ms": 1200.0, "status": "ok"} for i in range(3)]
    at = run_page(store_of_records(tmp_path, rows), "views/latency.py",
                  query_params={"from": "2026-03-02", "to": "2026-03-02"})
    assert not at.exception, [e.value for e in at.exception]
    assert ("Too few requests to draw: decode speed is drawn for the levels of requests in service with 5 requests or "
            "more, and here the most at any level is 3 requests (3 requests with a decode time in all). Widen the "
            "date range.") in [i.value for i in at.info]
    assert not any("Decode speed against requests in service" in chart_title(c) for c in at.get("vega_lite_chart"))


def test_the_percentiles_of_a_handful_of_requests_are_said_to_be_near_their_slowest(tmp_path):
    # the real tools' fixtures: a model of one request showed "P99 2.00 s" as if a tail had been measured
    rows = [{"request_id": f"{m}{i}", "ts": f"2026-03-02T10:{i % 60:02d}:00Z", "model": m, "input_tokens": 100,
             "output_tokens": 50, "total_ms": 1000.0 + i, "status": "ok"} for m, n in (("one", 1), ("busy", 120))
            for i in range(n)]
    at = run_page(store_of_records(tmp_path, rows), "views/percentiles.py",
                  query_params={"from": "2026-03-02", "to": "2026-03-02"})
    assert not at.exception, [e.value for e in at.exception]
    said = [c.value for c in at.caption if "at or near the group's slowest request" in c.value]
    assert len(said) == 1 and "(1 of the 2 groups here)" in said[0]
    table = next(d.value for d in at.dataframe if "requests" in d.value.columns).set_index("model")
    assert table.loc["one", "requests"] == 1 and table.loc["busy", "requests"] == 120


def test_todays_routing_repriced_prices_a_catalogue_model_as_the_bill_does(tmp_path):
    """The exploratory store's what-if showed "Today's routing (repriced) $136.95" under "The bill for these filters
    is $136.98 ... so unfiltered the two agree", and listed anthropic/claude-sonnet-4 among the models with no
    price: the replay priced a request only from a price book row of its own name, never through the resolution
    (aliases, the catalogue's dated and provider-prefixed names) the bill prices it by."""
    def rows(model, n, tokens_in, tokens_out, **more):
        return [{"request_id": f"{model}-{i}", "ts": f"2026-04-06T10:{i:02d}:00", "model": model, "tenant": "acme",
                 "input_tokens": tokens_in, "output_tokens": tokens_out, "status": "ok", **more} for i in range(n)]
    records = (rows("gpt-4o-mini", 4, 20_000, 5_000)       # 4 x (20,000 x $0.15 + 5,000 x $0.60) / 1M = $0.024
               + rows("gpt-4o", 2, 20_000, 5_000)          # 2 x (20,000 x $2.50 + 5,000 x $10) / 1M = $0.20
               # the catalogue's claude-sonnet-4: 3 x (20,000 x $3 + 4,000 x $15) / 1M = $0.36
               + rows("anthropic/claude-sonnet-4", 3, 20_000, 4_000))
    query = {"from": "2026-04-06", "to": "2026-04-06"}
    (tmp_path / "a").mkdir()
    at = run_page(store_of_records(tmp_path / "a", records), "views/routing.py", query_params=query)
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    # $0.024 + $0.20 + $0.36 = $0.584 (it was $0.224: claude-sonnet-4 at $0), the Cost page's total
    assert metrics["Today's routing (repriced)"] == metrics["Spend under as-logged"] == "$0.58"
    text = texts(at)
    assert "The bill for these filters is $0.58 (idle GPU time included), the same as today's routing repriced." in text
    assert "No price for" not in text
    cost = run_page(str(tmp_path / "a" / "s.duckdb"), "views/cost.py", query_params=query)
    assert "$0.58" in [m.value for m in cost.metric]
    # a semantic-cache hit whose cost the logs recorded is on the bill, not in the replay: the page says so
    (tmp_path / "b").mkdir()
    hit = rows("gpt-4o", 1, 20_000, 5_000, cache_hit=True, cost_usd=0.15, request_id="hit")
    at = run_page(store_of_records(tmp_path / "b", records + hit), "views/routing.py", query_params=query)
    assert not at.exception, [e.value for e in at.exception]
    assert {m.label: m.value for m in at.metric}["Today's routing (repriced)"] == "$0.58"
    assert ("The bill for these filters is $0.73 (idle GPU time included), $0.15 more than today's routing repriced: "
            "it counts the $0.15 the logs recorded for 1 semantic-cache hit, which the replay leaves out.") in texts(at)


def test_queue_waits_of_zero_are_said_off_the_log_axis_and_a_near_total_share_is_not_100_percent(tmp_path):
    """The sample's llama-3.1-8b: 247,352 of 247,359 requests did not wait, and the caption read "(100%)" beside a
    count that says 7 did; its P50, P95 and P99 of 0 ms have no dashed line on a log axis, while the page's note
    said "Dashed lines: P50, P95 and P99". Here 2,000 requests, 3 of them queued (100, 200, 300 ms): every
    percentile is 0 ms (P99 at rank 0.99 x 1,999 = 1,979 of 2,000, the first queued is rank 1,997)."""
    rows = [{"request_id": f"r{i}", "ts": f"2026-03-02T10:{i % 60:02d}:{i // 60:02d}", "model": "m",
             "input_tokens": 10, "output_tokens": 5, "total_ms": 500.0,
             "queue_ms": {1997: 100.0, 1998: 200.0, 1999: 300.0}.get(i, 0.0)} for i in range(2000)]
    path = store_of_records(tmp_path, rows)
    at = run_page(path, "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    body = texts(at)
    assert "1,997 of 2,000 requests (99.9%) did not wait" in body
    assert "Queue wait P50 0 ms, P95 0 ms, P99 0 ms (P50, P95 and P99: left of the log axis, no dashed line)." in body
