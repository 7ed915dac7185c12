"""Benchmark runs: load tests read from ``vllm bench serve`` and LLMPerf files, kept as runs.

A benchmark file is two things: requests (loaded into ``requests`` like any log,
by the ``vllm-bench`` and ``llmperf`` adapters) and a *run* (its model, provider,
offered load and latency percentiles), kept in the ``benchmark_runs`` table so the
capacity and latency pages can pick one. The readers here are plain functions
over a file: finops.ingest.loadtests reuses them to read load points for sizing, without a store.

Percentiles are computed here, the same way for both tools, over the run's
**successful** requests only (as LLMPerf's own summary does): a failed request
has no latency, so it never pulls a percentile down. numpy's default (linear)
percentile is used.

Table ``benchmark_runs`` (created on first use)
------------------------------------------------
``run_id``              ``<format>-<first 16 hex of the file's sha256>``: the same file is the same run
``source_format``       ``vllm-bench`` or ``llmperf``
``file_name``, ``sha256``  the file as loaded (sha256 links the run to its load batches)
``model``, ``provider`` what was measured (provider: LLMPerf's ``framework``; NULL for vLLM)
``request_rate_per_s``  offered arrival rate; NULL when unlimited (vLLM ``inf``) or closed-loop (LLMPerf)
``max_concurrency``     requests in flight at most (vLLM ``max_concurrency``, LLMPerf ``num_concurrent_requests``)
``num_prompts``         requests sent
``started_at``          wall-clock start of the run, UTC (see each reader for how it is derived)
``duration_s``          length of the run
``completed``, ``failed``  request counts
``ttft_ms_p50`` ... ``total_ms_mean``, ``mean_itl_ms_p50``, ``mean_itl_ms_p99``, ``output_tokens_per_s``
                        summary over successful requests (see :data:`SUMMARY_COLUMNS`)
``metadata``            every other run-level field of the source, JSON
``loaded_at``           when the run was first stored
"""
from __future__ import annotations

import heapq
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from finops import store
from finops.errors import InputError
from finops.ingest.base import json_kind
from finops.ingest.loader import file_sha256

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
SUMMARY_COLUMNS: tuple[str, ...] = (
    *(f"ttft_ms_p{p}" for p in PERCENTILES), "ttft_ms_mean",
    *(f"total_ms_p{p}" for p in PERCENTILES), "total_ms_mean",
    "mean_itl_ms_p50", "mean_itl_ms_p99", "output_tokens_per_s",
)
RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("source_format", "VARCHAR"), ("file_name", "VARCHAR"), ("sha256", "VARCHAR"),
    ("model", "VARCHAR"), ("provider", "VARCHAR"), ("request_rate_per_s", "DOUBLE"),
    ("max_concurrency", "INTEGER"), ("num_prompts", "INTEGER"), ("started_at", "TIMESTAMP"),
    ("duration_s", "DOUBLE"), ("completed", "INTEGER"), ("failed", "INTEGER"),
    *((c, "DOUBLE") for c in SUMMARY_COLUMNS),
    ("metadata", "JSON"), ("loaded_at", "TIMESTAMP"),
)
# per-request columns of BenchRun.requests
REQUEST_COLUMNS: tuple[str, ...] = ("index", "offset_s", "ok", "error", "ttft_ms", "total_ms", "queue_ms",
                                    "mean_itl_ms", "input_tokens", "output_tokens", "attrs")


@dataclass
class BenchRun:
    """One load-test run and its requests (``requests``: one row per request, :data:`REQUEST_COLUMNS`).

    ``requests.offset_s`` is each request's start in seconds after the run's start;
    latencies are NULL (NaN) for failed requests.
    """
    run_id: str
    source_format: str
    file_name: str
    sha256: str
    model: str | None
    provider: str | None
    request_rate_per_s: float | None
    max_concurrency: int | None
    num_prompts: int | None
    started_at: datetime | None
    duration_s: float | None
    metadata: dict = field(default_factory=dict)
    requests: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(REQUEST_COLUMNS)))

    def summary(self) -> dict[str, float | int | None]:
        """completed, failed and the :data:`SUMMARY_COLUMNS` over successful requests."""
        return summarize(self.requests, self.duration_s)


def summarize(requests: pd.DataFrame, duration_s: float | None) -> dict[str, float | int | None]:
    """Percentiles (numpy, linear) and means of the successful requests' latencies.

    >>> r = pd.DataFrame({"ok": [True, True, False], "ttft_ms": [100.0, 300.0, None],
    ...                   "total_ms": [1000.0, 2000.0, None], "mean_itl_ms": [10.0, 20.0, None],
    ...                   "output_tokens": [50, 150, 0]})
    >>> s = summarize(r, 4.0)
    >>> s["completed"], s["failed"], s["ttft_ms_p50"], s["output_tokens_per_s"]
    (2, 1, 200.0, 50.0)
    """
    ok = requests[requests["ok"].astype(bool)] if len(requests) else requests
    out: dict[str, float | int | None] = {"completed": int(len(ok)), "failed": int(len(requests) - len(ok))}
    for col in ("ttft_ms", "total_ms"):
        vals = pd.to_numeric(ok[col], errors="coerce").dropna().to_numpy(dtype=float) if len(ok) else np.array([])
        for p in PERCENTILES:
            out[f"{col}_p{p}"] = float(np.percentile(vals, p)) if vals.size else None
        out[f"{col}_mean"] = float(vals.mean()) if vals.size else None
    itl = pd.to_numeric(ok["mean_itl_ms"], errors="coerce").dropna().to_numpy(dtype=float) if len(ok) else np.array([])
    out["mean_itl_ms_p50"] = float(np.percentile(itl, 50)) if itl.size else None
    out["mean_itl_ms_p99"] = float(np.percentile(itl, 99)) if itl.size else None
    tokens = float(pd.to_numeric(ok["output_tokens"], errors="coerce").fillna(0).sum()) if len(ok) else 0.0
    out["output_tokens_per_s"] = tokens / duration_s if duration_s else None
    return out


