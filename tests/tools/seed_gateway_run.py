"""Reproduce the two gateway-log fixtures of ``tests/data/`` (see its README).

This is a faithful re-implementation of the dual-model gateway in section 3.2
of ``000_b5db6f0ad1bec1d3.txt``, kept apart from ``finops.gateway`` on purpose:
it measures prompt length in characters (``len(prompt)``), uses the seed's
timing constants, its semaphores (fast 8, slow 2), ``LEN_THRESHOLD = 40`` and
its ``[ROUTE]`` log line, written through ``logging`` with the
``%(asctime)s %(message)s`` format.

It serves the seed app with uvicorn on 127.0.0.1 (a free port, in a thread of
this process) and drives it over real HTTP twice, a fresh app each time:

``injected``  two uninjected slow requests one after the other (the service
              baseline), then six concurrent injected slow requests. Every
              prompt is longer than 40 characters, so it really goes to slow.
``verbatim``  exactly the commands of section 3.3: the short prompt, the
              "long" prompt (38 characters, so fast), then six concurrent
              injected requests with the seed's 37-character prompt (fast).

Only the ``[ROUTE]`` lines are written, to
``tests/data/seed_gateway_injected.log`` and ``tests/data/seed_gateway_verbatim.log``.

    python tests/tools/seed_gateway_run.py [--out-dir tests/data]
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path

import httpx
from fastapi import FastAPI
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from finops.gateway.app import ServerThread  # noqa: E402  (the harness only; the gateway is the seed's)

LEN_THRESHOLD = 40                       # characters, as in the seed
COST = {"fast": 1.0, "slow": 8.0}        # relative cost per request
CAPACITY = {"fast": 8, "slow": 2}
PREFILL_S_PER_CHAR = {"fast": 0.002, "slow": 0.006}
DECODE_S = {"fast": 0.05, "slow": 0.4}
SLOW_INJECT_S = 2.0
LOG_FORMAT = "%(asctime)s %(message)s"   # logging.basicConfig format of the seed

# The seed's own section 3.3 prompts.
SEED_SHORT = "今天天气如何"                                                       # 6 chars
SEED_LONG = "请详细分析分布式训练中数据并行张量并行流水并行三者在通信开销显存占用上的取舍"      # 38 chars
SEED_INJECT = "超长复杂推理请求需要路由到大模型并注入慢路径来观察排队与服务耗时的拆分情况"      # 37 chars

# Prompts that really cross the 40-character threshold.
BASELINE_PROMPTS = (
    "请详细分析分布式训练中数据并行、张量并行和流水并行三者在通信开销与显存占用上的取舍，并给出选型建议",
    "请比较大模型推理中预填充阶段和解码阶段的瓶颈差异，说明各自受算力还是显存带宽限制，以及对应的优化手段",
)
INJECT_PROMPT = "超长复杂推理请求需要路由到大模型，并注入慢路径来观察排队耗时与服务耗时的拆分情况，请给出详细的分析步骤"


class Req(BaseModel):
    prompt: str
    slow_inject: bool = False


def make_seed_app(log: logging.Logger) -> FastAPI:
    """The seed gateway, one fresh instance (and fresh semaphores) per run."""
    app = FastAPI()
    sem = {name: asyncio.Semaphore(n) for name, n in CAPACITY.items()}

    async def mock_model(name: str, prompt: str, slow_inject: bool) -> dict:
        t0 = time.perf_counter()
        async with sem[name]:
            t_acquired = time.perf_counter()
            queue_ms = (t_acquired - t0) * 1000
            prefill = len(prompt) * PREFILL_S_PER_CHAR[name]
            decode = DECODE_S[name]
            if slow_inject:
                decode += SLOW_INJECT_S
            await asyncio.sleep(prefill + decode)
            svc_ms = (time.perf_counter() - t_acquired) * 1000
            return {"model": name, "queue_ms": round(queue_ms, 1),
                    "service_ms": round(svc_ms, 1), "cost": COST[name]}

    @app.post("/v1/fast")
    async def fast(r: Req):
        return await mock_model("fast", r.prompt, r.slow_inject)

    @app.post("/v1/slow")
    async def slow(r: Req):
        return await mock_model("slow", r.prompt, r.slow_inject)

    @app.post("/route")
    async def route(r: Req):
        t_in = time.perf_counter()
        target = "slow" if len(r.prompt) > LEN_THRESHOLD else "fast"
        t_decide = time.perf_counter()
        resp = await mock_model(target, r.prompt, r.slow_inject)
        t_out = time.perf_counter()
        route_ms = (t_decide - t_in) * 1000
        total_ms = (t_out - t_in) * 1000
        log.info(
            f"[ROUTE] target={target} len={len(r.prompt)} "
            f"route_ms={route_ms:.2f} queue_ms={resp['queue_ms']} "
            f"service_ms={resp['service_ms']} total_ms={total_ms:.1f} "
            f"cost={resp['cost']} inject={r.slow_inject}"
        )
        return {"routed_to": target, "total_ms": round(total_ms, 1), **resp}

    return app


async def _post(client: httpx.AsyncClient, prompt: str, slow_inject: bool = False) -> dict:
    body = {"prompt": prompt}
    if slow_inject:
        body["slow_inject"] = True
    r = await client.post("/route", json=body)
    r.raise_for_status()
    return r.json()


async def drive_injected(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for prompt in BASELINE_PROMPTS:
            await _post(client, prompt)
        await asyncio.gather(*(_post(client, INJECT_PROMPT, True) for _ in range(6)))


async def drive_verbatim(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await _post(client, SEED_SHORT)
        await _post(client, SEED_LONG)
        await asyncio.gather(*(_post(client, SEED_INJECT, True) for _ in range(6)))


RUNS = (  # (file name, driver)
    ("seed_gateway_injected.log", drive_injected),
    ("seed_gateway_verbatim.log", drive_verbatim),
)


class RouteOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage().startswith("[ROUTE]")


def run_once(path: Path, driver) -> None:
    log = logging.getLogger(f"seed-gw.{path.stem}")
    log.setLevel(logging.INFO)
    log.propagate = False
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(RouteOnly())
    log.addHandler(handler)
    try:
        with ServerThread(make_seed_app(log)) as server:
            asyncio.run(driver(server.url))
    finally:
        log.removeHandler(handler)
        handler.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "tests" / "data",
                        help="where to write the two logs (default: tests/data)")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, driver in RUNS:
        path = args.out_dir / name
        run_once(path, driver)
        print(f"wrote {path}")
        print(path.read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
