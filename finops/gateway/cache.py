"""Semantic caches: the first stage of the decision pipeline.

The built-in cache is an exact match on normalised text (NFKC, case-folded,
whitespace collapsed), in an LRU of ``max_entries`` whose entries expire
``ttl_s`` seconds after they were stored. With ``scope = "tenant"`` (the
default) the key includes the tenant, so no tenant is ever served another's
answer. A plugin cache (``kind = "package.module:factory"``, called with the
section's other keys) implements ``key(tenant, pinned, messages) -> str``,
``get(key) -> CachedAnswer | None`` and ``put(key, answer)``; its ``key`` may
match on something else than the exact text (an embedding's nearest neighbour, say).
"""
from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """The text the exact cache compares.

    >>> normalise("  What is\\tthe  WEATHER? ")
    'what is the weather?'
    >>> normalise("ＡＢＣ") == normalise("abc")
    True
    """
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass(frozen=True)
class CachedAnswer:
    """An answer worth serving again, and who produced it."""

    text: str
    backend: str
    model: str
    input_tokens: int
    output_tokens: int
    confidence: float | None


class ExactCache:
    """LRU with TTL over the normalised text; ``clock`` is injectable for tests.

    >>> t = [0.0]
    >>> c = ExactCache(max_entries=2, ttl_s=10, clock=lambda: t[0])
    >>> k = c.key("default", None, [("user", "Hi")])
    >>> c.put(k, CachedAnswer("hello", "fast", "fast", 1, 1, 0.9))
    >>> c.get(k).text
    'hello'
    >>> t[0] = 11.0
    >>> c.get(k) is None
    True
    """

    def __init__(self, max_entries: int = 10_000, ttl_s: float = 600.0, scope: str = "tenant",
                 clock: Callable[[], float] = time.monotonic):
        self.max_entries, self.ttl_s, self.scope, self._clock = max_entries, ttl_s, scope, clock
        self._entries: OrderedDict[str, tuple[float, CachedAnswer]] = OrderedDict()

    def key(self, tenant: str, pinned: str | None, messages: list[tuple[str, str]]) -> str:
        who = tenant if self.scope == "tenant" else ""
        text = "\x1e".join(f"{role}\x1f{normalise(content)}" for role, content in messages)
        return hashlib.blake2b(f"{who}\x1d{pinned or ''}\x1d{text}".encode(), digest_size=16).hexdigest()

    def get(self, key: str) -> CachedAnswer | None:
        item = self._entries.get(key)
        if item is None:
            return None
        stored_at, answer = item
        if self._clock() - stored_at > self.ttl_s:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return answer

    def put(self, key: str, answer: CachedAnswer) -> None:
        self._entries[key] = (self._clock(), answer)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class NoCache:
    """The cache stage switched off."""

    def key(self, tenant: str, pinned: str | None, messages: list[tuple[str, str]]) -> str:
        return ""

    def get(self, key: str) -> CachedAnswer | None:
        return None

    def put(self, key: str, answer: CachedAnswer) -> None:
        return None


CACHES: dict[str, Any] = {
    "exact": ExactCache,
    "none": NoCache,
}