# ---------------------------------------------------------------- readers

def _load_json(path: Path, name: str):
    import gzip
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")) as fh:
            return json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError, OSError) as exc:
        raise InputError(f"not valid JSON: {exc}", file=name) from None


def _number(v) -> float | None:
    """A finite number, else None; true and false are none (Python's float(True) is 1.0: a latency of 1 s)."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def _model_id(doc: dict, name: str) -> str | None:
    """The run's ``model_id``: a text (vLLM writes the served model's name), or the file is refused naming it."""
    model = doc.get("model_id")
    if model is not None and not isinstance(model, str):
        raise InputError(f"the run's model_id is the model's name (a text), found {json_kind(model)}", file=name,
                         field="model_id")
    return model


def _start_before(end: datetime, duration_s: float, name: str) -> datetime:
    """A run's start: its end less its duration, or a clear error where that is before year 1."""
    try:
        return end - timedelta(seconds=duration_s)
    except OverflowError:
        raise InputError(f"the run lasts {_seconds_text(duration_s)} and ended {end.isoformat(sep=' ')}: its start "
                         "is before year 1; give the run's start with --start", file=name, field="duration") from None


def _seconds_text(s: float) -> str:
    """A duration read from a file, for a message: ``4.687 s``, ``1e+300 s`` (never three hundred digits)."""
    return f"{s:,.3f} s" if abs(s) < 1e12 else f"{s:.4g} s"


def read_vllm_bench(path: str | Path, name: str | None = None, start: datetime | None = None) -> BenchRun:
    """Read a ``vllm bench serve --save-result --save-detailed`` result JSON.

    One request per position of ``input_lens``, ``output_lens``, ``ttfts``, ``itls``,
    ``latencies``, ``start_times`` (and ``queue_times``, ``errors``, ``generated_texts``
    where present). A request failed when its ``errors`` entry is not empty (vLLM
    then records ttft and latency as 0: they are left NULL here).

    Times: ``start_times`` are ``time.perf_counter()`` readings, so only their
    differences mean anything: ``offset_s = start_time - min(start_times)``. The run's
    wall-clock start is ``start`` when given, else the file's ``date`` (written when
    the run *ended*, in the benchmarking machine's local time, read here as UTC)
    minus ``duration``.
    """
    runs = read_vllm_bench_runs(path, name, start)
    if len(runs) != 1:
        raise InputError(f"the file holds {len(runs)} runs (--append-result): read it with read_vllm_bench_runs",
                         file=name or Path(path).name)
    return runs[0]


def _vllm_docs(path: Path, name: str):
    """The result documents of a vllm bench file: one (``--save-result``), or one per line (``--append-result``
    opens the file with ``a+``, writes a newline when it is not empty, then ``json.dump``s the run)."""
    import gzip
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener = (lambda: gzip.open(path, "rt", encoding="utf-8")) if gz else (lambda: open(path, encoding="utf-8"))
    try:
        with opener() as fh:
            first = fh.readline()
            rest = fh.readline()
    except (UnicodeDecodeError, EOFError, OSError) as exc:
        raise InputError(f"not valid JSON: {exc}", file=name) from None
    try:
        one_line = json.loads(first) if first.strip() and rest else None
    except json.JSONDecodeError:
        one_line = None
    if not isinstance(one_line, dict):         # a single document (perhaps indented): read it whole
        yield 1, _load_json(path, name)
        return
    with opener() as fh:                        # one run per line: stream
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg})", file=name, row=lineno) from None


def read_vllm_bench_runs(path: str | Path, name: str | None = None, start: datetime | None = None) -> list[BenchRun]:
    """Every run of a vllm bench result file: one, or one per line of an ``--append-result`` file
    (run ids then end in ``-<line>``)."""
    path = Path(path)
    name = name or path.name
    sha = file_sha256(path)
    docs = list(_vllm_docs(path, name))
    return [_vllm_run(doc, name if len(docs) == 1 else f"{name}:{line}", sha,
                      f"vllm-bench-{sha[:16]}" + (f"-{line}" if len(docs) > 1 else ""), start)
            for line, doc in docs]


