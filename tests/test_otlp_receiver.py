"""The OTLP/HTTP receiver (finops.ingest.otlp): the real OpenTelemetry SDK exporter sends GenAI spans to it on
127.0.0.1, drain loads them through the otel adapter; OTLP/JSON, gzip, refusals, idempotent drains, and a
receiver killed with SIGKILL mid-stream losing no acknowledged span. Nothing is mocked."""
from __future__ import annotations

import base64
import copy
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from datetime import datetime, timedelta

import httpx
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import SpanKind

from finops import access, store
from finops.ingest import IngestOptions, ingest_path, otlp
from helpers import DATA, ROOT, wait_until

T0_NS = 1_764_590_400_000_000_000           # 2025-12-01 12:00:00 UTC
PROTO = {"Content-Type": "application/x-protobuf"}
JSONH = {"Content-Type": "application/json"}


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


@pytest.fixture()
def receiver(tmp_path):
    r = otlp.start_receiver(tmp_path / "spool", port=0)
    yield r
    r.stop()


def _rows(con, sql, params=None):
    return con.execute(sql, params or []).fetchall()


def _spooled_bytes(spool) -> int:
    return sum(p.stat().st_size for p in spool.iterdir() if p.suffix == ".jsonl")


# the attributes the official OpenAI instrumentation (opentelemetry-instrumentation-openai-v2) writes,
# named as in tests/data/otel_genai_spans.jsonl
def _genai_attrs(i: int) -> dict:
    return {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.usage.input_tokens": 1000 + i, "gen_ai.usage.output_tokens": 10 + i,
            "server.address": "api.openai.com"}


