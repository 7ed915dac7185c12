"""The saturation rules on vLLM's own series, and the engine view of the Latency page.

The stores are scripted scrape by scrape: each scrape is the Prometheus text of :class:`VllmRegistry`
(``tests/test_scrape_vllm.py``: the metrics as vLLM's ``PrometheusStatLogger`` declares them, older or later names;
vLLM itself cannot run here) rendered by ``prometheus_client.generate_latest`` and parsed and stored as
``scrape vllm`` does (``engine.parse_vllm_metrics``, ``engine.store_samples``), at the scripted time.

The scripted fleet: model ``llama-70b`` on replicas gpu-a and gpu-b, one scrape a minute from 10:00 to 11:00.
gpu-a's KV cache is 0.97 full from 10:20 to 10:40 (20 scrapes, else 0.50) with 32 requests running (its largest
batch; else 20) and 5 waiting (else 0). gpu-b runs 32 with nobody waiting and a KV cache 0.60 full, except 7
scrapes of 10:45-10:59 at 0.99 (fewer than half of 15: no alert). In 15-minute windows gpu-a's 10:15 and 10:30
windows have 10 of 15 scrapes at 0.97 (10 >= 7.5: the usage held by half the scrapes, the 8th largest, is 0.97),
its 10:00 and 10:45 windows none: one alert from 10:15 to 10:45 worth 0.97.
"""
from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.filters import Filters
from finops.ingest import engine, ingest_frame
from finops.ops import alerts, incidents
from helpers import run_page, texts

prometheus_client = pytest.importorskip("prometheus_client")
from test_scrape_vllm import VllmRegistry  # noqa: E402  (after the importorskip of prometheus_client)

T0 = datetime(2026, 5, 4, 10, 0)
HOUR = Filters(since=T0, until=T0 + timedelta(hours=1))
MODEL = "llama-70b"


def scrape(con, reg: VllmRegistry, replica: str, ts: datetime) -> None:
    text = prometheus_client.generate_latest(reg.registry).decode()
    engine.store_samples(con, engine.parse_vllm_metrics(text), replica, ts)


def scripted(con, later_names: bool = True, minutes: int = 60) -> None:
    a, b = VllmRegistry(MODEL, later_names), VllmRegistry(MODEL, later_names)
    for i in range(minutes):
        ts = T0 + timedelta(minutes=i)
        hot = 20 <= i < 40
        a.load(waiting=5 if hot else 0, running=32 if hot else 20, kv=0.97 if hot else 0.50)
        b.load(waiting=0, running=32, kv=0.99 if 45 <= i < 52 else 0.60)
        scrape(con, a, "gpu-a", ts)
        scrape(con, b, "gpu-b", ts)


def requests(n: int = 600, model: str = MODEL) -> pd.DataFrame:
    """``n`` served requests of ``model`` spread over the scripted hour (TTFT 400 ms, total 1.8 s)."""
    return pd.DataFrame({"request_id": [f"q{i}" for i in range(n)],
                         "ts": [T0 + timedelta(seconds=3600 * i / n) for i in range(n)], "model": model,
                         "tenant": "acme", "sla_tier": "standard", "status": "ok", "total_ms": 1800.0,
                         "ttft_ms": 400.0, "queue_ms": 50.0, "input_tokens": 900, "output_tokens": 120})


def fired(con, rule, f=HOUR):
    a = alerts.open_alerts(con, f)
    return a[a["rule"] == rule].reset_index(drop=True)


@pytest.mark.parametrize("later_names", [True, False], ids=["later-names", "a6f0308-names"])
def test_kv_cache_rule_fires_on_the_saturated_replica_only(later_names):
    con = store.connect(":memory:")
    scripted(con, later_names)
    a = fired(con, "kv_cache_saturated")
    assert len(a) == 1, a
    row = a.iloc[0]
    assert (row.model, row.tenant, row.severity) == (MODEL, "(replica gpu-a)", "warning")
    assert (row.window_start, row.window_end) == (pd.Timestamp(T0 + timedelta(minutes=15)),
                                                  pd.Timestamp(T0 + timedelta(minutes=45)))
    assert_allclose(row.value, 0.97)
    assert row.threshold == 0.95
    assert ("KV cache nearly full for half a window or more: llama-70b on replica gpu-a, 97.0% (threshold 95.0%) "
            "from 2026-05-04 10:15 to 2026-05-04 10:45 UTC, 2 windows of 15 minutes; worst: the KV cache was 95% "
            "full or more in 10 of 15 scrapes (fullest 97.0%)") in row.message


