"""The reference gateway over real HTTP on 127.0.0.1: routing, cache, cascade, auth, errors, log, metrics."""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from finops.commands import gateway as gateway_command
from finops.errors import InputError
from finops.gateway.app import ServerThread, create_app
from finops.gateway.backends import MockBackend
from finops.gateway.classify import estimate_tokens
from finops.gateway.config import Tier, load_config, parse_config
from finops.gateway.log import JsonlLog, MemoryLog
from finops.gateway.pipeline import (
    Gateway,
    GatewayRequest,
    RouteContext,
    cascade,
    cost_first,
    latency_first,
)
from finops.schema import NAMES, TYPES, create_table_sql
from helpers import DATA, ROOT, async_wait_until, free_port, wait_until

SEED_SHORT = "今天天气如何"
SEED_LONG_38 = "请详细分析分布式训练中数据并行张量并行流水并行三者在通信开销显存占用上的取舍"

GATEWAY_TOML = """
[routing]
cascade_threshold = 0.7

[classifier]
kind = "length"
unit = "tokens"
threshold = 32
long_min_quality = 0.85

[tiers.standard]
strategy = "cost"
quality_floor = 0.5

[tiers.batch]
strategy = "cascade"
quality_floor = 0.5

[tenants.alice]
tier = "standard"
api_keys = ["sk-alice"]

[tenants.bob]
tier = "batch"
api_keys = ["sk-bob"]

[backends.fast]
kind = "mock"
quality = 0.7
capacity = 8
request_usd = 0.001
prefill_ms_per_token = 0.1
decode_ms_per_token = 1.0
output_tokens = 5
confidence = [0.1, 0.3]      # always under tau: a cascade always escalates

[backends.slow]
kind = "mock"
quality = 0.9
capacity = 2
request_usd = 0.008
prefill_ms_per_token = 0.2
decode_ms_per_token = 2.0
output_tokens = 5
confidence = [0.9, 1.0]

[backends.sleepy]
kind = "mock"
quality = 0.0
decode_ms_per_token = 500.0
output_tokens = 10
timeout_s = 0.3

[backends.narrow]
kind = "mock"
quality = 0.0
capacity = 1
max_queue = 1
decode_ms_per_token = 20.0
output_tokens = 10

[backends.upstream]
kind = "openai"
model = "tiny"
upstream_model = "tiny-model"
base_url = "{upstream}/v1"
quality = 0.0
input_usd_per_1m = 1.0
output_usd_per_1m = 2.0

[backends.broken]
kind = "openai"
base_url = "{upstream}/v1"
quality = 0.0
"""

ALICE = {"Authorization": "Bearer sk-alice"}
BOB = {"Authorization": "Bearer sk-bob"}


# ---------------------------------------------------------------- servers