def _vllm_run(doc, name: str, sha: str, run_id: str, start: datetime | None) -> BenchRun:
    if not isinstance(doc, dict):
        raise InputError(f"expected a vllm bench serve result (a JSON object), found {json_kind(doc)}", file=name)
    if "model_id" not in doc:
        raise InputError("not a vllm bench serve result (no model_id)", file=name)
    if "input_lens" not in doc or "ttfts" not in doc:
        raise InputError("this vllm bench result has no per-request data: re-run with --save-result "
                         "--save-detailed (its summary alone cannot be loaded as requests)", file=name)
    series = {k: doc.get(k) for k in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
                                      "queue_times", "errors", "generated_texts")}
    for k, v in series.items():
        if v is not None and not isinstance(v, list):
            # a series of another JSON type (a number, a text, an object) is no per-request list
            raise InputError(f"expected one value per request (a JSON array), found {json_kind(v)}", file=name,
                             field=k)
    n = len(doc["input_lens"])
    for k, v in series.items():
        if v is not None and len(v) != n:
            raise InputError(f"{k} has {len(v)} entries but input_lens has {n}", file=name, field=k)
    starts = series["start_times"]
    if starts is None:
        raise InputError("this vllm bench result has no start_times (vLLM older than the "
                         "--save-detailed start_times field): cannot place requests in time", file=name)
    for i, t in enumerate(starts):
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise InputError(f"a start time is a number of seconds, found {json_kind(t)}", file=name,
                             row=i + 1, field="start_times")
    for i, e in enumerate(series["errors"] or []):
        if e is not None and not isinstance(e, str):
            raise InputError(f"an error is a text, found {json_kind(e)}", file=name, row=i + 1, field="errors")
    for i, gaps in enumerate(series["itls"] or []):
        odd = [gaps] if not isinstance(gaps, list) else [g for g in gaps if isinstance(g, bool)
                                                         or not isinstance(g, int | float)][:1]
        if gaps is not None and odd:
            raise InputError(f"a request's inter-token latencies are a list of seconds, found {json_kind(odd[0])}"
                             + (" in it" if isinstance(gaps, list) else ""), file=name, row=i + 1, field="itls")
    t0 = min(starts) if n else 0.0
    rows = []
    for i in range(n):
        err = (series["errors"][i] or "") if series["errors"] is not None else ""
        lat = _number(series["latencies"][i]) if series["latencies"] is not None else None
        ttft = _number(series["ttfts"][i])
        ok = not err if series["errors"] is not None else bool(lat)
        itl = series["itls"][i] if series["itls"] is not None else None
        attrs = {"ttft_s": ttft, "latency_s": lat, "start_time_perf_s": starts[i], "prompt_len": doc["input_lens"][i],
                 "itls_s": itl, "error": err or None}
        if series["generated_texts"] is not None:
            attrs["generated_text"] = series["generated_texts"][i]
        queue = _number(series["queue_times"][i]) if series["queue_times"] is not None else None
        rows.append({
            "index": i, "offset_s": float(starts[i]) - t0, "ok": ok,
            "error": (err.strip().splitlines() or ["error"])[-1][:200] if not ok else None,
            "ttft_ms": ttft * 1000 if ok and ttft is not None else None,
            "total_ms": lat * 1000 if ok and lat is not None else None,
            "queue_ms": queue * 1000 if queue is not None else None,
            "mean_itl_ms": float(np.mean(itl)) * 1000 if ok and itl else None,
            # vLLM counts a failed request's prompt in no throughput (calculate_metrics sums completed ones)
            "input_tokens": doc["input_lens"][i] if ok else 0,
            "output_tokens": series["output_lens"][i] if series["output_lens"] is not None else None,
            "attrs": attrs,
        })
    duration = _number(doc.get("duration"))
    started = start
    if started is None and doc.get("date"):
        try:
            end = datetime.strptime(str(doc["date"]), "%Y%m%d-%H%M%S")
        except ValueError:
            raise InputError(f"date {doc['date']!r} is not YYYYMMDD-HHMMSS; give the run's start with --start",
                             file=name, field="date") from None
        started = _start_before(end, duration or 0.0, name)
    rate = doc.get("request_rate")
    per_request = {"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times",
                   "errors", "generated_texts"}
    return BenchRun(
        run_id=run_id, source_format="vllm-bench", file_name=name, sha256=sha,
        model=_model_id(doc, name), provider=None,
        request_rate_per_s=_number(rate) if rate not in (None, "inf") else None,
        max_concurrency=doc.get("max_concurrency"), num_prompts=doc.get("num_prompts", n),
        started_at=_naive_utc(started), duration_s=duration,
        metadata={k: v for k, v in doc.items() if k not in per_request},
        requests=pd.DataFrame(rows, columns=list(REQUEST_COLUMNS)),
    )


# LLMPerf leaderboard file names: <provider>_<size>.json, every run a Llama-2 chat model
LEADERBOARD_NAME = re.compile(r"^(?P<provider>[a-z0-9-]+)_(?P<size>\d+b)$")


def llmperf_summary_path(path: Path) -> Path | None:
    """The summary file beside an LLMPerf individual-responses file, if there is one.

    LLMPerf writes ``<name>_individual_responses.json`` and ``<name>_summary.json``
    side by side; the leaderboard keeps ``individual/<run>.json`` and ``summary/<run>.json``.
    """
    candidates = []
    if path.name.endswith("_individual_responses.json"):
        candidates.append(path.with_name(path.name.replace("_individual_responses.json", "_summary.json")))
    if path.parent.name == "individual":
        candidates.append(path.parent.parent / "summary" / path.name)
    candidates.append(path.with_name(f"{path.stem}_summary.json"))
    return next((c for c in candidates if c.is_file()), None)


def names_from_file_name(name: str) -> tuple[str | None, str | None]:
    """``(provider, model)`` from an LLMPerf leaderboard file name, else ``(None, None)``.

    >>> names_from_file_name("fireworks_70b.json")
    ('fireworks', 'llama-2-70b-chat')
    >>> names_from_file_name("my_run_individual_responses.json")
    (None, None)
    """
    m = LEADERBOARD_NAME.match(Path(name).name.removesuffix(".gz").removesuffix(".json"))
    if not m:
        return None, None
    return m.group("provider"), f"llama-2-{m.group('size')}-chat"