def test_kv_cache_windows_hand_computed():
    """gpu-b's 10:45 window: 7 of 15 scrapes at 0.99 -> the 8th largest is 0.60, below 0.95, no alert."""
    con = store.connect(":memory:")
    scripted(con)
    w = engine.kv_cache_windows(con, HOUR, "15min", 0.95).set_index(["replica", "window_start"])
    at = pd.Timestamp(T0 + timedelta(minutes=45))
    assert tuple(w.loc[("gpu-b", at), ["scrapes", "hits"]]) == (15, 7)
    assert_allclose(w.loc[("gpu-b", at), ["held", "peak"]].astype(float), [0.60, 0.99])
    assert_allclose(w.loc[("gpu-a", pd.Timestamp(T0 + timedelta(minutes=15))), ["held", "hits"]].astype(float),
                    [0.97, 10])
    assert fired(con, "kv_cache_saturated")["tenant"].tolist() == ["(replica gpu-a)"]


def test_kv_cache_rule_half_a_window_is_enough_and_less_is_not():
    con = store.connect(":memory:")
    b = VllmRegistry(MODEL, True)
    for i in range(15):
        b.load(waiting=0, running=4, kv=0.99 if i < 8 else 0.10)
        scrape(con, b, "gpu-b", T0 + timedelta(minutes=i))
    a = fired(con, "kv_cache_saturated")
    assert len(a) == 1 and a.iloc[0].value == pytest.approx(0.99)
    con2 = store.connect(":memory:")
    for i in range(15):
        b.load(waiting=0, running=4, kv=0.99 if i < 7 else 0.10)
        scrape(con2, b, "gpu-b", T0 + timedelta(minutes=i))
    assert fired(con2, "kv_cache_saturated").empty


@pytest.mark.parametrize("later_names", [True, False], ids=["later-names", "a6f0308-names"])
def test_engine_queue_rule_needs_a_full_batch_and_a_queue(later_names):
    """gpu-a: 32 running (its largest) and 5 waiting for 20 minutes -> alert; gpu-b: 32 running (full) but nobody
    waiting -> none."""
    con = store.connect(":memory:")
    scripted(con, later_names)
    a = fired(con, "engine_queue_saturated")
    assert len(a) == 1, a
    row = a.iloc[0]
    assert (row.tenant, row.value, row.threshold) == ("(replica gpu-a)", 5.0, 0.0)
    assert (row.window_start, row.window_end) == (pd.Timestamp(T0 + timedelta(minutes=15)),
                                                  pd.Timestamp(T0 + timedelta(minutes=45)))
    assert "5.0 requests waiting (threshold 0.0 requests waiting)" in row.message
    assert "in 10 of 15 scrapes the batch was full (32 requests running" in row.message


def test_engine_queue_rule_not_on_a_queue_below_the_largest_batch():
    """Requests wait while the batch runs 20 of its observed 32: the engine is not batch-bound, no alert."""
    con = store.connect(":memory:")
    r = VllmRegistry(MODEL, True)
    r.load(waiting=0, running=32, kv=0.5)
    scrape(con, r, "gpu-a", T0 - timedelta(hours=1))            # its largest batch, an hour before
    for i in range(30):
        r.load(waiting=9, running=20, kv=0.5)
        scrape(con, r, "gpu-a", T0 + timedelta(minutes=i))
    w = engine.queue_saturation_windows(con, HOUR, "15min", 0.0)
    assert w["max_running"].tolist() == [32.0, 32.0] and w["held"].tolist() == [0.0, 0.0]
    assert fired(con, "engine_queue_saturated").empty