def make_upstream(received: list[dict]) -> FastAPI:
    """A minimal OpenAI-compatible server: fixed usage; model "broken" answers HTTP 500."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions(request: Request):
        body = await request.json()
        received.append(body)
        if body.get("model") == "broken":
            return JSONResponse({"error": {"message": "upstream exploded"}}, status_code=500)
        return {"id": "up-123", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}

    return app


@pytest.fixture(scope="module")
def upstream():
    received: list[dict] = []
    with ServerThread(make_upstream(received)) as server:
        server.received = received
        yield server


@pytest.fixture(scope="module")
def gw(upstream, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gw")
    cfg_path = tmp / "gateway.toml"
    cfg_path.write_text(GATEWAY_TOML.replace("{upstream}", upstream.url), encoding="utf-8")
    log_path = tmp / "gateway.jsonl"
    gateway = Gateway(load_config(cfg_path), JsonlLog(log_path))
    with ServerThread(create_app(gateway)) as server:
        server.log_path = log_path
        server.client = httpx.Client(base_url=server.url, timeout=10)
        yield server
        server.client.close()


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def rows_for(path: Path, request_id: str) -> list[dict]:
    """The rows of one request: its attempts and its answer."""
    return [r for r in read_rows(path)
            if r["request_id"] == request_id or r["attrs"].get("parent_id") == request_id]


def chat(gw, content: str, headers=ALICE, **extra) -> httpx.Response:
    return gw.client.post("/v1/chat/completions", headers=headers,
                          json={"messages": [{"role": "user", "content": content}], **extra})


_PY_TYPES = {"VARCHAR": str, "TIMESTAMP": str, "BOOLEAN": bool, "BIGINT": int, "INTEGER": int,
             "DOUBLE": (int, float), "JSON": dict}


def assert_canonical(row: dict) -> None:
    assert list(row) == list(NAMES)
    for name, value in row.items():
        if value is not None:
            assert isinstance(value, _PY_TYPES[TYPES[name]]), (name, value)
            if TYPES[name] in ("BIGINT", "INTEGER"):
                assert not isinstance(value, bool)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", row["ts"])
    assert row["request_id"] and row["model"] and row["status"] in ("ok", "error", "timeout", "rejected")


# ---------------------------------------------------------------- endpoints

def test_healthz_lists_backends(gw):
    assert gw.client.get("/healthz").status_code == 401          # keys are set: health is behind one too
    body = gw.client.get("/healthz", headers=ALICE).json()
    assert body["status"] == "ok"
    assert body["backends"]["slow"] == {"model": "slow", "kind": "mock", "queue_length": 0, "in_flight": 0,
                                        "slots": 2}


def test_route_sends_seed_short_prompt_to_fast_and_its_long_prompt_to_slow(gw):
    short = gw.client.post("/route", headers=ALICE, json={"prompt": SEED_SHORT}).json()
    long = gw.client.post("/route", headers=ALICE, json={"prompt": SEED_LONG_38}).json()
    assert (short["routed_to"], long["routed_to"]) == ("fast", "slow")
    assert (short["cost"], long["cost"]) == (0.001, 0.008)
    row = rows_for(gw.log_path, long["request_id"])[0]
    assert_canonical(row)
    assert row["prompt_chars"] == 38 and row["input_tokens"] == 38
    assert row["attrs"]["complexity"] == "long" and row["attrs"]["endpoint"] == "route"
    assert row["tenant"] == "alice" and row["sla_tier"] == "standard" and row["strategy"] == "cost"


def test_chat_completions_subset(gw):
    r = chat(gw, "Say hello", max_tokens=3, user="u-42")
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "fast"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    (row,) = rows_for(gw.log_path, body["id"])
    assert_canonical(row)
    assert row["output_tokens"] == 3 and row["cost_usd"] == 0.001 and row["attrs"]["user"] == "u-42"
    for seg in ("route_ms", "queue_ms", "prefill_ms", "decode_ms", "service_ms", "ttft_ms", "total_ms"):
        assert row[seg] >= 0
    assert row["service_ms"] == pytest.approx(row["prefill_ms"] + row["decode_ms"], abs=0.01)
    assert row["total_ms"] >= row["route_ms"] + row["queue_ms"] + row["service_ms"] - 0.01
    assert row["replica"] == "fast-0"


def test_bad_request_is_a_clean_400(gw):
    r = gw.client.post("/v1/chat/completions", headers=ALICE, json={"messages": []})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = chat(gw, "x", model="gpt-9")
    assert r.status_code == 404 and r.json()["error"]["type"] == "model_not_found"


def test_repeated_prompt_is_logged_as_a_cache_hit_costing_zero(gw):
    first = chat(gw, "  What is   the capital of France? ").json()
    second = chat(gw, "what is the capital of france?").json()      # same once normalised
    assert second["finops"]["cache_hit"] is True
    (hit,) = rows_for(gw.log_path, second["id"])
    assert_canonical(hit)
    assert hit["cache_hit"] is True and hit["route"] == "cache"
    assert hit["model"] == first["model"] == "fast"                  # who would have served it
    assert hit["cost_usd"] == 0.0 and hit["queue_ms"] is None and hit["service_ms"] is None
    # another tenant never sees alice's answer
    other = chat(gw, "what is the capital of france?", headers=BOB).json()
    assert other["finops"]["cache_hit"] is False
    # no-cache skips the lookup
    fresh = chat(gw, "what is the capital of france?", headers={**ALICE, "Cache-Control": "no-cache"}).json()
    assert fresh["finops"]["cache_hit"] is False


def test_low_confidence_cascade_is_logged_as_escalated_with_both_costs(gw):
    r = chat(gw, "Classify this ticket: printer on fire", headers=BOB)
    assert r.status_code == 200
    body = r.json()
    assert body["model"] == "slow" and body["finops"]["escalations"] == 1
    assert body["finops"]["cost_usd"] == pytest.approx(0.009)
    attempt, answer = rows_for(gw.log_path, body["id"])
    for row in (attempt, answer):
        assert_canonical(row)
        assert row["strategy"] == "cascade" and row["tenant"] == "bob" and row["sla_tier"] == "batch"
    assert attempt["request_id"] == body["id"] + "#attempt"
    assert attempt["attrs"]["parent_id"] == body["id"]
    assert (attempt["model"], attempt["escalated"], attempt["cost_usd"]) == ("fast", True, 0.001)
    assert attempt["confidence"] < 0.7
    assert (answer["model"], answer["escalated"], answer["cost_usd"]) == ("slow", False, 0.008)
    assert answer["attrs"]["cascade_cost_usd"] == pytest.approx(0.009)
    assert answer["total_ms"] > attempt["total_ms"]


def test_unknown_or_missing_key_gets_401_and_no_row(gw):
    before = len(read_rows(gw.log_path))
    for headers in ({"Authorization": "Bearer sk-nobody"}, {}, {"X-Tenant": "alice"}):
        r = chat(gw, "hello", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "invalid_api_key"
        assert r.headers["www-authenticate"] == "Bearer"
    assert gw.client.post("/route", json={"prompt": "hi"}).status_code == 401
    assert len(read_rows(gw.log_path)) == before


def test_backend_timeout_is_a_logged_timeout_row_and_a_clean_504(gw):
    # sleepy needs 5 s; its 0.3 s timeout answers first (the client would give up at 10 s with an error)
    r = chat(gw, "take your time", model="sleepy")
    assert r.status_code == 504
    err = r.json()["error"]
    assert err["type"] == "timeout"
    (row,) = rows_for(gw.log_path, err["request_id"])
    assert_canonical(row)
    assert (row["status"], row["error_type"], row["model"]) == ("timeout", "timeout", "sleepy")
    # A lower bound set by the timeout itself (load only lengthens it), not a duration of this machine.
    # >= 299, not 300: under uvloop (libuv) timers have 1 ms resolution and can fire up to 1 ms early
    # (libuv/libuv#4773); the timeout still bounds the call.
    assert row["cost_usd"] is None and row["queue_ms"] is not None and row["total_ms"] >= 299


def test_full_queue_is_rejected_with_503(gw):
    async def burst():
        async with httpx.AsyncClient(base_url=gw.url, timeout=10) as client:
            return await asyncio.gather(*(client.post(
                "/v1/chat/completions", headers={**ALICE, "Cache-Control": "no-cache"},
                json={"model": "narrow", "messages": [{"role": "user", "content": "q"}]}) for _ in range(3)))

    codes = sorted(r.status_code for r in asyncio.run(burst()))
    assert codes == [200, 200, 503]
    rejected = next(r for r in asyncio.run(burst()) if r.status_code == 503).json()["error"]
    (row,) = rows_for(gw.log_path, rejected["request_id"])
    assert (row["status"], row["error_type"]) == ("rejected", "queue_full")


def test_openai_compatible_upstream_is_proxied_with_its_token_counts(gw, upstream):
    r = chat(gw, "ping", model="tiny", max_tokens=9)
    assert r.status_code == 200
    body = r.json()
    assert body["choices"][0]["message"]["content"] == "pong"
    assert body["usage"]["prompt_tokens"] == 11 and body["usage"]["completion_tokens"] == 7
    sent = upstream.received[-1]
    assert sent["model"] == "tiny-model" and sent["max_tokens"] == 9
    assert sent["messages"] == [{"role": "user", "content": "ping"}]
    (row,) = rows_for(gw.log_path, body["id"])
    assert_canonical(row)
    assert (row["model"], row["route"], row["input_tokens"], row["output_tokens"]) == ("tiny", "upstream", 11, 7)
    assert row["cost_usd"] == pytest.approx(11 * 1.0 / 1e6 + 7 * 2.0 / 1e6)
    assert row["service_ms"] > 0 and row["ttft_ms"] >= row["service_ms"]
    assert row["prefill_ms"] is None and row["decode_ms"] is None
    assert row["attrs"]["upstream_id"] == "up-123"


def test_upstream_error_is_a_logged_error_row_and_a_clean_502(gw):
    r = chat(gw, "ping", model="broken")
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["type"] == "http_500" and "upstream exploded" not in err["message"]   # the body stays in the log
    (row,) = rows_for(gw.log_path, err["request_id"])
    assert (row["status"], row["error_type"], row["model"]) == ("error", "http_500", "broken")


def parse_prometheus(text: str) -> dict[str, dict[tuple, float]]:
    """A strict reader of the text format: every line is a comment or ``name{labels} value``."""
    sample = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_]\w*="(?:[^"\\]|\\.)*",?)*\})? (\S+)')
    families: dict[str, str] = {}
    out: dict[str, dict[tuple, float]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = kind
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = sample.fullmatch(line)
        assert m, line
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in families else name
        assert family in families, line
        lab = tuple(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
        out.setdefault(name, {})[lab] = float(value)
    return out


def test_metrics_parse_and_count_requests(gw):
    chat(gw, "count me", headers={**ALICE, "Cache-Control": "no-cache"})
    assert gw.client.get("/metrics").status_code == 401
    r = gw.client.get("/metrics", headers=ALICE)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    m = parse_prometheus(r.text)
    assert m["finops_gateway_requests_total"][(("backend", "fast"), ("status", "ok"))] >= 1
    assert m["finops_gateway_requests_total"][(("backend", "cache"), ("status", "ok"))] >= 1
    assert m["finops_gateway_queue_length"][(("backend", "slow"),)] == 0
    assert m["finops_gateway_slots"][(("backend", "fast"),)] == 8
    buckets = {k: v for k, v in m["finops_gateway_request_duration_seconds_bucket"].items()
               if ("backend", "fast") in k}
    counts = [v for k, v in sorted(buckets.items(), key=lambda kv: float(dict(kv[0])["le"]))]
    assert counts == sorted(counts)
    assert counts[-1] == m["finops_gateway_request_duration_seconds_count"][(("backend", "fast"),)]


OVERHEAD_TOML = """
[cache]
kind = "none"

