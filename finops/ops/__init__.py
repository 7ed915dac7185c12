"""Operations: alert rules, their delivery, and the production-readiness checklist.

Modules
-------
``alerts``     alert rules as data (error rate, P99 over SLA, GPU utilisation, queue growth, spend spikes, budget
               forecasts, unpriced traffic), evaluated per model and tenant per window; SLA targets per tier;
               each alert's identity, acknowledge and snooze
``delivery``   delivery targets (Slack-compatible webhook, generic HTTP, SMTP), grouped messages, the delivery log
               (an alert is sent once, a failure retried), the daily digest
``readiness``  the production-readiness checklist: items judged from the store, ticks kept in settings
"""
__all__ = ["alerts", "delivery", "readiness"]
