"""Write the provider-format test files from the tools' own response types (tests/data/README.md says which).

Run in a throwaway venv holding the SDKs (not the project's):

    python3.11 -m venv /tmp/fmt-venv && /tmp/fmt-venv/bin/pip install openai==3.57.0 anthropic==2.15.0 openrouter==1.3.84
    /tmp/fmt-venv/bin/python tests/tools/provider_files_build.py tests/data/providers

Every object below is built by the SDK's pydantic model (validated: a wrong field name or type fails here)
and written by its serialiser; the usage numbers are ours, chosen so each token class and rule has a row.
Shapes the SDKs have no type for are written from the spec named beside them.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

T0 = 1741096800          # 2025-03-04 14:00:00 UTC
DAY = 86400


def dump(obj) -> dict:
    return obj.model_dump(mode="json", by_alias=True, exclude_unset=False)


def openai_batch(out: Path) -> None:
    from openai.types import CreateEmbeddingResponse
    from openai.types.chat import ChatCompletion

    def chat(cid, model, created, prompt, cached, completion, reasoning):
        return dump(ChatCompletion.model_validate({
            "id": cid, "object": "chat.completion", "created": created, "model": model,
            "service_tier": "default", "system_fingerprint": "fp_batch",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": "ok", "refusal": None}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                                    "accepted_prediction_tokens": 0,
                                                    "rejected_prediction_tokens": 0}}}))

    emb = dump(CreateEmbeddingResponse.model_validate({
        "object": "list", "model": "text-embedding-3-small",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.01, -0.02]}],
        "usage": {"prompt_tokens": 42, "total_tokens": 42}}))
    # the line wrapper: BatchRequestOutput (openai/openai-openapi openapi.yaml, see tests/data/README.md)
    lines = [
        {"id": "batch_req_a1", "custom_id": "ticket-1", "error": None,
         "response": {"status_code": 200, "request_id": "req_a1",
                      "body": chat("chatcmpl-a1", "gpt-4o-mini-2024-07-18", T0, 1200, 1024, 300, 0)}},
        {"id": "batch_req_a2", "custom_id": "ticket-2", "error": None,
         "response": {"status_code": 200, "request_id": "req_a2",
                      "body": chat("chatcmpl-a2", "o3-mini-2025-01-31", T0 + 5, 500, 0, 900, 640)}},
        {"id": "batch_req_a3", "custom_id": "ticket-3", "error": None,
         "response": {"status_code": 400, "request_id": "req_a3",
                      "body": {"error": {"message": "This model's maximum context length is 128000 tokens.",
                                         "type": "invalid_request_error", "param": "messages",
                                         "code": "context_length_exceeded"}}}},
        {"id": "batch_req_a4", "custom_id": "ticket-4", "response": None,
         "error": {"code": "batch_expired", "message": "This request could not be executed before the "
                                                       "completion window expired."}},
        {"id": "batch_req_a5", "custom_id": "embed-1", "error": None,
         "response": {"status_code": 200, "request_id": "req_a5", "body": emb}},
        {"id": "batch_req_a6", "custom_id": "ticket-5", "error": None,
         "response": {"status_code": 200, "request_id": "req_a6",
                      "body": chat("chatcmpl-a6", "gpt-4o-mini-2024-07-18", T0 + 61, 2048, 2048, 17, 0)}},
    ]
    (out / "openai_batch_output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def anthropic_batch(out: Path) -> None:
    from anthropic.types.messages import MessageBatchIndividualResponse

    def ok(cid, mid, model, inp, read, w5, w1h, output):
        usage = {"input_tokens": inp, "output_tokens": output, "cache_read_input_tokens": read,
                 "cache_creation_input_tokens": w5 + w1h, "service_tier": "batch",
                 "cache_creation": {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1h}}
        return {"custom_id": cid, "result": {"type": "succeeded", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "stop_reason": "end_turn",
            "stop_sequence": None, "content": [{"type": "text", "text": "ok"}], "usage": usage}}}

    results = [
        ok("doc-1", "msg_01A", "claude-sonnet-4-20250514", 12, 4000, 1000, 500, 250),
        ok("doc-2", "msg_01B", "claude-3-5-haiku-20241022", 800, 0, 0, 0, 64),
        {"custom_id": "doc-3", "result": {"type": "errored", "error": {
            "type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}}},
        {"custom_id": "doc-4", "result": {"type": "canceled"}},
        {"custom_id": "doc-5", "result": {"type": "expired"}},
    ]
    text = "".join(json.dumps(dump(MessageBatchIndividualResponse.model_validate(r))) + "\n" for r in results)
    (out / "anthropic_batch_results.jsonl").write_text(text)


def openrouter(out: Path) -> None:
    from openrouter.components import GenerationResponse

    base = {"api_type": "completions", "app_id": None, "cache_discount": None, "data_region": "global",
            "finish_reason": "stop", "http_referer": None, "is_byok": False, "moderation_latency": None,
            "native_finish_reason": "stop", "native_tokens_completion_images": None, "num_fetches": None,
            "num_input_audio_prompt": None, "num_media_completion": None, "num_media_prompt": None,
            "num_search_results": None, "origin": "", "preset_id": None, "provider_responses": None,
            "router": None, "streamed": True, "upstream_inference_cost": None, "user_agent": None,
            "web_search_engine": None, "workspace_id": None}
    gens = [
        dict(id="gen-1741096800-aaaa", created_at="2025-03-04T14:00:00.123Z", model="openai/gpt-4o",
             provider_name="OpenAI", external_user="team-search", cancelled=False, service_tier="default",
             tokens_prompt=1510, tokens_completion=220, native_tokens_prompt=1500, native_tokens_completion=230,
             native_tokens_cached=1024, native_tokens_reasoning=0, latency=1840.0, generation_time=1510.0,
             total_cost=0.0044, usage=0.0044, upstream_id="chatcmpl-or1"),
        dict(id="gen-1741096830-bbbb", created_at="2025-03-04T14:00:30.000Z", model="anthropic/claude-sonnet-4",
             provider_name="Anthropic", external_user="team-legal", cancelled=False, service_tier=None,
             tokens_prompt=3000, tokens_completion=1200, native_tokens_prompt=3100, native_tokens_completion=1250,
             native_tokens_cached=0, native_tokens_reasoning=800, latency=9120.5, generation_time=8900.0,
             total_cost=0.02805, usage=0.02805, upstream_id="msg_or2"),
        dict(id="gen-1741096900-cccc", created_at="2025-03-04T14:01:40.500Z",
             model="meta-llama/llama-3.3-70b-instruct:free", provider_name="Together", external_user=None,
             cancelled=False, service_tier=None, tokens_prompt=90, tokens_completion=40, native_tokens_prompt=92,
             native_tokens_completion=41, native_tokens_cached=None, native_tokens_reasoning=None,
             latency=640.0, generation_time=410.0, total_cost=0.0, usage=0.0, upstream_id=None),
        dict(id="gen-1741096960-dddd", created_at="2025-03-04T14:02:40.000Z", model="openai/gpt-4o-mini",
             provider_name="OpenAI", external_user="team-search", cancelled=True, service_tier="default",
             tokens_prompt=700, tokens_completion=12, native_tokens_prompt=690, native_tokens_completion=12,
             native_tokens_cached=0, native_tokens_reasoning=0, latency=2300.0, generation_time=90.0,
             total_cost=0.00011, usage=0.00011, upstream_id="chatcmpl-or4"),
    ]
    text = "".join(json.dumps(dump(GenerationResponse.model_validate({"data": {**base, **g}}))) + "\n"
                   for g in gens)
    (out / "openrouter_generations.jsonl").write_text(text)


def openai_billing(out: Path) -> None:
    from openai.types.admin.organization.usage_completions_response import UsageCompletionsResponse
    from openai.types.admin.organization.usage_costs_response import UsageCostsResponse

    def cost(value, line_item, project, quantity=None, unit=None):
        return {"object": "organization.costs.result", "amount": {"value": value, "currency": "usd"},
                "line_item": line_item, "project_id": project, "api_key_id": None, "quantity": quantity,
                "quantity_unit": unit}
    costs = {"object": "page", "has_more": False, "next_page": None, "data": [
        {"object": "bucket", "start_time": T0 - 14 * 3600, "end_time": T0 - 14 * 3600 + DAY, "results": [
            cost(0.39, "gpt-4o-mini-2024-07-18, input", "proj_search", 2_600_000, "tokens"),
            cost(0.1536, "gpt-4o-mini-2024-07-18, cached input", "proj_search", 2_048_000, "tokens"),
            cost(1.2, "gpt-4o-mini-2024-07-18, output", "proj_search", 2_000_000, "tokens"),
            cost(4.4, "o3-mini-2025-01-31, output", "proj_legal", 1_000_000, "tokens"),
            cost(0.25, "Web Search Tool Calls", "proj_search", 25, None)]},
        {"object": "bucket", "start_time": T0 - 14 * 3600 + DAY, "end_time": T0 - 14 * 3600 + 2 * DAY,
         "results": [cost(0.075, "gpt-4o-mini-2024-07-18, input", "proj_search", 500_000, "tokens")]},
    ]}
    UsageCostsResponse.model_validate(costs)
    (out / "openai_costs.json").write_text(json.dumps(dump(UsageCostsResponse.model_validate(costs)), indent=1))

    def use(model, project, key, batch, inp, cached, output, n, writes=None):
        return {"object": "organization.usage.completions.result", "model": model, "project_id": project,
                "api_key_id": key, "batch": batch, "user_id": None, "input_tokens": inp,
                "input_cached_tokens": cached, "input_cache_write_tokens": writes, "output_tokens": output,
                "num_model_requests": n, "input_audio_tokens": 0, "output_audio_tokens": 0}
    usage = {"object": "page", "has_more": False, "next_page": None, "data": [
        {"object": "bucket", "start_time": T0 - 14 * 3600, "end_time": T0 - 14 * 3600 + DAY, "results": [
            use("gpt-4o-mini-2024-07-18", "proj_search", "key_abc", False, 4_648_000, 2_048_000, 2_000_000, 3100),
            use("o3-mini-2025-01-31", "proj_legal", "key_def", True, 80_000, 0, 1_000_000, 160, 0)]},
        {"object": "bucket", "start_time": T0 - 14 * 3600 + DAY, "end_time": T0 - 14 * 3600 + 2 * DAY,
         "results": []},
    ]}
    (out / "openai_usage_completions.json").write_text(
        json.dumps(dump(UsageCompletionsResponse.model_validate(usage)), indent=1))


def anthropic_billing(out: Path) -> None:
    from anthropic.types.beta.organization import (
        BetaAnalyticsCostReportTimeBucket,
        BetaAnalyticsUsageReportTimeBucket,
    )

    def page(buckets, kind):
        return {"data": [dump(kind.model_validate(b)) for b in buckets], "has_more": False, "next_page": None}

    def cost(amount_cents, model, token_type, tier="standard", cost_type="tokens"):
        return {"amount": amount_cents, "list_amount": amount_cents, "currency": "USD", "model": model,
                "cost_type": cost_type, "token_type": token_type, "context_window": "0-200k",
                "requests": None}
    costs = [
        {"starting_at": "2025-03-04T00:00:00Z", "ending_at": "2025-03-05T00:00:00Z", "results": [
            cost("1.8", "claude-sonnet-4-20250514", "uncached_input_tokens"),
            cost("60.0", "claude-sonnet-4-20250514", "cache_read_input_tokens"),
            cost("187.5", "claude-sonnet-4-20250514", "output_tokens"),
            cost("12.3456", "claude-3-5-haiku-20241022", "output_tokens")]},
        {"starting_at": "2025-03-05T00:00:00Z", "ending_at": "2025-03-06T00:00:00Z", "results": [
            cost("250", "claude-sonnet-4-20250514", "output_tokens")]},
    ]
    (out / "anthropic_cost_report.json").write_text(
        json.dumps(page(costs, BetaAnalyticsCostReportTimeBucket), indent=1))

    def use(model, uncached, read, w5, w1h, output, n):
        return {"model": model, "uncached_input_tokens": uncached, "cache_read_input_tokens": read,
                "cache_creation": {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1h},
                "output_tokens": output, "requests": n, "server_tool_use": {"web_search_requests": 0},
                "context_window": "0-200k"}
    usage = [
        {"starting_at": "2025-03-04T00:00:00Z", "ending_at": "2025-03-05T00:00:00Z", "results": [
            use("claude-sonnet-4-20250514", 6_000, 2_000_000, 100_000, 50_000, 125_000, 420),
            use("claude-3-5-haiku-20241022", 800_000, 0, 0, 0, 30_864, 96)]},
    ]
    (out / "anthropic_usage_report.json").write_text(
        json.dumps(page(usage, BetaAnalyticsUsageReportTimeBucket), indent=1))


def helicone(out: Path) -> None:
    """No SDK type in Python: every field of the ``HeliconeRequest`` interface (Helicone/helicone
    packages/llm-mapper/types.ts), in its order, wrapped as ``POST /v1/request/query`` answers.

    The token fields are what Helicone's response body processors store (``prompt_tokens`` is the usage's
    ``promptTokens``, valhalla/jawn/src/lib/handlers/LoggingHandler.ts): ``prompt``, ``read``, ``write``,
    ``completion`` are the provider's own usage. OpenAI (``OpenAIBodyProcessor.getUsage``,
    valhalla/jawn/src/lib/shared/bodyProcessors/openaiBodyProcessor.ts at 8f8667da6dbcf00e1c0c68e0d28cb3e621711213):
    ``prompt_tokens`` = max(0, prompt_tokens - cached_tokens - audio_tokens), ``prompt_cache_read_tokens`` =
    cached_tokens, ``total_tokens`` = the usage's total. Anthropic (``AnthropicBodyProcessor``,
    anthropicBodyProcessor.ts at 534f6b508dfb53a25241533eba64d144930dbca3): ``prompt_tokens`` = Anthropic's
    ``input_tokens`` (the cache excluded), reads and writes as Anthropic gives them, total = input + output."""
    def req(rid, at, ms, ttft, status, provider, model, user, team, prompt, read, write, completion, cost):
        if prompt is None:
            total = None
        elif provider == "OPENAI":           # OpenAI's prompt_tokens count the cached ones: Helicone splits them
            total, prompt = prompt + (completion or 0), max(0, prompt - (read or 0))
        else:
            total = prompt + (completion or 0)
        return {"response_id": None if status != 200 else f"resp-{rid}", "response_created_at": at,
                "response_body": None, "response_status": status, "response_model": model,
                "request_id": rid, "request_created_at": at, "request_body": None,
                "request_path": "/v1/chat/completions" if provider == "OPENAI" else "/v1/messages",
                "request_user_id": user, "request_properties": {"team": team}, "request_model": model,
                "model_override": None, "helicone_user": None, "provider": provider, "delay_ms": ms,
                "time_to_first_token": ttft, "total_tokens": total, "prompt_tokens": prompt,
                "prompt_cache_write_tokens": write, "prompt_cache_read_tokens": read,
                "completion_tokens": completion, "prompt_id": None, "feedback_created_at": None,
                "feedback_id": None, "feedback_rating": None, "signed_body_url": None, "llmSchema": None,
                "country_code": "US", "asset_ids": None, "asset_urls": None, "scores": None, "costUSD": cost,
                "properties": {"team": team}, "assets": [],
                "target_url": "https://api.openai.com" if provider == "OPENAI" else "https://api.anthropic.com",
                "model": model}
    data = [
        req("5f1c9a52-0001-4a6e-9d1e-000000000001", "2025-03-04T14:00:00.250Z", 1234, 310, 200, "OPENAI",
            "gpt-4o-mini-2024-07-18", "alice", "search", 1500, 1024, 0, 200, 0.000411),
        req("5f1c9a52-0002-4a6e-9d1e-000000000002", "2025-03-04T14:00:05.000Z", 5100, 900, 200, "ANTHROPIC",
            "claude-sonnet-4-20250514", "bob", "legal", 12, 4000, 1500, 250, 0.0062),
        req("5f1c9a52-0003-4a6e-9d1e-000000000003", "2025-03-04T14:00:09.500Z", 80, None, 429, "OPENAI",
            "gpt-4o-mini-2024-07-18", "alice", "search", None, None, None, None, 0),
        req("5f1c9a52-0004-4a6e-9d1e-000000000004", "2025-03-04T14:01:00.000Z", 2200, 450, 200, "OPENAI",
            "ft:gpt-4o-mini:acme:tickets:abc123", None, "search", 300, 0, 0, 50, 0),
    ]
    (out / "helicone_requests.json").write_text(json.dumps({"data": data, "error": None}, indent=1))


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/providers")
    target.mkdir(parents=True, exist_ok=True)
    for build in (openai_batch, anthropic_batch, openrouter, helicone, openai_billing, anthropic_billing):
        build(target)