def _send_with_sdk(endpoint: str, n: int, processor=SimpleSpanProcessor, **exporter_kw) -> list[tuple]:
    """n chat spans under one HTTP server span, through the SDK's OTLPSpanExporter (protobuf); returns
    (request_id, start, end, input, output) of each chat span."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot", "tenant.id": "acme"}))
    exporter = OTLPSpanExporter(endpoint=endpoint, **exporter_kw)
    provider.add_span_processor(processor(exporter))
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")
    sent = []
    with tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER, start_time=T0_NS,
                                      attributes={"http.route": "/chat"}) as parent:
        for i in range(n):
            start, end = T0_NS + i * 1_000_000_000, T0_NS + i * 1_000_000_000 + 250_000_000 + i * 1000
            span = tracer.start_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, start_time=start,
                                     attributes=_genai_attrs(i))
            span.end(end_time=end)
            ctx = span.get_span_context()
            sent.append((f"{ctx.trace_id:032x}:{ctx.span_id:016x}", start, end, 1000 + i, 10 + i))
        parent.end(end_time=T0_NS + n * 1_000_000_000)
    assert provider.force_flush(30_000)
    provider.shutdown()
    return sent


def _expected(sent):
    """The rows the spans sent must become: ts is the start (UTC, to the microsecond), total_ms end - start."""
    return sorted((rid, datetime(1970, 1, 1) + timedelta(microseconds=start // 1000), "acme",
                   "gpt-4o-mini-2024-07-18", "openai", inp, out, (end - start) / 1e6, "ok")
                  for rid, start, end, inp, out in sent)


def _stored(con):
    return _rows(con, "SELECT request_id, ts, tenant, model, provider, input_tokens, output_tokens, total_ms, "
                      "status FROM requests ORDER BY request_id")


TENANT = IngestOptions(tenant_field="tenant.id")


# ---------------------------------------------------------------- the SDK's exporter, protobuf

def test_sdk_exporter_spans_reach_the_store(receiver, con):
    sent = _send_with_sdk(receiver.endpoint, 3)
    assert receiver.stats.requests == 4 and receiver.stats.spans == 4     # SimpleSpanProcessor: one per span
    assert otlp.drain(con, receiver.spool_dir, TENANT) == 3              # the HTTP server span is no model call
    assert _stored(con) == _expected(sent)
    # timestamps to the microsecond: 12:00:00, 12:00:01, 12:00:02 UTC
    assert sorted(r[1] for r in _stored(con)) == [datetime(2025, 12, 1, 12, 0, i) for i in range(3)]
    assert sorted(r[7] for r in _stored(con)) == [250.0, 250.001, 250.002]
    assert not list(receiver.spool_dir.glob("seg-*.jsonl"))             # loaded segments are deleted
    assert otlp.drain(con, receiver.spool_dir, TENANT) == 0


def test_batch_processor_and_gzip(receiver, con):
    sent = _send_with_sdk(receiver.endpoint, 120, BatchSpanProcessor, compression=Compression.Gzip)
    assert receiver.stats.spans == 121
    assert otlp.drain(con, receiver.spool_dir, TENANT) == 120
    assert _stored(con) == _expected(sent)
    assert _rows(con, "SELECT sum(input_tokens), sum(output_tokens) FROM requests") == [
        (sum(1000 + i for i in range(120)), sum(10 + i for i in range(120)))]


def test_spooled_line_is_the_file_exporters_otlp_json(receiver):
    _send_with_sdk(receiver.endpoint, 1)
    line = (receiver.spool_dir / "active.jsonl").read_text().splitlines()[0]
    doc = json.loads(line)
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and int(span["traceId"], 16)           # hex, not base64
    assert len(span["spanId"]) == 16 and int(span["spanId"], 16)
    assert span["kind"] == 3 and span["startTimeUnixNano"] == str(T0_NS)    # enums as ints, int64 as strings
    attrs = {a["key"]: a["value"] for a in span["attributes"]}
    assert attrs["gen_ai.usage.input_tokens"] == {"intValue": "1000"}


# ---------------------------------------------------------------- the committed fixture, both encodings

def _fixture_docs():
    return [json.loads(line) for line in (DATA / "otel_genai_spans.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("encoding", ["json", "protobuf", "protobuf+gzip"])
def test_fixture_through_the_receiver_loads_as_the_file_does(receiver, con, encoding):
    """Each line of tests/data/otel_genai_spans.jsonl posted to the receiver loads the same rows as the
    file loaded directly (the otel adapter's own test pins those)."""
    with httpx.Client() as client:
        for doc in _fixture_docs():
            if encoding == "json":
                resp = client.post(receiver.endpoint, content=json.dumps(doc).encode(), headers=JSONH)
                assert resp.headers["content-type"] == "application/json" and resp.json() == {}
            else:
                msg = json_format.ParseDict(_to_b64_ids(doc), ExportTraceServiceRequest())
                body, headers = msg.SerializeToString(), dict(PROTO)
                if encoding.endswith("gzip"):
                    body, headers = gzip.compress(body), {**PROTO, "Content-Encoding": "gzip"}
                resp = client.post(receiver.endpoint, content=body, headers=headers)
                assert resp.headers["content-type"] == "application/x-protobuf" and resp.content == b""
            assert resp.status_code == 200
    assert otlp.drain(con, receiver.spool_dir, TENANT) == 5
    ref = store.connect(":memory:")
    ingest_path(ref, DATA / "otel_genai_spans.jsonl", TENANT)
    cols = ("SELECT request_id, ts, tenant, model, provider, input_tokens, output_tokens, cached_input_tokens, "
            "total_ms, status, error_type, attrs FROM requests ORDER BY request_id")
    got, want = _rows(con, cols), _rows(ref, cols)
    assert len(got) == 5 and got == want
    ref.close()


def _to_b64_ids(doc):
    doc = copy.deepcopy(doc)
    otlp._walk_ids(doc, lambda v, k: base64.b64encode(bytes.fromhex(v)).decode())
    return doc


# ---------------------------------------------------------------- refusals: nothing spooled

def test_malformed_protobuf_is_400_with_a_status(receiver):
    resp = httpx.post(receiver.endpoint, content=b"\xff\xff\xff\xff not a protobuf", headers=PROTO)
    assert resp.status_code == 400
    status = status_pb2.Status.FromString(resp.content)
    assert "ExportTraceServiceRequest" in status.message and status.code == 3
    assert _spooled_bytes(receiver.spool_dir) == 0 and receiver.stats.rejected_requests == 1


@pytest.mark.parametrize("body, says", [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "00"}]}]}]}).encode(),
     "not hex"),
    (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}).encode(),
     "startTimeUnixNano"),
    (b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "not JSON"),      # nested past recursion
])
def test_malformed_json_is_400(receiver, body, says):
    resp = httpx.post(receiver.endpoint, content=body, headers=JSONH)
    assert resp.status_code == 400 and says in resp.json()["message"]
    assert _spooled_bytes(receiver.spool_dir) == 0


