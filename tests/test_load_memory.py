"""A load runs under loader.LOAD_MEMORY_LIMIT and puts the store's own limit back (issue 15's flat memory)."""
import pytest

from finops import store
from finops.ingest import IngestOptions, ingest_path, loader
from helpers import DATA

AZURE_MAP = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}


def _limit(con) -> str:
    return con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]


def _load_seeing_limit(con, path, options) -> set[str]:
    seen = set()
    ingest_path(con, path, options, progress=lambda fraction, what: seen.add(_limit(con)))
    return seen


@pytest.fixture()
def con(tmp_path):
    c = store.connect(tmp_path / "s.duckdb")     # store.connect sets 1536MB
    yield c
    c.close()


def test_a_load_runs_under_the_load_limit_and_puts_the_store_limit_back(con):
    before = _limit(con)
    assert before == "1.4 GiB"
    seen = _load_seeing_limit(con, DATA / "azure_conv.csv", IngestOptions(mapping=AZURE_MAP, model="m"))
    # 768MB is 732.4 MiB: every step of the load after reading ran under it; the first step ran before it
    assert "732.4 MiB" in seen and seen <= {"732.4 MiB", before}
    assert _limit(con) == before
    assert con.execute("SELECT count(*) FROM requests").fetchall()[0][0] == 19_366


def test_a_lower_limit_is_left_as_it_is(con):
    con.execute("SET memory_limit = '256MB'")
    seen = _load_seeing_limit(con, DATA / "azure_conv.csv", IngestOptions(mapping=AZURE_MAP, model="m"))
    assert seen == {"244.1 MiB"} and _limit(con) == "244.1 MiB"


def test_the_limit_is_put_back_when_a_load_fails(con, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")     # a header and no rows
    before = _limit(con)
    with pytest.raises(Exception, match="no rows"):
        ingest_path(con, bad, IngestOptions(mapping=AZURE_MAP, model="m"))
    assert _limit(con) == before


@pytest.mark.parametrize("text, expected", [("1.4 GiB", 1.4 * 2 ** 30), ("732.4 MiB", 732.4 * 2 ** 20),
                                            ("768MB", 768e6), ("500 KiB", 500 * 1024), ("unlimited", None)])
def test_memory_sizes_read_as_duckdb_writes_them(text, expected):
    assert loader._bytes(text) == expected
