"""Issue 18 on one machine: the structures written at load time (the SLA sketch, the queue windows), the bound on
raw rows read at once (store.raw_scope), and the Latency page on a rollup-only store."""
from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.cli import main
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.latency import diagnose
from finops.latency import stats as latency
from finops.ops import alerts
from finops.spend import routing
from helpers import run_page, texts

T0 = datetime(2026, 4, 6, 0, 0)


def _frame(per_hour: list[int], model: str = "gpt-4o", tenant: str = "acme", tier: str = "premium",
           seed: int = 0, prefix: str = "r") -> pd.DataFrame:
    """``per_hour[h]`` requests spread evenly over hour ``h`` from T0, lognormal latencies."""
    rng = np.random.default_rng(seed)
    ts = [T0 + timedelta(hours=h, seconds=3600 * i / n) for h, n in enumerate(per_hour) for i in range(n)]
    n = len(ts)
    return pd.DataFrame({
        "request_id": [f"{prefix}{i}" for i in range(n)], "ts": ts, "model": model, "tenant": tenant,
        "sla_tier": tier, "status": "ok", "input_tokens": rng.integers(10, 5000, n),
        "output_tokens": rng.integers(2, 800, n), "total_ms": rng.lognormal(7, 0.8, n),
        "ttft_ms": rng.lognormal(5, 0.6, n), "queue_ms": np.round(rng.exponential(40, n), 3),
        "prefill_ms": rng.lognormal(4, 0.5, n), "decode_ms": rng.lognormal(6.5, 0.7, n)})


@pytest.fixture
def con():
    c = store.connect(":memory:")
    ingest_frame(c, pd.concat([_frame([10, 20, 30]),
                               _frame([5, 5, 5], model="llama-3.1-8b", tenant="globex", tier="batch", seed=1,
                                      prefix="g")], ignore_index=True))
    return c


# ---------------------------------------------------------------- the bound on raw rows

def test_raw_scope_keeps_a_period_within_the_budget_whole(con):
    s = store.raw_scope(con, Filters(), budget=75)
    assert (s.filters, s.requests, s.period_requests, s.narrowed, s.note()) == (Filters(), 75, 75, False, "")


def test_raw_scope_narrows_to_the_latest_hours_that_fit(con):
    # hours hold 15, 25, 35 requests: 35 + 25 = 60 fit in 60, 35 + 25 + 15 = 75 do not
    s = store.raw_scope(con, Filters(), budget=60)
    assert (s.filters.since, s.requests, s.period_requests, s.narrowed) == (T0 + timedelta(hours=1), 60, 75, True)
    assert "latest part" in s.note() and "2026-04-06 01:00" in s.note()
    # fewer than the last hour holds: the last hour still
    s = store.raw_scope(con, Filters(), budget=10)
    assert (s.filters.since, s.requests) == (T0 + timedelta(hours=2), 35)
    # per model: gpt-4o holds 10, 20, 30
    s = store.raw_scope(con, Filters(models=("gpt-4o",)), budget=55)
    assert (s.filters.since, s.requests, s.period_requests) == (T0 + timedelta(hours=1), 50, 60)
    # a period that starts later is kept where it fits
    f = Filters(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3))
    assert store.raw_scope(con, f, budget=60).filters == f


def test_raw_row_analyses_read_only_the_scope(con, monkeypatch):
    monkeypatch.setattr(store, "RAW_ROW_BUDGET", 40)        # the last hour: 30 + 5 requests
    hist = latency.histogram(con, Filters(), "queue_ms", 10, exact=True)
    assert hist["count"].sum() == 35
    slow = latency.slowest(con, Filters(), 100)          # more than the load-time table keeps: raw rows
    assert len(slow) == 35 and slow["ts"].min() >= T0 + timedelta(hours=2)
    # what is read from the tables written at load time covers the whole period
    assert latency.histogram(con, Filters(), "queue_ms", 10)["count"].sum() == 75
    assert len(latency.slowest(con, Filters(), store.SLOWEST_KEPT)) == store.SLOWEST_KEPT
    exact = latency.percentiles(con, Filters(tenants=("acme",)))      # a tenant filter: exact, on raw rows
    assert exact["requests"].tolist() == [30]
    # the sketch still covers the whole period
    assert latency.percentiles(con, Filters())["requests"].tolist() == [60, 15]
    assert all(fd.metrics["window_start"] >= T0 + timedelta(hours=2) for fd in diagnose.diagnose(con, Filters()))


def test_the_replay_says_when_it_covers_the_latest_part_only(con, monkeypatch):
    con.execute("UPDATE prices SET size_class = 'small' WHERE model = 'gpt-4o-mini'")
    ingest_frame(con, _frame([5, 5, 5], model="gpt-4o-mini", seed=2, prefix="m"))
    con.execute("UPDATE prices SET size_class = 'large' WHERE model = 'gpt-4o'")
    monkeypatch.setattr(store, "RAW_ROW_BUDGET", 50)        # the last hour: 30 + 5 + 5 requests
    w = routing.whatif(con, Filters(), "all-small", small_model="gpt-4o-mini", large_model="gpt-4o")
    assert w.requests == 40
    assert w.assumptions[0].startswith("Replayed over the latest part of the period, from 2026-04-06 02:00 UTC "
                                       "(40 of its 90 requests)")
    assert routing.fleet_models(con, Filters()).set_index("model")["requests"].to_dict() == {
        "gpt-4o": 60, "llama-3.1-8b": 15, "gpt-4o-mini": 15}


