"""The ecosystem's log formats: detection, mapping, idempotence, benchmark runs, derived fields."""
import json
import shutil
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.errors import InputError
from finops.ingest import ADAPTERS, IngestOptions, benchruns, ingest_path, probe
from finops.ingest.loader import detect
from helpers import DATA

START = datetime(2025, 1, 1)
LLMPERF = DATA / "llmperf" / "individual"

# file -> (adapter detected, options to load it, rows ingested)
FILES = {
    "canonical_sample.csv": ("canonical", IngestOptions(), 4),
    "seed_gateway_injected.log": ("gateway-log", IngestOptions(), 8),
    "litellm_spendlogs.csv": ("litellm", IngestOptions(), 8),
    "litellm_spend_logs.json": ("litellm", IngestOptions(), 5),
    "langfuse_observations.json": ("langfuse", IngestOptions(), 5),
    "langfuse_generations.csv": ("langfuse", IngestOptions(), 4),
    "otel_genai_spans.jsonl": ("otel", IngestOptions(tenant_field="tenant.id"), 5),
    "vllm_bench_serve_detailed.json": ("vllm-bench", IngestOptions(), 10),
    "llmperf/individual/fireworks_70b.json": ("llmperf", IngestOptions(), 150),
    "llmperf/individual/lepton_7b.json": ("llmperf", IngestOptions(), 150),
    "llmperf/individual/bedrock_13b.json": ("llmperf", IngestOptions(), 150),
    "llmperf/individual/together_13b.json": ("llmperf", IngestOptions(), 150),
    "llmperf_individual_only/perplexity_70b.json": ("llmperf", IngestOptions(start=START), 150),
    "azure_conv.csv": ("azure-trace", IngestOptions(model="azure-conv"), 19_366),
    "azure_code_excerpt.csv": ("azure-trace", IngestOptions(model="azure-code"), 500),
    "mooncake_conversation_head300.jsonl": ("mooncake", IngestOptions(model="kimi", start=START), 300),
    "mooncake_conversation_rows1337_1346.jsonl": ("mooncake", IngestOptions(model="kimi", start=START), 10),
}


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _rows(con, sql, params=None):
    return con.execute(sql, params or []).fetchall()


# ---------------------------------------------------------------- detection

@pytest.mark.parametrize("name", sorted(FILES))
def test_detection_picks_the_right_adapter_with_a_unique_top_score(name):
    p = probe(DATA / name)
    assert detect(p).name == FILES[name][0]
    scores = sorted((a.sniff(p) for a in ADAPTERS), reverse=True)
    assert scores[0] > scores[1], f"{name}: the top score ties"


def test_other_data_files_are_refused_or_advised():
    # the summary and the traces exports are recognised, and loading them says what to load instead
    con = store.connect(":memory:")
    assert detect(probe(DATA / "llmperf/summary/fireworks_70b.json")).name == "llmperf"
    with pytest.raises(InputError, match="summary file: load the individual responses"):
        ingest_path(con, DATA / "llmperf/summary/fireworks_70b.json")
    assert detect(probe(DATA / "langfuse_traces.json")).name == "langfuse"
    with pytest.raises(InputError, match="traces export: load the observations"):
        ingest_path(con, DATA / "langfuse_traces.json")
    assert store.row_count(con) == 0


def test_a_mapping_still_means_generic_and_tenant_field_does_not():
    assert detect(probe(DATA / "azure_code_excerpt.csv"), mapped=True).name == "generic"
    con = store.connect(":memory:")
    [r] = ingest_path(con, DATA / "litellm_spendlogs.csv", IngestOptions(tenant_field="user"))
    assert r.format == "litellm"
    assert sorted(t for (t,) in _rows(con, "SELECT DISTINCT tenant FROM requests")) == ["alice", "bob", "carol", "dave"]


def test_a_file_matching_two_formats_is_refused_with_the_candidates(tmp_path):
    both = tmp_path / "hybrid.jsonl"
    both.write_text(json.dumps({"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1],
                                "resourceSpans": [], "note": "gen_ai.request.model"}) + "\n")
    with pytest.raises(InputError, match=r"several formats: (otel, mooncake|mooncake, otel).*--format"):
        detect(probe(both))
    assert detect(probe(both), forced="mooncake").name == "mooncake"


def test_an_unknown_format_is_refused_with_the_list(tmp_path):
    f = tmp_path / "other.jsonl"
    f.write_text('{"a": 1, "b": 2}\n')
    with pytest.raises(InputError, match="no known log format") as err:
        detect(probe(f))
    for name in ("litellm", "langfuse", "otel", "vllm-bench", "llmperf", "azure-trace", "mooncake"):
        assert name in str(err.value)