def test_too_large_is_413_before_and_after_decompression(tmp_path):
    with otlp.start_receiver(tmp_path / "spool", port=0, max_body_bytes=10_000) as r:
        resp = httpx.post(r.endpoint, content=b"\0" * 10_001, headers=PROTO)
        assert resp.status_code == 413
        bomb = gzip.compress(b"\0" * 1_000_000)          # ~1 kB that expands to 1 MB
        assert len(bomb) < 10_000
        resp = httpx.post(r.endpoint, content=bomb, headers={**PROTO, "Content-Encoding": "gzip"})
        assert resp.status_code == 413 and "expands" in status_pb2.Status.FromString(resp.content).message
        assert _spooled_bytes(r.spool_dir) == 0


def test_other_types_paths_and_methods(receiver):
    assert httpx.post(receiver.endpoint, content=b"x", headers={"Content-Type": "text/plain"}).status_code == 415
    assert httpx.post(receiver.endpoint, content=b"x", headers={**PROTO, "Content-Encoding": "br"}).status_code == 415
    assert httpx.post(receiver.endpoint.replace("traces", "metrics"), content=b"", headers=PROTO).status_code == 404
    resp = httpx.get(receiver.endpoint)
    assert resp.status_code == 405 and resp.headers["allow"] == "POST"
    # an empty request is valid OTLP: 200, nothing spooled
    assert httpx.post(receiver.endpoint, content=b"", headers=PROTO).status_code == 200
    assert _spooled_bytes(receiver.spool_dir) == 0


def test_bearer_token(tmp_path, con):
    with otlp.start_receiver(tmp_path / "spool", port=0, token="s3cret") as r:
        assert httpx.post(r.endpoint, content=b"", headers=PROTO).status_code == 401
        assert httpx.post(r.endpoint, content=b"", headers={**PROTO, "Authorization": "Bearer nope"}).status_code == 401
        sent = _send_with_sdk(r.endpoint, 2, headers={"Authorization": "Bearer s3cret"})
        assert otlp.drain(con, r.spool_dir, TENANT) == 2
        assert _stored(con) == _expected(sent)


def test_one_receiver_per_spool(receiver):
    with pytest.raises(otlp.InputError, match="another OTLP receiver"):
        otlp.start_receiver(receiver.spool_dir, port=0)


# ---------------------------------------------------------------- drain: idempotent, rotation, partial lines, rejects

def _request(ids: range, trace: int = 1) -> bytes:
    """An ExportTraceServiceRequest (protobuf) with one chat span per id: span id = the id."""
    doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "tenant.id", "value": {"stringValue": "acme"}}]},
                              "scopeSpans": [{"scope": {"name": "test"}, "spans": [
                                  {"traceId": f"{trace:032x}", "spanId": f"{i:016x}", "name": "chat", "kind": 3,
                                   "startTimeUnixNano": str(T0_NS + i * 1_000_000),
                                   "endTimeUnixNano": str(T0_NS + i * 1_000_000 + 500_000),
                                   "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int)
                                                   else {"stringValue": v}} for k, v in _genai_attrs(i).items()]}
                                  for i in ids]}]}]}
    return json_format.ParseDict(_to_b64_ids(doc), ExportTraceServiceRequest()).SerializeToString()