[tiers.standard]
strategy = "cascade"
quality_floor = 0.5          # small then big; sleepy only when pinned

[backends.small]
kind = "mock"
quality = 0.5
request_usd = 0.001
decode_ms_per_token = 20.0
output_tokens = 5            # 100 ms of service
confidence = [0.1, 0.2]      # always escalates to big

[backends.big]
kind = "mock"
quality = 0.9
request_usd = 0.008
decode_ms_per_token = 20.0
output_tokens = 5

[backends.sleepy]
kind = "mock"
quality = 0.0
decode_ms_per_token = 50.0
output_tokens = 10           # 500 ms of service, cut short at 300 ms
timeout_s = 0.3
"""


@pytest.fixture
def overhead_gw():
    """A fresh gateway whose metrics count only this test's requests; every call spends >= 100 ms
    in a backend."""
    import tomllib

    log = MemoryLog()
    with ServerThread(create_app(Gateway(parse_config(tomllib.loads(OVERHEAD_TOML)), log))) as server:
        server.log = log
        with httpx.Client(base_url=server.url, timeout=10) as client:
            server.client = client
            yield server


def overhead_buckets(m: dict, endpoint: str) -> dict[float, float]:
    """le (seconds) -> cumulative count of finops_gateway_overhead_seconds for ``endpoint``."""
    return {float(dict(k)["le"]): v for k, v in m["finops_gateway_overhead_seconds_bucket"].items()
            if ("endpoint", endpoint) in k}


def test_overhead_histogram_counts_each_request_and_excludes_backend_time(overhead_gw):
    gw = overhead_gw
    for i in range(3):      # cascade: small (100 ms) escalates to big (100 ms), so 200 ms in backends
        r = gw.client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": f"q{i}"}]})
        assert r.status_code == 200 and r.json()["finops"]["escalations"] == 1
    assert gw.client.post("/route", json={"prompt": "hello"}).status_code == 200
    m = parse_prometheus(gw.client.get("/metrics").text)
    assert m["finops_gateway_overhead_seconds_count"][(("endpoint", "chat"),)] == 3
    assert m["finops_gateway_overhead_seconds_count"][(("endpoint", "route"),)] == 1
    assert (("endpoint", "metrics"),) not in m["finops_gateway_overhead_seconds_count"]   # observed after render
    backend_ms = [r["queue_ms"] + r["service_ms"] for r in gw.log.rows]
    assert len(backend_ms) == 8 and min(backend_ms) >= 95         # each attempt sleeps 100 ms at least
    for endpoint, n in (("chat", 3), ("route", 1)):
        assert overhead_buckets(m, endpoint)[float("inf")] == n
    # Counted in, the backend time would make each request's overhead at least its backend time; left
    # out, the overhead is the gateway's own time only. Compared with this run's backend time, not with
    # a fixed duration that a loaded machine could pass.
    chat_backend_s = sum(r["queue_ms"] + r["service_ms"] for r in gw.log.rows
                         if r["attrs"]["endpoint"] == "chat") / 1000
    assert m["finops_gateway_overhead_seconds_sum"][(("endpoint", "chat"),)] < chat_backend_s / 2


def test_overhead_excludes_a_backend_timeout_and_counts_error_answers(overhead_gw):
    gw = overhead_gw
    r = gw.client.post("/v1/chat/completions",
                       json={"model": "sleepy", "messages": [{"role": "user", "content": "wait"}]})
    assert r.status_code == 504
    assert gw.client.post("/v1/chat/completions", json={"messages": []}).status_code == 400
    gw.client.get("/nowhere")
    m = parse_prometheus(gw.client.get("/metrics").text)
    assert overhead_buckets(m, "chat")[float("inf")] == 2
    assert m["finops_gateway_overhead_seconds_count"][(("endpoint", "other"),)] == 1
    # the 300 ms the timed-out call spent in its backend is not the gateway's: both answers together
    # took the gateway less than that call's own logged time
    (timed_out,) = [row for row in gw.log.rows if row["status"] == "timeout"]
    assert m["finops_gateway_overhead_seconds_sum"][(("endpoint", "chat"),)] < timed_out["total_ms"] / 1000


def test_log_rows_load_into_the_canonical_duckdb_table(gw):
    chat(gw, "one more for the table")
    con = duckdb.connect()
    con.execute(create_table_sql("requests"))
    columns = {c: TYPES[c] for c in NAMES}
    con.execute("INSERT INTO requests SELECT * FROM read_json(?, format='newline_delimited', columns=?)",
                [str(gw.log_path), columns])
    n, escalated, hits, errors = con.execute(
        "SELECT count(*), count(*) FILTER (escalated), count(*) FILTER (cache_hit), "
        "count(*) FILTER (status <> 'ok') FROM requests").fetchone()
    assert n == len(read_rows(gw.log_path)) and escalated >= 1 and hits >= 1 and errors >= 1
    assert con.execute("SELECT count(*) FROM requests WHERE json_extract_string(attrs, '$.endpoint') IS NULL"
                       ).fetchone()[0] == 0
    con.close()


# ---------------------------------------------------------------- killed and stopped processes

KILL_TOML = """
[tiers.standard]
strategy = "cost"

