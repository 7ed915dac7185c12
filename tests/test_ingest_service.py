"""The ingester as a process (``python -m finops serve-ingest``) on a temporary store.

While it runs, the store is held by that process: the test reads it through the ingester's own control
endpoint (``report --json`` forwarded, the CLI's fallback), and directly once the process stopped. The
vLLM server is prometheus_client's exporter on 127.0.0.1 serving vLLM's metric names (vLLM cannot run
here: no GPU), as in tests/test_scrape_vllm.py.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from finops import access, store
from finops.ingest import service
from helpers import ROOT, free_port, stop_process, wait_until

ENV = dict(os.environ, FINOPS_DEMO="0")


def _line(i: int, model: str = "m-small") -> str:
    return json.dumps({"request_id": f"r{i}", "ts": f"2026-11-29T10:{i // 60:02d}:{i % 60:02d}Z", "model": model,
                       "tenant": "lab", "input_tokens": 100 + i, "output_tokens": 10, "total_ms": 500.0,
                       "status": "ok"}) + "\n"


def _append(path: Path, lines: range) -> None:
    with open(path, "a") as fh:
        fh.write("".join(_line(i) for i in lines))


def cli(*args: str, db: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finops", *args, "--db", db], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)


@contextlib.contextmanager
def serving(db: str, *flags: str):
    """A ``serve-ingest`` process on ``db``; yields (process, control client) once its sidecar names it."""
    proc = subprocess.Popen([sys.executable, "-m", "finops", "serve-ingest", "--db", db, "--tick", "0.3", *flags],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def ready():
        if proc.poll() is not None:
            raise AssertionError("serve-ingest exited: " + proc.stdout.read())
        client = service.control_for(db)
        return client if client is not None and client.pid == proc.pid else None

    try:
        yield proc, wait_until(ready, timeout=120, interval=0.1, message="serve-ingest's control endpoint")
    finally:
        stop_process(proc)


def requests_seen(client) -> int:
    """The store's request count, asked of the ingester holding it (report --json, forwarded)."""
    out, _ = client.command("report", ["--json", "--by", "tenant"])
    return sum(r["requests"] for r in json.loads(out))


