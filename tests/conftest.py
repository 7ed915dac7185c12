import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("FINOPS_DB", ":memory:")
os.environ["FINOPS_DEMO"] = "0"      # tests never build the sample store by surprise

DEMO_TEST_DAYS = 9                   # covers both incident windows of the sample fleet


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> str:
    """A store file holding the sample fleet (shorter than the default 14 days, same generator)."""
    from finops import demo, store

    path = str(tmp_path_factory.mktemp("demo") / "demo.duckdb")
    con = store.connect(path)
    demo.build_demo(con, days=DEMO_TEST_DAYS)
    con.close()
    return path


@pytest.fixture()
def empty_db(tmp_path) -> str:
    from finops import store

    path = str(tmp_path / "empty.duckdb")
    store.connect(path).close()
    return path
