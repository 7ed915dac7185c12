"""Issue 8 end to end, on 127.0.0.1 over real HTTP, with the README's commands:
start the gateway (mock backends, slow capacity 2), run the section 3.3 preset, ingest the log,
and `diagnose` names the queue bottleneck on slow and the decode tail, with this run's numbers."""
import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from finops.fmt import duration_ms
from helpers import ROOT, free_port, wait_until

pytestmark = pytest.mark.slow


def _finops(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "finops", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_seed_experiment_is_diagnosed_from_the_gateway_log(tmp_path):
    port = free_port()
    log = tmp_path / "gateway.jsonl"
    gw = subprocess.Popen([sys.executable, "-m", "finops", "gateway", "--config", "examples/gateway.toml",
                           "--host", "127.0.0.1", "--port", str(port), "--log", str(log)],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    try:
        def healthy() -> bool:
            if gw.poll() is not None:
                raise RuntimeError("gateway did not start: " + gw.stdout.read().decode()[-2000:])
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2)
                return True
            except OSError:
                return False

        wait_until(healthy, timeout=60, interval=0.1, message="gateway answering /healthz")
        run = _finops("load", "--url", url, "--preset", "dual-model", "--json")
        assert run.returncode == 0, run.stderr
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            gw.wait(timeout=20)
        except subprocess.TimeoutExpired:
            gw.kill()
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    slow = [r for r in rows if r["model"] == "slow"]
    injected = [r for r in slow if r["attrs"].get("slow_inject")]
    assert len(injected) == 6
    waits = sorted(r["queue_ms"] for r in injected)
    # slow has 2 slots: two start at once (they waited less than any call's service, so for no release);
    # the last waited at least one 2 s injected call. Orderings and the mock's own sleeps, not durations.
    assert waits[1] < min(r["service_ms"] for r in injected) and waits[-1] > 1000

    db = tmp_path / "exp.duckdb"
    ing = _finops("ingest", str(log), "--db", str(db), "--json")
    assert ing.returncode == 0, ing.stderr
    assert json.loads(ing.stdout)["rows_ingested"] == len(rows)
    diag = _finops("diagnose", "--db", str(db), "--json")
    assert diag.returncode == 0, diag.stderr
    findings = json.loads(diag.stdout)["findings"]
    queue = [f for f in findings if f["layer"] == "queue" and f["model"] == "slow"]
    tail = [f for f in findings if f["layer"] in ("decode", "tail") and f["model"] == "slow"]
    assert queue, findings
    assert tail, findings
    # the evidence quotes this run's numbers
    worst = duration_ms(max(waits))
    assert any(worst in f["evidence"] or str(round(max(waits))) in f["evidence"] or
               abs(f["metrics"].get("queue_ms_max", 0) - max(waits)) < 1 for f in queue), queue
