"""What more than one test file uses: paths, a bounded wait, AppTest runs, the spend fixtures' rows.

Test files import these as ``from helpers import ...`` (pytest puts ``tests/`` on ``sys.path``);
never from ``conftest`` (pytest imports it itself, and a second import under another name runs it
twice) and never from another test file.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
APP = str(ROOT / "app.py")

T = TypeVar("T")


# ---------------------------------------------------------------- waiting on an event

def wait_until(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.02,
               message: str = "condition") -> T:
    """Call ``predicate`` until it returns something truthy and return that; fail after ``timeout`` s.

    For waiting on an event (a server answering, a line in a log, a queue filling), never for
    letting time pass. The deadline only bounds a hang: nothing is asserted about how long it took.

    >>> calls = []
    >>> wait_until(lambda: calls.append(1) or len(calls) >= 3 and len(calls))
    3
    >>> wait_until(lambda: False, timeout=0.05, message="never")
    Traceback (most recent call last):
    ...
    AssertionError: never: not within 0.05 s
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message}: not within {timeout:g} s")
        time.sleep(interval)


async def async_wait_until(predicate: Callable[[], Awaitable[object]], timeout: float = 30.0,
                           interval: float = 0.02, message: str = "condition") -> object:
    """:func:`wait_until` inside an event loop, for a predicate that is a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message}: not within {timeout:g} s")
        await asyncio.sleep(interval)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loaded_attrs(path) -> list[str]:
    """The ``attrs`` text of every request that loading ``path`` into a fresh in-memory store gives, by request_id
    (what two readings of the same records must agree on)."""
    from finops import store
    from finops.ingest import ingest_path

    c = store.connect(":memory:")
    try:
        ingest_path(c, path)
        return [a for (a,) in c.execute("SELECT attrs FROM requests ORDER BY request_id").fetchall()]
    finally:
        c.close()


def read_jsonl(path: Path) -> list[dict]:
    """The JSON objects of a newline-delimited file, blank lines skipped."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def store_of_records(folder: Path, rows: list[dict], name: str = "s.duckdb") -> str:
    """A store at ``folder/name`` holding ``rows`` (canonical records) loaded as a JSON Lines file; its path."""
    from finops import store
    from finops.ingest import IngestOptions, ingest_path
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = str(folder / name)
    con = store.connect(path)
    try:
        ingest_path(con, folder / "records.jsonl", IngestOptions())
    finally:
        con.close()
    return path


def failing_store(folder: Path) -> str:
    """A store at ``folder/failing.duckdb`` of three failed gpt-4o requests of tenant acme (2026-11-20 10:00-10:02):
    too few for any alert rule's minimum requests per window; its path."""
    from finops import store
    from finops.ingest import ingest_path
    f = folder / "failing.csv"
    f.write_text("request_id,ts,model,tenant,input_tokens,output_tokens,total_ms,status\n"
                 + "".join(f"e{i},2026-11-20T10:0{i}:00Z,gpt-4o,acme,1000,100,900,error\n" for i in range(3)))
    path = str(folder / "failing.duckdb")
    con = store.connect(path)
    try:
        ingest_path(con, f)
    finally:
        con.close()
    return path


def untimed_fleet_store(folder: Path) -> str:
    """A store of the committed Mooncake excerpt (tests/data/mooncake_conversation_head300.jsonl: 300 real requests
    over 102 s from 2025-01-01 00:00, arrivals and tokens, no time of any kind) served by the self-hosted
    ``gpu-model`` of :func:`add_test_models`; its path."""
    from datetime import datetime

    from finops import store
    from finops.ingest import IngestOptions, ingest_path
    path = str(folder / "mooncake.duckdb")
    con = store.connect(path)
    try:
        ingest_path(con, Path(__file__).parent / "data" / "mooncake_conversation_head300.jsonl",
                    IngestOptions(model="gpu-model", start=datetime(2025, 1, 1)))
        add_test_models(con)
    finally:
        con.close()
    return path


