"""finops.ops.readiness: items judged from the store, ticks stored in the settings table."""
from datetime import datetime

import pandas as pd
import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import IngestOptions, benchruns, ingest_frame, ingest_path
from finops.ops import alerts, readiness
from helpers import DATA


def _status(con) -> dict:
    return readiness.checklist(con).set_index("id")["status"].to_dict()


def test_empty_store_leaves_everything_open(empty_db):
    con = store.connect(empty_db)
    c = readiness.checklist(con)
    assert list(c.id) == [i.id for i in readiness.CHECKLIST] and len(c) == 8
    assert not c.done.any()
    s = c.set_index("id")["status"]
    assert s["load_test"] == "fail" and s["metrics"] == "fail" and s["canary"] == "manual"
    assert set(c[c.source == "person"].id) == {"cold_start", "canary", "rollback", "auth_rate_limit"}


def test_metrics_from_a_gateway_log_lack_the_gpu_side():
    con = store.connect(":memory:")
    ingest_path(con, DATA / "seed_gateway_injected.log", IngestOptions(format="gateway-log"))
    row = readiness.checklist(con).set_index("id").loc["metrics"]
    assert row.status == "partial"
    assert "queue length (queue wait" in row.evidence and "GPU utilisation (no self-hosted model" in row.evidence


def test_metrics_from_full_logs_still_wait_for_gpu_memory():
    con = store.connect(":memory:")
    ingest_frame(con, pd.DataFrame({"request_id": ["a"], "ts": [datetime(2026, 1, 1)], "model": ["llama-3.1-8b"],
                                    "status": ["ok"], "total_ms": [10.0], "service_ms": [9.0], "queue_ms": [1.0]}))
    row = readiness.checklist(con).set_index("id").loc["metrics"]
    assert row.status == "partial" and "missing" not in row.evidence and "GPU memory" in row.evidence
    readiness.tick(con, "metrics")
    assert readiness.checklist(con).set_index("id").loc["metrics", "done"]


def test_load_test_recorded_by_a_benchmark_batch():
    con = store.connect(":memory:")
    assert _status(con)["load_test"] == "fail"
    con.execute("INSERT INTO batches (batch_id, file_name, format) VALUES (1, 'bench.json', 'vllm-bench')")
    assert _status(con)["load_test"] == "pass"


def _load_test_run(con, model: str, completed: int, duration_s: float) -> None:
    """A stored benchmark run of ``model``: ``completed`` requests in ``duration_s`` (its batch recorded too)."""
    con.execute("INSERT INTO batches (batch_id, file_name, sha256, format) VALUES (99, 'bench.json', 'abc', 'vllm-bench')")
    reqs = pd.DataFrame({"ok": [True] * completed, "ttft_ms": 100.0, "total_ms": 1000.0, "mean_itl_ms": 10.0,
                         "output_tokens": 50})
    benchruns.record_run(con, benchruns.BenchRun("vllm-bench-abc", "vllm-bench", "bench.json", "abc", model, None,
                                                 None, 1, completed, datetime(2026, 1, 1), duration_s, requests=reqs))


def test_instance_plan_redundancy_band():
    con = store.connect(":memory:")
    con.execute("DELETE FROM prices")
    con.execute("INSERT INTO prices (model, kind, gpu_hour_usd, gpus_per_replica, replicas, slots_per_replica) "
                "VALUES ('m-self', 'self_hosted', 1.0, 1, 15, 1)")
    assert _status(con)["instance_plan"] == "manual"             # no load test, no traffic: nothing to judge
    # what the fleet lacks, named (it said "no self-hosted model has replicas in the price book, a load test and
    # traffic in this store" of a fleet with replicas: which of the three was missing?)
    evidence = readiness.checklist(con).set_index("id").loc["instance_plan", "evidence"]
    assert evidence.startswith("no plan from this store: m-self: no load test, no traffic in this store (")
    _load_test_run(con, "m-self", completed=1, duration_s=1000)  # one instance does 0.001 req/s
    assert _status(con)["instance_plan"] == "manual"             # still no traffic
    evidence = readiness.checklist(con).set_index("id").loc["instance_plan", "evidence"]
    assert evidence.startswith("no plan from this store: m-self: no traffic in this store (")
    ts = [datetime(2026, 1, 2, 10, m) for m in range(40)]        # busiest hour: 40 requests = 0.0111 req/s
    ingest_frame(con, pd.DataFrame({"request_id": [f"r{i}" for i in range(40)], "ts": ts, "model": "m-self"}))
    row = readiness.checklist(con).set_index("id").loc["instance_plan"]
    # ceil(0.0111 / 0.001) = 12 instances; 15 replicas = 25 % redundancy
    assert row.status == "pass" and "12 instances" in row.evidence and "25% redundancy" in row.evidence
    con.execute("UPDATE prices SET replicas = 13 WHERE model = 'm-self'")
    row = readiness.checklist(con).set_index("id").loc["instance_plan"]
    assert row.status == "fail" and "8% redundancy" in row.evidence and "20%–30%" in row.evidence
    con.execute("UPDATE prices SET replicas = 18 WHERE model = 'm-self'")        # 50 %: more than the plan asks
    assert _status(con)["instance_plan"] == "fail"


def test_alert_rules_configured_once_sla_saved():
    con = store.connect(":memory:")
    assert _status(con)["alerts"] == "partial"
    alerts.save_sla_targets(con, {"premium": 1500})
    assert _status(con)["alerts"] == "pass"


def test_ticks_are_stored_and_survive_a_reconnect(tmp_path):
    path = str(tmp_path / "s.duckdb")
    con = store.connect(path)
    readiness.tick(con, "canary", True, note="5% for 2 h, signed off")
    readiness.tick(con, "rollback", True)
    readiness.tick(con, "rollback", False)
    con.close()
    c = readiness.checklist(store.connect(path)).set_index("id")
    assert c.loc["canary", "ticked"] and c.loc["canary", "done"] and c.loc["canary", "note"].startswith("5%")
    assert not c.loc["rollback", "ticked"] and not c.loc["rollback", "done"]
    with pytest.raises(InputError):
        readiness.tick(store.connect(path), "nonsense")