def test_drain_rotates_the_active_segment_and_loads_nothing_twice(receiver, con):
    with httpx.Client() as client:
        assert client.post(receiver.endpoint, content=_request(range(0, 10)), headers=PROTO).status_code == 200
        assert otlp.drain(con, receiver.spool_dir) == 10
        # the writer notices the rename and starts a new segment
        assert client.post(receiver.endpoint, content=_request(range(10, 25)), headers=PROTO).status_code == 200
        # the exporter retried a request that had been acknowledged: the same spans again
        assert client.post(receiver.endpoint, content=_request(range(20, 30)), headers=PROTO).status_code == 200
    assert otlp.drain(con, receiver.spool_dir) == 20
    assert _rows(con, "SELECT count(*), count(DISTINCT request_id), sum(input_tokens) FROM requests") == [
        (30, 30, sum(1000 + i for i in range(30)))]
    assert otlp.drain(con, receiver.spool_dir) == 0


def test_crash_between_load_and_delete_adds_nothing(receiver, con, tmp_path):
    assert httpx.post(receiver.endpoint, content=_request(range(7)), headers=PROTO).status_code == 200
    with otlp._spool_lock(receiver.spool_dir):
        seg = otlp._rotate_active(receiver.spool_dir)
    kept = seg.read_bytes()
    assert otlp.drain(con, receiver.spool_dir) == 7
    seg.write_bytes(kept)                                  # as if drain died before its unlink
    assert otlp.drain(con, receiver.spool_dir) == 0
    assert not seg.exists()
    # the loader skipped the file by its sha256 (the same bytes read the same way): no second batch
    assert _rows(con, "SELECT count(*), count(DISTINCT sha256), sum(rows_ingested) FROM batches") == [(1, 1, 7)]
    assert _rows(con, "SELECT count(*) FROM requests") == [(7,)]


@pytest.mark.parametrize("tail", ["end of file", "zeros written ahead", "torn write into the zeros"])
def test_a_partial_last_line_is_dropped(tmp_path, con, tail):
    spool = tmp_path / "spool"
    spool.mkdir()
    good = otlp.spool_lines(otlp.parse_protobuf(_request(range(3))))
    cut = otlp.spool_lines(otlp.parse_protobuf(_request(range(3, 6))))
    text = good + cut[: len(cut) // 2]                                       # killed mid-write
    if tail == "zeros written ahead":
        text += bytes(50_000)
    elif tail == "torn write into the zeros":                               # a later page of it landed, not this one
        text += bytes(4096) + cut[len(cut) // 2:] + bytes(10_000)
    (spool / "active.jsonl").write_bytes(text)
    assert otlp.drain(con, spool) == 3
    assert _rows(con, "SELECT request_id FROM requests ORDER BY 1") == [(f"{1:032x}:{i:016x}",) for i in range(3)]
    assert list(spool.glob("*.jsonl")) == []


def test_a_segment_the_adapter_refuses_is_moved_aside(tmp_path, con):
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "seg-1-1.jsonl").write_bytes(b'{"resourceSpans": [}\n')
    only_http = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01" * 16, "spanId": "02" * 8,
                                                               "name": "GET /", "kind": 2}]}]}]}
    (spool / "seg-2-1.jsonl").write_bytes(otlp.spool_lines(json_format.ParseDict(_to_b64_ids(only_http),
                                                                                  ExportTraceServiceRequest())))
    (spool / "seg-3-1.jsonl").write_bytes(otlp.spool_lines(otlp.parse_protobuf(_request(range(2)))))
    assert otlp.drain(con, spool) == 2
    assert sorted(p.name for p in (spool / "rejected").iterdir()) == ["seg-1-1.jsonl", "seg-1-1.jsonl.reason.txt"]
    assert "seg-1-1.jsonl" in (spool / "rejected" / "seg-1-1.jsonl.reason.txt").read_text()
    assert list(spool.glob("seg-*.jsonl")) == []         # no GenAI spans: nothing to load, deleted
    assert otlp.drain(con, spool) == 0