# ---------------------------------------------------------------- every format loads, once

@pytest.mark.parametrize("name", sorted(FILES))
def test_every_format_loads_and_reloading_adds_nothing(con, name):
    fmt, opts, n = FILES[name]
    [first] = ingest_path(con, DATA / name, opts)
    assert (first.format, first.rows_ingested, first.rows_rejected) == (fmt, n, 0)
    [again] = ingest_path(con, DATA / name, opts)
    assert again.rows_ingested == 0
    assert store.row_count(con) == n


@pytest.mark.parametrize("name,extra", [
    ("litellm_spendlogs.csv", None),
    ("mooncake_conversation_rows1337_1346.jsonl", '{"timestamp": 999000, "input_length": 600, '
                                                  '"output_length": 9, "hash_ids": [0, 99999990]}'),
])
def test_a_grown_copy_adds_only_the_new_rows(con, tmp_path, name, extra):
    """Other bytes, so the row keys decide: the old rows are skipped, the new one goes in."""
    fmt, opts, n = FILES[name]
    lines = (DATA / name).read_text().splitlines()
    if extra is None:       # a LiteLLM row with a new request_id
        extra = lines[1].replace("chatcmpl-0001a7c1e9f0b5d2", "chatcmpl-9999a7c1e9f0b5d2")
    grown = tmp_path / name.replace("/", "_")
    grown.write_text("\n".join(lines + [extra]) + "\n")
    ingest_path(con, DATA / name, opts)
    [r] = ingest_path(con, grown, opts)
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (n + 1, 1, n)


# ---------------------------------------------------------------- litellm

def test_litellm_fields_map_onto_the_canonical_schema(con):
    ingest_path(con, DATA / "litellm_spendlogs.csv")
    got = {r[0]: r[1:] for r in _rows(con, "SELECT request_id, ts, tenant, model, input_tokens, output_tokens, "
                                           "cached_input_tokens, ttft_ms, total_ms, status, error_type, cost_usd, "
                                           "cache_hit FROM requests")}
    # startTime 09:00:00.000, completionStartTime +412 ms, endTime +2310 ms; cached from metadata
    assert got["chatcmpl-0001a7c1e9f0b5d2"] == (datetime(2024, 11, 12, 9, 0), "team-search", "gpt-4o-mini-2024-07-18",
                                                1250, 180, 1024, 412.0, 2310.0, "ok", None, 0.0002955, False)
    # status failure -> error, its class from metadata.error_information; no completionStartTime -> no TTFT
    assert got["chatcmpl-0004a7c1e9f0b5d2"][8:11] == ("error", "RateLimitError", 0.0)
    assert got["chatcmpl-0004a7c1e9f0b5d2"][6] is None
    assert got["chatcmpl-0005a7c1e9f0b5d2"][-1] is True           # cache_hit "True"
    assert got["chatcmpl-0007a7c1e9f0b5d2"][1] == "default"       # no team_id
    attrs = json.loads(_rows(con, "SELECT attrs FROM requests WHERE request_id = 'chatcmpl-0006a7c1e9f0b5d2'")[0][0])
    assert attrs["request_tags"] == ["prod", "rag"]              # JSON text kept as JSON
    assert attrs["metadata"]["additional_usage_values"]["cache_read_input_tokens"] == 2048
    assert (attrs["end_user"], attrs["model_group"]) == ("cust-004", "claude-sonnet")
    # custom_llm_provider is the provider column now
    assert _rows(con, "SELECT provider FROM requests WHERE request_id = 'chatcmpl-0006a7c1e9f0b5d2'") == [("anthropic",)]


def test_litellm_json_and_csv_agree(con):
    ingest_path(con, DATA / "litellm_spendlogs.csv")
    ingest_path(con, DATA / "litellm_spend_logs.json")
    cols = "ts, tenant, model, input_tokens, output_tokens, cached_input_tokens, ttft_ms, total_ms, status, " \
           "error_type, cost_usd, cache_hit"
    csv_rows = _rows(con, f"SELECT {cols} FROM requests WHERE request_id LIKE '%a7c1%' ORDER BY ts LIMIT 5")
    json_rows = _rows(con, f"SELECT {cols} FROM requests WHERE request_id LIKE '%b8d2%' ORDER BY ts")
    assert csv_rows == json_rows