def stored_ids(db: str) -> list[str]:
    con = store.connect(db, read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT request_id FROM requests ORDER BY request_id").fetchall()]
    finally:
        con.close()


def status_of(client, source_id: int) -> dict:
    return next(s for s in client.status()["sources"] if s["id"] == source_id)


def test_followed_log_in_three_steps_then_restart_then_rotation(tmp_path):
    db, log = str(tmp_path / "s.duckdb"), tmp_path / "gateway.jsonl"
    assert cli("serve-ingest", "--add-follow", str(log), db=db).returncode == 0
    with serving(db) as (_, client):
        for n, step in enumerate((range(0, 5), range(5, 12), range(12, 20)), start=1):
            _append(log, step)
            wait_until(lambda step=step: requests_seen(client) == step.stop, timeout=60,
                       message=f"step {n}'s lines loaded")
        with open(log, "a") as fh:                       # a line still being written waits for its newline
            fh.write(_line(20)[:-15])
        wait_until(lambda: status_of(client, 1)["last_ok"] is not None, timeout=30)
    assert stored_ids(db) == sorted(f"r{i}" for i in range(20))
    # down: the partial line completes and more arrive; a restart resumes at the persisted offset
    with open(log, "a") as fh:
        fh.write(_line(20)[-15:])
    _append(log, range(21, 25))
    with serving(db) as (_, client):
        wait_until(lambda: requests_seen(client) == 25, timeout=60, message="the lines written while it was down")
    assert stored_ids(db) == sorted(f"r{i}" for i in range(25))
    con = store.connect(db)
    assert con.execute("SELECT offset_bytes FROM ingest_status WHERE source_id = 1").fetchall()[0][0] \
        == log.stat().st_size
    con.close()
    # rotated while down: the old file got two more lines before logrotate moved it; a new file starts
    _append(log, range(25, 27))
    log.rename(tmp_path / "gateway.jsonl.1")
    _append(log, range(27, 30))
    with serving(db) as (_, client):
        wait_until(lambda: requests_seen(client) == 30, timeout=60, message="the old file's rest and the new file")
        _append(log, range(30, 32))                     # and the new file is followed on
        wait_until(lambda: requests_seen(client) == 32, timeout=60)
    assert stored_ids(db) == sorted(f"r{i}" for i in range(32))


def test_kill_9_mid_stream_loses_nothing_and_duplicates_nothing(tmp_path):
    db, log = str(tmp_path / "s.duckdb"), tmp_path / "gateway.jsonl"
    assert cli("serve-ingest", "--add-follow", str(log), db=db).returncode == 0
    with serving(db) as (proc, client):
        _append(log, range(0, 20))
        wait_until(lambda: requests_seen(client) == 20, timeout=60)
        for i in range(20, 120, 20):
            _append(log, range(i, i + 20))
        proc.kill()                                     # kill -9 with lines still to load, or mid-load
        proc.wait()
    _append(log, range(120, 200))
    assert service.control_for(db) is None              # its sidecar is stale: the pid is gone
    with serving(db) as (_, client):
        wait_until(lambda: requests_seen(client) == 200, timeout=60)
    ids = stored_ids(db)
    assert len(ids) == len(set(ids)) == 200


def test_watched_folder_loads_each_new_file_once(tmp_path):
    db, folder = str(tmp_path / "s.duckdb"), tmp_path / "drop"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(_line(i) for i in range(0, 7)))
    (folder / "notes.txt").write_text("not a log\n")
    assert cli("serve-ingest", "--add-watch", str(folder), "--glob", "*.jsonl", db=db).returncode == 0
    with serving(db) as (_, client):
        wait_until(lambda: requests_seen(client) == 7, timeout=60)
        (folder / "b.jsonl").write_text("".join(_line(i) for i in range(7, 10)))
        wait_until(lambda: requests_seen(client) == 10, timeout=60)
        (folder / "copy-of-a.jsonl").write_bytes((folder / "a.jsonl").read_bytes())
        wait_until(lambda: "3 files seen" in status_of(client, 1)["state"], timeout=60)
        assert requests_seen(client) == 10
    con = store.connect(db)
    batches = con.execute("SELECT file_name, rows_ingested FROM batches ORDER BY batch_id").fetchall()
    seen = con.execute("SELECT path FROM ingest_files ORDER BY path").fetchall()
    con.close()
    assert [b for b in batches if b[1]] == [("a.jsonl", 7), ("b.jsonl", 3)]
    assert [Path(p).name for (p,) in seen] == ["a.jsonl", "b.jsonl", "copy-of-a.jsonl"]


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_an_otlp_port_that_is_no_tcp_port_is_refused_in_a_sentence(tmp_path, port, capsys):
    """``serve-ingest --otlp-port 70000`` stopped in bind() with OverflowError's traceback (the dashboard's
    setting was checked; the flag was not). Refused before the store is opened."""
    from finops.cli import main
    db = tmp_path / "s.duckdb"
    assert main(["serve-ingest", "--db", str(db), "--otlp-port", port]) == 1
    assert capsys.readouterr().err == "error: the OTLP port is a number from 1 to 65535 (0: off)\n"
    assert not db.exists()


def test_only_configured_paths_can_be_followed(tmp_path):
    con = store.connect(str(tmp_path / "s.duckdb"))
    log = tmp_path / "gateway.jsonl"
    log.write_text(_line(1))
    engineer = access.Access("engineer", user="eng@example.com")
    with access.acting(engineer), pytest.raises(access.AccessDenied, match="not a log an admin configured"):
        service.follow_path(con, log)
    with access.acting(engineer), pytest.raises(access.AccessDenied, match="may not change the store's settings"):
        service.add_source(con, "follow", str(log))
    with access.acting(access.Access("admin", user="ada")):
        added = service.add_source(con, "follow", str(log))
    with access.acting(engineer):
        assert service.set_enabled(con, added.id, False).enabled is False
        assert service.follow_path(con, log).enabled is True           # configured: the engineer may resume it
    with access.acting(access.Access("viewer", user="vic")), pytest.raises(access.AccessDenied):
        service.set_enabled(con, added.id, False)
    with pytest.raises(service.InputError, match="NAME of an environment variable"):
        service.add_source(con, "pull-litellm", credential="postgresql://u:secret@db/litellm")
    con.close()


@pytest.fixture()
def vllm_server():
    prometheus_client = pytest.importorskip("prometheus_client")
    reg = prometheus_client.CollectorRegistry()
    g = {"registry": reg, "labelnames": ["model_name", "engine"]}
    prometheus_client.Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", **g
                            ).labels("llama-70b", "0").set(4)
    prometheus_client.Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", **g
                            ).labels("llama-70b", "0").set(2)
    port = free_port()
    server, thread = prometheus_client.start_http_server(port, addr="127.0.0.1", registry=reg)
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        server.shutdown()
        thread.join()


