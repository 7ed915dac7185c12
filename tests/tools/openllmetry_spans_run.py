"""Write OpenLLMetry 0.33 spans (traceloop's OpenAI instrumentation) with the real instrumentation, as OTLP JSON lines.

    python -m venv /tmp/venv-olm && /tmp/venv-olm/bin/pip install "opentelemetry-instrumentation-openai==0.33.12" \\
        "openai==1.59.9" "opentelemetry-sdk==1.28.2" "opentelemetry-exporter-otlp-proto-common==1.28.2" \\
        "opentelemetry-proto==1.28.2"
    /tmp/venv-olm/bin/python tests/tools/openllmetry_spans_run.py tests/data/openllmetry_0_33_openai_spans.jsonl

A throwaway venv, not requirements-dev.txt: opentelemetry-instrumentation-openai 0.33.12 requires
opentelemetry-api 1.28 (its ``opentelemetry-instrumentation`` 0.49b), and the dev environment's is 1.45.

The OpenAI Python SDK calls a mock of OpenAI's chat completions API on 127.0.0.1 (the mock stands for
OpenAI's API; its usage numbers and sleeps are in ``ANSWERS``) under ``OpenAIInstrumentor``: two chat calls
of two models and one refused with a 429. The SDK's finished spans (``InMemorySpanExporter``) are encoded by
OpenTelemetry's OTLP encoder (``encode_spans``) and written as protobuf JSON, one ``TracesData`` per line,
trace and span ids as hex (the OTLP JSON encoding), as the Collector's file exporter writes them.
"""
from __future__ import annotations

import base64
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# model asked -> (HTTP status, seconds the mock waits, the response): what the test checks the spans against
ANSWERS = {
    "gpt-4o-mini": (200, 0.25, {
        "id": "chatcmpl-olm-1", "object": "chat.completion", "created": 1741096800,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_olm",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 1250, "completion_tokens": 180, "total_tokens": 1430}}),
    "gpt-4o": (200, 0.40, {
        "id": "chatcmpl-olm-2", "object": "chat.completion", "created": 1741096801,
        "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_olm",
        "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 2000, "completion_tokens": 512, "total_tokens": 2512}}),
    "o3-mini": (429, 0.05, {"error": {"message": "Rate limit reached for o3-mini", "type": "tokens",
                                      "code": "rate_limit_exceeded"}}),
}


class Mock(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        code, wait_s, doc = ANSWERS[body["model"]]
        time.sleep(wait_s)
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(out: Path) -> None:
    import openai
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    server = ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot", "tenant.id": "acme"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="sk-mock", max_retries=0)
    for model in ANSWERS:
        try:
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Summarise."}])
        except openai.RateLimitError:
            pass
    server.shutdown()
    lines = []
    for span in exporter.get_finished_spans():
        doc = MessageToDict(encode_spans([span]))
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if s.get(k):
                            s[k] = base64.b64decode(s[k]).hex()
        lines.append(json.dumps(doc))
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/openllmetry_0_33_openai_spans.jsonl"))
