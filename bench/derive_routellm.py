"""Derive tests/data/routellm_gsm8k_cascade.csv from RouteLLM's GSM8K responses.

Source: lm-sys/RouteLLM @ 0b64fdafe049e596a3f5657c219329f24af24198,
routellm/evals/gsm8k/gsm8k_responses.csv (Apache-2.0; Ong et al., "RouteLLM", 2024).
A byte copy lives in ../shared/realdata/routellm/gsm8k/ (see its SOURCES.md).

    python bench/derive_routellm.py [SOURCE_CSV] [OUT_CSV]

One output row per source row (all 1,319), in source order:

* prompt_id: 0-based row number in the source file; prompt_sha1: first 12 hex
  digits of the SHA-1 of the prompt text (to re-join with the source);
* confidence: finops.cascade.sweep.routellm_confidence(Mixtral's response text);
* mixtral_correct, gpt4_correct: the source's True/False columns, as 1/0;
* prompt_chars, mixtral_response_chars, gpt4_response_chars: text lengths;
* mixtral_cost_usd_est, gpt4_cost_usd_est: tokens estimated as ceil(chars / 4)
  (a rough English rule of thumb, not a tokenizer) priced with data/prices.csv
  (mixtral-8x7b-instruct and gpt-4-1106-preview, USD per 1M input/output tokens).
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from finops.cascade.sweep import routellm_confidence  # noqa: E402

SMALL, LARGE = "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"
PRICE_ROWS = {"mixtral": "mixtral-8x7b-instruct", "gpt4": "gpt-4-1106-preview"}
DEFAULT_SOURCE = ROOT.parent / "shared/realdata/routellm/gsm8k/gsm8k_responses.csv"
DEFAULT_OUT = ROOT / "tests/data/routellm_gsm8k_cascade.csv"


def est_tokens(chars: pd.Series) -> np.ndarray:
    return np.ceil(chars.to_numpy() / 4.0)


def derive(source: Path) -> pd.DataFrame:
    src = pd.read_csv(source)
    prices = pd.read_csv(ROOT / "data/prices.csv").set_index("model")
    out = pd.DataFrame({
        "prompt_id": np.arange(len(src)),
        "prompt_sha1": [hashlib.sha1(p.encode("utf-8")).hexdigest()[:12] for p in src["prompt"]],
        "confidence": routellm_confidence(src[f"{SMALL}_response"]),
        "mixtral_correct": src[SMALL].astype(bool).astype(int),
        "gpt4_correct": src[LARGE].astype(bool).astype(int),
        "prompt_chars": src["prompt"].str.len(),
        "mixtral_response_chars": src[f"{SMALL}_response"].fillna("").str.len(),
        "gpt4_response_chars": src[f"{LARGE}_response"].fillna("").str.len(),
    })
    prompt_tokens = est_tokens(out["prompt_chars"])
    for short, model in PRICE_ROWS.items():
        p = prices.loc[model]
        completion = est_tokens(out[f"{short}_response_chars"])
        cost = (prompt_tokens * p["input_usd_per_1m"] + completion * p["output_usd_per_1m"]) / 1e6
        out[f"{short}_cost_usd_est"] = np.round(cost, 8)
    return out


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else DEFAULT_SOURCE
    out_path = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out = derive(source)
    out.to_csv(out_path, index=False)
    print(f"wrote {len(out)} rows, {out_path.stat().st_size / 1024:.0f} KB to {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
