"""Spend: what the fleet costs, by whom, against which budget, and what another routing would have cost.

Modules
-------
``pricing``    the price book and the cost of requests (tokens × dated prices, GPU hours × rates, idle capacity)
``report``     the spend report by any dimensions, KPIs with period-over-period change, ``grain_for``
``costviews``  the Overview and Cost pages' views: KPI cards, spend over time, the model × tenant matrix
``fleets``     self-hosted fleets: the schedule of periods, reservations, the default idle policy
``budgets``    monthly budgets per tenant: burn so far and the forecast to month end
``exports``    CSV that spreadsheets cannot execute, Parquet, and a FOCUS-shaped CSV
``routing``    the traffic mix, the semantic cache, the cascade, misrouting and what-if replay
"""
__all__ = ["budgets", "costviews", "exports", "fleets", "pricing", "report", "routing"]
