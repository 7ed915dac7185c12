"""Latency: percentiles (exact, or from the hourly sketch), histograms, segments and the slow-path diagnosis.

Modules
-------
``stats``       percentiles by any grouping and over time, queue-time histograms, segment breakdowns at a
                percentile, latency by length bucket, decode speed against concurrency, TTFT / TPOT, the slowest
``servicefit``  the non-negative least-squares service-time fit ``a + b·input + c·output tokens``, from sums
``diagnose``    the slow-path playbook as rules: findings per model and window with evidence and action
"""
__all__ = ["diagnose", "servicefit", "stats"]