def test_api_pages_load_like_arrays(con, tmp_path):
    """LiteLLM's /spend/logs/v2 and Langfuse's API answer in pages: {"data": [...], ...}."""
    rows = json.loads((DATA / "litellm_spend_logs.json").read_text())
    page = tmp_path / "spend_logs_v2.json"
    page.write_text(json.dumps({"data": rows, "total": 5, "page": 1, "page_size": 50, "total_pages": 1}, indent=1))
    assert detect(probe(page)).name == "litellm"
    assert ingest_path(con, page)[0].rows_ingested == 5
    lf = json.loads((DATA / "langfuse_observations.json").read_text())
    lines = tmp_path / "observations_pages.jsonl"      # two pages, one per line
    lines.write_text(json.dumps({"data": lf["data"][:3], "meta": {"page": 1}}) + "\n"
                     + json.dumps({"data": lf["data"][3:], "meta": {"page": 2}}) + "\n")
    assert detect(probe(lines)).name == "langfuse"
    assert ingest_path(con, lines)[0].rows_ingested == 5


# ---------------------------------------------------------------- langfuse

def test_langfuse_usage_cost_and_trace_fields(con):
    ingest_path(con, DATA / "langfuse_observations.json")
    got = {r[0]: r[1:] for r in _rows(con, "SELECT request_id, tenant, model, input_tokens, output_tokens, "
                                           "cached_input_tokens, ttft_ms, total_ms, status, error_type, cost_usd "
                                           "FROM requests")}
    # spans and events are not model calls: 5 of the 7 observations load
    assert sorted(got) == ["obs-002", "obs-003", "obs-004", "obs-005", "obs-006"]
    # OpenAI via Langfuse: input 226 + input_cached_tokens 1024 = 1250 prompt tokens, 1024 cached
    assert got["obs-002"] == ("user-17", "gpt-4o-mini-2024-07-18", 1250, 180, 1024, 420.0, 2100.0, "ok", None,
                              0.0002187)
    # Anthropic: input 1052 + cache_read 2048 + cache_creation 0 = 3100
    assert got["obs-004"][2:5] == (3100, 260, 2048)
    assert got["obs-005"][7:9] == ("error", "RateLimitError: Rate limit reached for gpt-4o")
    assert got["obs-006"][1:4] == ("text-embedding-3-small", 512, None)
    attrs = json.loads(_rows(con, "SELECT attrs FROM requests WHERE request_id = 'obs-004'")[0][0])
    assert (attrs["userId"], attrs["sessionId"], attrs["tags"]) == ("user-42", "sess-b", ["prod"])


def test_langfuse_csv_matches_the_api_json_and_takes_a_tenant_field(con):
    ingest_path(con, DATA / "langfuse_generations.csv", IngestOptions(tenant_field="tenant"))
    got = _rows(con, "SELECT request_id, tenant, input_tokens, cached_input_tokens, cost_usd FROM requests "
                     "ORDER BY request_id")
    assert got == [("obs-002", "acme", 1250, 1024, 0.0002187), ("obs-003", "acme", 2410, None, 0.011145),
                   ("obs-004", "acme", 3100, 2048, 0.0076704), ("obs-005", "globex", 0, None, None)]


# ---------------------------------------------------------------- otel

def test_otel_genai_spans(con):
    ingest_path(con, DATA / "otel_genai_spans.jsonl", IngestOptions(tenant_field="tenant.id"))
    got = _rows(con, "SELECT request_id, ts, tenant, model, input_tokens, output_tokens, cached_input_tokens, "
                     "total_ms, status, error_type FROM requests ORDER BY ts")
    # the HTTP server span and the execute_tool span are not model calls
    assert [g[3] for g in got] == ["gpt-4o-mini-2024-07-18", "gpt-4o-2024-08-06", "gpt-4o",
                                   "text-embedding-3-small", "claude-3-5-sonnet-20241022"]
    assert got[0] == ("5b8efff798038103d269b633813fc60c:e457b5a2e4d86bd1", datetime(2025, 3, 4, 14, 0, 0, 40000),
                      "acme", "gpt-4o-mini-2024-07-18", 1250, 180, 1024, 2310.0, "ok", None)
    assert got[2][2:] == ("globex", "gpt-4o", None, None, None, 1503.0, "error", "RateLimitError")
    attrs = json.loads(_rows(con, "SELECT attrs FROM requests WHERE model = 'gpt-4o'")[0][0])
    assert attrs["resource"]["service.name"] == "search-api"
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["status_message"].startswith("Error code: 429")


def test_otel_without_a_tenant_field_uses_the_constant(con):
    ingest_path(con, DATA / "otel_genai_spans.jsonl", IngestOptions(tenant="platform"))
    assert _rows(con, "SELECT DISTINCT tenant FROM requests") == [("platform",)]