def test_a_large_request_is_split_into_lines_the_loader_takes():
    req = otlp.parse_protobuf(_request(range(40)))
    doc = otlp.request_to_otlp_json(req)
    whole = otlp.spool_lines(req)
    assert whole.count(b"\n") == 1
    split = otlp.spool_lines(req, max_line_bytes=4096)
    lines = split.splitlines()
    assert len(lines) > 5 and all(len(line) < 4096 for line in lines)
    spans = [s["spanId"] for line in lines for s in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert spans == [f"{i:016x}" for i in range(40)]
    assert all(json.loads(line)["resourceSpans"][0]["resource"] == doc["resourceSpans"][0]["resource"]
               for line in lines)
    with pytest.raises(otlp._BadRequest, match="over the 600"):
        otlp.spool_lines(req, max_line_bytes=600)         # a span alone is ~700 bytes


# ---------------------------------------------------------------- kill -9 mid-stream

RECEIVER_MAIN = ("import sys, time; from finops.ingest.otlp import start_receiver; "
                 "r = start_receiver(sys.argv[1], port=0); print(r.port, flush=True); time.sleep(3600)")


@pytest.mark.slow
def test_kill_9_mid_stream_loses_no_acknowledged_span(tmp_path, con):
    spool = tmp_path / "spool"
    proc = subprocess.Popen([sys.executable, "-c", RECEIVER_MAIN, str(spool)], cwd=ROOT, stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        port = int(proc.stdout.readline())
        url = f"http://127.0.0.1:{port}/v1/traces"
        acked: list[set[str]] = [set() for _ in range(4)]
        attempted = [0] * 4
        stop = threading.Event()

        def stream(k: int) -> None:
            with httpx.Client(timeout=10) as client:
                n = 0
                while not stop.is_set():
                    ids = range(n * 25, n * 25 + 25)
                    attempted[k] += 1
                    try:
                        resp = client.post(url, content=_request(ids, trace=k + 1), headers=PROTO)
                    except httpx.HTTPError:
                        return                      # the receiver is gone
                    if resp.status_code == 200:
                        acked[k].update(f"{k + 1:032x}:{i:016x}" for i in ids)
                    n += 1

        threads = [threading.Thread(target=stream, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        wait_until(lambda: sum(len(a) for a in acked) >= 2000, timeout=60, message="2,000 acknowledged spans")
        os.kill(proc.pid, signal.SIGKILL)           # mid-stream: the clients are still posting
        proc.wait()
        stop.set()
        for t in threads:
            t.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    every_acked = set().union(*acked)
    assert len(every_acked) >= 2000
    loaded = otlp.drain(con, spool)
    stored = {r[0] for r in _rows(con, "SELECT request_id FROM requests")}
    assert every_acked <= stored
    assert _rows(con, "SELECT count(*) - count(DISTINCT request_id) FROM requests") == [(0,)]
    assert loaded == len(stored)
    # only spans of requests that were sent can appear (at most the one in flight per client unacknowledged)
    assert len(stored) - len(every_acked) <= 4 * 25
    assert otlp.drain(con, spool) == 0
    # a receiver started again on the spool takes over from the killed one
    with otlp.start_receiver(spool, port=0) as r:
        assert httpx.post(r.endpoint, content=_request(range(5), trace=99), headers=PROTO).status_code == 200
    assert otlp.drain(con, spool) == 5


# ---------------------------------------------------------------- the converter against protobuf's own

def _reference_json(req: ExportTraceServiceRequest) -> dict:
    """protobuf's json_format with OTLP/JSON's hex ids: what request_to_otlp_json must equal."""
    doc = json_format.MessageToDict(req, use_integers_for_enums=True)
    otlp._walk_ids(doc, lambda v, k: base64.b64decode(v).hex())
    return doc


def _every_shape() -> ExportTraceServiceRequest:
    rich = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "x"}}],
                     "droppedAttributesCount": 2,
                     "entityRefs": [{"type": "service", "idKeys": ["service.name"], "schemaUrl": "s"}]},
        "schemaUrl": "https://opentelemetry.io/schemas/1.37.0",
        "scopeSpans": [{"scope": {"name": "s", "version": "1", "attributes": [{"key": "a", "value": {}}],
                                  "droppedAttributesCount": 1},
                        "schemaUrl": "u",
                        "spans": [{
                            "traceId": base64.b64encode(bytes(range(16))).decode(),
                            "spanId": base64.b64encode(bytes(range(8))).decode(),
                            "parentSpanId": base64.b64encode(b"\xff" * 8).decode(),
                            "traceState": "k=v", "flags": 257, "name": "chat", "kind": 3,
                            "startTimeUnixNano": "18446744073709551615", "endTimeUnixNano": "1",
                            "attributes": [
                                {"key": "s", "value": {"stringValue": "é\u0000\n"}},
                                {"key": "i", "value": {"intValue": "-9223372036854775808"}},
                                {"key": "d", "value": {"doubleValue": 0.1}},
                                {"key": "inf", "value": {"doubleValue": "Infinity"}},
                                {"key": "nan", "value": {"doubleValue": "NaN"}},
                                {"key": "b", "value": {"boolValue": False}},
                                {"key": "by", "value": {"bytesValue": base64.b64encode(b"\x00\x01").decode()}},
                                {"key": "arr", "value": {"arrayValue": {"values": [{"intValue": "1"}, {}]}}},
                                {"key": "empty", "value": {"arrayValue": {}}},
                                {"key": "kv", "value": {"kvlistValue": {"values": [
                                    {"key": "n", "value": {"kvlistValue": {}}}]}}},
                                {"key": "", "value": {"stringValue": "no key"}},
                                {"key": "novalue"},
                                {"keyStrindex": 3, "value": {"stringValueStrindex": 4}},
                            ],
                            "droppedAttributesCount": 1, "droppedEventsCount": 2, "droppedLinksCount": 3,
                            "events": [{"timeUnixNano": "5", "name": "e",
                                        "attributes": [{"key": "x", "value": {"intValue": "7"}}]}],
                            "links": [{"traceId": base64.b64encode(b"\x01" * 16).decode(),
                                       "spanId": base64.b64encode(b"\x02" * 8).decode(), "flags": 1,
                                       "traceState": "t", "attributes": [], "droppedAttributesCount": 4}],
                            "status": {"code": 2, "message": "Error code: 429"},
                        }, {}]}, {}]}, {}]}
    return json_format.ParseDict(rich, ExportTraceServiceRequest())