def test_scheduled_scrape_and_a_failing_source_that_stops_nothing(tmp_path, vllm_server):
    db, log = str(tmp_path / "s.duckdb"), tmp_path / "gateway.jsonl"
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    assert cli("serve-ingest", "--add-scrape", "vllm", "--url", dead, "--every", "1", db=db).returncode == 0
    assert cli("serve-ingest", "--add-scrape", "vllm", "--url", vllm_server, "--replica", "gpu-a", "--every", "1",
               db=db).returncode == 0
    assert cli("serve-ingest", "--add-pull", "litellm", "--dsn-env", "FINOPS_TEST_UNSET_DSN", db=db).returncode == 0
    assert cli("serve-ingest", "--add-follow", str(log), db=db).returncode == 0
    _append(log, range(0, 4))
    with serving(db) as (_, client):
        wait_until(lambda: requests_seen(client) == 4, timeout=60, message="the followed log despite the failures")
        wait_until(lambda: status_of(client, 2)["rows_total"] >= 3 * 2, timeout=60, message="three scrapes")
        failing, pull = status_of(client, 1), status_of(client, 3)
    assert failing["state"] == "failing" and "could not reach 127.0.0.1" in failing["last_error"]
    assert "FINOPS_TEST_UNSET_DSN is not set" in pull["last_error"] and pull["last_ok"] is None
    con = store.connect(db)
    scrapes = [r[0] for r in con.execute("SELECT DISTINCT ts FROM engine_metrics WHERE replica = 'gpu-a' "
                                         "ORDER BY ts").fetchall()]
    values = dict(con.execute("SELECT metric, max(value) FROM engine_metrics GROUP BY 1").fetchall())
    con.close()
    assert len(scrapes) >= 3
    # never sooner than its schedule: consecutive scrapes at least --every 1 s apart
    assert min((b - a).total_seconds() for a, b in zip(scrapes, scrapes[1:], strict=False)) >= 1.0
    assert values == {"vllm:num_requests_waiting": 4.0, "vllm:num_requests_running": 2.0}
    listed = cli("serve-ingest", "--list", db=db)
    assert listed.returncode == 0 and "postgresql" not in listed.stdout and "FINOPS_TEST_UNSET_DSN" in listed.stdout


def test_cli_ingest_and_report_while_the_store_is_held(tmp_path):
    db = str(tmp_path / "s.duckdb")
    data = tmp_path / "batch.jsonl"
    data.write_text("".join(_line(i, "m-large" if i % 3 == 0 else "m-small") for i in range(12))
                    + '{"request_id": "bad", "ts": "not a time", "model": "m"}\n')
    direct_db = str(tmp_path / "direct.duckdb")
    direct = cli("ingest", str(data), db=direct_db)
    direct_report = cli("report", "--json", db=direct_db)
    with serving(db) as (proc, _):
        held = cli("ingest", str(data), db=db)
        assert held.returncode == 0, held.stderr
        assert held.stdout == direct.stdout == \
            "batch.jsonl [canonical]: 13 read, 12 ingested, 1 rejected, 0 duplicates skipped\n"
        assert held.stderr == direct.stderr and "rejected batch.jsonl row 13" in held.stderr
        report = cli("report", "--json", db=db)
        assert report.returncode == 0, report.stderr
        assert report.stdout == direct_report.stdout and report.stderr == direct_report.stderr
        assert "warning: no price for m-small (8 requests)" in report.stderr
        rows = {r["model"]: r for r in json.loads(report.stdout)}
        assert {m: (r["requests"], r["input_tokens"]) for m, r in rows.items()} == {
            "m-large": (4, sum(100 + i for i in (0, 3, 6, 9))),
            "m-small": (8, sum(100 + i for i in range(12) if i % 3))}
        again = cli("ingest", str(data), "--json", db=db)
        assert again.returncode == 0 and json.loads(again.stdout)["rows_ingested"] == 0
        missing = cli("ingest", str(tmp_path / "nope.jsonl"), db=db)
        direct_missing = cli("ingest", str(tmp_path / "nope.jsonl"), db=direct_db)
        assert (missing.returncode, missing.stderr) == (direct_missing.returncode, direct_missing.stderr) \
            == (1, f"error: file {tmp_path / 'nope.jsonl'}: no such file\n")
        bad_by = cli("report", "--json", "--by", "colour", db=db)
        assert bad_by.returncode == cli("report", "--json", "--by", "colour", db=direct_db).returncode == 1
        sidecar = service.sidecar_path(db)
        assert sidecar.stat().st_mode & 0o777 == 0o600
        assert json.loads(sidecar.read_text())["pid"] == proc.pid
    assert not service.sidecar_path(db).exists()       # removed on a clean exit
    # without a live ingester the held-store message is as before
    assert service.control_for(db) is None


