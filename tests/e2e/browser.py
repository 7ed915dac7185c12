"""Playwright helpers for the browser tests."""
from __future__ import annotations

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"


# a heading, no "running" status widget, and the app's script state not "running" (the widget shows only
# after a delay, so a slow page's run can be under way with no widget yet)
IDLE_JS = ("() => document.querySelector('[data-testid=\"stMain\"] h1')"
           " && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
           " && document.querySelector('[data-testid=\"stApp\"]').getAttribute('data-test-script-state')"
           " !== 'running'")


def wait_ready(pg, timeout_ms: int = 90_000) -> None:
    """Wait until the page has a heading and the app has stopped running, twice in a row.

    A page's first run starts a moment after the document loads, so one idle check
    can pass before the run begins; a second check after a pause cannot.
    """
    pg.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    for _ in range(2):
        pg.wait_for_function(IDLE_JS, timeout=timeout_ms)
        pg.wait_for_timeout(1000)
    pg.wait_for_function(IDLE_JS, timeout=timeout_ms)


def exceptions_on(pg) -> list[str]:
    return [e.inner_text() for e in pg.query_selector_all("[data-testid='stException']")]


#: the text of each metric card's label or value that its card cuts with an ellipsis (wider than its box)
CUT_METRICS_JS = ("() => [...document.querySelectorAll('[data-testid=\"stMetricLabel\"] .stMarkdownEllipsis, "
                  "[data-testid=\"stMetricValue\"], [data-testid=\"stMetricValue\"] div')]"
                  ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)")


def cut_metrics(pg) -> list[str]:
    """The metric labels and values shown cut (``...``) in the page as laid out now."""
    return pg.evaluate(CUT_METRICS_JS)


#: the lines of chart titles and subtitles Vega cut with an ellipsis (wider than their chart)
CUT_TITLES_JS = ("() => [...document.querySelectorAll('.role-title-text text, .role-title-subtitle text, "
                 "text.role-title-text, text.role-title-subtitle')].map(t => t.textContent)"
                 ".filter(s => s.includes('\u2026'))")


def cut_titles(pg) -> list[str]:
    """The chart title lines shown cut (``…``) in the page as laid out now."""
    return pg.evaluate(CUT_TITLES_JS)


def shoot(pg, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    out = SCREENSHOTS / f"{name}.png"
    pg.screenshot(path=str(out), full_page=True)
    return out
