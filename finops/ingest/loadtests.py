"""Load-test files read as load points: P50/P99 latency against throughput, one point per run or CSV row.

:func:`read_loadtest` reads a ``vllm bench serve`` result JSON (detailed or summary only), an
LLMPerf individual-responses or summary JSON (the readers of :mod:`finops.ingest.benchruns`), or
a CSV of qps and/or concurrency against P99 latency (:data:`CSV_ALIASES` lists the accepted column
names); :func:`read_loadtest_bytes` reads an upload; :func:`benchmark_points` gives the points of the
benchmark runs in the store. A missing QPS or concurrency comes from Little's law (L = λ W, W the
mean latency, else the P50). :func:`finops.capacity.loadtest.fit_loadtest` turns points into instances.

Columns (:data:`POINT_COLUMNS`): ``source``, ``model``, ``concurrency``, ``qps`` (req/s through the
tested endpoint), ``p50_s``, ``p99_s``, ``mean_s`` (end-to-end latency), ``qps_basis``.
"""
from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from finops import store
from finops.errors import InputError
from finops.ingest import benchruns
from finops.ingest.uploads import read_upload

__all__ = ["CSV_ALIASES", "LOADTEST_EXAMPLE", "POINT_COLUMNS", "benchmark_points", "read_loadtest",
           "read_loadtest_bytes"]

LOADTEST_EXAMPLE = store.ROOT / "data" / "loadtest_example.csv"


