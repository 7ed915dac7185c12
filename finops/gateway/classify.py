"""Prompt length in estimated tokens, and the complexity classifiers built on it.

Why tokens and not characters
-----------------------------
The seed gateway routes on ``len(prompt) > 40`` characters. A character is a
very different amount of text in Chinese and in English: its own section 3.3
"long" prompts are Chinese sentences of 37 and 38 characters, under the
threshold, so run as written they all go to the fast model. Models bill and
slow down by tokens, so the default classifier counts estimated tokens.

The estimator (no tokenizer download, a few microseconds per prompt)::

    tokens = n_cjk + sum(ceil(len(word) / 4) for word in other_words)

* ``n_cjk``: characters of CJK scripts (Han ideographs, kana, Hangul syllables,
  CJK and full-width punctuation), about one token each in current BPE
  vocabularies (cl100k / o200k give 0.7 to 1.5 per Han character);
* ``other_words``: the rest of the text split on whitespace; a word costs one
  token per started four characters (the usual ~4 characters per English token).

With the default threshold of 32 tokens, the seed's 37- and 38-character
prompts are long (37 and 38 tokens) and its "今天天气如何" is short (6 tokens);
an English prompt is long from roughly 130 characters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f"
    "\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003134f]"
)


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (see the module docstring for the rule).

    >>> estimate_tokens("今天天气如何")
    6
    >>> estimate_tokens("请详细分析分布式训练中数据并行张量并行流水并行三者在通信开销显存占用上的取舍")
    38
    >>> estimate_tokens("What is the weather like today?")
    8
    >>> estimate_tokens("")
    0
    """
    n_cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text) if n_cjk else text
    return n_cjk + sum((len(w) + 3) // 4 for w in rest.split())


@dataclass(frozen=True)
class Complexity:
    """What the classifier concluded: a label and the quality a backend needs for it."""

    label: str                 # "short" / "long", or a plugin's own labels
    prompt_length: int         # in ``unit``
    unit: str                  # "tokens" or "chars"
    min_quality: float = 0.0


class Classifier(Protocol):
    def classify(self, text: str) -> Complexity: ...


class LengthClassifier:
    """Long when the prompt's length (estimated tokens, or characters) exceeds ``threshold``.

    A long prompt needs a backend of quality >= ``long_min_quality``.

    >>> c = LengthClassifier(unit="tokens", threshold=32, long_min_quality=0.85)
    >>> c.classify("今天天气如何").label, c.classify("超长复杂推理请求需要路由到大模型并注入慢路径来观察排队与服务耗时的拆分情况").label
    ('short', 'long')
    >>> LengthClassifier(unit="chars", threshold=40).classify("超长复杂推理请求需要路由到大模型并注入慢路径来观察排队与服务耗时的拆分情况").label
    'short'
    """

    def __init__(self, unit: str = "tokens", threshold: int = 32, long_min_quality: float = 0.85):
        self.unit, self.threshold, self.long_min_quality = unit, threshold, long_min_quality
        self._measure = estimate_tokens if unit == "tokens" else len

    def classify(self, text: str) -> Complexity:
        n = self._measure(text)
        if n > self.threshold:
            return Complexity("long", n, self.unit, self.long_min_quality)
        return Complexity("short", n, self.unit, 0.0)


class NoClassifier:
    """Every prompt is ``any``: the tier's floor alone decides."""

    def classify(self, text: str) -> Complexity:
        return Complexity("any", estimate_tokens(text), "tokens", 0.0)


CLASSIFIERS: dict[str, Any] = {
    "length": LengthClassifier,
    "none": NoClassifier,
}
