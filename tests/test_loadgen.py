"""The open-loop load generator, against the reference gateway on 127.0.0.1."""
from __future__ import annotations

import argparse
import asyncio
import json
import math
from datetime import datetime

import pytest

from finops.commands import load as load_command
from finops.errors import InputError
from finops.gateway.app import ServerThread, create_app
from finops.gateway.config import parse_config
from finops.gateway.loadgen import (
    SEED_33_BASELINE,
    SEED_33_INJECTED,
    LoadSpec,
    arrival_times,
    load_prompts,
    percentile,
    run_load,
    run_seed_33,
)
from finops.gateway.log import MemoryLog
from finops.gateway.pipeline import Gateway

# Mock backends with the seed's shape, scaled down ~10x so the preset runs in about a second.
CONFIG = {
    "cache": {"kind": "none"},
    "tiers": {"standard": {"strategy": "cost", "quality_floor": 0.5}},    # "single" only when pinned
    "backends": {
        "fast": {"kind": "mock", "quality": 0.7, "capacity": 8, "request_usd": 0.001,
                 "prefill_ms_per_token": 0.2, "decode_ms_per_token": 0.5, "output_tokens": 10,
                 "slow_inject_ms": 200.0},
        "slow": {"kind": "mock", "quality": 0.9, "capacity": 2, "request_usd": 0.008,
                 "prefill_ms_per_token": 0.6, "decode_ms_per_token": 4.0, "output_tokens": 10,
                 "slow_inject_ms": 200.0},
        "single": {"kind": "mock", "quality": 0.0, "capacity": 1, "decode_ms_per_token": 10.0,
                   "output_tokens": 10},
    },
}


@pytest.fixture(scope="module")
def gateway():
    log = MemoryLog()
    gateway = Gateway(parse_config(CONFIG), log)
    with ServerThread(create_app(gateway)) as server:
        server.log = log
        server.gateway = gateway
        yield server


def test_arrival_counts_follow_the_rate_and_the_pattern():
    rate, duration = 200.0, 30.0
    for pattern in ("steady", "burst", "ramp"):
        n = len(arrival_times(rate, duration, pattern, seed=7))
        assert abs(n - rate * duration) < 4 * (rate * duration) ** 0.5, pattern     # Poisson: sd = sqrt(mean)
    burst = arrival_times(rate, duration, "burst", seed=7)
    in_burst = sum(1 for t in burst if t % 10.0 < 2.0) / (0.2 * duration)
    outside = sum(1 for t in burst if t % 10.0 >= 2.0) / (0.8 * duration)
    assert in_burst / outside == pytest.approx(6.0, rel=0.2)                          # 3x against 0.5x
    ramp = arrival_times(rate, duration, "ramp", seed=7)
    assert sum(t >= 15 for t in ramp) / sum(t < 15 for t in ramp) == pytest.approx(3.0, rel=0.15)
    assert arrival_times(rate, duration, "steady", seed=7) == arrival_times(rate, duration, "steady", seed=7)


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="unknown pattern"):
        arrival_times(1, 1, "sawtooth")
    with pytest.raises(InputError, match="over 2,000,000"):
        arrival_times(1e6, 1e3)
    empty = tmp_path / "p.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no prompts"):
        load_prompts(empty)
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"prompt": "a"}\n{"text": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="row 2"):
        load_prompts(bad)
    # a rate or duration of nan never left the schedule's loop; 1e-9 req/s for 1e9 s slept for years
    for rate, duration, field in ((math.nan, 1, "rate"), (10, math.nan, "duration"), (1e-9, 1e9, "duration")):
        with pytest.raises(InputError, match=f"field {field}: the {field} is a number"):
            arrival_times(rate, duration)
    # a timeout of nan, a negative max_tokens and a URL that is none went out to the client
    for change, field in ((dict(timeout_s=math.nan), "timeout"), (dict(max_tokens=-5), "max_tokens"),
                          (dict(url="notaurl"), "url")):
        spec = LoadSpec(**{"url": "http://127.0.0.1:9", "rate_per_s": 1.0, "duration_s": 1.0, **change})
        with pytest.raises(InputError, match=f"field {field}"):
            run_load(spec)


def test_prompts_file_one_per_line_or_jsonl(tmp_path):
    txt = tmp_path / "p.txt"
    txt.write_text("first\n\n今天天气如何\n", encoding="utf-8")
    assert load_prompts(txt) == ["first", "今天天气如何"]
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"prompt": "a"}\n{"prompt": "b", "tenant": "x"}\n', encoding="utf-8")
    assert load_prompts(jl) == ["a", "b"]


