"""Cascade: a small → large model cascade's thresholds, its shadow evaluation, and edge versus cloud.

Modules
-------
``sweep``   the cost-quality curve over every threshold, its Pareto frontier and hull, the cheapest tau
            meeting a quality floor, RouteLLM's metrics, the parametric (seed table) mode
``shadow``  the shadow evaluation read from the store (per-query confidence, qualities, costs), per-tenant
            curves and quality floors, and a curve as shown (slider points, the seed-form table, baselines)
``edge``    when escalating an edge request to the cloud pays: break-even RTT, policies over RTT samples

Eval CSVs and RTT samples are read by :mod:`finops.ingest.uploads`.
"""
__all__ = ["edge", "shadow", "sweep"]
