"""The store's data version (the key of every cached page query) moves on every kind of write, and only then."""
from __future__ import annotations

import pandas as pd
import pytest

from finops import store
from finops.cascade import shadow
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import IngestOptions, benchruns, ingest_frame, ingest_path
from finops.ops import alerts, delivery, readiness
from finops.spend import budgets, pricing
from finops.spend import report as spend
from helpers import DATA, alert_rows, free_port, march, spend_frame

ROWS = [("r1", march(2, 10, 5), "a", "premium", "gpt-4o", 100, 10, 0, 50.0, 100.0, None, False, "ok", None, None),
        ("r2", march(2, 11, 5), "b", "batch", "gpt-4o", 200, 20, 0, 60.0, 120.0, None, False, "ok", None, None)]


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _loaded(con) -> int:
    """Ingest two rows; the new batch's id."""
    return ingest_frame(con, spend_frame(ROWS), name="two-rows").batch_id


def _quiet(con) -> None:
    """No setup beyond an empty store."""


def _alerting(con) -> None:
    """A critical error-rate alert, and a delivery target whose port nobody listens on."""
    ingest_frame(con, alert_rows(200, march(2), errors=20))
    delivery.save_targets(con, [{"name": "h", "kind": "http", "url": f"http://127.0.0.1:{free_port()}/", "timeout_s": 1}])


def _first_alert(con):
    return alerts.open_alerts(con).head(1)


# name -> (setup before the count is read, the write)
WRITES = {
    "ingest_path": (_quiet, lambda con: ingest_path(con, DATA / "seed_gateway_injected.log",
                                                      IngestOptions(format="gateway-log"))),
    "ingest_frame": (_quiet, _loaded),
    "delete_batch": (_loaded, lambda con: store.delete_batch(con, int(store.batches(con).batch_id.iloc[0]))),
    "save_price_book": (_quiet, lambda con: pricing.save_price_book(con, pricing.price_book(con))),
    "load_price_book (reset)": (_quiet, lambda con: store.load_price_book(con, store.PRICES_CSV)),
    "save_budgets": (_quiet, lambda con: budgets.save_budgets(
        con, "2026-03-01", pd.DataFrame({"tenant": ["a"], "budget_usd": [100.0]}))),
    "set_budget": (_quiet, lambda con: budgets.set_budget(con, "a", "2026-03-01", 50.0)),
    "set_setting": (_quiet, lambda con: store.set_setting(con, "anything", {"x": 1})),
    "alert rules": (_quiet, lambda con: alerts.save_rules(
        con, [alerts.AlertRule(**{**alerts.DEFAULT_RULES[0].__dict__, "threshold": 0.02})])),
    "sla targets": (_quiet, lambda con: alerts.save_sla_targets(con, {"premium": 800.0})),
    "quality floors": (_quiet, lambda con: shadow.save_quality_floors(con, {"a": 0.8})),
    "readiness tick": (_quiet, lambda con: readiness.tick(con, readiness.CHECKLIST[0].id)),
    "benchmark file ingest": (_quiet, lambda con: ingest_path(con, DATA / "vllm_bench_serve_detailed.json")),
    "alert acknowledged": (_alerting, lambda con: alerts.acknowledge(con, _first_alert(con), "Ada")),
    "alert snoozed": (_alerting, lambda con: alerts.snooze(con, _first_alert(con), march(2) + pd.Timedelta(days=3650),
                                                           "Ada", now=march(2))),
    "alert reopened": (_alerting, lambda con: alerts.reopen(con, _first_alert(con), "Ada")),
    "delivery targets": (_quiet, lambda con: delivery.save_targets(
        con, [{"name": "h", "kind": "http", "url": "http://127.0.0.1:9/"}])),
    "delivery attempt logged": (_alerting, lambda con: delivery.deliver(con, _first_alert(con))),
    "test message logged": (_alerting, lambda con: delivery.send_test(con, "h")),
    "digest logged": (_alerting, lambda con: delivery.deliver_digest(
        con, delivery.digest(con, alerts.open_alerts(con)))),
    # the run on its own: the ingest's bump above would hide a record_run that forgot its own
    "benchmark run stored": (_quiet, lambda con: benchruns.record_run(
        con, benchruns.read_vllm_bench(DATA / "vllm_bench_serve_detailed.json"))),
}


