"""AppTest smoke tests of the Incidents, Percentiles and Readiness pages, and of the links between them."""
from datetime import datetime

import pytest

from finops import store
from finops.filters import Filters
from finops.ops import alerts, incidents
from helpers import run_page, shown, store_of_records, texts
from views._shared import plain

pytestmark = pytest.mark.slow
PAGES = ("views/incidents.py", "views/percentiles.py", "views/readiness.py")


def _ok(at):
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.parametrize("page", PAGES)
def test_page_on_an_empty_store(empty_db, page):
    at = run_page(empty_db, page)
    _ok(at)
    assert "holds no requests" in texts(at)


def test_incidents_page_lists_the_outage_first_with_its_evidence_and_requests(demo_db):
    at = run_page(demo_db, "views/incidents.py", timeout=300)
    _ok(at)
    worst = incidents.incidents(store.connect(demo_db))[0]
    assert worst.cause == "replica_outage"
    labels = [e.label for e in at.expander]
    assert plain(worst.title) in labels[0] and "critical" in labels[0]
    text = texts(at)
    assert "**Do:**" in text and "Bring llama" in text and plain("(the timeout cap)") in text
    assert len(at.dataframe) >= 2                     # its timeline and its requests
    assert "Alert rules and SLA targets" in labels


def test_incidents_page_controls_and_a_link_to_one_incident(demo_db):
    key = incidents.incidents(store.connect(demo_db))[-1].key
    at = run_page(demo_db, "views/incidents.py", timeout=300, query_params={"incident": key})
    _ok(at)
    at.segmented_control(key="inc_order").set_value("newest first").run()
    _ok(at)
    at.segmented_control(key="inc_window").set_value("15min").run()
    _ok(at)


def test_latency_page_shows_an_incidents_requests(demo_db):
    inc = incidents.incidents(store.connect(demo_db))[0]
    at = run_page(demo_db, "views/latency.py", timeout=300, query_params={"incident": inc.key})
    _ok(at)
    text = texts(at)
    assert "Requests hit by an incident" in text and plain(inc.title) in text
    shown = at.dataframe[-1].value
    assert set(shown["request_id"]) <= set(inc.hit["request_id"]) and len(shown) == min(incidents.LINKED_MAX, inc.affected)


def test_latency_page_names_a_link_it_cannot_find(demo_db):
    at = run_page(demo_db, "views/latency.py", timeout=300,
                  query_params={"incident": "nope|2020-01-01T00:00|2020-01-01T01:00"})
    _ok(at)
    assert "not among those of the period" in texts(at) and "The slowest requests" in texts(at)


def test_percentiles_page_in_seconds_per_model(demo_db):
    at = run_page(demo_db, "views/percentiles.py", timeout=300, query_params={"lat_by": "sla_tier"})
    _ok(at)
    assert "P50, P95 and P99 of total latency" in texts(at)
    # in seconds, and named so (a CSV of the table says its unit)
    table = next(df.value for df in at.dataframe if "requests" in df.value.columns)
    assert {"total_s_p50", "total_s_p95", "total_s_p99"} <= set(table.columns)
    assert not any(c.startswith("total_ms") for c in table.columns)
    models = store.distinct_values(store.connect(demo_db), "model")
    assert len(at.get("vega_lite_chart")) == len(models)      # one panel per model
    at.segmented_control(key="pct_field").set_value("queue_ms").run()
    _ok(at)
    assert "P50, P95 and P99 of queue wait" in texts(at)
    assert len(at.get("vega_lite_chart")) == 2 and "No queue wait in the logs of gpt-4o, gpt-4o-mini" in texts(at)