def closed_loop_offsets(durations_s: list[float], concurrency: int) -> tuple[list[float], float]:
    """Start offsets of requests sent by ``concurrency`` clients, each sending its next
    request as soon as its previous one ends (LLMPerf's closed loop), in file order.

    Request i starts when the earliest-free client frees up:
    ``start_i = min over clients of free_at``, then that client's ``free_at = start_i + d_i``.
    Returns ``(offsets, run_length_s)``.

    >>> closed_loop_offsets([2.0, 1.0, 1.0, 3.0], 2)
    ([0.0, 0.0, 1.0, 2.0], 5.0)
    >>> closed_loop_offsets([2.0, -1.0, 1.5], 1), closed_loop_offsets([], 1)
    (([0.0, 2.0, 2.0], 3.5), ([], 0.0))
    """
    if max(1, int(concurrency or 1)) == 1:
        # one client: each request starts when the one before ends (the same additions, in order)
        if not len(durations_s):
            return [], 0.0
        ends = np.cumsum(np.maximum(np.asarray(durations_s, dtype=float), 0.0))
        return [0.0, *ends[:-1].tolist()], float(ends[-1])
    free = [0.0] * max(1, int(concurrency or 1))
    heapq.heapify(free)
    offsets = []
    for d in durations_s:
        t = heapq.heappop(free)
        offsets.append(t)
        heapq.heappush(free, t + max(0.0, d))
    return offsets, max(free) if offsets else 0.0


def _llmperf_context(path: Path, name: str, summary_path: str | Path | None, model: str | None) -> dict:
    """What an LLMPerf run's requests do not say: the summary beside the file (or given), the model and
    provider (summary, ``model``, the leaderboard file name) and the clients' concurrency."""
    spath = Path(summary_path) if summary_path else llmperf_summary_path(path)
    summary = _load_json(spath, spath.name) if spath else {}
    file_provider, file_model = names_from_file_name(name)
    return {"spath": spath, "summary": summary, "model": summary.get("model") or model or file_model,
            "provider": summary.get("framework") or file_provider,
            "concurrency": summary.get("num_concurrent_requests")}


def _llmperf_started(ctx: dict, start: datetime | None, length: float, name: str) -> datetime:
    if start is not None:
        return start
    stamp = ctx["summary"].get("timestamp")
    if stamp is not None:
        try:
            return datetime.fromtimestamp(float(stamp), UTC) - timedelta(seconds=length)
        except (TypeError, ValueError, OverflowError, OSError):
            raise InputError(f"the run's summary has a timestamp of {str(stamp)[:40]!r} and the run lasts "
                             f"{_seconds_text(length)}: no start time in years 1 to 9999 follows; give the run's start "
                             "with --start", file=name, field="timestamp") from None
    raise InputError("LLMPerf individual responses carry no timestamps: give the run's start with "
                     "--start, or keep the run's summary file beside this one", file=name)


def _llmperf_run(path: Path, name: str, ctx: dict, started: datetime, length: float, n: int,
                 requests: pd.DataFrame) -> BenchRun:
    summary, spath, concurrency = ctx["summary"], ctx["spath"], ctx["concurrency"]
    meta = {k: v for k, v in summary.items() if not k.startswith("results_")}
    meta["summary_file"] = spath.name if spath else None
    meta["source_summary"] = {k: v for k, v in summary.items() if k.startswith("results_")}
    meta["times"] = "derived: closed-loop replay of end-to-end latencies (no per-request timestamps)"
    sha = file_sha256(path)
    return BenchRun(
        run_id=f"llmperf-{sha[:16]}", source_format="llmperf", file_name=name, sha256=sha,
        model=ctx["model"], provider=ctx["provider"], request_rate_per_s=None,
        max_concurrency=int(concurrency) if concurrency else None,
        num_prompts=summary.get("results_num_requests_started") or n,
        started_at=_naive_utc(started), duration_s=length or None, metadata=meta, requests=requests,
    )


def read_llmperf(path: str | Path, name: str | None = None, summary_path: str | Path | None = None,
                 start: datetime | None = None, model: str | None = None) -> BenchRun:
    """Read an LLMPerf individual-responses JSON (one object per request).

    Model and provider: from the summary beside the file (``model``, ``framework``:
    see :func:`llmperf_summary_path`), else ``model``, else the leaderboard file
    name (``fireworks_70b.json`` -> provider ``fireworks``, model ``llama-2-70b-chat``).

    A request failed when its ``error_code`` is set; its latencies are left NULL
    (LLMPerf records 0 for some failures and partial times for others; its summary
    leaves all failed requests out, and so do we). The raw values stay in attrs.

    Times: LLMPerf records none per request. Offsets are derived by replaying the
    closed loop (:func:`closed_loop_offsets`) with the run's concurrency and each
    request's end-to-end latency; the run's start is ``start`` when given, else
    the summary's ``timestamp`` (written when the run ended) minus the replayed
    run length. Without either the file cannot be placed in time.
    """
    path = Path(path)
    name = name or path.name
    doc = _load_json(path, name)
    if isinstance(doc, dict) and any(k.startswith("results_") for k in doc):
        raise InputError("this is an LLMPerf summary file: load the individual responses file "
                         "(its summary beside it is read for model, provider and time)", file=name)
    if not isinstance(doc, list):
        raise InputError("not an LLMPerf individual responses file (a JSON array of request objects)", file=name)
    for i, r in enumerate(doc):
        if not isinstance(r, dict):
            raise InputError(f"expected an LLMPerf request (a JSON object), found {json_kind(r)}", file=name,
                             row=i + 1)
    ctx = _llmperf_context(path, name, summary_path, model)
    durations = [_number(r.get("end_to_end_latency_s")) or 0.0 for r in doc]
    offsets, length = closed_loop_offsets(durations, ctx["concurrency"] or 1)
    started = _llmperf_started(ctx, start, length, name)
    rows = []
    for i, (r, off) in enumerate(zip(doc, offsets, strict=True)):
        ok = r.get("error_code") is None
        ttft, e2e, itl = (_number(r.get(k)) for k in ("ttft_s", "end_to_end_latency_s", "inter_token_latency_s"))
        rows.append({
            "index": i, "offset_s": off, "ok": ok,
            "error": None if ok else f"{r.get('error_code')}: {r.get('error_msg') or ''}".strip().rstrip(":")[:200],
            "ttft_ms": ttft * 1000 if ok and ttft is not None else None,
            "total_ms": e2e * 1000 if ok and e2e is not None else None,
            "queue_ms": None,
            "mean_itl_ms": itl * 1000 if ok and itl is not None else None,
            "input_tokens": r.get("number_input_tokens"), "output_tokens": r.get("number_output_tokens"),
            "attrs": dict(r),
        })
    return _llmperf_run(path, name, ctx, started, length, len(doc),
                        pd.DataFrame(rows, columns=list(REQUEST_COLUMNS)))


