"""Issue 17 on the pages: a store that already holds bad rows, names that are Markdown, errors that are
internal, uploads left on disk, and a store whose requests all fail."""

from finops import store
from finops.ingest import ingest_path
from helpers import failing_store, run_page, shown, texts

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


# ---------------------------------------------------------------- names shown as text

EVIL = "![x](http://127.0.0.1:9/p.png) **bold** :red[x] $x$"


def _markdown_bodies(at) -> list[str]:
    out = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success"):
        out.extend(str(getattr(e, "value", "")) for e in getattr(at, kind))
    out.extend(str(m.label) for m in at.metric)
    return out


def test_a_tenant_and_model_named_in_markdown_show_as_text_on_every_page(tmp_path, monkeypatch):
    from views._shared import plain

    name = EVIL.replace(",", " ")            # one CSV field
    db = _store_with(tmp_path, monkeypatch, f"g1,2026-11-20T10:00:00Z,{name},{name},1000,100,900\n"
                                            f"g2,2026-11-20T11:00:00Z,{name},{name},1000,100,900\n")
    at = run_page(db, query_params={"tenant": name})
    assert at.session_state["_filters"].tenants == (name,)
    escaped = plain(name)
    assert escaped == r"\!\[x\]\(http\://127.0.0.1\:9/p.png\) \*\*bold\*\* \:red\[x\] \$x\$"
    seen = set()
    for page in ("views/overview.py", "views/cost.py", "views/budgets.py", "views/routing.py", "views/latency.py",
                 "views/data.py"):
        at.switch_page(page)
        at.run()
        assert not at.exception, (page, at.exception)
        bodies = _markdown_bodies(at)
        # the raw name never reaches Markdown: no image, no bold, no colour, no LaTeX
        assert not [b for b in bodies if "](http" in b or "**bold**" in b or " :red[" in b or "$x$" in b], page
        seen.update(page for b in bodies if escaped in b)
    # the filter caption (tenants: ...), the Data page's unpriced-model warning
    assert {"views/overview.py", "views/cost.py", "views/data.py"} <= seen


# ---------------------------------------------------------------- uploads on the Data page

def _upload_files(at) -> list:
    from pathlib import Path
    root = Path(at.session_state["_upload_dir"])
    return sorted(p.name for p in root.rglob("*") if p.is_file())


def test_an_upload_is_deleted_after_its_load_and_when_removed(empty_db, tmp_path):
    at = run_page(empty_db, "views/data.py")
    rows = (HEADER + "u1,2026-11-20T10:00:00Z,gpt-4o,acme,1000,100,900\n").encode()
    at.file_uploader(key="uploads").set_value([("first.csv", rows, "text/csv"),
                                               ("second.csv", rows.replace(b"u1", b"u2"), "text/csv")])
    at.run()
    assert not at.exception
    assert _upload_files(at) == ["first.csv", "second.csv"]
    load = [b for b in at.button if b.label == "Load first.csv into the store"]
    load[0].click()
    at.run()
    assert not at.exception
    assert _upload_files(at) == ["second.csv"]
    assert "first.csv is loaded" in texts(at)
    con = store.connect(empty_db)
    assert store.row_count(con) == 1
    con.close()
    at.file_uploader(key="uploads").set_value(None)
    at.run()
    assert not at.exception and _upload_files(at) == []


def test_a_corrupt_parquet_upload_names_the_upload_never_the_temp_path(empty_db):
    at = run_page(empty_db, "views/data.py")
    at.file_uploader(key="uploads").set_value(("fleet.parquet", b"PAR1" + b"\x15\x00" * 50, "application/octet-stream"))
    at.run()
    assert not at.exception
    [err] = at.error
    assert err.value == ("Cannot load this file: file fleet.parquet: the Parquet file is truncated or corrupt: "
                         r"export it again \(the reader's own message is in the server log\)")
    page = texts(at)
    assert at.session_state["_upload_dir"] not in page and "/tmp" not in page
    assert _upload_files(at) == []            # a file that cannot be read is not kept either