def test_the_converter_agrees_with_protobufs_json_format():
    cases = [_every_shape(), ExportTraceServiceRequest.FromString(_request(range(3)))]
    cases += [json_format.ParseDict(_to_b64_ids(doc), ExportTraceServiceRequest()) for doc in _fixture_docs()]
    for req in cases:
        ref = _reference_json(req)
        assert otlp.request_to_otlp_json(req) == ref
        # the text written directly is that JSON, byte for byte as json.dumps writes it
        assert otlp.request_to_line(req) == json.dumps(ref, separators=(",", ":")).encode() + b"\n"
    doc = otlp.request_to_otlp_json(cases[0])
    attrs = {a.get("key"): a.get("value") for a in doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]}
    assert attrs["inf"] == {"doubleValue": "Infinity"} and attrs["i"] == {"intValue": "-9223372036854775808"}
    line = otlp.spool_lines(cases[0])
    assert line.isascii() and b"\x00" not in line and line.count(b"\n") == 1
    # the spooled line parses back (OTLP/JSON -> protobuf) to the same request
    assert otlp.parse_json(line) == cases[0]


# ---------------------------------------------------------------- transport details, segments, rights

def test_chunked_body_and_missing_length(receiver, con):
    body = _request(range(4))
    resp = httpx.post(receiver.endpoint, content=iter([body[:100], body[100:]]), headers=PROTO)   # chunked
    assert resp.status_code == 200
    with socket.create_connection(("127.0.0.1", receiver.port)) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 411 ")
    assert otlp.drain(con, receiver.spool_dir) == 4