[backends.fast]
kind = "mock"
request_usd = 0.001
decode_ms_per_token = 2.0
output_tokens = 10

[backends.slow]
kind = "mock"
quality = 0.9
capacity = 1
request_usd = 0.008
decode_ms_per_token = 80.0
output_tokens = 10
"""


LAUNCH = ("import argparse, sys; from finops.commands import gateway as g; p = argparse.ArgumentParser(); "
          "g.add_arguments(p); sys.exit(g.run(p.parse_args()))")


def _spawn_gateway(tmp: Path, name: str) -> tuple[subprocess.Popen, str, Path]:
    cfg = tmp / f"{name}.toml"
    cfg.write_text(KILL_TOML, encoding="utf-8")
    log = tmp / f"{name}.jsonl"
    port = free_port()
    # The gateway command's own add_arguments/run (what `python -m finops gateway` calls), launched
    # without importing every other subcommand, which makes start-up several seconds slower.
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "--config", str(cfg), "--port", str(port),
                             "--log", str(log), "--graceful-timeout", "10"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc, f"http://127.0.0.1:{port}", log


def _wait_healthy(proc: subprocess.Popen, url: str) -> None:
    def healthy() -> bool:
        assert proc.poll() is None, proc.stderr.read().decode()
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, timeout=30, interval=0.05, message=f"gateway at {url} answering /healthz")


async def _wait_for_calls(client: httpx.AsyncClient, url: str, backend: str, *, in_flight: int,
                          waiting: int = 0) -> None:
    """Until ``backend`` of the gateway at ``url`` serves ``in_flight`` calls with ``waiting`` queued."""
    async def there() -> bool:
        b = (await client.get(url + "/healthz")).json()["backends"][backend]
        return (b["in_flight"], b["queue_length"]) == (in_flight, waiting)

    await async_wait_until(there, timeout=30, message=f"{in_flight} + {waiting} calls on {backend} at {url}")


def test_sigkill_loses_no_completed_row_and_sigterm_finishes_running_requests(tmp_path):
    killed, kill_url, kill_log = _spawn_gateway(tmp_path, "killed")
    stopped, stop_url, stop_log = _spawn_gateway(tmp_path, "stopped")
    try:
        _wait_healthy(killed, kill_url)
        _wait_healthy(stopped, stop_url)

        async def drive():
            async with httpx.AsyncClient(timeout=30) as client:
                def post(url, prompt, tenant):
                    return client.post(url + "/route", json={"prompt": prompt}, headers={"X-Tenant": tenant})

                # 20 quick requests complete; then 3 to the 1-slot slow backend are left running
                done = await asyncio.gather(*(post(kill_url, f"quick {i}", "carol") for i in range(20)))
                running = [asyncio.create_task(post(kill_url, "x" * 200 + str(i), "carol")) for i in range(3)]
                await _wait_for_calls(client, kill_url, "slow", in_flight=1, waiting=2)
                killed.send_signal(signal.SIGKILL)
                killed.wait(timeout=10)
                lost = await asyncio.gather(*running, return_exceptions=True)
                # SIGTERM while a ~1 s request runs: it finishes, its row is written, the process exits 0
                slow = asyncio.create_task(post(stop_url, "y" * 200, "dave"))
                await _wait_for_calls(client, stop_url, "slow", in_flight=1)
                stopped.send_signal(signal.SIGTERM)
                return done, lost, await slow

        done, lost, slow = asyncio.run(drive())
        assert all(r.status_code == 200 for r in done)
        assert all(isinstance(r, httpx.HTTPError) for r in lost)
        rows = read_rows(kill_log)                         # every line is whole JSON
        logged = {r["request_id"] for r in rows}
        assert {r.json()["request_id"] for r in done} <= logged
        assert all(r["tenant"] == "carol" for r in rows)

        assert slow.status_code == 200
        assert stopped.wait(timeout=15) in (0, -signal.SIGTERM)      # uvicorn re-raises the signal it handled
        (row,) = read_rows(stop_log)
        assert row["request_id"] == slow.json()["request_id"] and row["model"] == "slow"
        assert row["tenant"] == "dave"
    finally:
        for proc in (killed, stopped):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()


# ---------------------------------------------------------------- config, strategies, CLI

def test_example_config_loads_and_routes_the_seed_prompts_by_tokens():
    cfg = load_config(ROOT / "examples" / "gateway.toml")
    assert cfg.backends["slow"].capacity == 2 and cfg.backends["fast"].capacity == 8
    assert (cfg.backends["fast"].request_usd, cfg.backends["slow"].request_usd) == (0.001, 0.008)
    assert cfg.classifier.options == {"unit": "tokens", "threshold": 32, "long_min_quality": 0.85}
    assert estimate_tokens(SEED_SHORT) == 6 and estimate_tokens(SEED_LONG_38) == 38


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(InputError, match="backends.fast.capcity: unknown key"):
        parse_config({"backends": {"fast": {"kind": "mock", "capcity": 2}}}, "g.toml")
    with pytest.raises(InputError, match="tiers.gold.strategy: unknown strategy"):
        parse_config({"tiers": {"gold": {"strategy": "fastest"}}, "routing": {"default_tier": "gold"},
                      "backends": {"a": {"kind": "mock"}}}, "g.toml")
    with pytest.raises(InputError, match="no backends"):
        parse_config({}, "g.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[backends.fast\n", encoding="utf-8")
    parser = argparse.ArgumentParser()
    gateway_command.add_arguments(parser)
    with pytest.raises(InputError, match="not valid TOML"):        # the CLI prints it and exits 1
        gateway_command.run(parser.parse_args(["--config", str(bad)]))
    with pytest.raises(InputError, match="no such file"):
        gateway_command.run(parser.parse_args(["--config", str(tmp_path / "missing.toml")]))
    # a folder or a binary file stopped with IsADirectoryError's or UnicodeDecodeError's traceback
    with pytest.raises(InputError, match="is a folder: give the gateway's TOML file"):
        gateway_command.run(parser.parse_args(["--config", str(tmp_path)]))
    binary = tmp_path / "gateway.toml"
    binary.write_bytes(b"[backends]\nfast = '\xd0\xff'\n")
    with pytest.raises(InputError, match="not a text file: a gateway config is TOML text"):
        gateway_command.run(parser.parse_args(["--config", str(binary)]))
    # a port that is no TCP port: uvicorn hung after the gateway had said it listened there
    with pytest.raises(InputError, match="field port: --port is a number from 0 to 65535, got 70000"):
        gateway_command.run(parser.parse_args(["--config", "examples/gateway.toml", "--port", "70000"]))


def _backends(**waiting):
    cfg = parse_config({"backends": {
        "small": {"kind": "mock", "quality": 0.6, "request_usd": 0.001},
        "medium": {"kind": "mock", "quality": 0.8, "request_usd": 0.003},
        "large": {"kind": "mock", "quality": 0.95, "request_usd": 0.01}}})
    out = [MockBackend(b) for b in cfg.backends.values()]
    for b in out:
        b.replicas[0].waiting = waiting.get(b.name, 0)
    return out


def _ctx(floor: float, tier_floor: float = 0.0) -> RouteContext:
    from finops.gateway.classify import Complexity

    return RouteContext("t", Tier("x", quality_floor=tier_floor), Complexity("short", 5, "tokens"), floor,
                        5, None, 0.7)


def test_strategies_pick_by_price_queue_and_cascade_order():
    bs = _backends(small=4, medium=0, large=0)
    assert [b.name for b in cost_first(bs, _ctx(0.0)).chain] == ["small"]
    assert [b.name for b in cost_first(bs, _ctx(0.7)).chain] == ["medium"]
    assert [b.name for b in cost_first(bs, _ctx(0.99)).chain] == ["large"]     # none qualifies: the best
    assert [b.name for b in latency_first(bs, _ctx(0.0)).chain] == ["medium"]  # small has a queue
    bs[1].observe(500.0)
    assert [b.name for b in latency_first(bs, _ctx(0.0)).chain] == ["large"]   # medium's recent P99 is worse
    plan = cascade(bs, _ctx(0.9, tier_floor=0.7))
    assert [b.name for b in plan.chain] == ["medium", "large"] and plan.threshold == 0.7


# ---------------------------------------------------------------- the seed-gateway fixtures of tests/data

LINE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \[ROUTE\] target=(fast|slow) len=(\d+) "
                  r"route_ms=([\d.]+) queue_ms=([\d.]+) service_ms=([\d.]+) total_ms=([\d.]+) "
                  r"cost=([\d.]+) inject=(True|False)")


def _seed_log(name: str) -> list[dict]:
    rows = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        m = LINE.fullmatch(line)
        assert m, line
        ts, target, n, route, queue, service, total, cost, inject = m.groups()
        datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f")
        rows.append({"target": target, "len": int(n), "queue_ms": float(queue), "service_ms": float(service),
                     "total_ms": float(total), "cost": float(cost), "inject": inject == "True"})
    return rows


def test_injected_fixture_shows_the_slow_queue_and_the_decode_tail():
    rows = _seed_log("seed_gateway_injected.log")
    assert len(rows) == 8 and all(r["target"] == "slow" and r["len"] > 40 and r["cost"] == 8.0 for r in rows)
    baseline = [r for r in rows if not r["inject"]]
    injected = [r for r in rows if r["inject"]]
    assert len(baseline) == 2 and len(injected) == 6 and all(r["queue_ms"] < 50 for r in baseline)
    queue = sorted(r["queue_ms"] for r in injected)
    assert queue[0] < 50 and queue[1] < 50 and queue[2] > 2000 and queue[4] > 2 * 2000
    base_ms = sum(r["service_ms"] for r in baseline) / 2
    for r in injected:
        assert r["service_ms"] - base_ms == pytest.approx(2000 + (r["len"] - 49.5) * 6, abs=150)
        assert r["total_ms"] == pytest.approx(r["queue_ms"] + r["service_ms"], abs=5)


def test_verbatim_fixture_sends_everything_to_fast_with_no_queue():
    rows = _seed_log("seed_gateway_verbatim.log")
    assert [r["len"] for r in rows[:2]] == [6, 38] and len(rows) == 8
    assert all(r["target"] == "fast" and r["queue_ms"] < 50 for r in rows)
    injected = [r for r in rows if r["inject"]]
    assert len(injected) == 6 and all(r["len"] == 37 for r in injected)
    for r in injected:      # 37 chars x 2 ms + 50 ms decode + 2000 ms injected
        assert r["service_ms"] == pytest.approx(37 * 2 + 50 + 2000, abs=150)
    assert not math.isnan(sum(r["total_ms"] for r in rows))


def test_every_stage_is_pluggable_by_import_path():
    """The seed's own rule as a plugin classifier (characters, 40): its 38-character prompt goes to fast."""
    cfg = parse_config({
        "cache": {"kind": "finops.gateway.cache:ExactCache", "ttl_s": 5.0, "max_entries": 2},
        "classifier": {"kind": "finops.gateway.classify:LengthClassifier", "unit": "chars", "threshold": 40},
        "tiers": {"standard": {"strategy": "finops.gateway.pipeline:latency_first"}},
        "backends": {"fast": {"kind": "mock", "quality": 0.7, "decode_ms_per_token": 0.0},
                     "slow": {"kind": "mock", "quality": 0.9, "decode_ms_per_token": 0.0}}})
    log = MemoryLog()
    gw = Gateway(cfg, log)
    assert gw.cache.ttl_s == 5.0 and gw.classifier.unit == "chars"

    async def ask(prompt):
        return await gw.handle(GatewayRequest(messages=(("user", prompt),), tenant="t"))

    out = asyncio.run(ask(SEED_LONG_38))
    assert out.row["model"] == "fast" and out.row["attrs"]["complexity"] == "short"
    assert out.row["strategy"] == "finops.gateway.pipeline:latency_first"
    with pytest.raises(InputError, match="cannot load plugin"):
        Gateway(parse_config({"cache": {"kind": "no.such.module:Cache"},
                              "backends": {"a": {"kind": "mock"}}}), MemoryLog())
    with pytest.raises(InputError, match="does not take these options"):
        Gateway(parse_config({"cache": {"kind": "finops.gateway.cache:ExactCache", "size": 3},
                              "backends": {"a": {"kind": "mock"}}}), MemoryLog())