@pytest.mark.parametrize("kind", list(WRITES))
def test_every_kind_of_write_bumps_the_version(con, kind):
    setup, write = WRITES[kind]
    setup(con)
    before = store.data_version(con)
    write(con)
    assert store.data_version(con) > before, kind


def test_a_benchmark_run_is_stored_by_its_ingest(con):
    """The "benchmark file ingest" write above stores a run, not only a batch of requests."""
    ingest_path(con, DATA / "vllm_bench_serve_detailed.json")
    assert len(benchruns.benchmark_runs(con)) == 1


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02\xff\xfe binary \x00" * 64], ids=["empty", "binary"])
def test_a_refused_ingest_leaves_the_version(con, tmp_path, content):
    _loaded(con)
    before = store.data_version(con)
    bad = tmp_path / "requests.jsonl"
    bad.write_bytes(content)
    with pytest.raises(InputError):
        ingest_path(con, bad)
    assert store.data_version(con) == before
    assert store.row_count(con) == len(ROWS)


def test_reads_leave_the_version(con):
    _loaded(con)
    before = store.data_version(con)
    f = Filters()
    store.row_count(con), store.time_span(con), store.batches(con), store.distinct_values(con, "model")
    store.get_setting(con, "anything"), pricing.price_book(con), budgets.budget_table(con, "2026-03-01")
    alerts.rules(con), alerts.open_alerts(con, f), readiness.checklist(con), shadow.quality_floors(con)
    alerts.alert_states(con), delivery.targets(con), delivery.targets_frame(con), delivery.delivery_log(con)
    delivery.deliver(con, alerts.open_alerts(con, f)), delivery.deliver(con, alerts.open_alerts(con, f), dry_run=True)
    spend.kpis(con, f), spend.report(con, f)
    benchruns.benchmark_runs(con)
    assert store.data_version(con) == before


def test_a_new_store_starts_at_a_version_and_a_write_counts_once(con):
    before = store.data_version(con)
    store.set_setting(con, "k", 1)
    assert store.data_version(con) == before + 1


def test_a_file_whose_every_row_is_rejected_leaves_the_store_as_it_was(con, tmp_path):
    """It wrote a batch of 0 rows and bumped the version (every cached page read again for nothing); now it is a
    failed load: no batch, no new version, no setting, while its rejects still name the row and field."""
    _loaded(con)
    before = (store.data_version(con), store.row_count(con), len(store.batches(con)),
              con.execute("SELECT count(*) FROM settings").fetchall()[0][0])
    bad = tmp_path / "bad.csv"
    bad.write_text("request_id,ts,model,input_tokens\n"
                   "x1,2026-03-02T10:00:00Z,gpt-4o,-5\n"
                   "x2,2026-03-02T10:01:00Z,,7\n")
    [r] = ingest_path(con, bad)
    assert (r.batch_id, r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped) == (None, 2, 0, 2, 0)
    assert [(x["row"], x["field"]) for x in r.rejects] == [(2, "input_tokens"), (3, "model")]
    after = (store.data_version(con), store.row_count(con), len(store.batches(con)),
             con.execute("SELECT count(*) FROM settings").fetchall()[0][0])
    assert after == before
    # loaded again: rejected again the same way, the store still untouched
    [again] = ingest_path(con, bad)
    assert (again.batch_id, again.rows_rejected, len(again.rejects)) == (None, 2, 2)
    assert store.data_version(con) == before[0]


def test_a_file_loaded_again_still_reads_as_already_loaded(con, tmp_path):
    """Every row a duplicate (0 new) is not a failed load: the first load's batch stays the only one."""
    f = tmp_path / "ok.csv"
    f.write_text("request_id,ts,model\nk1,2026-03-02T10:00:00Z,gpt-4o\n")
    [first] = ingest_path(con, f)
    version = store.data_version(con)
    [again] = ingest_path(con, f)
    assert (first.rows_ingested, again.batch_id, again.rows_ingested, again.duplicates_skipped) == (1, None, 0, 1)
    assert store.data_version(con) == version and len(store.batches(con)) == 1