# ---------------------------------------------------------------- the SLA sketch and the queue windows

def test_sla_sketch_p99_per_tenant_and_hour_is_within_one_percent_of_numpy():
    rows = pd.concat([_frame([400, 300], seed=3), _frame([250, 500], tenant="globex", seed=4, prefix="g")],
                     ignore_index=True)
    c = store.connect(":memory:")
    ingest_frame(c, rows)
    got = alerts.sla_windows(c, Filters(), "hour", "ttft_ms")
    assert got.attrs["max_rel_error"] == store.SKETCH_ALPHA
    rows["window_start"] = rows["ts"].dt.floor("h")
    want = rows.groupby(["window_start", "tenant"])["ttft_ms"].agg(["size", lambda x: np.percentile(x, 99)])
    want.columns = ["requests", "p99"]
    got = got.set_index(["window_start", "tenant"]).loc[want.index]
    assert got["requests"].tolist() == want["requests"].tolist() == [400, 250, 300, 500]
    assert (got["model"] == "gpt-4o").all() and (got["tier"] == "premium").all()
    assert_allclose(got["p99"], want["p99"], rtol=store.SKETCH_ALPHA)
    # 15-minute windows are exact, from the raw rows
    exact = alerts.sla_windows(c, Filters(), "15min", "ttft_ms")
    first = rows[rows["ts"] < T0 + timedelta(minutes=15)]
    row = exact[(exact.window_start == T0) & (exact.tenant == "acme")].iloc[0]
    assert row.requests == 100 and row.p99 == pytest.approx(np.percentile(first[first.tenant == "acme"].ttft_ms, 99))
    # the day window sums the hours
    day = alerts.sla_windows(c, Filters(), "day", "total_ms").set_index("tenant")
    assert day.loc["acme", "requests"] == 700
    assert day.loc["acme", "p99"] == pytest.approx(np.percentile(rows[rows.tenant == "acme"].total_ms, 99),
                                                   rel=store.SKETCH_ALPHA)


def test_queue_windows_give_littles_law_as_the_raw_rows_do(con):
    raw = con.execute("SELECT model, time_bucket(INTERVAL 15 MINUTE, ts) AS w, count(*), avg(queue_ms) FROM requests "
                      "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    q = alerts.queue_length(con, Filters())
    assert list(zip(q.model, q.window_start, q.requests, strict=True)) == [(m, w, n) for m, w, n, _ in raw]
    assert_allclose(q.queue_length, [n / 900 * mean / 1000 for _, _, n, mean in raw], rtol=1e-12)
    hour = alerts.queue_length(con, Filters(models=("gpt-4o",)), "hour")
    assert hour["requests"].tolist() == [10, 20, 30]
    # a period off the quarter hour reads the raw rows
    off = alerts.queue_length(con, Filters(since=T0 + timedelta(minutes=7)), "hour")
    assert off.set_index("model").loc["gpt-4o", "requests"].tolist()[0] == 10 - 2   # 0:00 and 0:06 are before it


def test_derived_tables_follow_loads_deletions_and_rebuilds(con):
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t, *_ in store.DERIVED}
    assert all(counts[t] for t in ("latency_hourly", "latency_sla_hourly", "queue_15min"))
    assert counts["rollup_cascade_hourly"] == 0     # no cascade here
    con.execute("DELETE FROM settings WHERE key = 'latency_sla_version'")
    store.rebuild_derived(con, "latency_sla_hourly")
    assert con.execute("SELECT count(*) FROM latency_sla_hourly").fetchall()[0][0] == counts["latency_sla_hourly"]
    assert store.derived_ready(con, "latency_sla_hourly")
    store.delete_batch(con, 1)
    assert all(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] == 0 for t, *_ in store.DERIVED)


# ---------------------------------------------------------------- the Latency page on a rollup-only store

