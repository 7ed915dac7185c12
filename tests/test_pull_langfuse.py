"""``pull langfuse``: observations paged out of Langfuse's public API, resumable, rate-limit aware.

Langfuse's server (web, worker, PostgreSQL, ClickHouse, Redis) cannot run here, so this test's server stands
in for it on 127.0.0.1, answering exactly as Langfuse's published API definition says (fern, from which the
OpenAPI spec is generated), langfuse/langfuse:

* ``GET /api/public/observations`` (``fern/apis/server/definition/legacy/observations-v1.yml`` at
  1210598e49a54f09c66df7ff6c8be938db42cb6f): ``page`` (from 1), ``limit``, ``fromStartTime`` (on or after),
  ``toStartTime`` (before); ``{"data": [ObservationsView], "meta": MetaResponse}`` with ``page``, ``limit``,
  ``totalItems``, ``totalPages`` (``fern/apis/server/definition/utils/pagination.yml`` at
  18c4d1cd70d79f1a6dd8375dec349dfffd24f7e4);
* ``GET /api/public/v2/observations`` (``observations-v2.yml`` at 6bc2646637e2810f9e4ea3698ba48f0b896dc5c5):
  ``limit``, ``cursor`` (base64), ``fields``, ``fromStartTime``, ``toStartTime``; ``{"data": [...], "meta":
  {"cursor": ...}}``, the cursor absent on the last page;
* ``GET /api/public/traces`` (``trace.yml``): ``page``, ``limit``, ``fromTimestamp`` (and ``toTimestamp``,
  which later versions of the definition add); ``{"data": [...], "meta": MetaResponse}``;
* basic auth, username the public key and password the secret key, a wrong one answered 401
  (``UnauthorizedError``, ``fern/apis/server/definition/api.yml`` at 0d9efd10aff11d8fd2577c18cf1ba771d544d7b0);
* rate limits: the definition names no 429; the server answers one as Langfuse's ``sendRateLimitResponse``
  does (``web/src/features/public-api/server/RateLimitService.ts`` at 237bdd97d7cc3b98d5e1884408ab97490fb28130):
  status 429, the text body ``429 - rate limit exceeded``, ``Retry-After`` (whole seconds), ``X-RateLimit-Limit``,
  ``X-RateLimit-Remaining`` and ``X-RateLimit-Reset`` (a JavaScript ``Date.toString()``).

The observations and traces served are the real-shaped pages in ``tests/data/langfuse`` (see its README),
copied under new ids an hour apart; the server orders them newest first.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from helpers import DATA, ROOT

PK, SK = "pk-lf-1234567890", "sk-lf-secret-0987654321"
NOW = datetime(2025, 3, 4, 20, 0, tzinfo=UTC)


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _z(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _shifted(doc: dict, suffix: str, hours: int, trace: bool = False) -> dict:
    d = json.loads(json.dumps(doc))
    d["id"] = d["id"] + suffix
    if trace:
        d["timestamp"] = _z(_t(d["timestamp"]) + timedelta(hours=hours))
        return d
    d["traceId"] = d["traceId"] + suffix
    for k in ("startTime", "endTime", "completionStartTime", "createdAt", "updatedAt"):
        if d.get(k):
            d[k] = _z(_t(d[k]) + timedelta(hours=hours))
    return d


class Langfuse:
    """The state the server answers from: observations (v1 or v2 shape), traces, injected 429s."""

    def __init__(self, copies: int):
        self.v1 = [_shifted(o, f"-{k}", k) for k in range(copies)
                   for o in json.loads((DATA / "langfuse" / "api_v1_observations.json").read_text())["data"]]
        self.v2 = [_shifted(o, f"-{k}", k) for k in range(copies)
                   for o in json.loads((DATA / "langfuse" / "api_v2_observations.json").read_text())["data"]]
        self.traces = [_shifted(t, f"-{k}", k, trace=True) for k in range(copies)
                       for t in json.loads((DATA / "langfuse" / "api_v1_traces.json").read_text())["data"]]
        self.rate_limit_at: set[int] = set()     # the request numbers answered 429
        self.requests: list[str] = []
        self.lock = threading.Lock()

    def add(self, suffix: str, hours: float) -> None:
        base_v1 = json.loads((DATA / "langfuse" / "api_v1_observations.json").read_text())["data"]
        base_v2 = json.loads((DATA / "langfuse" / "api_v2_observations.json").read_text())["data"]
        self.v1 += [_shifted(o, suffix, hours) for o in base_v1]
        self.v2 += [_shifted(o, suffix, hours) for o in base_v2]
        self.traces += [_shifted(t, suffix, hours, trace=True)
                        for t in json.loads((DATA / "langfuse" / "api_v1_traces.json").read_text())["data"]]


def _window(rows, q, key_from, key_to, field):
    lo = _t(q[key_from][0]) if key_from in q else None
    hi = _t(q[key_to][0]) if key_to in q else None
    keep = [r for r in rows if (lo is None or _t(r[field]) >= lo) and (hi is None or _t(r[field]) < hi)]
    return sorted(keep, key=lambda r: (_t(r[field]), r["id"]), reverse=True)


def _paged(rows, q):
    page, limit = int(q.get("page", ["1"])[0]), int(q.get("limit", ["50"])[0])
    total_pages = -(-len(rows) // limit) if rows else 0
    return {"data": rows[(page - 1) * limit: page * limit],
            "meta": {"page": page, "limit": limit, "totalItems": len(rows), "totalPages": total_pages}}


def handler_for(state: Langfuse):
    good = "Basic " + base64.b64encode(f"{PK}:{SK}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            url = urlsplit(self.path)
            q = parse_qs(url.query)
            with state.lock:
                state.requests.append(self.path)
                n = len(state.requests)
            if self.headers.get("Authorization") != good:
                return self._send(401, {"message": "Invalid credentials. Confirm that you've configured the "
                                                   "correct host."})
            if n in state.rate_limit_at:
                reset = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%a %b %d %Y %H:%M:%S GMT+0000 "
                                                                            "(Coordinated Universal Time)")
                return self._send(429, "429 - rate limit exceeded",
                                  {"Retry-After": "1", "X-RateLimit-Limit": "30", "X-RateLimit-Remaining": "0",
                                   "X-RateLimit-Reset": reset})
            if url.path == "/api/public/observations":
                rows = _window(state.v1, q, "fromStartTime", "toStartTime", "startTime")
                return self._send(200, _paged(rows, q))
            if url.path == "/api/public/v2/observations":
                rows = _window(state.v2, q, "fromStartTime", "toStartTime", "startTime")
                limit = int(q.get("limit", ["50"])[0])
                at = int(base64.b64decode(q["cursor"][0]).decode()) if "cursor" in q else 0
                meta = {"cursor": base64.b64encode(str(at + limit).encode()).decode()} if at + limit < len(rows) else {}
                return self._send(200, {"data": rows[at: at + limit], "meta": meta})
            if url.path == "/api/public/traces":
                rows = _window(state.traces, q, "fromTimestamp", "toTimestamp", "timestamp")
                return self._send(200, _paged(rows, q))
            return self._send(404, {"message": "Not found"})

        def _send(self, code, doc, headers=None):
            text = isinstance(doc, str)
            body = doc.encode() if text else json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
    return Handler


@pytest.fixture()
def langfuse():
    servers = []

    def start(copies: int = 4) -> tuple[str, Langfuse]:
        state = Langfuse(copies)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}", state
    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _model_calls(obs: list[dict]) -> list[str]:
    return sorted(o["id"] for o in obs if o["type"] in ("GENERATION", "EMBEDDING"))


def _ids(con) -> list[str]:
    return sorted(r[0] for r in con.execute("SELECT request_id FROM requests").fetchall())


class Crash(Exception):
    pass


def test_v1_pages_interrupted_and_restarted_every_observation_once_through_a_429(langfuse):
    from finops import store
    from finops.ingest import pulls

    host, state = langfuse(4)
    state.rate_limit_at = {3}
    waits: list[float] = []
    con = store.connect(":memory:")

    def crash(page, result):
        if page == 4:
            raise Crash("killed after page 4 was committed")

    kw = {"api": "v1", "page_size": 3, "since": datetime(2025, 3, 4, 13), "window": timedelta(hours=2),
          "public_key": PK, "secret_key": SK, "now": NOW, "sleep": waits.append}
    with pytest.raises(Crash):
        pulls.pull_langfuse(con, host, on_page=crash, **kw)
    assert waits == [1.0]                            # the 429's Retry-After, honoured
    assert 0 < len(_ids(con)) < len(_model_calls(state.v1))
    result = pulls.pull_langfuse(con, host, **kw)
    assert _ids(con) == _model_calls(state.v1)       # every model call once; spans are not requests
    assert result.cursor == {"start_time": "2025-03-04 20:00:00"}
    # userId (the tenant) and the trace's sessionId come from the traces joined in
    tenants = dict(con.execute("SELECT request_id, tenant FROM requests").fetchall())
    assert tenants["obs-002-0"] == "user-17" and tenants["obs-007-3"] == "user-42"
    requested = [r for r in state.requests if r.startswith("/api/public/observations")]
    assert all("fromStartTime=" in r and "toStartTime=" in r for r in requested)


def test_v2_cursor_pages_then_only_the_new_and_late_observations(langfuse):
    from finops import store
    from finops.ingest import pulls

    host, state = langfuse(3)
    con = store.connect(":memory:")
    kw = {"api": "v2", "page_size": 4, "public_key": PK, "secret_key": SK, "now": NOW}
    first = pulls.pull_langfuse(con, host, **kw)
    assert _ids(con) == _model_calls(state.v2) and first.rows_ingested == 18
    assert any("cursor=" in r for r in state.requests)
    assert all("fields=core%2Cbasic%2Ctime%2Cmodel%2Cusage%2Cmetrics" in r for r in state.requests
               if r.startswith("/api/public/v2/observations"))
    # Langfuse made visible late an observation that started 10 minutes before the cursor, and a new one came
    state.add("-late", 5.8)         # 19:48-19:53: before the cursor (20:00), within the 15-minute overlap
    state.add("-new", 6.5)          # 20:30-20:35
    second = pulls.pull_langfuse(con, host, **{**kw, "now": NOW + timedelta(hours=1)})
    assert _ids(con) == _model_calls(state.v2)
    assert second.rows_ingested == 6 + 6                    # 6 model calls each; the rest read again, skipped
    v = con.execute("SELECT model, input_tokens FROM requests WHERE request_id = 'obs-002-0'").fetchall()
    assert v and v[0][0]


def _cli(*args, env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LANGFUSE_")}
    return subprocess.run([sys.executable, "-m", "finops", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**clean, **env}, timeout=120)


def test_cli_keys_from_the_environment_wrong_key_one_line(langfuse, tmp_path):
    host, state = langfuse(1)
    db = str(tmp_path / "lf.duckdb")
    ok = _cli("pull", "langfuse", "--host", host, "--db", db,
              env={"LANGFUSE_PUBLIC_KEY": PK, "LANGFUSE_SECRET_KEY": SK})
    assert ok.returncode == 0, ok.stderr
    assert "6 ingested" in ok.stdout and SK not in ok.stdout + ok.stderr
    again = _cli("pull", "langfuse", "--api", "v1", "--host", host, "--db", db, "--json",
                 env={"LANGFUSE_PUBLIC_KEY": PK, "LANGFUSE_SECRET_KEY": SK})
    assert again.returncode == 0 and '"rows_ingested": 0' in again.stdout
    wrong = _cli("pull", "langfuse", "--host", host, "--db", db,
                 env={"LANGFUSE_PUBLIC_KEY": PK, "LANGFUSE_SECRET_KEY": "sk-lf-wrong-key"})
    assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1
    assert "refused the keys (HTTP 401)" in wrong.stderr and "sk-lf-wrong-key" not in wrong.stderr
    none = _cli("pull", "langfuse", "--host", host, "--db", db, env={})
    assert none.returncode == 1 and "LANGFUSE_PUBLIC_KEY" in none.stderr


def test_a_429_that_outlasts_max_wait_stops_the_pull_keeping_what_was_committed(langfuse):
    from finops import store
    from finops.errors import InputError
    from finops.ingest import pulls

    host, state = langfuse(1)
    state.rate_limit_at = set(range(1, 1000))
    waits: list[float] = []
    con = store.connect(":memory:")
    with pytest.raises(InputError, match="kept answering HTTP 429"):
        pulls.pull_langfuse(con, host, public_key=PK, secret_key=SK, now=NOW, max_wait_s=3, sleep=waits.append)
    assert waits == [1.0, 1.0, 1.0] and pulls.cursor(con, "langfuse", f"langfuse {host} {PK}") is None