def test_segments_close_at_their_size_limit(tmp_path, con):
    r = otlp.Receiver(tmp_path / "spool", "127.0.0.1", 0, 16 << 20, None, segment_max_bytes=20_000)
    try:
        with httpx.Client() as client:
            for k in range(6):
                assert client.post(r.endpoint, content=_request(range(k * 20, k * 20 + 20)),
                                   headers=PROTO).status_code == 200
        assert len(list(r.spool_dir.glob("seg-*.jsonl"))) >= 2
    finally:
        r.stop()
    assert otlp.drain(con, r.spool_dir) == 120


def test_drain_needs_the_right_to_load_and_moves_nothing_without_it(receiver, con):
    assert httpx.post(receiver.endpoint, content=_request(range(3)), headers=PROTO).status_code == 200
    with access.acting(access.Access("viewer", user="ana")), pytest.raises(access.AccessDenied):
        otlp.drain(con, receiver.spool_dir)
    assert not (receiver.spool_dir / "rejected").exists() and _spooled_bytes(receiver.spool_dir) > 0
    assert otlp.drain(con, receiver.spool_dir) == 3


def test_stopped_receiver_refuses_rather_than_hangs(tmp_path):
    r = otlp.start_receiver(tmp_path / "spool", port=0)
    r.stop()
    assert r.spool.append(b"{}\n") == "the receiver is stopping"
    r.stop()                                           # a second stop does nothing
    with otlp.start_receiver(tmp_path / "spool", port=0):   # and the folder is free for the next receiver
        pass


