"""Write OpenInference spans (Arize Phoenix's format) with the real instrumentation, as OTLP JSON lines.

    python -m venv /tmp/venv-otel && /tmp/venv-otel/bin/pip install openai opentelemetry-sdk \\
        opentelemetry-exporter-otlp-proto-common openinference-instrumentation-openai
    /tmp/venv-otel/bin/python tests/tools/openinference_spans_run.py tests/data/openinference_openai_spans.jsonl

The OpenAI client calls a mock server on 127.0.0.1 (a chat call with cached and reasoning tokens, an
embedding call, and a call refused with a 429) under ``OpenAIInstrumentor`` inside a CHAIN span made
with OpenInference's own span-kind attribute. The SDK's spans are encoded by OpenTelemetry's OTLP
encoder (``encode_spans``) and written as protobuf JSON, one ``TracesData`` per line, with trace and
span ids as hex (the OTLP JSON encoding).
"""
from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Mock(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(0.05)
        if self.path.endswith("/embeddings"):
            return self._send(200, {"object": "list", "model": "text-embedding-3-small",
                                    "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
                                    "usage": {"prompt_tokens": 512, "total_tokens": 512}})
        if body["model"] == "gpt-4o":
            return self._send(429, {"error": {"message": "Rate limit reached for gpt-4o", "type": "tokens",
                                              "code": "rate_limit_exceeded"}})
        self._send(200, {"id": "chatcmpl-oi-1", "object": "chat.completion", "created": 1741096800,
                         "model": "gpt-4o-mini-2024-07-18", "service_tier": "default",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": "ok"}}],
                         "usage": {"prompt_tokens": 1250, "completion_tokens": 180, "total_tokens": 1430,
                                   "prompt_tokens_details": {"cached_tokens": 1024},
                                   "completion_tokens_details": {"reasoning_tokens": 64}}})

    def _send(self, code, doc):
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(out: Path) -> None:
    import openai
    from google.protobuf.json_format import MessageToDict
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
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
    tracer = provider.get_tracer("support-bot")
    with tracer.start_as_current_span("answer_ticket") as chain:
        chain.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, OpenInferenceSpanKindValues.CHAIN.value)
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Summarise."}])
        client.embeddings.create(model="text-embedding-3-small", input="ticket text")
        try:
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Summarise."}])
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
                            import base64
                            s[k] = base64.b64decode(s[k]).hex()
        lines.append(json.dumps(doc))
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/openinference_openai_spans.jsonl"))