def test_thresholds_are_editable_and_too_few_scrapes_are_not_judged():
    con = store.connect(":memory:")
    scripted(con)
    rules = {r.name: r for r in alerts.rules(con)}
    alerts.save_rules(con, [alerts.AlertRule(**{**rules["kv_cache_saturated"].__dict__, "threshold": 0.5}),
                            alerts.AlertRule(**{**rules["engine_queue_saturated"].__dict__, "min_requests": 20})])
    kv = fired(con, "kv_cache_saturated")
    # at 0.5 every window of both replicas holds (gpu-a 0.50 at least, gpu-b 0.60): one alert each, the hour
    assert sorted(kv["tenant"]) == ["(replica gpu-a)", "(replica gpu-b)"]
    assert set(kv["window_end"] - kv["window_start"]) == {pd.Timedelta(hours=1)}
    assert fired(con, "engine_queue_saturated").empty          # 15 scrapes a window < 20: not judged


def test_no_engine_rows_no_engine_alert_and_unjudged_names_the_gap():
    con = store.connect(":memory:")
    ingest_frame(con, requests())
    assert alerts.open_alerts(con, HOUR)["rule"].isin(alerts.ENGINE_RULES).sum() == 0
    assert alerts.unjudged(con, HOUR)["rule"].isin(alerts.ENGINE_RULES).sum() == 0   # no scrape at all: silent
    scripted(con, minutes=30)           # the scraper stopped at 10:30: the 10:30 and 10:45 windows are blind
    blind = alerts.unjudged(con, HOUR).set_index("rule")
    assert blind.loc["kv_cache_saturated", "windows"] == 2 and blind.loc["kv_cache_saturated", "requests"] == 300
    assert "2 windows of llama-70b served 300 requests with fewer than 3 scrapes" in blind.loc["kv_cache_saturated",
                                                                                                "why"]


def test_engine_alerts_make_an_incident_titled_by_the_engine():
    con = store.connect(":memory:")
    ingest_frame(con, requests())
    scripted(con)
    found = [i for i in incidents.incidents(con, HOUR) if i.cause == "engine_saturated"]
    assert len(found) == 1
    inc = found[0]
    assert inc.title == ("The llama-70b engine saturated from 10:15 to 10:45: its KV cache full on gpu-a and its "
                         "batch full with requests waiting on gpu-a")
    assert "KV cache full on replica gpu-a: 97.0% at worst" in inc.timeline["what"].tolist()
    assert any("1 KV cache full alert (replica gpu-a)" in e for e in inc.evidence)


def test_counter_rises_handle_a_restart_and_prefer_the_later_names():
    """Queries rise 1,000 a scrape; the server restarts at 10:07 (its counters from 0): that scrape's rise is
    its value, 1,000, not -6,000. 14 rises in the 10:00 window (the first scrape has none), 15 in the next."""
    con = store.connect(":memory:")
    r = VllmRegistry(MODEL, True)
    for i in range(30):
        if i == 7:
            r = VllmRegistry(MODEL, True)      # restarted
        r.load(waiting=0, running=1, kv=0.1)
        scrape(con, r, "gpu-a", T0 + timedelta(minutes=i))
    c = engine.counter_increases(con, HOUR, "15min")
    assert c["prefix_queries"].tolist() == [14_000.0, 15_000.0]
    assert c["prefix_hits"].tolist() == [3_500.0, 3_750.0] and c["preemptions"].tolist() == [14.0, 15.0]
    eng = engine.engine_over_time(con, HOUR, "15min")
    assert_allclose(eng["prefix_hit_rate"], [0.25, 0.25])
    # a replica exporting both namings is counted once, in the later one's units
    old = VllmRegistry(MODEL, False)
    for i in range(30):
        old.load(waiting=0, running=1, kv=0.1)
        old.queries.inc(1000)                     # 2,000 blocks a scrape: would make the rate 12.5 % if mixed in
        engine.store_samples(con, [s for s in engine.parse_vllm_metrics(
            prometheus_client.generate_latest(old.registry).decode()) if "prefix" in s.metric], "gpu-a",
            T0 + timedelta(minutes=i))
    assert engine.counter_increases(con, HOUR, "15min")["prefix_queries"].tolist() == [14_000.0, 15_000.0]