# The per-request values of an LLMPerf individual-responses file in SQL, each record parsed once
# (read_json streams the array, its fields typed JSON): what read_llmperf computes from it, for records whose values are of
# the JSON types read the same way in SQL and in Python. ``odd`` marks a record that is not (a count or a
# latency that is text or a boolean, which Python's float() reads; an error code or message of another
# type; white space Python's strip() takes and DuckDB's trim does not): the file is then read by read_llmperf.
# ``no_fields`` marks a record with none of the fields: ``{}``, or an element that is no object (read_json reads
# ``null`` so), which read_llmperf refuses.
_LLMPERF_FIELDS = ("error_code", "error_msg", "ttft_s", "end_to_end_latency_s", "inter_token_latency_s",
                   "number_input_tokens", "number_output_tokens")
LLMPERF_FIELD_TYPES = {f: "JSON" for f in _LLMPERF_FIELDS}
LLMPERF_RECORDS_SQL = r"""
WITH t AS (
  SELECT ordinality - 1 AS i, error_code AS code_j, error_msg AS msg_j,
    coalesce(json_type(error_code), 'NULL') AS code_t, coalesce(json_type(error_msg), 'NULL') AS msg_t,
    coalesce(json_type(ttft_s), 'NULL') AS ttft_t, coalesce(json_type(end_to_end_latency_s), 'NULL') AS e2e_t,
    coalesce(json_type(inter_token_latency_s), 'NULL') AS itl_t,
    coalesce(json_type(number_input_tokens), 'NULL') AS in_t, coalesce(json_type(number_output_tokens), 'NULL') AS out_t,
    TRY_CAST(ttft_s AS DOUBLE) AS ttft, TRY_CAST(end_to_end_latency_s AS DOUBLE) AS e2e,
    TRY_CAST(inter_token_latency_s AS DOUBLE) AS itl, TRY_CAST(number_input_tokens AS DOUBLE) AS n_in,
    TRY_CAST(number_output_tokens AS DOUBLE) AS n_out
  FROM read_json(?, format = 'array', columns = ?, compression = 'auto') WITH ORDINALITY),
n AS (
  SELECT *, code_t = 'NULL' AS ok,
    CASE WHEN code_t = 'VARCHAR' THEN json_extract_string(code_j, '$') ELSE CAST(code_j AS VARCHAR) END AS code,
    CASE WHEN msg_t = 'VARCHAR' THEN json_extract_string(msg_j, '$') ELSE '' END AS msg
  FROM t)
SELECT i,
  code_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'VARCHAR') OR msg_t NOT IN ('NULL', 'VARCHAR')
    OR ttft_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE') OR e2e_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE')
    OR itl_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE') OR in_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE')
    OR out_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE')
    OR (NOT ok AND regexp_matches(code || msg,
        '[\x1c-\x1f\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]')) AS odd,
  ok,
  CASE WHEN NOT ok THEN left(rtrim(trim(code || ': ' || msg, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)),
                                   ':'), 200) END AS error,
  CASE WHEN ok THEN ttft * 1000 END AS ttft_ms, CASE WHEN ok THEN e2e * 1000 END AS total_ms,
  CASE WHEN ok THEN itl * 1000 END AS mean_itl_ms,
  CASE WHEN n_in = floor(n_in) THEN CAST(n_in AS BIGINT) END AS input_tokens,
  CASE WHEN n_out = floor(n_out) THEN CAST(n_out AS BIGINT) END AS output_tokens,
  n_out AS output_raw, coalesce(e2e, 0.0) AS duration_s,
  code_t = 'NULL' AND msg_t = 'NULL' AND ttft_t = 'NULL' AND e2e_t = 'NULL' AND itl_t = 'NULL' AND in_t = 'NULL'
    AND out_t = 'NULL' AS no_fields
FROM n"""


@dataclass
class StreamedRun:
    """A run read in SQL: its :class:`BenchRun` (``requests`` holds only what its summary needs), a Parquet
    file of each request's values (:data:`LLMPERF_RECORDS_SQL`, in file order) and one of its offset
    (``offset_s``, and ``us``: the offset in whole microseconds as :func:`timedelta_microseconds` rounds it),
    to join to the records by position."""
    run: BenchRun
    values_path: str
    times_path: str

    def cleanup(self) -> None:
        for t in (self.values_path, self.times_path):
            Path(t).unlink(missing_ok=True)


