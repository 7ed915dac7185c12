"""Write LiteLLM spend-log rows with LiteLLM's own code, then export them as LiteLLM users do.

Run with a LiteLLM install (not a dependency of finops), PostgreSQL binaries on PATH:

    python -m venv /tmp/venv-litellm && /tmp/venv-litellm/bin/pip install "litellm[proxy]==1.74.9"
    /tmp/venv-litellm/bin/python tests/tools/litellm_spendlogs_run.py tests/data/litellm

Six calls go through ``litellm.Router`` to a mock OpenAI / Anthropic server on 127.0.0.1: a gpt-4o-mini
call with 1,024 cached prompt tokens, the same call again served from LiteLLM's cache, an o3-mini call
with reasoning tokens on the flex tier, a Claude call that reads and writes the prompt cache, a
fine-tuned model LiteLLM has no price for, and a gpt-4o call the server refuses with a 429
(``store_prompts_in_spend_logs`` on, so the ``response`` column holds the provider's response). The proxy's
own cost callback (``_ProxyDBLogger``) turns each into a row with ``get_logging_payload``; its DB
writer's ``update_database`` is replaced by a function that keeps that payload (the lines it runs
before queueing the row: ``payload["spend"] = response_cost or 0.0``). The rows go into two real
PostgreSQL databases made by LiteLLM's own migrations (``litellm_proxy_extras``): the baseline of
2025-03-26 (LiteLLM 1.65: no session_id, status or mcp_namespaced_tool_name columns) and all of
them (1.74.9). Then:

* ``spendlogs_v1_65.csv``, ``spendlogs_v1_74.csv``: ``psql -c '\\copy "LiteLLM_SpendLogs" TO ... CSV HEADER'``;
* ``spend_logs.json``: the list ``GET /spend/logs`` returns (Prisma rows; pydantic's JSON of each);
* ``spend_logs_ui.json``: the page ``GET /spend/logs/ui`` returns (``data``, ``total``, ``page``,
  ``page_size``, ``total_pages``).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIRST_CALL = datetime(2025, 3, 4, 14, 0, 0, tzinfo=UTC)
OPENAI = {
    "gpt-4o-mini": {"usage": {"prompt_tokens": 1250, "completion_tokens": 180, "total_tokens": 1430,
                              "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
                              "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}},
                    "service_tier": "default", "model": "gpt-4o-mini-2024-07-18"},
    "o3-mini": {"usage": {"prompt_tokens": 310, "completion_tokens": 1200, "total_tokens": 1510,
                          "prompt_tokens_details": {"cached_tokens": 0},
                          "completion_tokens_details": {"reasoning_tokens": 896}},
                "service_tier": "flex", "model": "o3-mini-2025-01-31"},
    "ft:gpt-4o-mini-2024-07-18:acme:support:B1xQz": {
        "usage": {"prompt_tokens": 420, "completion_tokens": 64, "total_tokens": 484},
        "service_tier": "default", "model": "ft:gpt-4o-mini-2024-07-18:acme:support:B1xQz"},
}
ANTHROPIC = {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
             "model": "claude-3-5-sonnet-20241022", "stop_reason": "end_turn", "stop_sequence": None,
             "content": [{"type": "text", "text": "Here is the summary."}],
             "usage": {"input_tokens": 52, "output_tokens": 260, "cache_read_input_tokens": 2048,
                       "cache_creation_input_tokens": 1500}}


class Mock(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(0.05)
        if self.path.endswith("/messages"):
            return self._send(200, ANTHROPIC)
        model = body["model"]
        if model == "gpt-4o":
            return self._send(429, {"error": {"message": "Rate limit reached for gpt-4o in organization org-x on "
                                              "tokens per min (TPM)", "type": "tokens", "code": "rate_limit_exceeded"}})
        spec = OPENAI[model]
        self._send(200, {"id": f"chatcmpl-{abs(hash(model)) % 10**12:012d}", "object": "chat.completion",
                         "created": int(time.time()), "model": spec["model"], "service_tier": spec["service_tier"],
                         "system_fingerprint": "fp_mock",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": "ok"}}],
                         "usage": spec["usage"]})

    def _send(self, code, doc):
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def auth_metadata(team: str, user: str, alias: str, end_user: str, tags: list[str]) -> dict:
    """What the proxy's auth step puts in a request's metadata (litellm_pre_call_utils)."""
    return {"user_api_key": "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",
            "user_api_key_alias": alias, "user_api_key_user_id": user, "user_api_key_team_id": team,
            "user_api_key_org_id": None, "user_api_key_team_alias": None, "user_api_key_end_user_id": end_user,
            "tags": tags}


async def make_rows(base: str) -> list[dict]:
    import litellm
    from litellm import Router
    from litellm.caching.caching import Cache
    from litellm.proxy import proxy_server
    from litellm.proxy._types import UserAPIKeyAuth
    from litellm.proxy.hooks.proxy_track_cost_callback import _ProxyDBLogger
    from litellm.proxy.spend_tracking.spend_tracking_utils import get_logging_payload
    from litellm.proxy.utils import ProxyLogging

    rows: list[dict] = []

    async def keep_payload(token, response_cost, user_id, end_user_id, team_id, kwargs, completion_response,
                           start_time, end_time, org_id):
        # db_spend_update_writer.update_database, up to the point where it queues the row
        payload = get_logging_payload(kwargs=kwargs, response_obj=completion_response,
                                      start_time=start_time, end_time=end_time)
        payload["spend"] = response_cost or 0.0
        rows.append(dict(payload))

    proxy_server.proxy_logging_obj = ProxyLogging(user_api_key_cache=proxy_server.user_api_key_cache)
    proxy_server.proxy_logging_obj.db_spend_update_writer.update_database = keep_payload
    proxy_server.prisma_client = object()       # "a database is configured": failures are tracked
    proxy_server.general_settings["store_prompts_in_spend_logs"] = True    # messages and response kept
    db_logger = _ProxyDBLogger()
    litellm.callbacks = [db_logger]
    litellm.cache = Cache()                      # in-memory cache: the second identical call is a hit
    router = Router(model_list=[
        {"model_name": "gpt-4o-mini", "litellm_params": {"model": "openai/gpt-4o-mini", "api_base": base + "/v1",
                                                         "api_key": "sk-mock"}},
        {"model_name": "reasoning", "litellm_params": {"model": "openai/o3-mini", "api_base": base + "/v1",
                                                       "api_key": "sk-mock"}},
        {"model_name": "support-ft", "litellm_params": {"model": "openai/ft:gpt-4o-mini-2024-07-18:acme:support:B1xQz",
                                                        "api_base": base + "/v1", "api_key": "sk-mock"}},
        {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-3-5-sonnet-20241022",
                                                    "api_base": base, "api_key": "sk-ant-mock"}},
        {"model_name": "gpt-4o", "litellm_params": {"model": "openai/gpt-4o", "api_base": base + "/v1",
                                                    "api_key": "sk-mock"}},
    ], num_retries=0)
    msgs = [{"role": "user", "content": "Summarise the ticket."}]
    calls = [("gpt-4o-mini", auth_metadata("team-search", "u-alice", "svc-search", "cust-001", ["prod"])),
             ("gpt-4o-mini", auth_metadata("team-search", "u-alice", "svc-search", "cust-001", ["prod"])),
             ("reasoning", auth_metadata("team-research", "u-bob", "svc-research", "", ["batch", "eval"])),
             ("claude", auth_metadata("team-support", "u-carol", "svc-support", "cust-002", [])),
             ("support-ft", auth_metadata("team-support", "u-carol", "svc-support", "cust-002", ["prod"]))]
    for model, meta in calls:
        extra = {"service_tier": "flex"} if model == "reasoning" else {}
        await router.acompletion(model=model, messages=msgs, metadata=dict(meta), caching=True, **extra)
        await asyncio.sleep(0.3)                 # the success callbacks run in the background
    meta = auth_metadata("team-search", "u-dave", "svc-search", "cust-003", ["prod"])
    request = {"model": "gpt-4o", "messages": msgs, "metadata": dict(meta)}
    try:
        await router.acompletion(**request)
    except Exception as exc:                     # the proxy's failure hook writes the failed call's row
        auth = UserAPIKeyAuth(api_key=meta["user_api_key"], key_alias=meta["user_api_key_alias"],
                              user_id=meta["user_api_key_user_id"], team_id=meta["user_api_key_team_id"],
                              request_route="/chat/completions")
        await db_logger.async_post_call_failure_hook(request, exc, auth)
    await asyncio.sleep(0.5)
    return rows


def psql(port: int, db: str, *args: str, input: str | None = None) -> str:
    return subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port), "-U",
                           "postgres", "-d", db, *args], input=input, text=True, check=True,
                          capture_output=True).stdout


def main(out: Path) -> None:
    import litellm_proxy_extras
    from pydantic import TypeAdapter

    server = ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    rows = asyncio.run(make_rows(f"http://127.0.0.1:{server.server_port}"))
    server.shutdown()
    assert len(rows) == 6, len(rows)
    # this machine's clock may run ahead: every time moves by one offset so the first call starts at
    # FIRST_CALL (differences between times, LiteLLM's latencies, are unchanged)
    shift = min(r["startTime"] for r in rows) - FIRST_CALL
    for r in rows:
        for k in ("startTime", "endTime", "completionStartTime"):
            if isinstance(r.get(k), str):
                r[k] = datetime.fromisoformat(r[k])
            if isinstance(r.get(k), datetime):
                r[k] = r[k] - shift
    migrations = sorted((Path(litellm_proxy_extras.__file__).parent / "migrations").glob("2*/migration.sql"))
    pg = Path(tempfile.mkdtemp(prefix="pg-litellm-"))
    port = 54329
    env = dict(os.environ)
    run_as = ["su", "postgres", "-c"] if os.geteuid() == 0 else None
    if run_as:
        shutil.chown(pg, "postgres")
    def sh(cmd: str) -> None:
        subprocess.run(run_as + [cmd] if run_as else ["sh", "-c", cmd], check=True, env=env, capture_output=True)
    sh(f"initdb -D {pg}/data -U postgres -A trust")
    sh(f"pg_ctl -D {pg}/data -o '-k {pg} -c listen_addresses=127.0.0.1 -p {port}' -l {pg}/log -w start")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for db, upto in (("litellm_v1_65", migrations[:1]), ("litellm_v1_74", migrations)):
            psql(port, "postgres", "-c", f"CREATE DATABASE {db}")
            for m in upto:
                psql(port, db, "-f", str(m))
            for r in rows:      # what Prisma's create_many writes: the columns the table has
                doc = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in r.items()}
                for k in ("metadata", "messages", "response", "proxy_server_request", "request_tags"):
                    if isinstance(doc.get(k), str):
                        doc[k] = json.loads(doc[k])
                assert "$doc$" not in json.dumps(doc)
                psql(port, db, "-c", "INSERT INTO \"LiteLLM_SpendLogs\" SELECT * FROM "
                     f"json_populate_record(NULL::\"LiteLLM_SpendLogs\", $doc${json.dumps(doc)}$doc$)")
            target = out / f"spendlogs_{db.removeprefix('litellm_')}.csv"
            psql(port, db, "-c", f"\\copy (SELECT * FROM \"LiteLLM_SpendLogs\" ORDER BY \"startTime\") TO "
                 f"'{target}' CSV HEADER")
        # GET /spend/logs: Prisma's find_many rows (DateTime as UTC datetimes), serialised by FastAPI (pydantic)
        text = psql(port, "litellm_v1_74", "-At", "-c", "SELECT json_agg(t ORDER BY \"startTime\") FROM "
                    "\"LiteLLM_SpendLogs\" t")
        api = json.loads(text)
        dt = TypeAdapter(datetime)
        for r in api:
            for k in ("startTime", "endTime", "completionStartTime"):
                if r.get(k):
                    r[k] = json.loads(dt.dump_json(datetime.fromisoformat(r[k]).replace(tzinfo=UTC)))
        (out / "spend_logs.json").write_text(json.dumps(api, indent=2) + "\n")
        page = {"data": api, "total": len(api), "page": 1, "page_size": 50, "total_pages": 1}
        (out / "spend_logs_ui.json").write_text(json.dumps(page, indent=2) + "\n")
    finally:
        sh(f"pg_ctl -D {pg}/data -m fast -w stop")
        shutil.rmtree(pg, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/litellm"))
