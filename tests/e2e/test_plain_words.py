"""Every page of the sample store speaks plainly: no course texts, no None/NaN, no traceback, money with separators.

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

TEXT_JS = """() => {
  const parts = [];
  for (const sel of ['[data-testid="stMain"]', '[data-testid="stSidebar"]']) {
    const el = document.querySelector(sel);
    if (el) parts.push(el.textContent);
  }
  for (const cell of document.querySelectorAll('[data-testid="stDataFrame"] [role="gridcell"],'
                                                + ' [data-testid="stDataFrame"] [role="columnheader"]')) {
    parts.push(cell.textContent);
  }
  return parts.join('\\n');
}"""


def offending(text: str) -> list[str]:
    """Every match of a forbidden pattern, with a little context, as ``pattern: …context…``."""
    found = []
    for pattern in (*COURSE_WORDS, *NOT_A_NUMBER, *TRACEBACK, UNSEPARATED_MONEY):
        flags = 0 if pattern in NOT_A_NUMBER else re.IGNORECASE
        for m in re.finditer(pattern, text, flags):
            found.append(f"{pattern}: …{text[max(0, m.start() - 60):m.end() + 40]}…")
    return found


def test_the_checker_catches_each_kind():
    assert offending("Spend $11,316.81 and $0.0043, 2.4 s, — (no price), sample fleet seed 7") == []
    bad = ["the seed's worked problem", "see section 2.5 of the routing text", "000_b5db6f0ad1bec1d3.txt",
           "002's exercise", "None", "NaN", "Traceback (most recent call last)", "$1605.02"]
    assert [len(offending(t)) > 0 for t in bad] == [True] * len(bad)


@pytest.mark.parametrize("slug", [p.slug for p in PAGES])
def test_page_speaks_plainly(server, page, slug):
    page.goto(f"{server}/{'' if slug == 'overview' else slug}")
    wait_ready(page)
    text = page.evaluate(TEXT_JS)
    assert exceptions_on(page) == []
    assert len(text) > 500, text                     # the page did render its report
    found = offending(text)
    assert not found, f"{len(found)} on /{slug}:\n" + "\n".join(found)