# ---------------------------------------------------------------- a store whose requests all fail

def test_a_small_store_whose_requests_all_fail_is_not_called_within_thresholds(tmp_path):
    db = failing_store(tmp_path)
    for page in ("views/overview.py", "views/incidents.py"):
        at = run_page(db, page)
        assert not at.exception
        assert "within their thresholds" not in texts(at)
        [w] = [shown(w.value) for w in at.warning if "too few requests to judge" in w.value]
        # the rule's title as it is written, not lower-cased; an admin (local mode) is told where to lower the minimum
        assert "Error rate above 1 %: 1 window with 3 requests in all (a window needs 50)" in w, w
        assert "lower the rule's minimum requests per window on the Incidents page" in w


def test_an_excel_upload_in_utf16_loads_and_one_in_latin1_is_refused_in_a_sentence(empty_db):
    """Excel's "Unicode Text" (UTF-16) and "CSV (Comma delimited)" (Windows-1252) uploads were both refused as
    "the file is binary"; the first loads now, the second names its byte, line and how to save it."""
    at = run_page(empty_db, "views/data.py")
    at.file_uploader(key="uploads").set_value(
        ("unicode.txt", "request_id\tts\tmodel\ttenant\nr1\t2026-11-20T10:00:00Z\tgpt-4o\tZürich\n".encode("utf-16"),
         "text/plain"))
    at.run()
    [load] = [b for b in at.button if b.label == "Load unicode.txt into the store"]
    load.click()
    at.run()
    assert not at.exception and not at.error and "unicode.txt is loaded" in texts(at)
    con = store.connect(empty_db)
    assert con.execute("SELECT tenant, model FROM requests").fetchall() == [("Zürich", "gpt-4o")]
    con.close()
    at.file_uploader(key="uploads").set_value(
        ("excel.csv", "request_id,ts,model,tenant\nr2,2026-11-20T10:00:00Z,gpt-4o,Zürich\n".encode("cp1252"),
         "text/csv"))
    at.run()
    assert not at.exception
    [err] = at.error
    assert err.value.startswith(r"Cannot load this file: file excel.csv, row 2: the file is not UTF-8 text: byte 0xFC "
                                r"at byte 59 \(line 2\)")      # 27 bytes of header, 31 to the tenant, its Z


def test_an_upload_whose_every_row_is_rejected_says_nothing_loaded_with_the_rows_and_fields(empty_db):
    """Such a load leaves the store as it was (no batch): its report said neither "already loaded" nor loaded."""
    at = run_page(empty_db, "views/data.py")
    rows = (HEADER + "b1,2026-11-20T10:00:00Z,gpt-4o,acme,-5,100,900\n"
            "b2,2026-11-20T10:01:00Z,,acme,1000,100,900\n").encode()
    at.file_uploader(key="uploads").set_value(("bad.csv", rows, "text/csv"))
    at.run()
    [load] = [b for b in at.button if b.label == "Load bad.csv into the store"]
    load.click()
    at.run()
    assert not at.exception
    page = shown(texts(at))
    assert "already loaded" not in page and "bad.csv** read as `canonical`" in page, page
    assert "bad.csv** read as `canonical`, batch" not in page
    [err] = [shown(e.value) for e in at.error if "bad.csv" in e.value]
    assert err == ("Nothing loaded from bad.csv: every one of its 2 rows was rejected (the reasons by row and field "
                   "below); the store is as it was. Pick another format or map its columns, then load it again.")
    [table] = [d.value for d in at.dataframe if list(d.value.columns) == ["row", "field", "reason"]]
    assert [(r["row"], r["field"]) for r in table.to_dict("records")] == [(2, "input_tokens"), (3, "model")]
    # the file stays to be loaded again another way
    assert [b.label for b in at.button if b.label == "Load bad.csv into the store"] == ["Load bad.csv into the store"]
    con = store.connect(empty_db)
    assert store.row_count(con) == 0 and len(store.batches(con)) == 0
    con.close()