def test_otel_error_type_given_as_a_number(con, tmp_path):
    """``error.type`` as an intValue (an HTTP status some instrumentations record) is its text, not a crash."""
    line = json.loads((DATA / "otel_genai_spans.jsonl").read_text().splitlines()[0])
    for rs in line["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span["attributes"] = [a for a in span["attributes"] if a["key"] != "error.type"] + [
                    {"key": "error.type", "value": {"intValue": "503"}}]
    path = tmp_path / "int_error.jsonl"
    path.write_text(json.dumps(line) + "\n")
    ingest_path(con, path, IngestOptions(tenant="t"))
    got = _rows(con, "SELECT DISTINCT status, error_type FROM requests")
    assert got == [("error", "503")]



def test_otel_names_given_as_arrays_or_numbers_are_text_not_a_crash(con, tmp_path):
    """gen_ai.operation.name as an arrayValue, the response model as an intValue in one file and an arrayValue in
    another (found by the fuzz test: a set lookup and Arrow's text column raised TypeError): the operation is no
    known one, the model is the number's text or the array's JSON; every model-call span still loads."""
    lines = [json.loads(x) for x in (DATA / "otel_genai_spans.jsonl").read_text().splitlines()[:2]]
    models = [{"intValue": "4"}, {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}}]
    loaded, changed = 0, set()
    for i, (line, model) in enumerate(zip(lines, models, strict=True)):
        (tmp_path / f"as_is_{i}.jsonl").write_text(json.dumps(line) + "\n")
        scratch = store.connect(":memory:")
        [before] = ingest_path(scratch, tmp_path / f"as_is_{i}.jsonl", IngestOptions(tenant="t"))
        scratch.close()
        calls = before.rows_ingested
        for rs in line["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    if any(a["key"] == "gen_ai.response.model" for a in span["attributes"]):
                        changed.add(json.dumps(model))
                        span["attributes"] = [a for a in span["attributes"] if a["key"] not in (
                            "gen_ai.response.model", "gen_ai.operation.name")] + [
                            {"key": "gen_ai.response.model", "value": model},
                            {"key": "gen_ai.operation.name", "value": {"arrayValue": {"values": []}}}]
        path = tmp_path / f"spans_{i}.jsonl"
        path.write_text(json.dumps(line) + "\n")
        [r] = ingest_path(con, path, IngestOptions(tenant="t"))
        assert (r.rows_ingested, r.rows_rejected) == (calls, 0)
        loaded += calls
    got = _rows(con, "SELECT model, count(*) FROM requests GROUP BY 1 ORDER BY 1")
    assert len(changed) == 2 and sum(n for _, n in got) == loaded and {"4", '["a","b"]'} <= {m for m, _ in got}


# ---------------------------------------------------------------- vllm bench

def test_vllm_bench_requests_and_run(con):
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    [r] = ingest_path(con, DATA / "vllm_bench_serve_detailed.json")
    runs = benchruns.benchmark_runs(con)
    assert len(runs) == 1
    run = runs.iloc[0]
    assert (run.source_format, run.model, run.request_rate_per_s, run.max_concurrency, run.num_prompts,
            run.completed, run.failed) == ("vllm-bench", "meta-llama/Llama-3.1-8B-Instruct", 4.0, 8, 10, 9, 1)
    # the file's date is the run's end: start = 14:05:00 - duration
    assert run.started_at == datetime(2025, 3, 4, 14, 5) - timedelta(seconds=doc["duration"])
    # our percentiles over successful requests agree with vLLM's own
    assert_allclose([run.ttft_ms_p99, run.ttft_ms_mean], [doc["p99_ttft_ms"], doc["mean_ttft_ms"]], rtol=1e-9)
    reqs = benchruns.benchmark_requests(con, run.run_id)
    assert len(reqs) == 10
    failed = reqs[reqs.status == "error"]
    assert len(failed) == 1 and failed.ttft_ms.isna().all() and failed.total_ms.isna().all()
    assert "ServerDisconnectedError" in failed.error_type.iloc[0]
    t0 = min(doc["start_times"])
    offsets = (reqs.ts - reqs.ts.min()).dt.total_seconds().to_numpy()
    assert_allclose(offsets, [s - t0 for s in doc["start_times"]], atol=1e-6)


def test_vllm_bench_without_details_is_refused(con, tmp_path):
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    for k in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
        doc.pop(k)
    f = tmp_path / "summary_only.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="--save-detailed"):
        ingest_path(con, f)
    assert benchruns.benchmark_runs(con).empty


def test_a_deleted_batch_hides_its_run(con):
    [r] = ingest_path(con, DATA / "vllm_bench_serve_detailed.json")
    assert len(benchruns.benchmark_runs(con)) == 1
    store.delete_batch(con, r.batch_id)
    assert benchruns.benchmark_runs(con).empty


def test_a_failed_load_stores_no_run(con, tmp_path):
    raw = json.loads((LLMPERF / "fireworks_70b.json").read_text())
    raw[3]["number_input_tokens"] = -5               # one bad row: --strict refuses the whole file
    (tmp_path / "individual").mkdir()
    (tmp_path / "summary").mkdir()
    bad = tmp_path / "individual" / "fireworks_70b.json"
    bad.write_text(json.dumps(raw))
    shutil.copy(DATA / "llmperf/summary/fireworks_70b.json", tmp_path / "summary" / "fireworks_70b.json")
    with pytest.raises(InputError, match="nothing loaded"):
        ingest_path(con, bad, IngestOptions(strict=True))
    assert store.row_count(con) == 0
    # not even hidden: no run was written (the table is created by the first stored run)
    assert _rows(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'benchmark_runs'") == [(0,)]
    [r] = ingest_path(con, bad)                      # without --strict the good rows and the run go in
    assert (r.rows_ingested, r.rows_rejected) == (149, 1)
    assert len(benchruns.benchmark_runs(con)) == 1
    # and --strict again refuses it: stored already, it still has a bad row (it passed, exit 0, the second time)
    with pytest.raises(InputError, match=r"1 bad row \(--strict\): this file was loaded before without --strict"):
        ingest_path(con, bad, IngestOptions(strict=True))
    assert store.row_count(con) == 149


# ---------------------------------------------------------------- llmperf

def test_llmperf_loads_with_provider_and_model_and_null_error_latencies(con):
    for name in ("fireworks_70b", "lepton_7b", "bedrock_13b", "together_13b"):
        ingest_path(con, LLMPERF / f"{name}.json")
    got = _rows(con, "SELECT attrs->>'provider', model, count(*), count(*) FILTER (WHERE status = 'error'), "
                     "count(ttft_ms), count(total_ms) FROM requests GROUP BY ALL ORDER BY 1")
    assert got == [("bedrock", "meta.llama2-13b-chat-v1", 150, 97, 53, 53),
                   ("fireworks", "accounts/fireworks/models/llama-v2-70b-chat", 150, 0, 150, 150),
                   ("lepton", "llama2-7b", 150, 130, 20, 20),
                   ("together", "together_ai/togethercomputer/llama-2-13b-chat", 150, 1, 149, 149)]
    # lepton's 429s recorded ttft 0: none of them reach the latency columns
    assert _rows(con, "SELECT min(ttft_ms) > 0 FROM requests WHERE attrs->>'provider' = 'lepton'") == [(True,)]
    assert _rows(con, "SELECT DISTINCT error_type FROM requests WHERE attrs->>'provider' = 'lepton' "
                      "AND status = 'error'") == [("429",)]
    runs = benchruns.benchmark_runs(con).set_index("provider")
    assert runs.loc["bedrock", "max_concurrency"] == 5 and runs.loc["bedrock", "failed"] == 97


def test_llmperf_ttft_percentiles_per_provider_match_numpy_on_the_raw_json(con):
    for path in sorted(LLMPERF.glob("*.json")):
        ingest_path(con, path)
    for path in sorted(LLMPERF.glob("*.json")):
        raw = json.loads(path.read_text())
        ok_ttft_ms = np.array([r["ttft_s"] for r in raw if r["error_code"] is None]) * 1000
        provider = path.stem.split("_")[0]
        stored = np.array([v for (v,) in _rows(con, "SELECT ttft_ms FROM requests WHERE attrs->>'provider' = ? "
                                                    "AND ttft_ms IS NOT NULL", [provider])])
        qs = [25, 50, 75, 90, 95, 99]
        assert_allclose(np.percentile(stored, qs), np.percentile(ok_ttft_ms, qs), rtol=1e-12)
        # and with LLMPerf's own summary (pandas quantiles over the same successful requests)
        summary = json.loads((DATA / "llmperf/summary" / path.name).read_text())
        assert_allclose(np.percentile(stored, qs) / 1000,
                        [summary[f"results_ttft_s_quantiles_p{q}"] for q in qs], rtol=1e-9)


def test_llmperf_times_replay_the_closed_loop_ending_at_the_summary_timestamp(con):
    ingest_path(con, LLMPERF / "fireworks_70b.json")
    summary = json.loads((DATA / "llmperf/summary/fireworks_70b.json").read_text())
    reqs = benchruns.benchmark_requests(con, benchruns.benchmark_runs(con).run_id.iloc[0])
    ends = reqs.ts + reqs.total_ms.apply(lambda ms: timedelta(milliseconds=ms))
    assert abs((ends.max() - datetime.fromtimestamp(summary["timestamp"], UTC).replace(tzinfo=None)).total_seconds()) < 1e-3
    # at no moment are more than num_concurrent_requests (5) in flight (times to the ms: a client's next
    # request starts the moment its previous one ends)
    events = sorted([(t.round("ms"), 1) for t in reqs.ts] + [(t.round("ms"), -1) for t in ends])
    assert max(np.cumsum([d for _, d in events])) == summary["num_concurrent_requests"]


def test_llmperf_without_summary_needs_a_start_and_reads_the_file_name(con, tmp_path):
    only = DATA / "llmperf_individual_only/perplexity_70b.json"
    with pytest.raises(InputError, match="--start"):
        ingest_path(con, only)
    ingest_path(con, only, IngestOptions(start=START))
    assert _rows(con, "SELECT DISTINCT model, attrs->>'provider', min(ts) FROM requests GROUP BY ALL") == \
        [("llama-2-70b-chat", "perplexity", START)]
    # LLMPerf's own layout: <run>_individual_responses.json beside <run>_summary.json
    shutil.copy(LLMPERF / "together_13b.json", tmp_path / "together-llama-2-13b_550_150_individual_responses.json")
    shutil.copy(DATA / "llmperf/summary/together_13b.json", tmp_path / "together-llama-2-13b_550_150_summary.json")
    ingest_path(con, tmp_path / "together-llama-2-13b_550_150_individual_responses.json")
    assert ("together_ai/togethercomputer/llama-2-13b-chat",) in _rows(con, "SELECT DISTINCT model FROM requests")


def test_llmperf_tenant_field_can_name_the_provider(con):
    ingest_path(con, LLMPERF / "lepton_7b.json", IngestOptions(tenant_field="provider"))
    assert _rows(con, "SELECT DISTINCT tenant FROM requests") == [("lepton",)]


# ---------------------------------------------------------------- azure

def test_azure_trace_is_the_generic_preset(con):
    with pytest.raises(InputError, match="--model"):
        ingest_path(con, DATA / "azure_code_excerpt.csv")
    generic = IngestOptions(mapping={"ts": "TIMESTAMP", "input_tokens": "ContextTokens",
                                     "output_tokens": "GeneratedTokens"}, model="m")
    assert ingest_path(con, DATA / "azure_code_excerpt.csv", generic)[0].rows_ingested == 500
    # the preset reads the same rows with the same keys: nothing new
    [r] = ingest_path(con, DATA / "azure_code_excerpt.csv", IngestOptions(model="m"))
    assert (r.format, r.rows_ingested, r.duplicates_skipped) == ("azure-trace", 0, 500)


# ---------------------------------------------------------------- mooncake

def test_mooncake_cached_tokens_match_a_hand_count(con):
    """Lines 1337-1346 of the FAST'25 conversation trace, loaded on their own (nothing seen before them).

    Hand count, 512 tokens per hash block, k = leading blocks already seen:
      1  hash_ids [0, 9731..9777, 27194, 27195, 27196, 28058]: nothing seen yet      k=0  -> 0
      2  [0, 1028, ...]:     0 seen (row 1), 1028 new                               k=1  -> 512
      3  [0, 28061]:         0 seen, 28061 new                                       k=1  -> 512  (input 897)
      4  [0, 28062, ...]:                                                            k=1  -> 512
      5  [0, 23039, ...]:                                                            k=1  -> 512
      6  [0, 9731..9777, 27194, 28105, ...]: the first 49 ids (0, the 47 ids 9731..9777
         and 27194) all appear in row 1; 28105 is new                               k=49 -> 49*512 = 25088
                                                                                          (input 68208)
      7-10 [0, new, ...]:                                                            k=1  -> 512 each
    """
    ingest_path(con, DATA / "mooncake_conversation_rows1337_1346.jsonl", IngestOptions(model="kimi", start=START))
    got = _rows(con, "SELECT cached_input_tokens, input_tokens FROM requests ORDER BY "
                     "CAST(attrs->>'timestamp_ms' AS BIGINT), input_tokens")
    by_input = {inp: cached for cached, inp in got}
    assert by_input == {26501: 0, 1738: 512, 897: 512, 21282: 512, 7573: 512, 68208: 25088,
                        2406: 512, 1246: 512, 11403: 512, 2608: 512}
    assert sum(by_input.values()) == 8 * 512 + 25088
    # timestamps are ms after --start: rows 1-2 at 452999 ms, rows 3-10 at 456000 ms
    assert _rows(con, "SELECT min(ts), max(ts) FROM requests") == [
        (START + timedelta(milliseconds=452999), START + timedelta(milliseconds=456000))]


def test_mooncake_cached_tokens_are_capped_by_the_prompt(con):
    # line 262 of the trace: input_length 1902 and 4 leading blocks seen before: min(1902, 2048) = 1902
    ingest_path(con, DATA / "mooncake_conversation_head300.jsonl", IngestOptions(model="kimi", start=START))
    line = json.loads((DATA / "mooncake_conversation_head300.jsonl").read_text().splitlines()[261])
    got = _rows(con, "SELECT cached_input_tokens, attrs->>'prefix_blocks_reused' FROM requests "
                     "WHERE input_tokens = ? AND CAST(attrs->>'timestamp_ms' AS BIGINT) = ?",
                [line["input_length"], line["timestamp"]])
    assert got == [(1902, "4")]
    assert _rows(con, "SELECT count(*) FROM requests WHERE cached_input_tokens > input_tokens") == [(0,)]


def test_mooncake_needs_start_and_model(con):
    f = DATA / "mooncake_conversation_rows1337_1346.jsonl"
    with pytest.raises(InputError, match="--start"):
        ingest_path(con, f, IngestOptions(model="kimi"))
    with pytest.raises(InputError, match="--model"):
        ingest_path(con, f, IngestOptions(start=START))
    assert store.row_count(con) == 0


def test_every_adapter_names_an_example_and_an_export_hint():
    for a in ADAPTERS:
        assert a.export_hint and a.source_tool, a.name
    ours = {"litellm", "langfuse", "otel", "vllm-bench", "llmperf", "azure-trace", "mooncake", "canonical",
            "gateway-log"}
    for a in ADAPTERS:
        if a.name in ours:
            assert (DATA.parent.parent / a.example).is_file(), a.name


# ---------------------------------------------------------------- vllm --append-result, providers of runs

def _append_result(path, doc):
    """vLLM's --append-result write (vllm/benchmarks/serve.py, main): open "a+", a newline if the file is
    not empty, then json.dump of the run."""
    with open(path, mode="a+", encoding="utf-8") as outfile:
        if outfile.tell() != 0:
            outfile.write("\n")
        json.dump(doc, outfile)


def test_vllm_append_result_loads_every_run(con, tmp_path):
    first = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    second = dict(first, date="20250304-151000", request_rate=8.0)
    f = tmp_path / "runs.json"
    _append_result(f, first)
    _append_result(f, second)
    assert detect(probe(f)).name == "vllm-bench"
    [r] = ingest_path(con, f)
    assert (r.rows_ingested, r.rows_rejected) == (20, 0)
    runs = benchruns.benchmark_runs(con).sort_values("started_at")
    assert list(runs.request_rate_per_s) == [4.0, 8.0]
    assert runs.started_at.iloc[1] == datetime(2025, 3, 4, 15, 10) - timedelta(seconds=first["duration"])
    assert ingest_path(con, f)[0].rows_ingested == 0 and len(benchruns.benchmark_runs(con)) == 2
    # the second line broken: named by its line
    f.write_text(f.read_text().splitlines()[0] + "\n{\"model_id\": \n")
    with pytest.raises(InputError, match=r"line 2|row 2"):
        ingest_path(con, f)


def test_vllm_failed_requests_carry_no_billable_tokens(con):
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    ingest_path(con, DATA / "vllm_bench_serve_detailed.json")
    failed = [i for i, e in enumerate(doc["errors"]) if e]
    got = _rows(con, "SELECT input_tokens, output_tokens, CAST(attrs->>'prompt_len' AS BIGINT) FROM requests "
                     "WHERE status = 'error'")
    assert got == [(0, 0, doc["input_lens"][i]) for i in failed]
    ok_input = sum(n for n, e in zip(doc["input_lens"], doc["errors"], strict=True) if not e)
    assert _rows(con, "SELECT sum(input_tokens) FROM requests") == [(ok_input,)]


def test_llmperf_rows_name_the_run_provider(con):
    ingest_path(con, LLMPERF / "bedrock_13b.json")
    summary = json.loads((DATA / "llmperf/summary/bedrock_13b.json").read_text())
    assert _rows(con, "SELECT DISTINCT provider FROM requests") == [(summary["framework"],)]     # "bedrock"


# ---------------------------------------------------------------- openinference (written by the real instrumentation)

def _spans(path):
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    yield s, {a["key"]: next(iter(a["value"].values())) for a in s["attributes"]}


def test_openinference_spans_load(con):
    f = DATA / "openinference_openai_spans.jsonl"
    assert detect(probe(f)).name == "otel"
    [r] = ingest_path(con, f, IngestOptions(tenant_field="tenant.id"))
    calls = [(s, a) for s, a in _spans(f) if a.get("openinference.span.kind") in ("LLM", "EMBEDDING")]
    assert (r.rows_ingested, r.rows_rejected) == (len(calls), 0) == (3, 0)     # the CHAIN span is skipped
    got = {g[0]: g[1:] for g in _rows(con, "SELECT request_id, model, provider, tenant, input_tokens, output_tokens, "
                                           "cached_input_tokens, reasoning_tokens, total_ms, status FROM requests")}
    for s, a in calls:
        g = got[f"{s['traceId']}:{s['spanId']}"]
        ms = (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e6
        assert g[1:3] == (a["llm.system"], "acme") and g[7] == pytest.approx(ms)
        assert g[3] == (int(a["llm.token_count.prompt"]) if "llm.token_count.prompt" in a else None)
    chat = got[next(f"{s['traceId']}:{s['spanId']}" for s, a in calls if "llm.model_name" in a)]
    assert chat == ("gpt-4o-mini-2024-07-18", "openai", "acme", 1250, 180, 1024, 64, chat[7], "ok")
    emb = [g for g in got.values() if g[0] == "text-embedding-3-small"]
    assert [e[3:7] for e in emb] == [(512, None, None, None)]
    # the 429: no response, so no llm.model_name; the requested model from llm.invocation_parameters
    [err] = [g for g in got.values() if g[-1] == "error"]
    assert err[:2] == ("gpt-4o", "openai") and err[3] is None
    assert ingest_path(con, f, IngestOptions(tenant_field="tenant.id"))[0].rows_ingested == 0


def test_openllmetry_0_33_spans_load(con):
    # written by traceloop's opentelemetry-instrumentation-openai 0.33.12 (tests/tools/openllmetry_spans_run.py):
    # its old attribute names, gen_ai.usage.prompt_tokens / completion_tokens and llm.usage.total_tokens
    f = DATA / "openllmetry_0_33_openai_spans.jsonl"
    assert detect(probe(f)).name == "otel"
    [r] = ingest_path(con, f, IngestOptions(tenant_field="tenant.id"))
    calls = list(_spans(f))
    assert (r.rows_ingested, r.rows_rejected) == (len(calls), 0) == (2, 0)   # 0.33 writes no span for the 429
    got = {g[0]: g[1:] for g in _rows(con, "SELECT request_id, model, provider, tenant, input_tokens, output_tokens, "
                                           "total_ms, status, ts FROM requests")}
    # the mock's answers (ANSWERS in the script): model asked -> (model answered, prompt, completion, wait s)
    mock = {"gpt-4o-mini": ("gpt-4o-mini-2024-07-18", 1250, 180, 0.25), "gpt-4o": ("gpt-4o-2024-08-06", 2000, 512, 0.40)}
    for s, a in calls:
        g = got[f"{s['traceId']}:{s['spanId']}"]
        answered, prompt, completion, wait_s = mock[a["gen_ai.request.model"]]
        ms = (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e6
        assert g[:5] == (answered, a["gen_ai.system"], "acme", prompt, completion)
        assert int(a["llm.usage.total_tokens"]) == prompt + completion
        assert g[5] == pytest.approx(ms) and ms >= wait_s * 1000           # the span covers the mock's wait
        assert g[6] == "ok"
        assert g[7] == datetime(1970, 1, 1) + timedelta(microseconds=int(s["startTimeUnixNano"]) // 1000)
    assert ingest_path(con, f, IngestOptions(tenant_field="tenant.id"))[0].rows_ingested == 0


def test_the_readme_formats_table_lists_every_format_with_how_to_export_it():
    from helpers import ROOT
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| format | source tool | how to export from it | example file |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells
    assert set(rows) == {a.name for a in ADAPTERS}
    for a in ADAPTERS:
        _, tool, how, example = rows[a.name][:4]
        assert tool and len(how) > 20, a.name
        assert a.example is None or (ROOT / a.example).is_file(), a.name
        for path in (p for p in example.replace("`", " ").split() if p.startswith("tests/data/")):
            assert (ROOT / path.rstrip(",;)")).exists(), (a.name, path)