def test_engine_over_time_adds_replicas_and_keeps_the_fullest_cache():
    con = store.connect(":memory:")
    scripted(con)
    eng = engine.engine_over_time(con, HOUR, "15min").set_index("ts")
    w = eng.loc[pd.Timestamp(T0 + timedelta(minutes=15))]
    # gpu-a: 5 scrapes at 20 running then 10 at 32 -> mean 28; gpu-b 32 -> 60 in all; waiting 10 x 5 / 15 = 3.33
    assert (w.replicas, w.scrapes) == (2, 30)
    assert_allclose([w.running, w.waiting], [60.0, 10 * 5 / 15])
    assert_allclose([w.kv_cache_pct_mean, w.kv_cache_pct_max], [100 * (5 * 0.5 + 10 * 0.97 + 15 * 0.6) / 30, 97.0])
    assert engine.models_by_scrapes(eng.reset_index()) == [MODEL]
    # tenant and tier filters do not apply to the engine; a model filter does
    assert len(engine.engine_over_time(con, Filters(since=T0, until=T0 + timedelta(hours=1), tenants=("x",)))) > 0
    assert engine.engine_over_time(con, Filters(models=("other",))).empty


# ---------------------------------------------------------------- the Latency page

@pytest.fixture()
def engine_db(tmp_path) -> str:
    path = str(tmp_path / "engine.duckdb")
    con = store.connect(path)
    ingest_frame(con, requests())
    scripted(con)
    con.close()
    return path


@pytest.fixture()
def plain_db(tmp_path) -> str:
    path = str(tmp_path / "plain.duckdb")
    con = store.connect(path)
    ingest_frame(con, requests())
    con.close()
    return path


def _charts(at) -> list[str]:
    from helpers import chart_title
    return [chart_title(c) for c in at.get("vega_lite_chart")]


def test_latency_page_shows_the_engine_view(engine_db):
    at = run_page(engine_db, "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    text = texts(at)
    assert "Engine view (scraped from vLLM)" in text and "llama-70b" in text
    assert "scrape vllm --url" not in text
    titles = " ".join(_charts(at))
    for what in ("request latency P99", "requests in the engine", "KV-cache usage", "prefix-cache hit rate",
                 "requests preempted"):
        assert f"llama-70b: {what}" in titles, titles


def test_latency_page_without_engine_rows_says_how_to_scrape(plain_db):
    at = run_page(plain_db, "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    text = texts(at)
    assert "Engine view (scraped from vLLM)" in text
    assert "No vLLM engine metrics were scraped for these models and period: `python -m finops scrape vllm" in text


# ---------------------------------------------------------------- the Alerts page and delivery

def test_engine_alerts_on_the_alerts_page_and_delivered(engine_db):
    from finops.ops import delivery
    from helpers import Receiver

    at = run_page(engine_db, "views/alerts.py", query_params={"from": "2026-05-04", "to": "2026-05-04"})
    assert not at.exception, [e.value for e in at.exception]
    text = texts(at)
    assert "KV cache nearly full for half a window or more: llama-70b on replica gpu-a, 97.0%" in text
    assert "Engine queue saturated" in text
    shown = {r for d in at.dataframe if "rule_shown" in d.value.columns for r in d.value["rule_shown"]}
    assert shown == {"KV cache full", "engine queue saturated", "unpriced traffic"}      # llama-70b has no price
    assert "kv_cache_saturated" not in text and "engine_queue_saturated" not in text
    assert all("_saturated" not in o for s in at.selectbox for o in s.options)
    receiver = Receiver()
    try:
        con = store.connect(engine_db)
        delivery.save_targets(con, [{"name": "hook", "kind": "http", "url": receiver.url + "/hook"}])
        frame = alerts.open_alerts(con, HOUR)
        results = delivery.deliver(con, frame[frame["rule"].isin(alerts.ENGINE_RULES)])
        con.close()
    finally:
        receiver.close()
    assert [r.ok for r in results] == [True]
    [post] = receiver.posts                       # one group: the model's two overlapping engine alerts
    assert post["json"]["title"].startswith("warning: 2 alerts on llama-70b, 2026-05-04 10:15 to 2026-05-04 10:45")
    assert sorted(a["rule"] for a in post["json"]["alerts"]) == ["engine_queue_saturated", "kv_cache_saturated"]
    assert any("on replica gpu-a" in line for line in post["json"]["lines"])
