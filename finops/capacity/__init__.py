"""Capacity: how many replicas, what they cost, whether they keep up, now and as traffic changes.

Modules
-------
``queueing``    the maths: Erlang B/C, M/M/c, G/G/c (Allen–Cunneen), wait percentiles, sizing
``calculator``  the calculator: queue figures and required replicas of a fleet, the page's curves, fleet cost
``observed``    fill from my logs: each self-hosted model's busiest hour, measured, against the prediction
``loadtest``    load test → instances: per-instance throughput under a P99 target (points from
                :mod:`finops.ingest.loadtests`)
``forecast``    hourly QPS forecasts with daily and weekly seasonality, a backtest, a replica plan
                (imports statsmodels: seconds, so nothing here imports it until a forecast is asked for)
``autoscale``   the autoscaling simulator: reactive, warm-pool and predictive policies against cold starts
``plans``       a forecast turned into replicas hour by hour; autoscaling policies compared on a ramp or forecast;
                the replicas a fleet was billed for against the hourly plan (capacity meets cost)
"""
__all__ = ["autoscale", "calculator", "forecast", "loadtest", "observed", "plans", "queueing"]
