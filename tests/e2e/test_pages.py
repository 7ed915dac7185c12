"""Every page of a running server loads without an exception on screen; screenshots for people."""
import re

import pytest
from browser import cut_metrics, cut_titles, exceptions_on, shoot, wait_ready

from views import PAGES

pytestmark = pytest.mark.e2e


def _page_slugs():
    return [p.slug for p in PAGES]


@pytest.mark.parametrize("slug", _page_slugs())
def test_page_loads_without_exception(server, page, slug):
    page.goto(f"{server}/{'' if slug == 'overview' else slug}")
    wait_ready(page)
    shoot(page, slug)
    assert exceptions_on(page) == []
    assert page.locator("h1").count() >= 1
    # 1024 pixels beside the sidebar: no card's label or value is cut with an ellipsis (21 were at 1280, e.g.
    # "Spent so far in November 20…", "Large-model calls for half the gap (CPT 5…"; at 1100 "Saving (USD) −$43…" on
    # Capacity and the Overview's "$13,608.39" in its 4-column grid). Every page's cards, the Overview's too, are as
    # wide as their content and wrap to a new line when narrow (views._shared.metric_row).
    page.set_viewport_size({"width": 1024, "height": 1000})
    page.wait_for_timeout(500)
    assert cut_metrics(page) == []
    # nor a chart's title line (charts.TITLE_LINE_CHARS, charts.beside for a chart beside another: "Share of requests
    # by RTT (ms): green where escala…" on Cascade at 1280, eleven titles on five pages at 1100, among them "Token mix
    # by model (share of tokens,…" and "Mean queue wait against utilisation a…slots")
    page.wait_for_timeout(1000)
    assert cut_titles(page) == []


def test_the_first_page_answers_at_its_own_name_too(server, page):
    """/overview (as a link or a person might spell it) shows the Overview, where Streamlit serves its default
    page at the root only and said "Page not found"."""
    page.goto(f"{server}/{PAGES[0].slug}")
    wait_ready(page)
    assert exceptions_on(page) == []
    assert page.get_by_text("Page not found").count() == 0
    assert page.locator("h1").first.inner_text().strip() == PAGES[0].title


def test_filter_goes_to_url_and_back(server, page):
    page.goto(server + "/")
    wait_ready(page)
    before = page.locator("[data-testid='stMetricValue']").first.inner_text()
    page.get_by_role("combobox", name="Tenants").click()
    options = [o for o in page.get_by_role("option").all() if o.inner_text().strip() != "Select all"]
    tenant = options[0].inner_text().strip()
    options[0].click()
    page.keyboard.press("Escape")
    wait_ready(page)
    assert re.search(r"[?&]tenant=", page.url), page.url
    filtered = page.locator("[data-testid='stMetricValue']").first.inner_text()
    assert filtered != before                      # one tenant spends less than the whole fleet
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    wait_ready(page)
    chips = page.locator("[data-testid='stMultiSelect']").first.locator(
        "[data-testid='stMultiSelectTagsContainer']").inner_text()
    assert tenant in chips, chips
    assert page.locator("[data-testid='stMetricValue']").first.inner_text() == filtered
    assert exceptions_on(page) == []


def test_seven_figure_spend_is_not_cut(page, tmp_path):
    """A month of a large fleet costs seven figures: "$1,234,567.89" is 206 pixels wide in a card's value font. The
    Overview's 4-column grid cut it below 1,480 pixels (this store's "$11,223,344.45" per 1M tokens below 1,600), and
    a stretched card in a wrapping row (laid out from a 224-pixel basis, four to a row at 1,400) cut it too: each
    card is as wide as its content now."""
    from helpers import dashboard, store_of_records
    rows = [{"request_id": f"r{i}", "ts": f"2026-03-02T{i // 60:02d}:{i % 60:02d}:00Z", "model": "gpt-4o",
             "tenant": "acme", "input_tokens": 1000, "output_tokens": 100, "cost_usd": 12_345.6789} for i in range(100)]
    db = store_of_records(tmp_path, rows)
    with dashboard(db, log=tmp_path / "streamlit.log") as (url, _):
        for slug in ("", "cost"):
            page.goto(f"{url}/{slug}")
            wait_ready(page)
            assert exceptions_on(page) == []
            assert page.get_by_text("$1,234,567.89").count() >= 1, slug
            for width in (1024, 1280, 1400, 1600):
                page.set_viewport_size({"width": width, "height": 1000})
                page.wait_for_timeout(500)
                assert cut_metrics(page) == [], (slug, width)
