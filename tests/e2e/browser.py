"""Playwright helpers for the browser tests."""
from __future__ import annotations

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"


def wait_ready(pg, timeout_ms: int = 60_000) -> None:
    """Wait until the app has finished running (no 'Running...' status widget)."""
    pg.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    pg.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && document.querySelector('[data-testid=\"stMain\"]')",
        timeout=timeout_ms)
    pg.wait_for_timeout(800)


def exceptions_on(pg) -> list[str]:
    return [e.inner_text() for e in pg.query_selector_all("[data-testid='stException']")]


def shoot(pg, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    out = SCREENSHOTS / f"{name}.png"
    pg.screenshot(path=str(out), full_page=True)
    return out
