"""The reference gateway: route LLM requests to fast/slow models and log every call.

It reproduces, as a product, the dual-model gateway experiment of section 3 of
``000_b5db6f0ad1bec1d3.txt``: requests are routed by a decision pipeline, wait
for a slot on their backend, are served, and each model call is written as one
canonical JSONL row (:mod:`finops.schema`) with its timing split into route,
queue, prefill, decode and service time.

Modules
-------
``config``    the TOML configuration, parsed into frozen dataclasses (``load_config``)
``classify``  the token estimator and the complexity classifiers
``cache``     the semantic caches (exact match on normalised text, LRU with TTL)
``backends``  built-in mock models and OpenAI-compatible upstreams
``pipeline``  :class:`Gateway`: cache -> classifier -> SLA tier -> strategy -> backend(s)
``log``       the JSONL log of canonical rows (one write per row, follows rotation)
``guard``     what one client may cost: auth and body limits before the body, head deadline,
              connection cap (``[server]``)
``metrics``   Prometheus text exposition, with the gateway's own overhead per request
``app``       the FastAPI face (``create_app``), timed by ``OverheadTimer``;
              ``python -m finops gateway`` serves it
``loadgen``   the open-loop load generator (``python -m finops load``)
"""
__all__ = ["app", "backends", "cache", "classify", "config", "loadgen", "log", "metrics", "pipeline"]
