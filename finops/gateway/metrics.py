"""Prometheus text exposition (format 0.0.4), written by hand: no client library needed.

The metrics are declared as data in :data:`SPECS`; :class:`Metrics` keeps the
counters and histograms, and reads the gauges (queue length, calls in flight,
slots) from the backends when scraped.

``finops_gateway_overhead_seconds`` is the gateway's own time per HTTP request,
per endpoint: from the moment the ASGI app is called until the last byte of the
response body is handed to the server, minus the time the request spent waiting
for and inside its model backend(s) (``queue_ms + service_ms`` of each call).
What is left is routing, the framework (reading and validating the body,
FastAPI's routing and exception handling), writing the log row and serialising
the answer. It is observed by :class:`finops.gateway.app.OverheadTimer`, the
outermost layer of the app; uvicorn's parsing of the request head, before the
app is called, is not in it.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass

BUCKETS_S: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# For the gateway's own time: sub-millisecond to tens of milliseconds, fine around the 5 ms target.
FINE_BUCKETS_S: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003,
                                     0.004, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    type: str                 # counter, gauge, histogram
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = BUCKETS_S     # histograms: upper bounds, seconds (+Inf implied)


SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("finops_gateway_requests_total", "counter",
               "Model calls by backend and status; cache hits count under backend=\"cache\".",
               ("backend", "status")),
    MetricSpec("finops_gateway_escalations_total", "counter",
               "Cascade attempts whose answer was rejected, by the backend that made them.", ("backend",)),
    MetricSpec("finops_gateway_unauthorized_total", "counter", "Requests refused with HTTP 401."),
    MetricSpec("finops_gateway_log_write_errors_total", "counter",
               "Rows the request log could not take (e.g. a full disk); each is answered HTTP 500 and its "
               "row written to the server log instead."),
    MetricSpec("finops_gateway_queue_length", "gauge", "Calls waiting for a slot, per backend.", ("backend",)),
    MetricSpec("finops_gateway_in_flight", "gauge", "Calls being served, per backend.", ("backend",)),
    MetricSpec("finops_gateway_slots", "gauge", "Concurrent calls a backend accepts (capacity x replicas).",
               ("backend",)),
    MetricSpec("finops_gateway_request_duration_seconds", "histogram",
               "Time from arrival at the gateway to the answer, seconds, per backend that answered.",
               ("backend",)),
    MetricSpec("finops_gateway_queue_seconds", "histogram", "Time waiting for a slot, seconds, per backend.",
               ("backend",)),
    MetricSpec("finops_gateway_route_seconds", "histogram", "Routing decision time, seconds.",
               buckets=FINE_BUCKETS_S),
    MetricSpec("finops_gateway_overhead_seconds", "histogram",
               "Gateway's own time per HTTP request, seconds, per endpoint: routing + framework + logging + "
               "serialising, from the app being called to the response body sent, excluding backend queue "
               "and service time.", ("endpoint",), FINE_BUCKETS_S),
)


def _escape(value: str) -> str:
    """Label value escaping of the text format.

    >>> _escape('a"b\\\\c')
    'a\\\\"b\\\\\\\\c'
    """
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(names: Iterable[str], values: Iterable[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(str(v))}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _num(x: float) -> str:
    if x == float("inf"):
        return "+Inf"
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


class Metrics:
    """Counters and histograms in memory; gauges pulled from ``gauges()`` at render time."""

    def __init__(self, gauges: Callable[[], dict[str, dict[tuple[str, ...], float]]] | None = None):
        self._counters: dict[str, dict[tuple[str, ...], float]] = {
            s.name: {} for s in SPECS if s.type == "counter"}
        self._hists: dict[str, dict[tuple[str, ...], list]] = {
            s.name: {} for s in SPECS if s.type == "histogram"}
        self._buckets = {s.name: s.buckets for s in SPECS if s.type == "histogram"}
        self._gauges = gauges or (lambda: {})

    def inc(self, name: str, *labels: str, by: float = 1.0) -> None:
        series = self._counters[name]
        series[labels] = series.get(labels, 0.0) + by

    def observe(self, name: str, seconds: float, *labels: str) -> None:
        series = self._hists[name]
        h = series.get(labels)
        buckets = self._buckets[name]
        if h is None:
            h = series[labels] = [[0] * (len(buckets) + 1), 0.0, 0]
        h[0][bisect.bisect_left(buckets, seconds)] += 1
        h[1] += seconds
        h[2] += 1

    def counter(self, name: str, *labels: str) -> float:
        return self._counters[name].get(labels, 0.0)

    def render(self) -> str:
        """The whole exposition, ``# HELP`` and ``# TYPE`` before each family.

        >>> m = Metrics()
        >>> m.inc("finops_gateway_requests_total", "fast", "ok")
        >>> m.observe("finops_gateway_route_seconds", 0.0002)
        >>> text = m.render()
        >>> 'finops_gateway_requests_total{backend="fast",status="ok"} 1' in text
        True
        >>> 'finops_gateway_route_seconds_bucket{le="+Inf"} 1' in text
        True
        """
        gauges = self._gauges()
        out: list[str] = []
        for spec in SPECS:
            out.append(f"# HELP {spec.name} {spec.help}")
            out.append(f"# TYPE {spec.name} {spec.type}")
            if spec.type == "counter":
                series = self._counters[spec.name]
                if not series and not spec.labels:
                    out.append(f"{spec.name} 0")
                for labels, value in sorted(series.items()):
                    out.append(f"{spec.name}{_labels(spec.labels, labels)} {_num(value)}")
            elif spec.type == "gauge":
                for labels, value in sorted(gauges.get(spec.name, {}).items()):
                    out.append(f"{spec.name}{_labels(spec.labels, labels)} {_num(value)}")
            else:
                for labels, (counts, total, n) in sorted(self._hists[spec.name].items()):
                    cumulative = 0
                    for le, c in zip((*spec.buckets, float("inf")), counts, strict=True):
                        cumulative += c
                        lab = _labels(spec.labels, labels, f'le="{_num(le)}"')
                        out.append(f"{spec.name}_bucket{lab} {cumulative}")
                    out.append(f"{spec.name}_sum{_labels(spec.labels, labels)} {_num(total)}")
                    out.append(f"{spec.name}_count{_labels(spec.labels, labels)} {n}")
        return "\n".join(out) + "\n"