def read_llmperf_streamed(con: duckdb.DuckDBPyConnection, path: str | Path, name: str | None = None,
                          summary_path: str | Path | None = None, start: datetime | None = None,
                          model: str | None = None) -> StreamedRun | None:
    """:func:`read_llmperf` in SQL over the file, streamed (never the whole document in memory); None when a
    record is one :data:`LLMPERF_RECORDS_SQL` does not read as Python does, the file is no array of
    objects or it holds none (read it with :func:`read_llmperf`, which says what is wrong).

    One pass reads the end-to-end latencies in file order, for the closed-loop replay (Python: the same
    :func:`closed_loop_offsets`) and the run's summary (the same :func:`summarize`)."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    name = name or path.name
    tmp = [tempfile.NamedTemporaryFile(prefix="finops-", suffix=".parquet", delete=False) for _ in range(2)]
    for t in tmp:
        t.close()
    values, times = tmp[0].name, tmp[1].name

    def drop() -> None:
        for t in (values, times):
            Path(t).unlink(missing_ok=True)
    try:
        # written by DuckDB itself (no Arrow batches through Python); in file order without a sort where the
        # connection keeps insertion order (COPY and a single file's scan then keep it)
        ordered = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
        order = "" if ordered else " ORDER BY i"
        con.execute(f"COPY (SELECT * FROM ({LLMPERF_RECORDS_SQL}){order}) TO ? (FORMAT parquet)",
                    [str(path), LLMPERF_FIELD_TYPES, values])
        frame = con.execute("SELECT odd, ok, ttft_ms, total_ms, mean_itl_ms, output_raw AS output_tokens, duration_s, "
                            f"no_fields FROM read_parquet(?){order}", [values]).df()
        # a record of none of the fields may be null (or another value read_json reads as no fields): only then is
        # the file read again for the first element that is no object, which read_llmperf refuses by its row
        odd_element = bool(frame["no_fields"].any()) and bool(con.execute(
            "SELECT count(*) FROM read_json_objects(?, format = 'array', compression = 'auto') "
            "WHERE json_type(json) IS DISTINCT FROM 'OBJECT'", [str(path)]).fetchall()[0][0])
    except duckdb.Error:
        drop()
        return None
    if not len(frame) or frame["odd"].any() or odd_element:
        drop()
        return None
    try:
        ctx = _llmperf_context(path, name, summary_path, model)
        offsets, length = closed_loop_offsets(frame["duration_s"].tolist(), ctx["concurrency"] or 1)
        started = _llmperf_started(ctx, start, length, name)
    except BaseException:
        drop()
        raise
    off = np.asarray(offsets, dtype=float)
    if not np.all(np.abs(off) < MAX_OFFSET_S):
        # an offset past any timestamp (a latency of 1e300 s before it): whole microseconds would wrap round in
        # int64 and every later request be stored at the run's start; read_llmperf rejects those rows by name
        drop()
        return None
    run = _llmperf_run(path, name, ctx, started, length, len(frame), frame.drop(columns=["odd", "duration_s"]))
    # read once, by position: neither compressed nor dictionary-encoded (a fifth of the writing's CPU)
    pq.write_table(pa.table({"offset_s": off, "us": timedelta_microseconds(off)}), times, compression="none",
                   use_dictionary=False, write_statistics=False)
    return StreamedRun(run, values, times)


#: offsets (s) whose whole microseconds int64 holds with room: 9e12 s is some 285,000 years
MAX_OFFSET_S = 9e12


def timedelta_microseconds(seconds: np.ndarray) -> np.ndarray:
    """``timedelta(seconds=s)`` in whole microseconds, for an array of float seconds, rounded as CPython's
    timedelta rounds a float: the whole seconds exactly, their fraction times 1e6 to the nearest, half to even.
    Each ``|s|`` must be below :data:`MAX_OFFSET_S` (int64 wraps round past it).

    >>> s = np.array([0.0, 1.5, 4.478070693999825, 2.0000005, 2.0000015])
    >>> [int(x) for x in timedelta_microseconds(s)] == [timedelta(seconds=float(x)) // timedelta(microseconds=1)
    ...                                                for x in s]
    True
    """
    frac, whole = np.modf(seconds)
    return whole.astype(np.int64) * 1_000_000 + np.rint(frac * 1e6).astype(np.int64)


def _naive_utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


# ---------------------------------------------------------------- the store

def ensure_table(con: duckdb.DuckDBPyConnection) -> None:
    cols = ", ".join(f"{n} {t}" for n, t in RUN_COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS benchmark_runs ({cols})")


def _has_table(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'benchmark_runs' "
                            "AND NOT temporary").fetchall()[0][0])


def record_run(con: duckdb.DuckDBPyConnection, run: BenchRun) -> bool:
    """Store a run unless its ``run_id`` is stored already. Returns whether it was added."""
    ensure_table(con)
    if con.execute("SELECT count(*) FROM benchmark_runs WHERE run_id = ?", [run.run_id]).fetchall()[0][0]:
        return False
    s = run.summary()
    values = {
        "run_id": run.run_id, "source_format": run.source_format, "file_name": run.file_name,
        "sha256": run.sha256, "model": run.model, "provider": run.provider,
        "request_rate_per_s": run.request_rate_per_s, "max_concurrency": run.max_concurrency,
        "num_prompts": run.num_prompts, "started_at": run.started_at, "duration_s": run.duration_s,
        **s, "metadata": json.dumps(run.metadata, default=str),
        "loaded_at": datetime.now(UTC).replace(tzinfo=None),
    }
    names = [n for n, _ in RUN_COLUMNS]
    con.execute(f"INSERT INTO benchmark_runs ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
                [values[n] for n in names])
    store.bump_data_version(con)
    return True


def benchmark_runs(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Stored runs whose requests are in the store (a deleted batch hides its run), newest first."""
    names = [n for n, _ in RUN_COLUMNS]
    if not _has_table(con):
        return pd.DataFrame(columns=names)
    cols = ", ".join(f"r.{n}" for n in names)
    return con.execute(
        f"SELECT {cols} FROM benchmark_runs r WHERE EXISTS (SELECT 1 FROM batches b WHERE b.sha256 = r.sha256 "
        f"AND b.format = r.source_format) ORDER BY r.started_at DESC NULLS LAST, r.run_id").df()


