"""Ingestion: a table of log-format adapters, detected from content, feeding the store; readers of uploads.

Importing this package registers every adapter (``formats`` and ``ecosystem``) and offers the load itself
(``ingest_path``, ``ingest_frame``, ``detect``, ``IngestOptions``...).

Modules
-------
``base``       the adapter table (``ADAPTERS``, ``adapter_named``) and the file probe
``formats``    the foundation's formats: canonical, generic (mapped columns), the seed gateway's text log
``ecosystem``  LiteLLM, Langfuse, OpenTelemetry GenAI, vLLM, LLMPerf, Azure and Mooncake logs
``tabular``    tabular files (CSV, JSONL, JSON arrays, Parquet) read as SQL, columns mapped
``loader``     one file into the store: detect, read, cast, validate, de-duplicate, insert, roll up
``preview``    a file before loading it: detected format, raw and canonical first rows, rejected rows
``follow``     follow a growing log file: ingest the complete lines added since last time
``pulls``      pull from the services: LiteLLM_SpendLogs from PostgreSQL, Langfuse's public API, resumably
``engine``     vLLM's Prometheus metrics scraped into ``engine_metrics``; the engine's queue over a span
``benchruns``  ``vllm bench serve`` and LLMPerf runs, kept in ``benchmark_runs``
``loadtests``  load-test files (benchmark results, CSVs) and stored runs as load points (P99 against QPS)
``uploads``    uploads as files; eval CSVs, tau tables and RTT samples
``otlp``       the OTLP/HTTP receiver (POST /v1/traces into a durable spool) and the spool's drain
``service``    the ingester: configured sources followed, watched, pulled and scraped each tick; the CLI's way in
"""
import finops.ingest.ecosystem  # noqa: F401  (LiteLLM, Langfuse, OTel, vLLM, LLMPerf, Azure, Mooncake)
import finops.ingest.providers  # noqa: F401  (OpenAI and Anthropic batch results, Helicone, OpenRouter)
from finops.ingest import formats  # noqa: F401  (registers the adapters)
from finops.ingest.base import ADAPTERS, IngestOptions, adapter_named, probe
from finops.ingest.loader import IngestResult, detect, ingest_frame, ingest_path

__all__ = ["ADAPTERS", "IngestOptions", "IngestResult", "adapter_named", "detect", "ingest_frame",
           "ingest_path", "probe",
           "base", "benchruns", "ecosystem", "engine", "follow", "formats", "loader", "loadtests", "otlp", "preview", "pulls", "service",
           "tabular", "uploads"]