def _num(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


#: the most clients a load test's run is taken to have had (a closed loop of 10^12 clients is no test)
MAX_CLIENTS = 100_000
POINT_COLUMNS = ("source", "model", "concurrency", "qps", "p50_s", "p99_s", "mean_s", "qps_basis")
# CSV column -> accepted names (case-insensitive); latencies take an _s or _ms suffix
CSV_ALIASES: dict[str, tuple[str, ...]] = {
    "concurrency": ("concurrency", "max_concurrency", "num_concurrent_requests", "clients", "batch"),
    "qps": ("qps", "throughput_qps", "request_throughput", "requests_per_s", "req_per_s", "rps"),
    "p50": ("p50", "p50_latency", "median", "median_latency", "latency_p50"),
    "p99": ("p99", "p99_latency", "latency_p99"),
    "mean": ("mean", "mean_latency", "avg_latency", "latency_mean"),
}
UNIT_SUFFIXES = (("_s", 1.0), ("_ms", 0.001), ("_sec", 1.0), ("_seconds", 1.0))


def _csv_column(columns: dict[str, str], names: tuple[str, ...], latency: bool) -> tuple[str, float] | None:
    """(actual column, factor to seconds) of the first alias present."""
    for n in names:
        if latency:
            for suffix, factor in UNIT_SUFFIXES:
                if n + suffix in columns:
                    return columns[n + suffix], factor
        elif n in columns:
            return columns[n], 1.0
    return None


def _read_loadtest_csv(text: str, name: str) -> pd.DataFrame:
    try:
        raw = pd.read_csv(io.StringIO(text), comment="#", skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"not a readable CSV: {exc}", file=name) from None
    cols = {str(c).strip().lower(): c for c in raw.columns}
    found = {k: _csv_column(cols, v, latency=k in ("p50", "p99", "mean")) for k, v in CSV_ALIASES.items()}
    if found["p99"] is None:
        raise InputError("a load-test CSV needs a P99 latency column (p99_s or p99_ms), with qps and/or "
                         "concurrency beside it", file=name)
    if found["qps"] is None and found["concurrency"] is None:
        raise InputError("a load-test CSV needs a qps column or a concurrency column", file=name)

    def col(key):
        if found[key] is None:
            return pd.Series(np.nan, index=raw.index)
        c, factor = found[key]
        values = pd.to_numeric(raw[c], errors="coerce")
        bad = values.isna() & raw[c].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
            raise InputError(f"not a number: {raw[c][bad].iloc[0]!r}", file=name, row=row, field=str(c))
        return values * factor

    out = pd.DataFrame({"source": name, "model": None, "concurrency": col("concurrency"), "qps": col("qps"),
                        "p50_s": col("p50"), "p99_s": col("p99"), "mean_s": col("mean"),
                        "qps_basis": "measured"})
    return _with_littles_law(out)


def _with_littles_law(points: pd.DataFrame) -> pd.DataFrame:
    """Fill QPS from concurrency (λ = L / W, Little's law) or concurrency from QPS (L = λ W).

    W is the mean latency where known, else the P50 (said in ``qps_basis``).
    """
    p = points.copy()
    w = p["mean_s"].where(p["mean_s"].notna(), p["p50_s"])
    w_name = np.where(p["mean_s"].notna(), "mean", "P50")
    need_qps = p["qps"].isna() & p["concurrency"].notna() & (w > 0)
    p.loc[need_qps, "qps"] = p.loc[need_qps, "concurrency"] / w[need_qps]
    p.loc[need_qps, "qps_basis"] = [f"Little's law: concurrency / {n} latency" for n in w_name[need_qps.to_numpy()]]
    need_conc = p["concurrency"].isna() & p["qps"].notna() & w.notna()
    p.loc[need_conc, "concurrency"] = p.loc[need_conc, "qps"] * w[need_conc]
    missing = p["qps"].isna()
    if missing.any():
        row = int(np.flatnonzero(missing.to_numpy())[0]) + 1
        raise InputError("this row has concurrency but no latency to turn it into QPS (Little's law needs "
                         "the mean or P50 latency)", file=str(p["source"].iloc[0]), row=row, field="qps")
    return p[list(POINT_COLUMNS)]


def _point(source: str, model, concurrency, qps, p50_s, p99_s, mean_s, basis="measured") -> dict:
    return {"source": source, "model": model, "concurrency": _num(concurrency), "qps": _num(qps),
            "p50_s": _num(p50_s), "p99_s": _num(p99_s), "mean_s": _num(mean_s), "qps_basis": basis}


def _run_point(run: benchruns.BenchRun, concurrency: int | None) -> dict:
    """One load point from a run's requests: throughput = completed / duration."""
    s = run.summary()
    conc = run.max_concurrency or concurrency
    ms = {k: (s[k] / 1000 if s[k] is not None else None) for k in ("total_ms_p50", "total_ms_p99", "total_ms_mean")}
    if run.source_format == "llmperf":
        # a closed loop of N clients: λ = N / W exactly (Little's law); LLMPerf gives no wall clock
        if not conc:
            raise InputError("an LLMPerf run without its summary needs the concurrency it ran at",
                             file=run.file_name, field="concurrency")
        qps = conc / ms["total_ms_mean"] if ms["total_ms_mean"] else None
        basis = "Little's law: concurrency / mean latency (closed loop)"
    else:
        qps = s["completed"] / run.duration_s if run.duration_s else None
        basis = "measured: completed / duration"
    return _point(run.file_name, run.model, conc, qps, ms["total_ms_p50"], ms["total_ms_p99"],
                  ms["total_ms_mean"], basis)


def _summary_point(doc: dict, name: str) -> dict | None:
    """A load point from a summary-only JSON: LLMPerf ``*_summary.json`` or vLLM without --save-detailed."""
    if any(k.startswith("results_end_to_end_latency_s") for k in doc):
        per_min = _num(doc.get("results_num_completed_requests_per_min"))
        return _point(name, doc.get("model"), doc.get("num_concurrent_requests"),
                      per_min / 60 if per_min is not None else None,
                      doc.get("results_end_to_end_latency_s_quantiles_p50"),
                      doc.get("results_end_to_end_latency_s_quantiles_p99"),
                      doc.get("results_end_to_end_latency_s_mean"), "measured: completed per minute / 60")
    if "model_id" in doc and "p99_e2el_ms" in doc:
        ms = {k: (_num(doc.get(k)) / 1000 if _num(doc.get(k)) is not None else None)
              for k in ("median_e2el_ms", "p99_e2el_ms", "mean_e2el_ms")}
        return _point(name, doc.get("model_id"), doc.get("max_concurrency"), doc.get("request_throughput"),
                      ms["median_e2el_ms"], ms["p99_e2el_ms"], ms["mean_e2el_ms"], "measured: request_throughput")
    return None


def read_loadtest(path: str | Path, name: str | None = None, *, concurrency: int | None = None) -> pd.DataFrame:
    """Load points (one per run or CSV row) from a load-test file.

    Accepted: a ``vllm bench serve`` result JSON (detailed or summary only), an LLMPerf
    individual-responses or summary JSON, or a CSV with a P99 latency column (``p99_s`` or
    ``p99_ms``) and ``qps`` and/or ``concurrency`` (``p50_*``, ``mean_*`` optional; ``#`` lines are
    comments). Missing QPS or concurrency comes from Little's law (L = λ W). ``concurrency``
    gives the clients of an LLMPerf run whose summary is not beside it.

    Columns: ``source``, ``model``, ``concurrency``, ``qps`` (req/s through the tested endpoint),
    ``p50_s``, ``p99_s``, ``mean_s`` (end-to-end latency), ``qps_basis``.
    """
    path = Path(path)
    name = name or path.name
    if concurrency is not None and not (isinstance(concurrency, int) and 1 <= concurrency <= MAX_CLIENTS):
        raise InputError(f"the clients of a run are a whole number from 1 to {MAX_CLIENTS:,}, not {concurrency!r}",
                         file=name, field="concurrency")
    head = path.read_bytes()[:4096].lstrip()
    if not head:
        raise InputError("empty file", file=name)
    if head[:1] not in (b"{", b"[") and head[:2] != b"\x1f\x8b":
        text = path.read_text(encoding="utf-8", errors="replace")
        return _read_loadtest_csv(text, name)
    doc = benchruns._load_json(path, name)
    if isinstance(doc, dict):
        if "model_id" in doc and "input_lens" in doc:
            return pd.DataFrame([_run_point(benchruns.read_vllm_bench(path, name, start=datetime(1970, 1, 1)),
                                            concurrency)], columns=list(POINT_COLUMNS))
        point = _summary_point(doc, name)
        if point is not None:
            return pd.DataFrame([point], columns=list(POINT_COLUMNS))
    if isinstance(doc, list):
        run = benchruns.read_llmperf(path, name, start=datetime(1970, 1, 1))
        return pd.DataFrame([_run_point(run, concurrency)], columns=list(POINT_COLUMNS))
    raise InputError("not a load test this reader knows: expected a vllm bench serve result, an LLMPerf "
                     "individual-responses or summary JSON, or a CSV of qps/concurrency against P99 latency",
                     file=name)


def read_loadtest_bytes(data: bytes, name: str, *, concurrency: int | None = None) -> pd.DataFrame:
    """:func:`read_loadtest` of an upload's bytes (the benchmark readers work on files)."""
    return read_upload(data, name, lambda path: read_loadtest(path, name, concurrency=concurrency))


def benchmark_points(con: duckdb.DuckDBPyConnection, model: str | None = None) -> pd.DataFrame:
    """Load points of the benchmark runs in the store (one per run; newest first), optionally one model's."""
    runs = benchruns.benchmark_runs(con)
    if model is not None:
        runs = runs[runs["model"] == model]
    rows = []
    for r in runs.itertuples(index=False):
        ms = {k: (float(getattr(r, k)) / 1000 if not pd.isna(getattr(r, k)) else None)
              for k in ("total_ms_p50", "total_ms_p99", "total_ms_mean")}
        conc = None if pd.isna(r.max_concurrency) else int(r.max_concurrency)
        if r.source_format == "llmperf" and conc and ms["total_ms_mean"]:
            qps, basis = conc / ms["total_ms_mean"], "Little's law: concurrency / mean latency (closed loop)"
        else:
            qps = r.completed / r.duration_s if r.duration_s else None
            basis = "measured: completed / duration"
        rows.append(_point(f"{r.file_name} ({r.run_id})", r.model, conc, qps, ms["total_ms_p50"],
                           ms["total_ms_p99"], ms["total_ms_mean"], basis))
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))
