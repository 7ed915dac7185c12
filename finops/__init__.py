"""finops: the analytics package behind the LLM-fleet FinOps dashboard.

Pure Python + DuckDB + numpy/scipy; never imports streamlit. The dashboard
pages and the ``python -m finops`` CLI are two thin faces over it. An import
only goes down these floors (README.md, "Layout"):

Core (floor 0)
    ``schema``    the canonical request columns and vocabulary (e.g. ``IDLE_TENANT``)
    ``errors``    :class:`~finops.errors.InputError`, the error a user can fix
    ``filters``   :class:`~finops.filters.Filters` and their bound-parameter WHERE clause
    ``store``     the DuckDB store: tables, rollups, the latency sketch, settings, data version
    ``charts``    Altair chart specs, one function per chart
    ``jsonutil``  numpy / pandas values as JSON-ready Python
Domains
    ``ingest`` (1), ``latency`` (2), ``spend`` (3), ``ops``, ``capacity``, ``cascade``,
    ``gateway`` (4, independent of each other), ``sample`` (5)
Faces
    ``cli`` and ``commands`` (6): ``python -m finops``
"""
__version__ = "0.1.0"

__all__ = ["capacity", "cascade", "charts", "cli", "commands", "errors", "filters", "gateway", "ingest",
           "jsonutil", "latency", "ops", "sample", "schema", "spend", "store"]