def test_overview_lists_incidents_with_links(demo_db):
    # a period of fewer than INCIDENTS_AT_ONCE requests: the worst incidents at once, titled as the
    # Incidents page titles them, beside the open alerts' counts
    at = run_page(demo_db, "views/overview.py", timeout=300)
    _ok(at)
    worst = incidents.incidents(store.connect(demo_db))[0]
    fired = incidents.service_alerts(alerts.open_alerts(store.connect(demo_db), Filters()))
    assert f"{(fired['severity'] == 'critical').sum():,} critical" in texts(at) and "service alerts open in this period on" in texts(at)
    assert plain(worst.title) in texts(at)
    # the incidents are counted as incidents, apart from the alerts' count above them
    every = incidents.incidents(store.connect(demo_db))
    by_severity = [(s, sum(i.severity == s for i in every)) for s in incidents.SEVERITIES]
    assert (" · ".join(f"{n:,} {s}" for s, n in by_severity if n) + " incidents in this period (the alerts above"
            in texts(at))
    # closed (a link can carry it; a larger period opens closed): the counts, no diagnosis, no titles
    closed = run_page(demo_db, None, timeout=300, query_params={"ov_incidents": "false"})        # the default page
    _ok(closed)
    assert plain(worst.title) not in texts(closed) and "Open to group the alerts" in texts(closed)
    assert "service alerts open in this period on" in texts(closed)
    hit = f"{worst.affected:,} of {worst.requests:,}"           # in the title (a failure's), else after the span
    assert (hit in worst.title) != (f"{hit} requests hit" in texts(at))


def _quiet_hours_store(path, **columns):
    """A store of eight quiet hours (2026-04-06 00:00-08:00, 720 served requests an hour, tenant acme, premium
    tier, 1 s each with a 200 ms TTFT) with ``columns`` added; returns it open."""
    from datetime import datetime, timedelta

    import pandas as pd

    from finops.ingest import ingest_frame

    t0, n = datetime(2026, 4, 6), 720
    ts = [t0 + timedelta(hours=h, minutes=60 * i / n) for h in range(8) for i in range(n)]
    con = store.connect(str(path))
    ingest_frame(con, pd.DataFrame({"request_id": [f"r{i}" for i in range(len(ts))], "ts": ts, "tenant": "acme",
                                    "sla_tier": "premium", "status": "ok", "total_ms": 1000.0, "ttft_ms": 200.0,
                                    **columns}))
    return con


def _more_quiet_days(con, days, **columns):
    """``days`` more days after _quiet_hours_store's, 2026-04-07 on: 120 requests an hour, the same columns."""
    from datetime import datetime, timedelta

    import pandas as pd

    from finops.ingest import ingest_frame

    ts = [datetime(2026, 4, 7) + timedelta(hours=h, minutes=i / 2) for h in range(24 * days) for i in range(120)]
    ingest_frame(con, pd.DataFrame({"request_id": [f"d{i}" for i in range(len(ts))], "ts": ts, "tenant": "acme",
                                    "sla_tier": "premium", "status": "ok", "total_ms": 1000.0, "ttft_ms": 200.0,
                                    **columns}))


def test_pages_that_judge_only_the_service_rules_do_not_vouch_for_gpu_utilisation(tmp_path):
    # eight quiet hours of a self-hosted model: GPU utilisation low fires (a money rule), no service rule does.
    # The Overview and the Incidents page evaluate the service rules only, so "GPU utilisation ... within their
    # thresholds" was a claim nothing had checked, beside an open GPU alert on the Alerts page
    db = str(tmp_path / "quiet.duckdb")
    con = _quiet_hours_store(db, model="llama-3.1-8b", queue_ms=0.0, service_ms=300.0)
    fired = alerts.open_alerts(con)
    # eight hours of one day: the spend spike has no week of logs before it to judge against
    assert list(fired["rule"]) == ["gpu_util_low"] and list(alerts.unjudged(con, None)["rule"]) == ["spend_spike"]
    con.close()
    period = {"from": "2026-04-06", "to": "2026-04-06"}
    for page in ("views/overview.py", "views/incidents.py"):
        at = run_page(db, page, query_params=period)
        _ok(at)
        [said] = [s.value for s in at.success if "alert fired" in s.value]
        # the rules these pages judge, by name: utilisation high is a service rule, low a money one; no vLLM
        # scrape, so neither engine rule judges anything and neither is named
        assert said == ("No service alert fired in this period. Rules judged, each within its threshold: error rate, "
                        "P99 over the tier's SLA, GPU utilisation high and queue growing. The other rules (GPU "
                        "utilisation low, daily spend spike, budget forecast passed and unpriced traffic) are judged "
                        "on the Alerts page. 1 info cost alert is open in this period (GPU utilisation low): see the "
                        "Alerts page.")
    at = run_page(db, "views/alerts.py", query_params=period)
    _ok(at)
    assert next(m.value for m in at.metric if m.label == "Open info alerts") == "1"
    # a rule turned off is said to be off, not within its threshold
    con = store.connect(db)
    frame = alerts.rules_frame(con)
    frame.loc[frame.name == "queue_growing", "enabled"] = False
    alerts.save_rules(con, frame)
    con.close()
    at = run_page(db, "views/incidents.py", query_params=period)
    _ok(at)
    [said] = [s.value for s in at.success if "alert fired" in s.value]
    assert ("within its threshold: error rate, P99 over the tier's SLA and GPU utilisation high. Turned off (on the "
            "Incidents page): queue growing. The other rules") in said