def test_percentile_matches_numpy_linear():
    np = pytest.importorskip("numpy")
    values = sorted([3.0, 1.5, 9.0, 4.25, 7.0, 2.0, 8.5])
    for q in (0, 10, 50, 90, 95, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_achieved_rate_is_close_to_the_requested_rate(gateway):
    spec = LoadSpec(url=gateway.url, rate_per_s=40.0, duration_s=2.0, seed=3, tenants=("a", "b"))
    report = run_load(spec)
    assert report.scheduled == len(arrival_times(40.0, 2.0, "steady", seed=3))
    assert report.sent == report.scheduled == report.ok and report.unfinished == 0
    assert report.achieved_rate_per_s == pytest.approx(40.0, rel=0.35)    # Poisson: 80 expected, sd 9
    assert report.latency_ms["p50"] is not None and report.latency_ms["p99"] >= report.latency_ms["p50"]
    assert set(report.by_route) <= {"fast", "slow"}


def test_sending_never_waits_for_responses(gateway, monkeypatch):
    # The "single" backend answers nothing until every scheduled request has reached it: a sender that
    # waited for an answer before sending on would leave the rest unsent and the run unfinished.
    spec = LoadSpec(url=gateway.url, rate_per_s=20.0, duration_s=1.0, seed=5, model="single", timeout_s=20.0)
    expected = len(arrival_times(spec.rate_per_s, spec.duration_s, spec.pattern, spec.seed))
    backend = gateway.gateway.backends["single"]
    generate = backend.generate
    arrived: list[int] = []
    everyone_in: list[asyncio.Event] = []        # made on the gateway's event loop, by the first call

    async def held_until_all_arrived(req, timing):
        if not everyone_in:
            everyone_in.append(asyncio.Event())
        arrived.append(len(arrived) + 1)
        if len(arrived) == expected:
            everyone_in[0].set()
        await everyone_in[0].wait()
        return await generate(req, timing)

    monkeypatch.setattr(backend, "generate", held_until_all_arrived)
    report = run_load(spec)
    assert expected >= 10 and len(arrived) == expected
    assert report.ok == report.sent == report.scheduled == expected and report.unfinished == 0


def _ts_s(row: dict) -> float:
    return datetime.strptime(row["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def test_preset_seed_33_shows_the_slow_queue(gateway):
    assert all(len(p) > 40 for p in (*SEED_33_BASELINE, SEED_33_INJECTED))
    before = len(gateway.log.rows)
    report = run_seed_33(gateway.url).to_dict()
    phases = [(r["phase"], r["route"], r["http_status"]) for r in report["requests"]]
    assert phases == [("baseline", "slow", 200)] * 2 + [("injected", "slow", 200)] * 6 + [("short", "fast", 200)]
    rows = gateway.log.rows[before:]
    injected = [r for r in rows if r["attrs"].get("slow_inject")]
    assert len(injected) == 6 and {r["model"] for r in injected} == {"slow"}
    # Orderings and lower bounds set by the mock's own sleeps, never a duration this machine must beat.
    # Each injected call sleeps its 200 ms injection (>= 199: timers can fire 1 ms early under uvloop).
    assert all(r["service_ms"] >= 199 for r in injected)
    # The six were in the gateway together: the last arrived before the first was answered.
    arrivals = [_ts_s(r) for r in injected]
    assert max(arrivals) < min(t + r["total_ms"] / 1000 for t, r in zip(arrivals, injected, strict=True))
    spread_ms = (max(arrivals) - min(arrivals)) * 1000
    # slow has 2 slots: two calls start at once, the third and fourth wait for one to end (>= 199 ms
    # after the first started), the fifth and sixth for a second round
    queue = sorted(r["queue_ms"] for r in injected)
    assert queue[1] < min(r["service_ms"] for r in injected)
    assert min(queue[2:4]) >= 199 - spread_ms and min(queue[4:]) >= 2 * 199 - spread_ms
    (short,) = [r for r in rows if r["model"] == "fast"]
    assert short["queue_ms"] < queue[2]                     # fast is untouched by the slow queue
    s = report["summary"]
    assert s["injected_queue_ms_sorted"] == pytest.approx(queue, abs=0.01)
    assert s["service_over_baseline_ms"] == pytest.approx(
        s["injected_service_ms_mean"] - s["baseline_service_ms"], abs=0.11)


def test_cli_load_json(gateway, capsys):
    parser = argparse.ArgumentParser()
    load_command.add_arguments(parser)
    args = parser.parse_args(["--url", gateway.url, "--rate", "20", "--duration", "1", "--json",
                              "--pattern", "burst", "--endpoint", "route"])
    assert load_command.run(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sent"] == report["ok"] and report["pattern"] == "burst"
    assert set(report["latency_ms"]) == {"p50", "p90", "p95", "p99", "max", "mean"}


def test_cli_load_with_no_arrival_in_its_window_says_so(gateway):
    """At 1 req/s for 1 s the Poisson schedule of seed 2 holds no request: the report read "0/0 sent ... achieved
    0.0 req/s", exit 0, as if the gateway had been measured."""
    parser = argparse.ArgumentParser()
    load_command.add_arguments(parser)
    args = parser.parse_args(["--url", gateway.url, "--rate", "1", "--duration", "1", "--seed", "2"])
    assert run_load(LoadSpec(url=gateway.url, rate_per_s=1.0, duration_s=1.0, seed=2)).scheduled == 0
    with pytest.raises(InputError, match=r"field duration: no request fell in 1 s at 1 req/s \(arrivals are random\)"):
        load_command.run(args)


def test_raw_client_gets_the_same_answers_as_httpx(gateway):
    for client in ("raw", "httpx"):
        report = run_load(LoadSpec(url=gateway.url, rate_per_s=30.0, duration_s=1.0, seed=11, client=client,
                                   endpoint="route", prompts=("今天天气如何",)))
        assert report.ok == report.sent == report.scheduled > 0, client
        assert report.by_route == {"fast": report.ok} and report.overhead_ms["p50"] is not None
    with pytest.raises(InputError, match="plain http"):
        run_load(LoadSpec(url="https://127.0.0.1:1", rate_per_s=1, duration_s=1, client="raw"))


def test_cli_text_writes_a_second_and_more_in_seconds_and_no_python_dicts(monkeypatch, capsys):
    # a run's client-side latency P99 of 1,170.6 ms read "p99=1170.6" under "latency_ms", and its counts as Python
    # dicts ("status: {'200': 47}"); each time now carries its unit (seconds from 1,000 ms), the counts are words
    from finops.cli import main
    from finops.gateway import loadgen

    pcts = {"p50": 3.8, "p90": 703.4, "p95": 883.3, "p99": 1170.6, "max": 1323.1, "mean": 133.8}
    report = loadgen.LoadReport(
        url="http://127.0.0.1:1", pattern="steady", requested_rate_per_s=20.0, duration_s=3.0, scheduled=47, sent=47,
        completed=47, ok=46, unfinished=0, achieved_rate_per_s=15.667, last_send_s=2.9, throughput_per_s=15.0,
        send_lag_ms={"p50": 0.8, "max": 3.7}, latency_ms=pcts, overhead_ms={"p50": None, "max": None},
        route_ms={}, by_status={"200": 46, "503": 1}, by_route={"cache": 32, "fast": 8, "slow": 6})
    monkeypatch.setattr(loadgen, "run_load", lambda spec: report)
    assert main(["load", "--url", "http://127.0.0.1:1", "--rate", "20", "--duration", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "status: 46 × 200, 1 × 503   routes: 32 cache, 8 fast, 6 slow"
    assert lines[2].split() == ["latency", "p50=3.8", "ms", "p90=703", "ms", "p95=883", "ms", "p99=1.17", "s",
                                "max=1.32", "s", "mean=134", "ms"]
    assert lines[3].split()[:3] == ["overhead", "p50=—", "max=—"]
    assert lines[4].split() == ["send", "lag", "p50=0.8", "ms", "max=3.7", "ms"]


def test_cli_preset_text_writes_times_with_units_and_no_python_lists(monkeypatch, capsys):
    # the dual-model preset's table read "5412.6" under queue_ms and its summary Python reprs
    # ("routes {'slow': 6}, queue_ms sorted [0.002, 2706.061, ...]")
    from finops.cli import main
    from finops.gateway import loadgen

    def row(phase, chars, inject, queue_ms, service_ms):
        return {"phase": phase, "prompt_chars": chars, "slow_inject": inject, "http_status": 200, "error": None,
                "route": "slow", "queue_ms": queue_ms, "service_ms": service_ms,
                "total_ms": None if queue_ms is None else queue_ms + service_ms}
    report = {"requests": [row("baseline", 49, False, 0.0, 694.2), row("injected", 51, True, 5412.6, 2706.4),
                           row("injected", 51, True, None, None)],
              "summary": {"injected_routes": {"slow": 2}, "injected_queue_ms_sorted": [0.002, 5412.6],
                          "baseline_service_ms": 694.2, "injected_service_ms_mean": 2706.4,
                          "service_over_baseline_ms": 2012.2}}

    class Run:
        def to_dict(self):
            return report
    monkeypatch.setitem(loadgen.PRESETS, "dual-model", lambda *a, **k: Run())
    assert main(["load", "--url", "http://127.0.0.1:1", "--preset", "dual-model"]) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == "phase chars inject status route queue service total"
    assert lines[1] == "baseline 49 False 200 slow 0 ms 694 ms 694 ms"
    assert lines[2] == "injected 51 True 200 slow 5.41 s 2.71 s 8.12 s"
    assert lines[3] == "injected 51 True 200 slow — — —"
    assert lines[4] == "injected: routes 2 slow; queue waits sorted 0.002 ms, 5.41 s"
    assert lines[5] == "service time: baseline 694 ms, injected mean 2.71 s, over baseline 2.01 s"
