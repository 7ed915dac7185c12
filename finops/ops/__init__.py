"""Operations: alert rules, incidents and the production-readiness checklist.

Modules
-------
``alerts``     alert rules as data (error rate, P99 over SLA, GPU utilisation, queue growth), evaluated per
               model and tenant per window; SLA targets per tier
``incidents``  findings and alerts of one model whose windows overlap or touch, as one incident: its root cause
               in plain words, evidence, one action, a timeline, the requests it hurt, a severity from the
               share of traffic and the SLA minutes hit
``readiness``  the production-readiness checklist: items judged from the store, ticks kept in settings
"""
__all__ = ["alerts", "incidents", "readiness"]
