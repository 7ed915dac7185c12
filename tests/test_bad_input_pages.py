"""Issue 17 on the pages: a store that already holds bad rows, names that are Markdown, errors that are
internal, uploads left on disk, and a store whose requests all fail."""

from finops import store
from finops.ingest import ingest_path
from helpers import run_page

HEADER = "request_id,ts,model,tenant,input_tokens,output_tokens,total_ms\n"


def _store_with(tmp_path, monkeypatch, rows: str, name="rows.csv", **env) -> str:
    """A store file holding ``rows`` (loaded with ``env`` set, e.g. a window that let 9999 in)."""
    path = str(tmp_path / "store.duckdb")
    f = tmp_path / name
    f.write_text(HEADER + rows)
    with monkeypatch.context() as m:
        for k, v in env.items():
            m.setenv(k, v)
        con = store.connect(path)
        ingest_path(con, f)
        con.close()
    return path


# ---------------------------------------------------------------- a stored row dated 9999-12-31

def test_a_store_holding_a_row_dated_9999_still_shows_every_page_and_deletes_it(tmp_path, monkeypatch):
    db = _store_with(tmp_path, monkeypatch,
                     "g1,2026-11-20T10:00:00Z,gpt-4o,acme,1000,100,900\n"
                     "b1,9999-12-31T00:00:00Z,gpt-4o,acme,1000,100,900\n", FINOPS_TS_MAX="9999-12-31T23:59:59")
    at = run_page(db)
    assert not at.exception, at.exception
    f = at.session_state["_filters"]
    # the sidebar's period stops at the loader's window: the pages never bucket eight millennia
    assert f.since.year == 2026 and f.until.year <= 2028
    side = "\n".join(c.value for c in at.sidebar.caption)
    assert "1 request outside" in side and "Data page" in side
    for page in ("views/overview.py", "views/cost.py", "views/latency.py", "views/data.py"):
        at.switch_page(page)
        at.run()
        assert not at.exception, (page, at.exception)
    at.button(key="delete-1").click()
    at.run()
    assert not at.exception
    con = store.connect(db)
    assert store.row_count(con) == 0 and store.time_span(con) == (None, None)
    con.close()
