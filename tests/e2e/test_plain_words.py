"""Every page of the sample store speaks plainly: no course texts, no None/NaN, no traceback, money with separators,
no raw field names (``ttft_ms``) or alert rule ids (``p99_over_sla``): those are for CSV exports, ``--json`` and
help tooltips (which are not in the page's text until hovered).

The text checked is the page's whole text content (hidden tabs and collapsed expanders included) plus the
cells of every table (Streamlit's data grid keeps them in an accessible table behind its canvas).
"""
import re

import pytest
from browser import exceptions_on, wait_ready

from views import PAGES

pytestmark = pytest.mark.e2e

#: what the product was designed from and its users never read
COURSE_WORDS = (
    r"\bseed\b(?!\s*\d)",            # "the seed", "seed's" (the sample fleet's "seed 7" is a random seed)
    r"\bseed's\b",
    r"\bsection \d+(\.\d+)?\b",
    r"\b(routing|deployment|course) text\b",
    r"\b00\d's\b", r"\(00\d\b", r"\b000_[0-9a-f]+",
    r"\bexercise\b",
    r"\bworked (problem|example)s?\b",
    r"\bproblems? \d of\b",
    r"\bquestion \d\b",
)
NOT_A_NUMBER = (r"\bNone\b", r"\bNaN\b", r"\bnan\b", r"\binf\b")
TRACEBACK = (r"Traceback \(most recent call last\)", r"\b\w+Error: ")
UNSEPARATED_MONEY = r"\$\d{4,}"
#: a number in exponent notation ("1e+03 replicas", "9.3e-7 s"); checked in the page's text, not in the table cells:
#: the grid's accessible cells hold a value unformatted (a predicted wait of 5.9e-10 s that shows as 0.000)
EXPONENT = r"\b\d(\.\d+)?e[+-]\d+\b"
#: the log's column names and the alert rules' ids: on screen they have plain names ("time to first token")
RAW_NAMES = (
    r"\b(ttft|total|queue|prefill|decode|service|route|tpot|other)_ms\b",
    r"\b(error_rate|p99_over_sla|gpu_util_high|gpu_util_low|queue_growing|spend_spike|budget_forecast|unpriced_share"
    r"|kv_cache_saturated|engine_queue_saturated)\b",
)

TEXT_JS = """() => {
  const parts = [];
  for (const sel of ['[data-testid="stMain"]', '[data-testid="stSidebar"]']) {
    const el = document.querySelector(sel);
    if (el) parts.push(el.textContent);
  }
  parts.push('\\u0000');                 // the page's text above, the table cells below
  for (const cell of document.querySelectorAll('[data-testid="stDataFrame"] [role="gridcell"],'
                                                + ' [data-testid="stDataFrame"] [role="columnheader"]')) {
    parts.push(cell.textContent);
  }
  return parts.join('\\n');
}"""


def offending(text: str) -> list[str]:
    """Every match of a forbidden pattern, with a little context, as ``pattern: …context…``; an exponent only in
    the text before the NUL that TEXT_JS puts between the page's text and its table cells."""
    shown = text.split("\0")[0]
    found = [f"{EXPONENT}: …{shown[max(0, m.start() - 60):m.end() + 40]}…" for m in re.finditer(EXPONENT, shown)]
    for pattern in (*COURSE_WORDS, *NOT_A_NUMBER, *TRACEBACK, UNSEPARATED_MONEY, *RAW_NAMES):
        flags = 0 if pattern in NOT_A_NUMBER else re.IGNORECASE
        for m in re.finditer(pattern, text, flags):
            found.append(f"{pattern}: …{text[max(0, m.start() - 60):m.end() + 40]}…")
    return found


def test_the_checker_catches_each_kind():
    assert offending("Spend $11,316.81 and $0.0043, 2.4 s, — (no price), sample fleet seed 7") == []
    assert offending("P99 time to first token 3.50 s against the premium tier's SLA; error rate 4.0%; "
                     "KV cache full on replica gpu-a; total latency 12.3 s") == []
    bad = ["the seed's worked problem", "see section 2.5 of the routing text", "000_b5db6f0ad1bec1d3.txt",
           "002's exercise", "None", "NaN", "Traceback (most recent call last)", "$1605.02",
           "P99 ttft_ms 44,501 ms", "queue length (queue_ms)", "Alerts on m: budget_forecast", "p99_over_sla · acme",
           "1e+03 replicas", "a wait of 9.3e-7 s"]
    assert [len(offending(t)) > 0 for t in bad] == [True] * len(bad)
    assert offending("a wait of 0.000 s\0" + "5.859266379317564e-10") == []          # a cell's raw value


