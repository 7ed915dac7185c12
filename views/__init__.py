"""The dashboard's pages, declared once: app.py routes to them and the tests walk them.

Each page is one file in this folder that reads like a report (headings, widgets, charts) and
calls ``finops`` through :func:`views._shared.query`; it holds no SQL and no maths.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class PageSpec:
    file: str          #: path relative to the repository root, as st.Page and AppTest.switch_page take it
    title: str
    icon: str

    @property
    def slug(self) -> str:
        """The URL path Streamlit gives the page (the file's stem)."""
        return Path(self.file).stem

    @property
    def path(self) -> Path:
        return HERE.parent / self.file


PAGES: tuple[PageSpec, ...] = (
    PageSpec("views/overview.py", "Overview", ":material/dashboard:"),
    PageSpec("views/alerts.py", "Alerts", ":material/notifications_active:"),
    PageSpec("views/cost.py", "Cost", ":material/payments:"),
    PageSpec("views/budgets.py", "Budgets", ":material/savings:"),
    PageSpec("views/routing.py", "Routing", ":material/alt_route:"),
    PageSpec("views/incidents.py", "Incidents", ":material/emergency:"),
    PageSpec("views/latency.py", "Latency", ":material/speed:"),
    PageSpec("views/percentiles.py", "Percentiles", ":material/stacked_line_chart:"),
    PageSpec("views/capacity.py", "Capacity", ":material/dns:"),
    PageSpec("views/cascade.py", "Cascade", ":material/stacks:"),
    PageSpec("views/readiness.py", "Readiness", ":material/checklist:"),
    PageSpec("views/data.py", "Data", ":material/upload_file:"),
)


def missing_pages() -> list[str]:
    """Declared pages whose file is not there (app.py refuses to start with any)."""
    return [p.file for p in PAGES if not p.path.is_file()]
