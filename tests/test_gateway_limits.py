"""Issue 17, the gateway: bad input never takes it down.

Real servers on 127.0.0.1 (in a thread, or the CLI in a subprocess when a signal, a descriptor
limit or the process's memory is the point), raw sockets where the bytes on the wire matter.
Every wait has a deadline; no test measures how long something took.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response, StreamingResponse

from finops.gateway.app import ServerThread, create_app
from finops.gateway.config import parse_config
from finops.gateway.log import JsonlLog, MemoryLog
from finops.gateway.pipeline import Gateway

ROOT = Path(__file__).resolve().parent.parent
KEY = {"Authorization": "Bearer sk-alice"}
KEY_HEADER = "Authorization: Bearer sk-alice"
MIB = 1024 * 1024

BASE_TOML = """
[tenants.alice]
api_keys = ["sk-alice"]

[backends.fast]
kind = "mock"
capacity = 4
prefill_ms_per_token = 0.0
decode_ms_per_token = 0.0
output_tokens = 3
"""

TIGHT_TOML = """
[server]
max_body_bytes = 65536
header_timeout_s = 0.5
body_timeout_s = 2.0
""" + BASE_TOML

CHAT = json.dumps({"messages": [{"role": "user", "content": "hello"}]}).encode()


# ---------------------------------------------------------------- helpers

def serve_in_thread(toml: str, log=None, http: str = "auto") -> ServerThread:
    cfg = parse_config(tomllib.loads(toml))
    gw = Gateway(cfg, log if log is not None else MemoryLog())
    server = ServerThread(create_app(gw), limits=cfg.server, http=http)
    server.gw = gw
    return server


def read_until_eof(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a server that never closes fails the socket's timeout."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def exchange(port: int, data: bytes, *, timeout_s: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(data)
        return read_until_eof(sock)


def parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def post_head(path: str, *headers: str) -> bytes:
    return ("\r\n".join([f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
                         *headers]) + "\r\n\r\n").encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LAUNCH = ("import argparse, sys; from finops.commands import gateway as g; p = argparse.ArgumentParser(); "
          "g.add_arguments(p); sys.exit(g.run(p.parse_args()))")


def spawn_gateway(tmp: Path, toml: str, *, nofile: int | None = None) -> tuple[subprocess.Popen, str, Path]:
    """``python -m finops gateway``'s own add_arguments/run in a subprocess (optionally under ``ulimit -n``)."""
    cfg = tmp / "gateway.toml"
    cfg.write_text(toml, encoding="utf-8")
    log = tmp / "gateway.jsonl"
    port = free_port()
    stderr = (tmp / "stderr.txt").open("wb")

    def limit_descriptors():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "--config", str(cfg), "--port", str(port),
                             "--log", str(log)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=limit_descriptors if nofile else None)
    stderr.close()              # the child has its own copy
    proc.stderr_path = tmp / "stderr.txt"
    return proc, f"http://127.0.0.1:{port}", log