# ---------------------------------------------------------------- AppTest smoke tests

def run_page(db_path: str, page: str | None = None, timeout: float = 120, query_params: dict | None = None):
    """AppTest of app.py on ``db_path``, switched to ``page`` (e.g. "views/cost.py")."""
    from streamlit.testing.v1 import AppTest  # here: most tests never load Streamlit's test harness

    os.environ["FINOPS_DB"] = db_path
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in (query_params or {}).items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    return at


def shown(text) -> str:
    r"""``text`` as Markdown shows it: the backslash escapes of ``views._shared.plain`` taken out
    ("\(300 requests\)" reads "(300 requests)")."""
    return re.sub(r"\\(.)", r"\1", str(text))


def chart_title(chart) -> str:
    """A chart's title as one line (an AppTest chart element or a spec dict): a long title is lines
    (finops.charts._lines), a substring may span two of them."""
    import json
    spec = json.loads(chart.proto.spec) if hasattr(chart, "proto") else chart
    title = spec.get("title", "")
    text = title.get("text", "") if isinstance(title, dict) else title
    return " ".join(text) if isinstance(text, list) else str(text)


def texts(at) -> str:
    """All markdown, captions, titles, headers, info/warning text of a run, joined (for assertions)."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success"):
        parts.extend(str(getattr(e, "value", "")) for e in getattr(at, kind))
    return "\n".join(parts)


# ---------------------------------------------------------------- the hand-checked spend fleet

SPEND_COLS = ["request_id", "ts", "tenant", "sla_tier", "model", "input_tokens", "output_tokens",
              "cached_input_tokens", "service_ms", "total_ms", "cost_usd", "cache_hit", "status", "strategy",
              "escalated"]
MARCH_2 = datetime(2026, 3, 2, 10, 0)


def spend_frame(rows) -> pd.DataFrame:
    """Rows given as tuples in ``SPEND_COLS`` order."""
    return pd.DataFrame(rows, columns=SPEND_COLS)


def march(d: int, h: int = 10, m: int = 0) -> datetime:
    """``d`` March 2026 at ``h:m``."""
    return MARCH_2.replace(day=d, hour=h, minute=m)


def add_test_models(con) -> None:
    """Save the price book with two hand-priced models added: ``gpu-model`` (self-hosted, 2 replicas x
    1 GPU x $2/GPU-hour = $4 an hour, 1 slot a replica) and ``api-model`` ($1 / $4 / $0.25 per 1M
    input / output / cached input, $0.001 a request)."""
    from finops.spend import pricing

    book = pricing.price_book(con)
    own = pd.DataFrame([
        dict(model="gpu-model", provider="self-hosted", publisher="Meta", kind="self_hosted", size_class="large",
             gpu_hour_usd=2.0, gpus_per_replica=1, replicas=2, slots_per_replica=1),
        dict(model="api-model", provider="Acme AI", publisher="Acme AI", kind="api", size_class="small",
             input_usd_per_1m=1.0, output_usd_per_1m=4.0, cached_input_usd_per_1m=0.25, request_usd=0.001),
    ])
    pricing.save_price_book(con, pd.concat([book[~book.model.isin(own.model)], own], ignore_index=True))


def fleet_day_store(replicas: int):
    """A store where ``m-self`` (self-hosted, 1 GPU x $2 a replica, 1 slot) is declared with ``replicas`` for
    1 March 2026, serving requests of 10 s each: 270 an hour off-peak (λ = 0.075 req/s, A = 0.75) and 630 an
    hour from 10:00 to 17:59 (λ = 0.175, A = 1.75)."""
    from datetime import timedelta

    from finops import store
    from finops.ingest import ingest_frame
    from finops.spend import fleets, pricing

    con = store.connect(":memory:")
    book = pricing.price_book(con)
    own = pd.DataFrame([dict(model="m-self", provider="self", publisher="x", kind="self_hosted", gpu_hour_usd=2.0,
                             gpus_per_replica=1, replicas=2, slots_per_replica=1)])
    pricing.save_price_book(con, pd.concat([book, own], ignore_index=True))
    fleets.save_schedule(con, pd.DataFrame([{"model": "m-self", "starts_at": "2026-03-01", "ends_at": "2026-03-02",
                                             "replicas": replicas}]))
    rows = []
    for h in range(24):
        n = 630 if 10 <= h < 18 else 270
        start = datetime(2026, 3, 1, h)
        rows += [{"request_id": f"q{h}-{i}", "ts": start + timedelta(seconds=3600 * i / n), "model": "m-self",
                  "service_ms": 10_000.0, "tenant": "t", "status": "ok"} for i in range(n)]
    ingest_frame(con, pd.DataFrame(rows))
    return con


# ---------------------------------------------------------------- alert delivery: a store and local receivers

ALERT_T0 = datetime(2026, 4, 6, 0, 0)


def alert_rows(n: int, start: datetime, model: str = "gpt-4o", tenant: str = "acme", errors: int = 0) -> pd.DataFrame:
    """``n`` requests over the hour from ``start``, the first ``errors`` of them failed."""
    from datetime import timedelta

    return pd.DataFrame({"request_id": [f"{model}-{tenant}-{start:%d%H}-{i}" for i in range(n)],
                         "ts": [start + timedelta(minutes=60 * i / n) for i in range(n)], "model": model,
                         "tenant": tenant, "sla_tier": "premium",
                         "status": ["error"] * errors + ["ok"] * (n - errors), "total_ms": 500.0, "queue_ms": 0.0})


def alert_store(path: str = ":memory:"):
    """A store with four critical error-rate alerts (20 of 200 requests failed in each hour named) in three
    groups: gpt-4o for acme and for beta in 00:00-01:00 (one group: same model, same window), gpt-4o for acme
    in 03:00-04:00 (apart: it does not touch 01:00), gpt-4o-mini for acme in 00:00-01:00 (another model)."""
    from datetime import timedelta

    from finops import store
    from finops.ingest import ingest_frame

    con = store.connect(path)
    h = lambda k: ALERT_T0 + timedelta(hours=k)  # noqa: E731
    frames = [alert_rows(200, h(0), errors=20), alert_rows(200, h(0), tenant="beta", errors=20),
              alert_rows(200, h(1)), alert_rows(200, h(2)), alert_rows(200, h(3), errors=20),
              alert_rows(200, h(0), model="gpt-4o-mini", errors=20)]
    ingest_frame(con, pd.concat(frames, ignore_index=True))
    return con


class Receiver:
    """A local HTTP server on 127.0.0.1 (http.server, a thread) that keeps every POST: path, headers and the
    JSON body. ``fail`` answers that many requests with HTTP 500 first; a POST to ``/slow`` waits until
    :meth:`close` (for timeouts)."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.posts: list[dict] = []
        self.fail = 0
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.startswith("/slow"):
                    outer.release.wait(30)
                if outer.fail > 0:
                    outer.fail -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                outer.posts.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