def test_the_overview_names_the_cost_alerts_open_beside_no_service_alert(tmp_path):
    # 100 requests of gpt-4o-mini and 20 of acme-private-7b, which nothing prices, on one day: 20 of 120 (16.7 %)
    # is over the unpriced traffic rule's 5 %, one day window of at least 100 requests, so 1 warning alert is open
    # on the Alerts page. The Overview said "No alert fired on the windows the rules could judge" beside it
    records = [{"request_id": f"{model}-{i}", "ts": f"2026-04-06T10:{i % 60:02d}:{i // 60:02d}", "model": model,
                "tenant": "acme", "input_tokens": 1_000, "output_tokens": 100, "status": "ok"}
               for model, n in (("gpt-4o-mini", 100), ("acme-private-7b", 20)) for i in range(n)]
    db = store_of_records(tmp_path, records)
    period = {"from": "2026-04-06", "to": "2026-04-06"}
    at = run_page(db, "views/alerts.py", query_params=period)
    _ok(at)
    open_ = {m.label: m.value for m in at.metric if m.label.startswith("Open ")}
    assert open_ == {"Open critical alerts": "0", "Open warning alerts": "1", "Open info alerts": "0"}
    for page in ("views/overview.py", "views/incidents.py"):
        at = run_page(db, page, query_params=period)
        _ok(at)
        [said] = [shown(w.value) for w in [*at.warning, *at.success] if "alert fired" in w.value]
        assert said.startswith("No service alert fired"), said
        assert said.endswith(" 1 warning cost alert is open in this period (unpriced traffic): see the Alerts "
                             "page."), said


def test_alerts_page_names_every_rule_it_judged_when_none_fired(tmp_path):
    # eight quiet hours of a paid API model: no rule fires. The Alerts page judges every rule but the engine ones
    # (no vLLM scrape: they judge nothing), and names exactly those
    db = str(tmp_path / "quiet_api.duckdb")
    con = _quiet_hours_store(db, model="gpt-4o-mini", provider="openai", input_tokens=100, output_tokens=20)
    assert alerts.open_alerts(con).empty and list(alerts.unjudged(con, None)["rule"]) == ["spend_spike"]
    con.close()
    at = run_page(db, "views/alerts.py", query_params={"from": "2026-04-06", "to": "2026-04-06"})
    _ok(at)
    # the spend spike judges a day against the 7 days before it: a store of one day has none, so it is not
    # named among the rules judged (it was: "daily spend spike ... within its threshold")
    [said] = [shown(s.value) for s in at.warning if "alert fired" in s.value]
    assert said == ("No alert fired on the windows the rules could judge, but some rules were not judged: daily spend "
                    "spike: 1 day of a tenant's spend (5,760 requests) could not be judged against the 7 days before: "
                    "1 with fewer than 7 days of logs before it (the logs start on 2026-04-06; the first day that can "
                    "be judged is 2026-04-13).")
    # eight more days of the same traffic: the last two can be judged, so every rule was, and each is named
    con = store.connect(db)
    _more_quiet_days(con, 8, model="gpt-4o-mini", provider="openai", input_tokens=100, output_tokens=20)
    assert alerts.unjudged(con, Filters(since=datetime(2026, 4, 13), until=datetime(2026, 4, 15))).empty
    assert list(alerts.unjudged(con, None)["windows"]) == [7]          # the whole store: its first week is not
    con.close()
    at = run_page(db, "views/alerts.py", query_params={"from": "2026-04-13", "to": "2026-04-14"})
    _ok(at)
    [said] = [s.value for s in at.success if "alert fired" in s.value]
    assert said == ("No alert fired in this period. Rules judged, each within its threshold: error rate, P99 over the "
                    "tier's SLA, GPU utilisation high, GPU utilisation low, queue growing, daily spend spike, budget "
                    "forecast passed and unpriced traffic.")