def test_latency_page_on_a_rollup_only_store_shows_the_sketch_percentiles(tmp_path, capsys):
    rows = pd.concat([_frame([300, 200, 100], seed=5), _frame([50, 50, 50], model="llama-3.1-8b", seed=6, prefix="g")],
                     ignore_index=True)
    rows["date"] = rows["ts"].dt.date
    dataset = tmp_path / "dataset"
    import duckdb
    gen = duckdb.connect()
    gen.register("rows", rows)
    gen.execute("COPY rows TO ? (FORMAT parquet, PARTITION_BY (date))", [str(dataset)])
    embedded = store.connect(tmp_path / "embedded.duckdb")
    ingest_frame(embedded, rows.drop(columns="date"))
    want = latency.percentiles(embedded, Filters())
    embedded.close()
    assert main(["rollup", "--input", str(dataset), "--output", str(tmp_path / "out")]) == 0
    # the printed line gives the first and last request, not whole hours
    lo, hi = rows["ts"].min(), rows["ts"].max()
    assert f", {lo:%Y-%m-%d %H:%M} to {hi:%H:%M} UTC (duckdb)" in capsys.readouterr().out
    db = tmp_path / "attached.duckdb"
    assert main(["attach-rollups", str(tmp_path / "out"), "--db", str(db)]) == 0

    at = run_page(str(db), "views/latency.py")
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at)
    assert shown.count(store.RAW_ROWS_NEEDED) == 1 and "Percentiles" in shown
    [table] = at.dataframe
    got = table.value
    assert got["model"].tolist() == ["gpt-4o", "llama-3.1-8b"] and got["requests"].tolist() == [600, 150]
    assert_allclose(got["total_ms_p99"], want["total_ms_p99"], rtol=1e-12)    # the same sketch, the same figure
    # and the chart's figures: P50/P95/P99 per model and hour, from the sketch
    attached = store.connect(db)           # the page's process holds it open read-write
    over = latency.over_time(attached, Filters(), "total_ms", "hour")
    assert over.attrs["max_rel_error"] == store.SKETCH_ALPHA
    assert over.groupby("grp")["requests"].apply(list).to_dict() == {"gpt-4o": [300, 200, 100],
                                                                    "llama-3.1-8b": [50, 50, 50]}


def test_the_cascade_summary_from_the_subset_rollups_equals_the_raw_rows(monkeypatch):
    rows = _frame([40, 40, 40], model="llama-3.1-8b", seed=7)
    rows["strategy"] = np.where(np.arange(len(rows)) % 3 == 0, "cost", "cascade")
    rows["escalated"] = np.where(rows["strategy"] == "cascade", np.arange(len(rows)) % 5 == 1, None)
    rows.loc[::7, "escalated"] = True            # a few escalations outside the cascade strategy too
    c = store.connect(":memory:")
    ingest_frame(c, rows)
    assert c.execute("SELECT sum(requests) FILTER (WHERE in_cascade) FROM rollup_cascade_hourly").fetchall()[0][0] == 80
    fast = routing.cascade_summary(c, Filters())
    monkeypatch.setattr(store, "derived_ready", lambda con, table: False)     # the raw-row path
    slow = routing.cascade_summary(c, Filters())
    # each group's share of its hour's GPU cost is a DECIMAL(38,12); the subset rollup splits a group the raw
    # rows keep whole (by escalated and cascade flags), so the two sums may differ in the 12th decimal only
    assert fast.rejected_attempts_usd == pytest.approx(slow.rejected_attempts_usd, abs=1e-9)
    assert fast.cascade_spend_usd == pytest.approx(slow.cascade_spend_usd, abs=1e-9)
    assert slow.rejected_attempts_usd > 0 and slow.cascade_spend_usd > 0
    pd.testing.assert_frame_equal(fast.by_model, slow.by_model, check_exact=False, atol=1e-9, rtol=0)
    assert int(fast.by_model["escalations"].sum()) == int((rows["escalated"] == True).sum())  # noqa: E712


def test_incidents_of_a_period_over_the_budget_are_those_of_its_latest_hours_alerts_included(monkeypatch):
    """The diagnosis reads the latest hours only; the alerts go with it. An alert of the whole period would send
    the outage and request reads over every row of its span (the Incidents page ran out of memory at 100M)."""
    from finops.ops import incidents

    rows = _frame([60, 60, 60])
    rows.loc[rows["ts"] < T0 + timedelta(hours=1), "status"] = "error"     # an error-rate alert in hour 0 only
    c = store.connect(":memory:")
    ingest_frame(c, rows)
    whole = alerts.open_alerts(c, Filters(), leave_out=incidents.COST_RULES)
    assert set(whole.loc[whole["rule"] == "error_rate", "window_start"]) == {T0}
    # within the budget, the whole period: the failed hour is an incident
    assert [(i.cause, i.start, i.affected) for i in incidents.incidents(c, Filters(), open_alerts=whole)] \
        == [("errors", T0, 60)]
    monkeypatch.setattr(store, "RAW_ROW_BUDGET", 60)                         # the last hour
    scoped = store.raw_scope(c, Filters()).filters
    assert scoped.since == T0 + timedelta(hours=2)
    got = incidents.incidents(c, Filters(), open_alerts=whole)
    assert all(i.start >= scoped.since for i in got)
    assert [i.key for i in got] == [i.key for i in incidents.incidents(c, scoped)]


@pytest.mark.parametrize("name, message", [
    ("missing", "no such folder"),         # it said "holds no .parquet files", as if the folder were there
    ("rows.csv", "is a file: give the dataset's folder (date=YYYY-MM-DD/ folders of .parquet files)"),
])
def test_rollup_of_no_folder_says_so(tmp_path, capsys, name, message):
    from finops.cli import main
    (tmp_path / "rows.csv").write_text("ts\n")
    path = tmp_path / name
    assert main(["rollup", "--input", str(path), "--output", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == f"error: file {path}: {message}\n"
