"""Operations: alert rules, their delivery, incidents, latency against its rule, the readiness checklist.

Modules
-------
``alerts``     alert rules as data (error rate, P99 over SLA, GPU utilisation, queue growth, spend spikes, budget
               forecasts, unpriced traffic), evaluated per model and tenant per window; SLA targets per tier;
               each alert's identity, acknowledge and snooze
``delivery``   delivery targets (Slack-compatible webhook, generic HTTP, SMTP), grouped messages, the delivery log
               (an alert is sent once, a failure retried), the daily digest
``incidents``  findings and alerts of one model whose windows overlap or touch, as one incident: its root cause
               in plain words, evidence, one action, a timeline, the requests it hurt, a severity from the
               share of traffic and the SLA minutes hit
``slo``        each model's P99 against the rule it is judged by (the Overview's latency table)
``readiness``  the production-readiness checklist: items judged from the store, ticks kept in settings
"""
__all__ = ["alerts", "delivery", "incidents", "readiness", "slo"]