def test_a_timeline_entry_that_ends_on_another_day_shows_that_day(tmp_path):
    """Two days of a model failing 1 request in 30 an hour: one error-rate alert from 2026-11-20 00:00 to 11-22
    00:00. Its timeline row read "11-20 00:00 | 00:00" (the To column in hours only: the same day's midnight?)."""
    import json

    rows = [{"request_id": f"a{h}-{k}", "ts": f"2026-11-{20 + h // 24}T{h % 24:02d}:{k * 2:02d}:00Z",
             "model": "gpt-4o-mini", "input_tokens": 500, "output_tokens": 100, "total_ms": 900.0,
             "status": "error" if k == 7 else "ok"} for h in range(48) for k in range(30)]
    path = store_of_records(tmp_path, rows)
    at = run_page(path, "views/incidents.py")
    _ok(at)
    line = next(d for d in at.dataframe if list(d.value.columns[:2]) == ["at", "until"])
    assert line.value["until"].iloc[0].strftime("%m-%d %H:%M") == "11-22 00:00"
    assert json.loads(line.proto.columns)["until"]["type_config"]["format"] == "MM-DD HH:mm"
    assert [m.label for m in at.metric][-1] == "Alert time"
    assert at.expander[0].label.count("48 of 1,440") == 1          # the title counts them: not said twice


def test_the_gpu_rules_name_a_fleet_whose_logs_carry_no_timing_as_not_judged(tmp_path):
    """The Mooncake excerpt served by a self-hosted fleet: no hour has a busy time, so neither GPU utilisation rule
    can judge it. The Alerts page said only that the P99 rule was not judged, as if the GPUs were fine; it now names
    both GPU rules in one clause. The Overview, which leaves the cost rules (GPU utilisation low among them) to the
    Alerts page, names only the high one."""
    from helpers import untimed_fleet_store

    db = untimed_fleet_store(tmp_path)
    con = store.connect(db)
    blind = alerts.unjudged(con).set_index("rule")
    con.close()
    why = ("the logs of gpu-model carry no service or latency time in 1 hour of traffic (300 requests): the GPU "
           "utilisation there is unknown")
    assert blind.loc[["gpu_util_high", "gpu_util_low"], "why"].tolist() == [why, why]
    assert blind.loc["gpu_util_high", ["windows", "requests"]].tolist() == [1, 300]
    q = {"from": "2025-01-01", "to": "2025-01-01"}
    at = run_page(db, "views/alerts.py", query_params=q)
    assert not at.exception, [e.value for e in at.exception]
    warned = shown(" ".join(w.value for w in at.warning))
    assert f"GPU utilisation high and GPU utilisation low: {why}" in warned, warned
    at = run_page(db, "views/overview.py", query_params=q)
    assert not at.exception, [e.value for e in at.exception]
    warned = shown(" ".join(w.value for w in at.warning))
    assert f"GPU utilisation high: {why}" in warned and "GPU utilisation low" not in warned, warned