def test_drains_while_clients_stream_load_every_span_once(receiver, con):
    """drain in a loop while three clients post: the rotation under the spool's lock neither loses an
    acknowledged span nor reads one twice."""
    acked: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def stream(k: int) -> None:
        with httpx.Client(timeout=30) as client:
            n = 0
            while not stop.is_set():
                ids = range(n * 10, n * 10 + 10)
                assert client.post(receiver.endpoint, content=_request(ids, trace=k + 1), headers=PROTO).status_code == 200
                with lock:
                    acked.update(f"{k + 1:032x}:{i:016x}" for i in ids)
                n += 1

    threads = [threading.Thread(target=stream, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    drained, rounds = 0, 0
    try:
        while rounds < 8 or len(acked) < 600:
            drained += otlp.drain(con, receiver.spool_dir)
            rounds += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    drained += otlp.drain(con, receiver.spool_dir)
    stored = [r[0] for r in _rows(con, "SELECT request_id FROM requests")]
    assert len(stored) == len(set(stored)) == drained
    assert set(stored) == acked


def test_lines_overwrite_a_segment_of_zeros_written_ahead(tmp_path, con):
    r = otlp.Receiver(tmp_path / "spool", "127.0.0.1", 0, 16 << 20, None, segment_max_bytes=1 << 20)
    try:
        spare = r.spool_dir / otlp.SPARE
        for k in range(2):
            wait_until(spare.exists, message="a spare segment of zeros")
            assert spare.stat().st_size == 1 << 20
            body = _request(range(k * 10, k * 10 + 10))
            assert httpx.post(r.endpoint, content=body, headers=PROTO).status_code == 200
            active = (r.spool_dir / otlp.ACTIVE).read_bytes()
            line = otlp.spool_lines(otlp.parse_protobuf(body))
            assert len(active) == 1 << 20 and active == line + bytes((1 << 20) - len(line))
            assert otlp.drain(con, r.spool_dir) == 10          # drain cuts at the zeros; the writer takes a new spare
    finally:
        r.stop()
    assert _rows(con, "SELECT count(*) FROM requests") == [(20,)]
    assert not (r.spool_dir / otlp.SPARE_TMP).exists()


def test_spares_shrink_to_what_frequent_drains_leave(receiver, con):
    """A spare is twice the last segment (at least 1 MiB): drains every few requests leave small segments,
    so the spool does not write 4 MiB of zeros for each few kB of lines."""
    spare = receiver.spool_dir / otlp.SPARE
    sizes = []
    for k in range(3):
        wait_until(spare.exists, message="a spare segment of zeros")
        sizes.append(spare.stat().st_size)
        assert httpx.post(receiver.endpoint, content=_request(range(k * 5, k * 5 + 5)), headers=PROTO).status_code == 200
        assert otlp.drain(con, receiver.spool_dir) == 5
    # the first two were made before any segment was left (4 MiB); the third after a ~4 kB one
    assert sizes == [4 << 20, 4 << 20, otlp.SPARE_MIN_BYTES]


def test_a_segment_the_loader_fails_on_is_moved_aside_and_the_rest_load(tmp_path, con, monkeypatch):
    """An exception that is no InputError (a bug in a reader, simulated here by wrapping the real
    ingest_path) puts that segment aside with the reason; the drain goes on with the next one."""
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "seg-1-1.jsonl").write_bytes(otlp.spool_lines(otlp.parse_protobuf(_request(range(2)))))
    (spool / "seg-2-1.jsonl").write_bytes(otlp.spool_lines(otlp.parse_protobuf(_request(range(2, 5)))))
    real = otlp.ingest_path

    def failing_on_the_first(con, path, options):
        if path.name == "seg-1-1.jsonl":
            raise TypeError("'int' object is not subscriptable")
        return real(con, path, options)

    monkeypatch.setattr(otlp, "ingest_path", failing_on_the_first)
    assert otlp.drain(con, spool) == 3
    reason = (spool / "rejected" / "seg-1-1.jsonl.reason.txt").read_text()
    assert "TypeError" in reason and "not subscriptable" in reason
    monkeypatch.setattr(otlp, "ingest_path", real)
    (spool / "rejected" / "seg-1-1.jsonl").rename(spool / "seg-1-1.jsonl")     # moved back: loads
    assert otlp.drain(con, spool) == 2


def test_a_spare_holding_lines_after_a_crash_is_loaded(tmp_path, con):
    """The writer takes the spare by a rename it does not fsync; if a crash loses that rename, the lines
    acknowledged into it are under spare.zeros, and drain (or the next receiver) loads them from there."""
    spool = tmp_path / "spool"
    spool.mkdir()
    lines = otlp.spool_lines(otlp.parse_protobuf(_request(range(4))))
    (spool / otlp.SPARE).write_bytes(lines + bytes(100_000))
    assert otlp.drain(con, spool) == 4
    assert not (spool / otlp.SPARE).exists()
    (spool / otlp.SPARE).write_bytes(otlp.spool_lines(otlp.parse_protobuf(_request(range(4, 6)))) + bytes(10))
    with otlp.start_receiver(spool, port=0):
        pass
    assert otlp.drain(con, spool) == 2
    (spool / otlp.SPARE).write_bytes(bytes(4096))            # an unused spare is left alone
    assert otlp.drain(con, spool) == 0 and (spool / otlp.SPARE).stat().st_size == 4096
    # taken between its maker's rename and folder fsync, the crash left it under the temporary name
    (spool / otlp.SPARE_TMP).write_bytes(otlp.spool_lines(otlp.parse_protobuf(_request(range(6, 9)))) + bytes(10))
    with otlp.start_receiver(spool, port=0):
        pass
    assert otlp.drain(con, spool) == 3
    assert _rows(con, "SELECT count(*) FROM requests") == [(9,)]


def test_concurrent_appends_each_land_whole_and_once(tmp_path):
    """200 appends from 16 threads at once: the threads take turns writing groups; every line is in the
    segment once and whole (no two groups interleave), and each append returned only once written."""
    (tmp_path / "spool").mkdir()
    spool = otlp._Spool(tmp_path / "spool", segment_max_bytes=1 << 20)
    lines = [(json.dumps({"n": i, "pad": "x" * (i % 97)}) + "\n").encode() for i in range(200)]
    start = threading.Barrier(16)
    results: list = []

    def worker(k: int) -> None:
        start.wait()
        for line in lines[k::16]:
            results.append(spool.append(line))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spool.close()
    assert results == [None] * 200
    text = (tmp_path / "spool" / otlp.ACTIVE).read_bytes().split(b"\0", 1)[0]
    assert sorted(text.splitlines(keepends=True)) == sorted(lines)
    assert 1 <= spool.commits <= 200