def benchmark_requests(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """The canonical rows of one run, in arrival order (empty when the run is unknown)."""
    if not _has_table(con):
        return pd.DataFrame()
    return con.execute(
        "SELECT q.* EXCLUDE (batch_id) FROM requests q WHERE q.batch_id IN ("
        "  SELECT b.batch_id FROM batches b JOIN benchmark_runs r ON b.sha256 = r.sha256 "
        "  AND b.format = r.source_format WHERE r.run_id = ?) "
        "AND starts_with(q.request_id, ?) ORDER BY q.ts, q.request_id", [run_id, run_id + ":"]).df()


# ---------------------------------------------------------------- vllm bench, streamed

#: the per-request series of a vllm bench result and the JSON values the streamed reading takes in each
#: (ijson events, numbers as int/float): anything else hands the file to read_vllm_bench_runs
VLLM_SERIES: dict[str, tuple[type, ...]] = {
    "input_lens": (int,), "output_lens": (int,), "ttfts": (int, float), "latencies": (int, float),
    "start_times": (float,), "queue_times": (int, float), "errors": (str,), "generated_texts": (str,),
    "itls": (float,),
}
VLLM_CHUNK = 100_000
#: a request completed: no error text (errors present), else a latency that is not 0 (read_vllm_bench_runs)
VLLM_OK_SQL = "coalesce(e.err, '') = ''"
VLLM_OK_LATENCY_SQL = "coalesce(l.latencies <> 0, false)"


class _NotPlain(Exception):
    """A value the streamed reading does not read as the Python one does."""


def _vllm_error_text(err: str) -> str:
    return (err.strip().splitlines() or ["error"])[-1][:200]


class _SeriesWriter:
    """One series of a vllm bench result, written to its own Parquet file a chunk at a time (``buf`` holds the
    chunk being read; ``n`` counts the values flushed)."""

    def __init__(self, key: str):
        import tempfile

        import pyarrow as pa
        self.key, self.n, self.buf = key, 0, []
        tmp = tempfile.NamedTemporaryFile(prefix="finops-", suffix=".parquet", delete=False)
        tmp.close()
        self.path = tmp.name
        if key == "itls":
            self.schema = pa.schema([("itls", pa.list_(pa.float64())), ("itl_mean_s", pa.float64())])
        elif key == "errors":
            self.schema = pa.schema([("err", pa.string()), ("err_text", pa.string())])
        elif key in ("input_lens", "output_lens"):
            self.schema = pa.schema([(key, pa.int64())])
        elif key == "generated_texts":
            self.schema = pa.schema([(key, pa.string())])
        else:
            self.schema = pa.schema([(key, pa.float64())])
        self.writer = None

    def flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, self.schema)
        buf, self.buf = self.buf, []
        if self.key == "itls":
            means = np.full(len(buf), np.nan)
            by_len: dict[int, list[int]] = {}
            for i, x in enumerate(buf):
                if x:
                    by_len.setdefault(len(x), []).append(i)
            for idx in by_len.values():
                # np.mean over each row of a C-ordered block: the same pairwise sums as np.mean(list)
                means[idx] = np.mean(np.array([buf[i] for i in idx], dtype=float), axis=1)
            cols = [pa.array(buf, pa.list_(pa.float64())), pa.array(means)]
        elif self.key == "errors":
            cols = [pa.array(buf, pa.string()), pa.array([_vllm_error_text(e) if e else None for e in buf], pa.string())]
        else:
            cols = [pa.array(buf, self.schema.field(0).type)]
        self.writer.write_table(pa.Table.from_arrays(cols, schema=self.schema))

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _vllm_stream(fh, writers: dict) -> dict:
    """Read one vllm bench result document from ``fh`` with ijson: the per-request series into ``writers``
    (created here, by key), every other top-level field built whole (the run's metadata)."""
    import ijson

    meta: dict = {}
    events = ijson.parse(fh, use_float=True)
    prefix, event, value = next(events)
    if event != "start_map":
        raise _NotPlain
    for prefix, event, value in events:
        if prefix == "" and event == "end_map":
            break
        if event != "map_key" or prefix != "":
            raise _NotPlain
        key = value
        if key in meta or key in writers:
            raise _NotPlain         # a key given twice: json.load keeps the last
        if key in VLLM_SERIES:
            w = writers[key] = _SeriesWriter(key)
            ok_types = VLLM_SERIES[key]
            _, ev, _ = next(events)
            if ev != "start_array":
                raise _NotPlain
            item, inner = f"{key}.item", f"{key}.item.item"
            buf, add = w.buf, w.buf.append
            for pfx, ev, val in events:
                if ev == "end_array" and pfx == key:
                    break
                if key == "itls":
                    if ev != "start_array":
                        raise _NotPlain
                    vals = []
                    push = vals.append
                    for p2, e2, v2 in events:
                        if e2 == "end_array":
                            break
                        if type(v2) not in ok_types or p2 != inner:
                            raise _NotPlain
                        push(v2)
                    add(vals)
                elif type(val) in ok_types and pfx == item:
                    add(val)
                else:
                    raise _NotPlain
                if len(buf) >= VLLM_CHUNK:
                    w.n += len(buf)
                    w.flush()
                    buf, add = w.buf, w.buf.append
            w.n += len(buf)
            w.close()
        else:
            builder = ijson.ObjectBuilder()
            depth = 0
            for _pfx, ev, val in events:
                builder.event(ev, val)
                if ev in ("start_map", "start_array"):
                    depth += 1
                elif ev in ("end_map", "end_array"):
                    depth -= 1
                if depth == 0:
                    break
            meta[key] = builder.value
    if next(events, None) is not None:
        raise _NotPlain
    return meta