@pytest.mark.parametrize("slug", [p.slug for p in PAGES])
def test_page_speaks_plainly(server, page, slug):
    page.goto(f"{server}/{'' if slug == 'overview' else slug}")
    wait_ready(page)
    # a slow page (the Incidents page under load) can look idle between its header and its report
    page.wait_for_function("() => (document.querySelector('[data-testid=\"stMain\"]')?.textContent || '').length"
                           " > 600", timeout=120_000)
    wait_ready(page)
    text = page.evaluate(TEXT_JS)
    assert exceptions_on(page) == []
    assert len(text) > 500, text                     # the page did render its report
    found = offending(text)
    assert not found, f"{len(found)} on /{slug}:\n" + "\n".join(found)


# ---------------------------------------------------------------- the same on the real tools' own files
#: one file of each request-level format, written by the tool itself or copied from its repository
#: (tests/data/README.md): what a team that loads its own exports meets. Partial logs (no prefill or decode
#: time, no time to first token, unpriced models, minutes of a model on one day) reach sentences the sample
#: fleet never shows: a page named log columns there and wrote a wait as 2.7e+03 ms.
TOOLS_FILES = {
    "litellm/spendlogs_v1_74.csv": {}, "litellm/spend_logs.json": {}, "langfuse_observations.json": {},
    "langfuse/api_v2_observations.json": {}, "langfuse/ui_export_observations.csv": {},
    "otel_genai_spans.jsonl": {}, "openinference_openai_spans.jsonl": {}, "openllmetry_0_33_openai_spans.jsonl": {},
    "vllm_bench_serve_detailed.json": {}, "llmperf/individual/fireworks_70b.json": {},
    "llmperf/individual/bedrock_13b.json": {}, "seed_gateway_injected.log": {},
    "providers/openai_batch_output.jsonl": {}, "providers/helicone_requests.json": {},
    "providers/openrouter_generations.jsonl": {}, "canonical_sample.csv": {},
    "azure_conv.csv": {"model": "gpt-4o", "tenant": "chat"},
    "mooncake_conversation_head300.jsonl": {"model": "kimi-k2", "start": "2026-11-20T10:00:00"},
    "providers/anthropic_batch_results.jsonl": {"start": "2026-11-20T12:00:00"},
}


@pytest.fixture(scope="module")
def tools_server(tmp_path_factory):
    """The dashboard on a store of :data:`TOOLS_FILES` (and two providers' billing exports): its base URL."""
    from datetime import datetime

    from finops import store
    from finops.ingest import IngestOptions, ingest_path
    from finops.ingest.billing import load_billing_file
    from helpers import DATA, dashboard
    folder = tmp_path_factory.mktemp("e2e-tools")
    db = folder / "tools.duckdb"
    con = store.connect(str(db))
    for name, opts in TOOLS_FILES.items():
        start = datetime.fromisoformat(opts["start"]) if "start" in opts else None
        [r] = ingest_path(con, DATA / name, IngestOptions(model=opts.get("model"), tenant=opts.get("tenant"),
                                                          start=start))
        assert r.rows_read > 0, name
    for name in ("openai_costs.json", "anthropic_cost_report.json"):
        load_billing_file(con, DATA / "providers" / name)
    con.close()
    no_secrets = folder / "secrets.toml"
    no_secrets.write_text("", encoding="utf-8")
    with dashboard(db, "--secrets.files", str(no_secrets), log=folder / "streamlit.log") as (url, _):
        yield url


@pytest.mark.parametrize("slug", [p.slug for p in PAGES])
def test_page_speaks_plainly_on_the_real_tools_files(tools_server, page, slug):
    test_page_speaks_plainly(tools_server, page, slug)