def wait_healthy(proc: subprocess.Popen, url: str, headers=KEY, deadline_s: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr_path.read_text()
        try:
            if httpx.get(url + "/healthz", headers=headers, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)        # polling interval of a readiness check, not a synchronisation
    raise AssertionError(f"gateway at {url} was not healthy before the deadline")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def tight():
    with serve_in_thread(TIGHT_TOML) as server:
        yield server


@pytest.fixture(scope="module", params=["httptools", "h11"])
def tight_any_parser(request):
    """The head deadline is mixed into both of uvicorn's HTTP/1.1 protocols."""
    with serve_in_thread(TIGHT_TOML, http=request.param) as server:
        yield server


@pytest.fixture(scope="module")
def default_limits():
    with serve_in_thread(BASE_TOML) as server:
        yield server


# ---------------------------------------------------------------- the head decides before the body

def test_unauthenticated_upload_is_refused_from_its_head(default_limits):
    """No key, 100 MB announced, not a byte sent: 401 at once, and the connection is closed."""
    raw = exchange(default_limits.port, post_head("/v1/chat/completions", f"Content-Length: {100 * MIB}"))
    status, headers, body = parse_response(raw)
    assert status == 401 and headers["connection"] == "close" and headers["www-authenticate"] == "Bearer"
    assert json.loads(body)["error"]["type"] == "invalid_api_key"
    assert default_limits.gw.metrics.counter("finops_gateway_unauthorized_total") >= 1


def test_declared_body_over_max_body_bytes_is_413_before_any_byte_is_read(default_limits):
    too_big = 8 * MIB + 1                                       # the default max_body_bytes is 8 MiB
    before = len(default_limits.gw.log.rows)
    raw = exchange(default_limits.port, post_head("/route", KEY_HEADER, f"Content-Length: {too_big}"))
    status, headers, body = parse_response(raw)
    assert status == 413 and headers["connection"] == "close"
    err = json.loads(body)["error"]
    assert err["type"] == "request_too_large" and str(too_big) in err["message"]
    assert len(default_limits.gw.log.rows) == before


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_chunked_body_is_cut_off_at_max_body_bytes(tight):
    """A chunked body (no Content-Length) is counted as it arrives: past 64 KiB it is 413, unfinished."""
    before = len(tight.gw.log.rows)
    with socket.create_connection(("127.0.0.1", tight.port), timeout=10) as sock:
        sock.sendall(post_head("/route", KEY_HEADER, "Transfer-Encoding: chunked"))
        for _ in range(17):                                     # 17 x 4 KiB > 64 KiB; never terminated
            sock.sendall(chunked(b" " * 4096))
        status, headers, body = parse_response(read_until_eof(sock))
    assert status == 413 and headers["connection"] == "close"
    assert json.loads(body)["error"]["type"] == "request_too_large"
    assert len(tight.gw.log.rows) == before                    # the handler never ran
    # a body under the limit, chunked too, is served
    ok = httpx.post(tight.url + "/route", headers=KEY, timeout=10,
                    content=iter([b'{"prompt": "', b"x" * 1000, b'"}']))
    assert ok.status_code == 200 and ok.json()["routed_to"] == "fast"


# ---------------------------------------------------------------- slow clients

def test_body_that_does_not_arrive_in_time_is_408(tight):
    raw = exchange(tight.port, post_head("/route", KEY_HEADER, "Content-Length: 100") + b'{"prompt": ')
    status, headers, body = parse_response(raw)
    assert status == 408 and headers["connection"] == "close"
    assert json.loads(body)["error"]["type"] == "request_timeout"


@pytest.mark.parametrize("sent", [b"", b"POST /route HTTP/1.1\r\nHost: 127.0.0.1\r\n"],
                         ids=["nothing", "half a head"])
def test_connection_without_a_complete_head_is_closed(tight_any_parser, sent):
    assert exchange(tight_any_parser.port, sent) == b""                   # closed by the server, no answer


def test_keep_alive_connection_is_closed_when_the_next_head_stalls(tight_any_parser):
    with socket.create_connection(("127.0.0.1", tight_any_parser.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + KEY_HEADER.encode() + b"\r\n\r\n")
        first = b""
        while b'"status":"ok"' not in first:
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")            # and then nothing more
        assert read_until_eof(sock) == b""


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_connections_past_max_connections_get_503(http):
    toml = "[server]\nmax_connections = 2\n" + BASE_TOML
    with serve_in_thread(toml, http=http) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(2)]
        try:
            deadline = time.monotonic() + 10
            while len(server.server.server_state.connections) < 2:
                assert time.monotonic() < deadline, "the server did not take the two idle connections"
                time.sleep(0.01)
            status, headers, body = parse_response(exchange(server.port, b""))
            assert status == 503 and headers["connection"] == "close"
            assert json.loads(body)["error"]["type"] == "overloaded"
        finally:
            for sock in idle:
                sock.close()
        deadline = time.monotonic() + 10                        # once they are gone, requests are served
        while True:
            try:
                if httpx.get(server.url + "/healthz", headers=KEY, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the gateway stayed overloaded after the idle sockets closed"
            time.sleep(0.05)


def test_idle_sockets_under_a_256_descriptor_limit_do_not_starve_real_requests(tmp_path):
    """300 sockets that never send a head, against a gateway with ``ulimit -n 256``: real requests go through."""
    toml = "[server]\nheader_timeout_s = 1.0\n" + BASE_TOML
    proc, url, _ = spawn_gateway(tmp_path, toml, nofile=256)
    port = int(url.rsplit(":", 1)[1])
    idle: list[socket.socket] = []
    try:
        wait_healthy(proc, url)
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        served = None
        deadline = time.monotonic() + 30
        while served is None and time.monotonic() < deadline:
            try:
                r = httpx.get(url + "/healthz", headers=KEY, timeout=5)
                if r.status_code == 200:
                    served = r
            except httpx.HTTPError:
                pass
            time.sleep(0.05)                                    # retry interval until the deadline
        assert served is not None, "no real request was served while the idle sockets were open"
        assert proc.poll() is None
        # the surplus sockets were refused with a 503 at once; the rest were closed at the head deadline
        answers = [read_until_eof(sock) for sock in idle]
        assert all(a == b"" or a.startswith(b"HTTP/1.1 503") for a in answers)
        assert any(a.startswith(b"HTTP/1.1 503") for a in answers)
    finally:
        for sock in idle:
            sock.close()
        stop(proc)
    assert "max_connections lowered from 1000 to 188" in (tmp_path / "stderr.txt").read_text()  # 256 - 64 - 4 slots


# ---------------------------------------------------------------- upstreams

SECRET = "internal: key sk-upstream-secret at 10.0.0.7"


def make_upstream() -> FastAPI:
    app = FastAPI()
    big = json.dumps({"choices": [{"message": {"role": "assistant", "content": "x" * (2 * MIB)}}],
                      "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()

    @app.post("/v1/chat/completions")
    async def completions(body: dict):
        model = body["model"]
        if model == "leaky":
            return JSONResponse({"error": {"message": SECRET}}, status_code=500)
        if model == "huge":
            return Response(big, media_type="application/json")
        if model == "endless":                                  # chunked: no Content-Length to refuse early
            async def stream():
                yield b'{"choices": [{"message": {"role": "assistant", "content": "'
                for _ in range(64):
                    yield b"y" * 65536
                yield b'"}}]}'
            return StreamingResponse(stream(), media_type="application/json")
        return {"choices": [{"message": {"role": "assistant", "content": "pong"}}],
                "usage": {"prompt_tokens": 2, "completion_tokens": 1}}

    return app


@pytest.fixture(scope="module")
def proxied():
    with ServerThread(make_upstream()) as upstream:
        toml = BASE_TOML + "".join(f"""
[backends.{name}]
kind = "openai"
base_url = "{upstream.url}/v1"
quality = 0.0
max_response_bytes = 262144
""" for name in ("leaky", "huge", "endless", "fine"))
        with serve_in_thread(toml) as server:
            yield server


def ask(server, model: str) -> httpx.Response:
    return httpx.post(server.url + "/v1/chat/completions", headers=KEY, timeout=10,
                      json={"model": model, "messages": [{"role": "user", "content": "hi"}]})


def test_upstream_error_body_goes_to_the_server_log_not_to_the_client(proxied, caplog):
    r = ask(proxied, "leaky")
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["type"] == "http_500" and "HTTP 500" in err["message"]
    assert "sk-upstream-secret" not in r.text and "10.0.0.7" not in r.text
    assert any(SECRET in rec.getMessage() for rec in caplog.records if rec.name == "finops.gateway")
    (row,) = [row for row in proxied.gw.log.rows if row["request_id"] == err["request_id"]]
    assert (row["status"], row["error_type"]) == ("error", "http_500")


@pytest.mark.parametrize("model", ["huge", "endless"])
def test_upstream_answer_over_max_response_bytes_is_a_json_502(proxied, model):
    r = ask(proxied, model)
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["type"] == "upstream_response_too_large" and "262144" in err["message"]
    assert len(r.content) < 1000
    (row,) = [row for row in proxied.gw.log.rows if row["request_id"] == err["request_id"]]
    assert (row["status"], row["error_type"], row["route"]) == ("error", "upstream_response_too_large", model)
    assert ask(proxied, "fine").json()["choices"][0]["message"]["content"] == "pong"


# ---------------------------------------------------------------- admin endpoints

@pytest.mark.parametrize("path", ["/metrics", "/healthz"])
def test_admin_endpoints_need_the_key_when_keys_are_set(default_limits, path):
    url = default_limits.url + path
    assert httpx.get(url, timeout=10).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer sk-wrong"}, timeout=10).status_code == 401
    assert httpx.get(url, headers=KEY, timeout=10).status_code == 200


def test_admin_endpoints_are_open_when_no_keys_are_set():
    open_toml = BASE_TOML.replace('api_keys = ["sk-alice"]', "")
    with serve_in_thread(open_toml) as server:
        assert httpx.get(server.url + "/metrics", timeout=10).status_code == 200
        assert httpx.get(server.url + "/healthz", timeout=10).json()["status"] == "ok"


# ---------------------------------------------------------------- the request log

def test_failed_log_write_is_a_logged_json_500_and_counted(caplog):
    """/dev/full: every write fails with ENOSPC, as on a full disk."""
    with serve_in_thread(BASE_TOML, log=JsonlLog("/dev/full")) as server:
        r = httpx.post(server.url + "/route", headers=KEY, json={"prompt": "hello"}, timeout=10)
        assert r.status_code == 500
        err = r.json()["error"]
        assert err["type"] == "log_write_failed" and err["request_id"].startswith("gw-")
        assert server.gw.metrics.counter("finops_gateway_log_write_errors_total") == 1
        logged = [rec.getMessage() for rec in caplog.records if rec.name == "finops.gateway"]
        assert any(err["request_id"] in m and "No space left" in m for m in logged)
        metrics = httpx.get(server.url + "/metrics", headers=KEY, timeout=10).text
        assert "finops_gateway_log_write_errors_total 1" in metrics


TORN = """
import json, resource, signal, sys
from finops.gateway.log import JsonlLog
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
log = JsonlLog(sys.argv[1])
log.write({"n": 1})
size = len(open(sys.argv[1], "rb").read())
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 20, resource.RLIM_INFINITY))  # room for part of a row
try:
    log.write({"n": 2, "pad": "x" * 100})
except OSError as exc:
    print(exc.errno)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
log.write({"n": 3})
"""


def test_a_row_cut_short_by_a_full_disk_does_not_swallow_the_next_row(tmp_path):
    path = tmp_path / "log.jsonl"
    out = subprocess.run([sys.executable, "-c", TORN, str(path)], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "27"                           # EFBIG: the write stopped part-way
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"n": 1} and json.loads(lines[-1]) == {"n": 3}
    assert len(lines) == 3 and lines[1].startswith('{"n":2')  # the torn row is one bad line of its own


def test_log_follows_rotation_and_sighup_reopens_it_without_killing(tmp_path):
    proc, url, log = spawn_gateway(tmp_path, BASE_TOML)
    try:
        wait_healthy(proc, url)

        def route(prompt: str) -> str:
            r = httpx.post(url + "/route", headers=KEY, json={"prompt": prompt}, timeout=10)
            assert r.status_code == 200
            return r.json()["request_id"]

        first = route("before rotation")
        log.rename(tmp_path / "gateway.jsonl.1")                # logrotate's default: rename, no signal
        second = route("after rotation")
        assert [r["request_id"] for r in rows(tmp_path / "gateway.jsonl.1")] == [first]
        assert [r["request_id"] for r in rows(log)] == [second]

        log.rename(tmp_path / "gateway.jsonl.2")
        proc.send_signal(signal.SIGHUP)                         # logrotate's postrotate
        wait_healthy(proc, url)
        assert proc.poll() is None                              # SIGHUP used to kill the gateway
        third = route("after SIGHUP")
        assert [r["request_id"] for r in rows(log)] == [third]
        assert [r["request_id"] for r in rows(tmp_path / "gateway.jsonl.2")] == [second]
    finally:
        stop(proc)


# ---------------------------------------------------------------- memory

def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def test_eight_unauthenticated_100mb_posts_leave_the_gateway_under_200mb(tmp_path):
    proc, url, _ = spawn_gateway(tmp_path, BASE_TOML)
    try:
        wait_healthy(proc, url)
        chunk = b" " * MIB

        def upload(_: int) -> str:
            def body():
                for _ in range(100):                            # 100 MB, one 1 MiB buffer sent 100 times
                    yield chunk
            try:
                r = httpx.post(url + "/v1/chat/completions", content=body(), timeout=60,
                               headers={"Content-Type": "application/json"})
            except httpx.TransportError:                        # refused mid-upload: the server closed
                return "closed"
            return str(r.status_code)

        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(upload, range(8)))
        assert set(outcomes) <= {"401", "closed"}, outcomes
        wait_healthy(proc, url)                                 # still serving
        peak = vm_hwm_mb(proc.pid)
        print(f"gateway VmHWM after 8 x 100 MB unauthenticated POSTs: {peak:.0f} MB")
        assert peak < 200
    finally:
        stop(proc)