@dataclass
class StreamedVllm:
    """A vllm bench run read streamed: its :class:`BenchRun` (``requests`` holds what its summary needs) and
    the Parquet file of each series (:data:`VLLM_SERIES`), to join by position."""
    run: BenchRun
    series: dict[str, str]
    t0: float               # the first start_times reading: offsets count from it

    def cleanup(self) -> None:
        for p in self.series.values():
            Path(p).unlink(missing_ok=True)


def read_vllm_streamed(con: duckdb.DuckDBPyConnection, path: str | Path, name: str | None = None,
                       start: datetime | None = None) -> StreamedVllm | None:
    """:func:`read_vllm_bench_runs` for a file of one result document, streamed (ijson: memory of a chunk of
    each series, never the document); None when the file holds one run per line (--append-result, read a
    line at a time there), is no plain document of the series' usual types, or is one that
    :func:`_vllm_run` refuses (it says why)."""
    import gzip

    path = Path(path)
    name = name or path.name
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener = (lambda: gzip.open(path, "rb")) if gz else (lambda: open(path, "rb"))
    with opener() as fh:
        first = fh.readline()
        if fh.readline():
            try:
                if isinstance(json.loads(first), dict):
                    return None         # one run per line
            except (json.JSONDecodeError, UnicodeDecodeError):
                pass
    writers: dict[str, _SeriesWriter] = {}

    def drop() -> None:
        for w in writers.values():
            if w.writer is not None:
                w.writer.close()
            Path(w.path).unlink(missing_ok=True)
    try:
        with opener() as fh:
            meta = _vllm_stream(fh, writers)
    except Exception:       # ijson's errors, a value of another type: the Python reading says what is wrong
        drop()
        return None
    series = {k: w.path for k, w in writers.items()}
    counts = {k: w.n for k, w in writers.items()}
    n = counts.get("input_lens")
    if ("model_id" not in meta or n is None or "ttfts" not in counts or "start_times" not in counts or not n
            or any(c != n for c in counts.values())):
        drop()
        return None         # refused by _vllm_run, with its message
    try:
        return _vllm_streamed_run(con, path, name, start, meta, series, n)
    except BaseException:
        drop()
        raise


def _vllm_streamed_run(con, path: Path, name: str, start: datetime | None, meta: dict, series: dict[str, str],
                       n: int) -> StreamedVllm | None:
    sha = file_sha256(path)
    t0 = con.execute("SELECT min(start_times) FROM read_parquet(?)", [series["start_times"]]).fetchall()[0][0]
    errors = "errors" in series
    lat = "latencies" in series
    frame = con.execute(
        f"SELECT {VLLM_OK_SQL if errors else (VLLM_OK_LATENCY_SQL if lat else 'false')} AS ok, t.ttfts AS ttft_s, "
        + ("l.latencies" if lat else "CAST(NULL AS DOUBLE)") + " AS latency_s, "
        + ("i.itl_mean_s" if "itls" in series else "CAST(NULL AS DOUBLE)") + " AS itl_mean_s, "
        + ("o.output_lens" if "output_lens" in series else "CAST(NULL AS BIGINT)") + " AS output_tokens "
        "FROM read_parquet(?) t"
        + (" POSITIONAL JOIN read_parquet(?) l" if lat else "")
        + (" POSITIONAL JOIN read_parquet(?) e" if errors else "")
        + (" POSITIONAL JOIN read_parquet(?) i" if "itls" in series else "")
        + (" POSITIONAL JOIN read_parquet(?) o" if "output_lens" in series else ""),
        [series["ttfts"], *([series["latencies"]] if lat else []), *([series["errors"]] if errors else []),
         *([series["itls"]] if "itls" in series else []),
         *([series["output_lens"]] if "output_lens" in series else [])]).df()
    ok = frame["ok"].astype(bool)
    requests = pd.DataFrame({
        "ok": ok, "ttft_ms": (frame["ttft_s"] * 1000).where(ok), "total_ms": (frame["latency_s"] * 1000).where(ok),
        "mean_itl_ms": (frame["itl_mean_s"] * 1000).where(ok), "output_tokens": frame["output_tokens"]})
    def drop_series() -> None:
        for p in series.values():
            Path(p).unlink(missing_ok=True)
    try:
        model = _model_id(meta, name)
    except InputError:
        drop_series()
        raise
    duration = _number(meta.get("duration"))
    started = start
    if started is None and meta.get("date"):
        try:
            end = datetime.strptime(str(meta["date"]), "%Y%m%d-%H%M%S")
            started = end - timedelta(seconds=duration or 0.0)
        except (ValueError, OverflowError):     # the Python reading names the field
            drop_series()
            return None
    rate = meta.get("request_rate")
    run = BenchRun(
        run_id=f"vllm-bench-{sha[:16]}", source_format="vllm-bench", file_name=name, sha256=sha,
        model=model, provider=None,
        request_rate_per_s=_number(rate) if rate not in (None, "inf") else None,
        max_concurrency=meta.get("max_concurrency"), num_prompts=meta.get("num_prompts", n),
        started_at=_naive_utc(started), duration_s=duration, metadata=meta, requests=requests)
    return StreamedVllm(run, series, t0)
