"""Operations: alert rules and the production-readiness checklist.

Modules
-------
``alerts``     alert rules as data (error rate, P99 over SLA, GPU utilisation, queue growth), evaluated per
               model and tenant per window; SLA targets per tier
``readiness``  the production-readiness checklist: items judged from the store, ticks kept in settings
"""
__all__ = ["alerts", "readiness"]
