"""Ingestion: a table of log-format adapters, detected from content, feeding the store.

Importing this package registers every adapter (``formats`` and any later modules).
"""
import finops.ingest.ecosystem  # noqa: F401  (LiteLLM, Langfuse, OTel, vLLM, LLMPerf, Azure, Mooncake)
from finops.ingest import formats  # noqa: F401  (registers the adapters)
from finops.ingest.base import ADAPTERS, IngestOptions, adapter_named, probe
from finops.ingest.loader import IngestResult, detect, ingest_frame, ingest_path

__all__ = ["ADAPTERS", "IngestOptions", "IngestResult", "adapter_named", "detect", "ingest_frame",
           "ingest_path", "probe"]