# ---------------------------------------------------------------- a wide, long store (issue 17: bounded charts)

def build_wide_store(path: str, *, tenants: int = 3000, models: int = 1200, rows: int = 120_000,
                     since: str = "2016-01-01", years: int = 10) -> str:
    """A store of ``rows`` requests over ``tenants`` tenants, ``models`` models (every 400th self-hosted,
    in the price book) and ``years`` years, written by DuckDB itself (the loader would take minutes),
    then its rollups, sketch and batch row as a load leaves them."""
    from finops import store
    con = store.connect(path)
    span_s = years * 365 * 86400
    con.execute(f"""
        INSERT INTO requests (request_id, ts, tenant, sla_tier, model, route, status, input_tokens, output_tokens,
                              cached_input_tokens, queue_ms, prefill_ms, decode_ms, ttft_ms, total_ms, provider,
                              replica, batch_id)
        SELECT 'w' || i, TIMESTAMP '{since}' + to_seconds(CAST((i * 7919) % {span_s} AS BIGINT)),
               't' || (i % {tenants}), CASE i % 3 WHEN 0 THEN 'gold' WHEN 1 THEN 'silver' ELSE 'bronze' END,
               'model-' || (i % {models}), CASE i % 2 WHEN 0 THEN 'fast' ELSE 'slow' END,
               CASE WHEN i % 50 = 0 THEN 'error' ELSE 'ok' END,
               100 + i % 5000, 10 + i % 700, (i % 5000) // 3, i % 400, 5 + i % 90, 20 + i % 900, 30 + i % 500,
               60 + i % 4000, 'acme-cloud', 'r' || (i % 4), 1
        FROM range({rows}) t(i)""")
    # every 400th model self-hosted in the price book (billed every hour of its ten years), the rest API-priced
    cols = [c for (c,) in con.execute("SELECT column_name FROM (DESCRIBE prices)").fetchall()]
    for m in range(0, models, 1):
        row = {"model": f"model-{m}", "provider": "acme-cloud"}
        if m % 400 == 0:
            row.update(kind="self_hosted", gpu_hour_usd=2.5, gpus_per_replica=1, replicas=1, slots_per_replica=4)
        else:
            row.update(kind="api", input_usd_per_1m=0.1 + m % 13, output_usd_per_1m=0.4 + m % 17)
        present = {k: v for k, v in row.items() if k in cols}
        con.execute(f"INSERT INTO prices ({', '.join(present)}) VALUES ({', '.join('?' * len(present))})",
                    list(present.values()))
    con.execute("INSERT INTO batches SELECT 1, 'wide.csv', 'wide', 'canonical', '{}', count(*), count(*), 0, 0, "
                "now()::TIMESTAMP, min(ts), max(ts) FROM requests")
    store.rebuild_rollups(con)
    store.rebuild_sketch(con)
    con.execute("INSERT INTO budgets SELECT 't' || i, date_trunc('month', max_ts)::DATE, 10.0 "
                "FROM batches, range(400) r(i)")
    store.bump_data_version(con)
    con.close()
    return path


