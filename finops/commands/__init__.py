"""CLI subcommands, one module each, discovered by :mod:`finops.cli` (``_common`` holds shared arguments).

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int`` and calls the
same functions the pages call: ``alerts``, ``attach_rollups``, ``billing``, ``cascade``, ``demo``, ``diagnose``, ``edge``, ``gateway``,
``incidents``, ``ingest``, ``latency``, ``load``, ``mmc``, ``pull``, ``report``, ``rollup``, ``scrape``, ``size``.
"""
__all__ = ["alerts", "attach_rollups", "billing", "cascade", "demo", "diagnose", "edge", "gateway", "incidents", "ingest",
           "latency", "load", "mmc", "pull", "report", "rollup", "scrape", "size"]
