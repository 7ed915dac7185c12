"""Issue 16's acceptance for one store shared by a team: everything at once, nothing lost, no error anywhere.

Real processes on 127.0.0.1: a dashboard holding the store (its ingester follows a configured log and
receives OTLP/HTTP on a configured port), a second dashboard process (served by the first, finops.remote),
``finops ingest`` and ``finops report`` in loops from the command line, lines appended to the followed
log, GenAI spans sent by the OpenTelemetry SDK's OTLP/HTTP exporter, and both dashboards' pages loaded in
Chromium (Playwright) meanwhile. At the end: every command exited 0, no page showed an exception, the
store holds exactly the rows sent, and ``report`` totals equal a recount made here from the sources.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

from finops import access, remote, store
from finops.ingest import ingest_path, service
from helpers import ROOT, dashboard, free_port, wait_until

pytestmark = pytest.mark.e2e

ENV = dict(os.environ, FINOPS_DEMO="0")
CHROMIUM = "/usr/bin/chromium"
T0_NS = 1_764_590_400 * 10 ** 9            # 2025-12-01 12:00 UTC


def _row(i: int, model: str, tenant: str) -> dict:
    # costs in whole micro-dollars: their sum is exact in the store's 12-place decimals and here
    return {"request_id": f"{model}-{i}", "ts": f"2025-12-01T{10 + i // 3600 % 2:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "model": model, "tenant": tenant, "input_tokens": 100 + i % 97, "output_tokens": 10 + i % 13,
            "total_ms": 400.0 + i % 50, "status": "ok", "cost_usd": f"{(150 + i % 31) / 1e6:.6f}"}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _dashboard(db: Path, secrets: Path, log: Path):
    return dashboard(db, "--secrets.files", str(secrets), log=log, timeout=90)


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finops", *args, "--db", str(db)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)


def _send_spans(endpoint: str, first: int, n: int) -> list[dict]:
    """n GenAI chat spans through the SDK's OTLPSpanExporter (protobuf); the rows they must become."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import SpanKind

    provider = TracerProvider(resource=Resource.create({"service.name": "team-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")
    sent = []
    for i in range(first, first + n):
        start = T0_NS + i * 1_000_000_000
        span = tracer.start_span("chat team-otel", kind=SpanKind.CLIENT, start_time=start, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "team-otel",
            "gen_ai.response.model": "team-otel", "gen_ai.usage.input_tokens": 500 + i,
            "gen_ai.usage.output_tokens": 20 + i % 7})
        span.end(end_time=start + 300_000_000)
        sent.append({"model": "team-otel", "input_tokens": 500 + i, "output_tokens": 20 + i % 7, "cost_usd": None})
    assert provider.force_flush(30_000)
    provider.shutdown()
    return sent


def _exceptions(pg) -> list[str]:
    return [e.inner_text() for e in pg.query_selector_all("[data-testid='stException']")]


def _settled(pg, timeout_ms: int = 60_000) -> None:
    idle = ("() => document.querySelector('[data-testid=\"stMain\"] h1')"
            " && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
            " && document.querySelector('[data-testid=\"stApp\"]').getAttribute('data-test-script-state')"
            " !== 'running'")
    pg.wait_for_function(idle, timeout=timeout_ms)


def test_one_store_many_processes_at_once(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    t_start = time.monotonic()

    def phase(what):
        print(f"{time.monotonic() - t_start:6.1f} s  {what}", flush=True)

    db = tmp_path / "team.duckdb"
    secrets = tmp_path / "secrets.toml"
    secrets.write_text("")                       # local mode, whatever a developer's secrets say
    followed = tmp_path / "gateway.jsonl"
    followed.write_text("")
    otlp_port = free_port()
    sent: list[dict] = []                        # every distinct row sent, as the sources say it
    base = [_row(i, "team-small", "acme") for i in range(1000)]
    con = store.connect(str(db))
    with access.acting(access.LOCAL):
        ingest_path(con, _write(tmp_path / "base.jsonl", base))
        service.add_source(con, "follow", str(followed))
        service.set_otlp_port(con, otlp_port)
    con.close()
    sent += base
    files = [_write(tmp_path / f"load{k}.jsonl", [_row(i, "team-large" if i % 2 else "team-small", f"t{k % 3}")
                                                  for i in range(2000 + k * 300, 2000 + k * 300 + 300)])
             for k in range(6)]
    for f in files:
        sent += [json.loads(line) for line in f.read_text().splitlines()]

    failures: list[str] = []
    done = threading.Event()
    reports = []

    with _dashboard(db, secrets, tmp_path / "dash1.log") as (url1, dash1), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        pg1 = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
        phase("first dashboard up")
        pg1.goto(url1 + "/")                      # the first page view starts the holder's ingester
        _settled(pg1)
        wait_until(lambda: (remote.holder_info(str(db)) or {}).get("pid") == dash1.pid, timeout=60,
                   interval=0.2, message="the first dashboard's ingester serving the store")
        with _dashboard(db, secrets, tmp_path / "dash2.log") as (url2, _dash2):
            phase("second dashboard up")
            pg2 = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
            pg2.goto(url2 + "/")
            _settled(pg2)
            phase("both pages shown")
            assert _exceptions(pg1) == [] and _exceptions(pg2) == []

            def loads(part):
                for f in part:
                    r = _cli("ingest", str(f), "--json", db=db)
                    if r.returncode:
                        failures.append(f"ingest {f.name}: {r.stderr}")

            def report_loop():
                while not done.is_set():
                    r = _cli("report", "--json", "--by", "model", db=db)
                    if r.returncode:
                        failures.append(f"report: {r.stderr}")
                    reports.append(r)

            def follow():
                for k in range(10):
                    lines = [_row(i, "team-log", "gw") for i in range(k * 40, k * 40 + 40)]
                    with open(followed, "a") as fh:
                        fh.write("".join(json.dumps(r) + "\n" for r in lines))
                    sent.extend(lines)
                    time.sleep(0.4)

            def spans():
                for k in range(5):
                    sent.extend(_send_spans(f"http://127.0.0.1:{otlp_port}/v1/traces", k * 20, 20))

            # two cron-style loaders at once (the first file twice: it adds nothing the second time)
            workers = [threading.Thread(target=loads, args=(files[0::2] + [files[1]],)),
                       threading.Thread(target=loads, args=(files[1::2] + [files[0]],)),
                       *(threading.Thread(target=fn) for fn in (follow, spans))]
            reporter = threading.Thread(target=report_loop)
            for w in [*workers, reporter]:
                w.start()
            slugs = ["", "data", "cost", ""]
            n = 0
            while any(w.is_alive() for w in workers):
                for pg, url in ((pg1, url1), (pg2, url2)):
                    pg.goto(f"{url}/{slugs[n % len(slugs)]}")
                    _settled(pg)
                    if got := _exceptions(pg):
                        failures.append(f"{url}/{slugs[n % len(slugs)]}: {got}")
                n += 1
            for w in workers:
                w.join()
            phase(f"sources done, {n} page rounds")
            done.set()
            reporter.join()
            phase(f"{len(reports)} reports done")

            total = len(sent)
            reader = store.connect(str(db))
            assert getattr(reader, "remote", False)
            wait_until(lambda: store.row_count(reader) >= total, timeout=60, interval=0.3,
                       message=f"all {total} rows sent stored")
            # a page already open sees the last load within seconds (the sidebar's live-source check)
            pg2.goto(url2 + "/")
            _settled(pg2)
            extra = [_row(i, "team-log", "gw") for i in range(5000, 5010)]
            with open(followed, "a") as fh:
                fh.write("".join(json.dumps(r) + "\n" for r in extra))
            sent += extra
            wait_until(lambda: store.row_count(reader) == len(sent), timeout=60, interval=0.05,
                       message="the last lines followed")
            committed = time.monotonic()
            pg2.wait_for_function(f"() => document.body.innerText.includes('{len(sent):,} requests')", timeout=5_000)
            shown_after_s = time.monotonic() - committed
            assert _exceptions(pg1) == [] and _exceptions(pg2) == []
            phase("all rows stored, the open page updated")
            final = _cli("report", "--json", "--by", "model", db=db)
            counts = reader.execute("SELECT count(*), count(DISTINCT request_id), "
                                    "(SELECT count(DISTINCT batch_id) FROM batches), "
                                    "(SELECT count(*) FROM batches) FROM requests").fetchall()[0]
            reader.close()
        browser.close()

    assert failures == []
    assert reports and all(r.returncode == 0 for r in reports)
    assert counts[0] == counts[1] == len(sent), counts          # no row lost, none twice
    assert counts[2] == counts[3]                               # no batch id twice
    assert final.returncode == 0, final.stderr
    got = {r["model"]: r for r in json.loads(final.stdout)}
    want: dict[str, dict] = {}
    for r in sent:
        w = want.setdefault(r["model"], {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cost": Decimal(0)})
        w["requests"] += 1
        w["input_tokens"] += r["input_tokens"]
        w["output_tokens"] += r["output_tokens"]
        w["cost"] += Decimal(r["cost_usd"] or 0)                # team-otel is unpriced: $0, and said so
    assert sorted(got) == sorted(want)
    for model, w in want.items():
        assert (got[model]["requests"], got[model]["input_tokens"], got[model]["output_tokens"]) == \
            (w["requests"], w["input_tokens"], w["output_tokens"]), model
        assert got[model]["cost_usd"] == pytest.approx(float(w["cost"]), rel=1e-12, abs=1e-12), model
    assert "no price for team-otel" in final.stderr
    print(f"a new load shown on the open page of the second dashboard after {shown_after_s:.1f} s")
