"""Issue 17: no chart or table grows with the data. A store of thousands of tenants and models over ten
years renders every page with each chart's data and each table within its bound, and the bound said
on screen (a chart's subtitle, a table's caption with the full CSV to download)."""
import json

import pyarrow as pa
import pytest
from streamlit.proto.Dataframe_pb2 import Dataframe as DataframeProto

from finops.charts import MAX_POINTS, MAX_SERIES
from tests.helpers import build_wide_store, run_page, texts
from views import PAGES
from views._shared import MAX_TABLE_COLUMNS, MAX_TABLE_ROWS

TENANTS, MODELS = 2500, 1100


@pytest.fixture(scope="module")
def wide_db(tmp_path_factory):
    return build_wide_store(str(tmp_path_factory.mktemp("wide") / "wide.duckdb"), tenants=TENANTS, models=MODELS,
                            rows=30_000, years=10)


def _nodes(at, kind):
    out = []

    def walk(node):
        if getattr(node, "type", None) == kind:
            out.append(node)
        for child in getattr(node, "children", {}).values():
            walk(child)
    walk(at._tree)
    return out


def _chart_data(node) -> list[int]:
    """The rows of each dataset a chart sends to the browser."""
    proto = node.proto
    sizes = [pa.ipc.open_stream(d.data.data).read_all().num_rows for d in proto.datasets if d.data.data]
    if proto.data.data:
        sizes.append(pa.ipc.open_stream(proto.data.data).read_all().num_rows)
    return sizes


def _subtitles(node) -> str:
    title = json.loads(node.proto.spec).get("title")
    return " ".join(title.get("subtitle", [])) if isinstance(title, dict) else ""


@pytest.mark.parametrize("page", [p.file for p in PAGES])
def test_every_chart_and_table_is_bounded_on_a_store_of_thousands_of_tenants_and_models(wide_db, page):
    at = run_page(wide_db, page, timeout=600)
    assert not at.exception, [e.message for e in at.exception]
    for chart in _nodes(at, "vega_lite_chart"):
        assert all(n <= MAX_POINTS for n in _chart_data(chart)), (page, _chart_data(chart), _subtitles(chart))
    # editors (price book, budgets, floors, aliases) are exempt: they show the whole table they save
    for table in (t for t in at.dataframe if t.proto.editing_mode == DataframeProto.EditingMode.READ_ONLY):
        assert len(table.value) <= MAX_TABLE_ROWS and len(table.value.columns) <= MAX_TABLE_COLUMNS, page
    shown = texts(at)
    if page in ("views/cost.py", "views/budgets.py", "views/data.py"):
        assert f"Showing the {MAX_TABLE_ROWS} of " in shown and "download the full CSV" in shown, page
    if page == "views/overview.py":
        [spend] = [c for c in _nodes(at, "vega_lite_chart") if "Spend per" in c.proto.spec][:1]
        assert f"The {MAX_SERIES} of {MODELS:,} models with the highest spend; the rest as 'other'" in \
            _subtitles(spend)