# ---------------------------------------------------------------- OTLP/HTTP through the ingester

def _genai_spans(n: int, first: int = 0) -> list:
    """n GenAI chat spans (the attributes opentelemetry-instrumentation-openai-v2 writes), finished and
    captured by the official SDK, ready for its OTLP/HTTP exporter."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot", "tenant.id": "acme"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")
    t0 = 1_764_000_000_000_000_000
    for i in range(first, first + n):
        span = tracer.start_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, start_time=t0 + i * 1_000_000, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": 1000 + i,
            "gen_ai.usage.output_tokens": 10})
        span.end(end_time=t0 + i * 1_000_000 + 250_000_000)
    provider.shutdown()
    return list(memory.get_finished_spans())


def _span_id(span) -> str:
    return f"{span.context.trace_id:032x}:{span.context.span_id:016x}"


@pytest.fixture()
def otlp_ready():
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    if service._otlp_module() is None:
        pytest.skip("this build has no OTLP receiver (finops.ingest.otlp)")


def test_sdk_exporter_spans_reach_the_store_and_kill_9_loses_no_acknowledged_span(tmp_path, otlp_ready):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    db, port = str(tmp_path / "s.duckdb"), free_port()
    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    spans = _genai_spans(400)
    acked: list[str] = []
    with serving(db, "--otlp-port", str(port), "--otlp-tenant-field", "tenant.id") as (proc, client):
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=5)
        wait_until(lambda: status_of_otlp(client), timeout=60, message="the receiver listening")
        assert exporter.export(spans[:10]) is SpanExportResult.SUCCESS
        acked += [_span_id(s) for s in spans[:10]]
        wait_until(lambda: requests_seen(client) == 10, timeout=60, message="the first spans in the store")
        out, _ = client.command("report", ["--json", "--by", "model,tenant"])
        assert [(r["model"], r["tenant"], r["requests"], r["input_tokens"]) for r in json.loads(out)] == [
            ("gpt-4o-mini-2024-07-18", "acme", 10, sum(1000 + i for i in range(10)))]

        def stream() -> None:                        # batches of 10 until the ingester is gone
            for k in range(10, 400, 10):
                if exporter.export(spans[k:k + 10]) is not SpanExportResult.SUCCESS:
                    return
                acked.extend(_span_id(s) for s in spans[k:k + 10])

        sender = threading.Thread(target=stream)
        sender.start()
        wait_until(lambda: len(acked) >= 100, timeout=60, message="100 acknowledged spans")
        proc.kill()                                  # kill -9 mid-stream: the exporter is still posting
        proc.wait()
        sender.join()
        exporter.shutdown()
    assert 10 < len(acked) < 400
    with serving(db, "--otlp-port", str(port)) as (_, client):     # the restart drains what was spooled
        wait_until(lambda: requests_seen(client) >= len(acked), timeout=60, message="every acknowledged span")
    stored = stored_ids(db)
    assert set(acked) <= set(stored) and len(stored) == len(set(stored))


def status_of_otlp(client) -> bool:
    return any(s["id"] == service.OTLP_ID and s["state"].startswith("listening") for s in client.status()["sources"])


# ---------------------------------------------------------------- one tick at a time, in this process

def _ingester(con):
    ing = service.Ingester(con, None, control=False)
    ing.wait_scheduled = True        # tick() returns once its pulls and scrapes ended
    return ing


def test_a_truncated_log_is_read_again_from_the_start_without_duplicates(tmp_path):
    con = store.connect(":memory:")
    log = tmp_path / "gateway.jsonl"
    _append(log, range(0, 6))
    src = service.add_source(con, "follow", str(log))
    ing = _ingester(con)
    assert ing.tick().rows == {src.id: 6}
    log.write_text(_line(2) + _line(6))           # copytruncate: the same file, shorter, starting again
    assert ing.tick().rows == {src.id: 1}
    assert ing.tick().rows == {src.id: 0}
    assert sorted(stored_ids_of(con)) == sorted(f"r{i}" for i in range(7))
    offset = con.execute("SELECT offset_bytes FROM ingest_status WHERE source_id = ?", [src.id]).fetchall()[0][0]
    assert offset == log.stat().st_size == len(_line(2) + _line(6))


def stored_ids_of(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT request_id FROM requests").fetchall()]


def test_a_watched_file_still_changing_waits_until_it_settled(tmp_path):
    con = store.connect(":memory:")
    folder = tmp_path / "drop"
    folder.mkdir()
    src = service.add_source(con, "watch", str(folder), pattern="*.jsonl")
    ing = _ingester(con)
    part = folder / "a.jsonl"
    part.write_text("".join(_line(i) for i in range(3)))        # just written: not settled yet
    assert ing.tick().rows == {src.id: 0}
    old = part.stat().st_mtime - 2 * service.SETTLE_S
    os.utime(part, (old, old))
    assert ing.tick().rows == {src.id: 3}
    assert ing.tick().rows == {src.id: 0}                        # seen: not hashed or loaded again
    (folder / "bad.jsonl").write_bytes(b"\x00\x01 not a log\n")
    os.utime(folder / "bad.jsonl", (old, old))
    result = ing.tick()
    assert "bad.jsonl" in result.errors[src.id] and store.row_count(con) == 3
    assert src.id not in ing.tick().errors                       # refused once; tried again only if it changes


def test_a_credential_is_stored_by_name_only_and_never_shown(tmp_path, monkeypatch):
    con = store.connect(":memory:")
    monkeypatch.setenv("FINOPS_TEST_DSN", f"postgresql://lite:hunter2-secret@127.0.0.1:{free_port()}/litellm")
    src = service.add_source(con, "pull-litellm", credential="$FINOPS_TEST_DSN", every_s=60)
    result = _ingester(con).tick()
    pytest.importorskip("psycopg")
    error = result.errors[src.id]
    assert "could not connect to PostgreSQL at lite@127.0.0.1" in error and "hunter2" not in error
    everything = json.dumps([list(map(str, r)) for t in ("ingest_sources", "ingest_status", "settings")
                             for r in con.execute(f"SELECT * FROM {t}").fetchall()])
    assert "FINOPS_TEST_DSN" in everything and "hunter2" not in everything
    assert "hunter2" not in service.status_frame(con).to_string()
    assert service.mask_url("http://u:pw@gpu-a:8000/metrics?token=t") == "http://gpu-a:8000/metrics"
    with pytest.raises(service.InputError, match="without a user or password"):
        service.add_source(con, "scrape-vllm", "http://u:pw@gpu-a:8000/metrics")


def test_the_control_endpoint_wants_its_token(tmp_path):
    import http.client

    db = str(tmp_path / "s.duckdb")
    con = store.connect(db)
    ing = service.Ingester(con, db).start()
    try:
        client = service.control_for(db)
        assert client.status()["pid"] == os.getpid()
        for token in ("", "Bearer wrong"):
            conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=10)
            conn.request("POST", "/command", body=b'{"name": "report", "argv": []}',
                         headers={"Authorization": token} if token else {})
            assert conn.getresponse().status == 401
            conn.close()
        with pytest.raises(service.InputError, match="does not run 'ingest-everything'"):
            client.command("ingest-everything", [])
        conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=10)    # over the cap: refused unread
        conn.putrequest("POST", "/ingest")
        conn.putheader("Authorization", f"Bearer {client.token}")
        conn.putheader("Content-Length", str(service.CONTROL_MAX_BYTES + 1))
        conn.putheader("X-Finops-Name", "huge.jsonl")
        conn.endheaders()
        resp = conn.getresponse()
        assert resp.status == 400 and "over the ingester's limit of 200 MiB" in json.loads(resp.read())["error"]
        conn.close()
        assert store.row_count(con) == 0
    finally:
        ing.stop()
        con.close()
    assert service.control_for(db) is None


def test_the_dashboards_ingester_takes_its_otlp_port_from_the_store(tmp_path, otlp_ready):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    db = str(tmp_path / "s.duckdb")
    con = store.connect(db)
    ing = service.Ingester(con, db, otlp_port=None, control=False)     # None: the store's setting
    assert ing.tick().rows == {} and ing.receiver is None               # off by default
    with access.acting(access.Access("engineer", user="eng")), pytest.raises(access.AccessDenied):
        service.set_otlp_port(con, 4318)
    port = free_port()
    service.set_otlp_port(con, port)
    try:
        ing.tick()
        assert ing.receiver is not None and ing.receiver.port == port
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=10)
        spans = _genai_spans(5)
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert ing.tick().rows == {service.OTLP_ID: 5}
        assert sorted(stored_ids_of(con)) == sorted(_span_id(s) for s in spans)
        assert ing.tick().rows == {service.OTLP_ID: 0}
        service.set_otlp_port(con, 0)
        ing.tick()
        assert ing.receiver is None
    finally:
        ing.stop()
        con.close()


def test_a_scheduled_langfuse_pull_reads_its_keys_by_name(tmp_path, monkeypatch):
    """A Langfuse stand-in on 127.0.0.1 (stdlib HTTP) answering with a real v2 observations page
    (tests/data/langfuse/api_v2_observations.json) to the keys the environment holds, and 401 otherwise."""
    import base64
    import http.server

    page = (ROOT / "tests" / "data" / "langfuse" / "api_v2_observations.json").read_bytes()
    expected_calls = sum(o["type"] in ("GENERATION", "EMBEDDING") for o in json.loads(page)["data"])
    seen_auth = []

    class Langfuse(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            seen_auth.append(self.headers.get("Authorization"))
            ok = self.headers.get("Authorization") == "Basic " + base64.b64encode(b"pk-lf-1:sk-lf-2").decode()
            body = (page if self.path.startswith("/api/public/v2/observations") else
                    b'{"data": [], "meta": {"totalPages": 1}}') if ok else b'{"message": "unauthorized"}'
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Langfuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        con = store.connect(":memory:")
        monkeypatch.setenv("LF_PUB", "pk-lf-1")
        monkeypatch.setenv("LF_SEC", "sk-lf-2")
        src = service.add_source(con, "pull-langfuse", f"http://127.0.0.1:{server.server_port}",
                                 credential="LF_PUB,LF_SEC", every_s=1)
        ing = _ingester(con)
        assert ing.tick().rows == {src.id: expected_calls}
        assert ing.tick().rows == {}                            # not due yet: every 1 s from the last run
        frame = service.status_frame(con)
        assert "sk-lf-2" not in frame.to_string() and "pk-lf-1" not in frame.to_string()
        assert store.row_count(con) == expected_calls
        monkeypatch.setenv("LF_SEC", "wrong")
        later = service._now() + timedelta(seconds=2)
        result = ing.tick(now=later)
        assert "401" in result.errors[src.id] and "wrong" not in result.errors[src.id]
        assert store.row_count(con) == expected_calls
    finally:
        server.shutdown()
        server.server_close()
    assert seen_auth and all(a.startswith("Basic ") for a in seen_auth)


def test_a_source_it_cannot_read_is_its_error_in_words(tmp_path):
    con = store.connect(":memory:")
    odd = tmp_path / "gateway.jsonl"
    src = service.add_source(con, "follow", str(odd))
    odd.mkdir()       # then a folder where the log should be (adding one is refused): open() fails (OSError)
    assert _ingester(con).tick().errors == {src.id: "cannot read gateway.jsonl: Is a directory"}
    assert service.status_frame(con).loc[0, "state"] == "failing"


@pytest.mark.parametrize("flag, given, message", [
    # a folder to follow was added ("added source 1: follow ...", exit 0) and failed at every tick after
    ("--add-follow", "folder", "is a folder: watch it (a watch source), or follow one of its files"),
    # a file to watch was "no such folder", though it is there
    ("--add-watch", "file.jsonl", "is a file: follow it (a follow source), or watch its folder"),
])
def test_a_source_of_the_wrong_kind_is_refused_saying_which_it_is(tmp_path, capsys, flag, given, message):
    from finops.cli import main
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.jsonl").write_text("")
    db = str(tmp_path / "s.duckdb")
    assert main(["serve-ingest", "--db", db, flag, str(tmp_path / given)]) == 1
    assert capsys.readouterr().err == f"error: file {tmp_path / given}: {message}\n"
    assert main(["serve-ingest", "--db", db, "--list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