@contextlib.contextmanager
def dashboard(db, *flags: str, env: dict | None = None, log: Path | None = None, timeout: float = 60.0):
    """A dashboard (``streamlit run app.py``) on the store ``db`` on a free port of 127.0.0.1, with extra
    ``streamlit run`` flags (e.g. ``--secrets.files``) and environment; its output to ``log`` when given.
    Yields ``(base URL, process)`` and stops it (terminate, then kill) when the block ends."""
    port = free_port()
    out = open(log, "wb") if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", *flags],
        cwd=ROOT, env=dict(os.environ, FINOPS_DEMO="0", **(env or {}), FINOPS_DB=str(db)),
        stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            said = log.read_text(errors="replace")[-2000:] if log is not None else ""
            raise RuntimeError("streamlit exited: " + said)
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return True
        except OSError:
            return False

    try:
        wait_until(healthy, timeout=timeout, interval=0.2, message="streamlit answering /_stcore/health")
        yield url, proc
    finally:
        stop_process(proc, timeout=20)
        if log is not None:
            out.close()


def stop_process(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Stop a server a test started: SIGTERM (it shuts down cleanly), then SIGKILL after ``timeout`` s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def use_python_reading(m, fmt: str) -> None:
    """Within the monkeypatch context ``m``, read format ``fmt`` by its Python reading: its adapter's reader called
    with ``fast=False`` (a reader without that switch has one reading and is left as it is)."""
    import dataclasses
    import functools
    import inspect

    from finops.ingest import base, loader
    adapters = [dataclasses.replace(a, read=functools.partial(a.read, fast=False))
                if a.name == fmt and "fast" in inspect.signature(a.read).parameters else a for a in base.ADAPTERS]
    m.setattr(base, "ADAPTERS", adapters)
    m.setattr(loader, "ADAPTERS", adapters)
