"""Upload preview: detection, raw and canonical first rows, nothing written; rejected rows read back."""
import gzip
import zipfile

import pandas as pd
import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import IngestOptions, ingest_path
from finops.ingest.preview import preview_path, rejected_rows, suggest_mapping
from helpers import DATA

AZURE_MAP = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _nothing_written(con):
    return con.execute("SELECT (SELECT count(*) FROM requests) + (SELECT count(*) FROM batches)").fetchall()[0][0] == 0


def test_azure_trace_is_detected_and_asks_for_a_model(con):
    p = preview_path(con, DATA / "azure_code_excerpt.csv")
    assert p.format == "azure-trace" and not p.ready and "model" in p.message
    assert p.columns == ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]
    assert len(p.raw) == 20 and p.raw["ContextTokens"].iloc[0] == "4808"
    given = preview_path(con, DATA / "azure_code_excerpt.csv", options=IngestOptions(model="gpt-4o"))
    assert given.ready and set(given.rows["model"]) == {"gpt-4o"}
    assert _nothing_written(con)


def test_a_mapping_previews_typed_canonical_rows(con):
    opts = IngestOptions(mapping=AZURE_MAP, model="azure-code")
    p = preview_path(con, DATA / "azure_code_excerpt.csv", options=opts, n=5)
    assert p.format == "generic" and p.ready and len(p.rows) == 5
    first = p.rows.iloc[0]
    assert first["ts"].isoformat() == "2023-11-16T18:17:03.979960"
    assert (first["input_tokens"], first["output_tokens"], first["model"]) == (4808, 10, "azure-code")
    assert first["_row"] == 2 and pd.isna(first["_reject"])
    assert {"ts", "model", "input_tokens", "output_tokens"} <= set(p.shown.columns)
    assert "queue_ms" not in p.shown.columns           # empty in every previewed row
    assert not [c for c in [*p.rows.columns, *p.shown.columns] if "hash" in c]     # the loader's, not the file's
    assert _nothing_written(con)


def test_an_unknown_table_needs_a_mapping(con, tmp_path):
    f = tmp_path / "mine.csv"
    f.write_text("when,prompt_tokens,completion_tokens,who\n2026-01-01 10:00:00,5,7,x\n")
    p = preview_path(con, f)
    assert p.needs_mapping and p.format == "generic" and p.rows.empty
    assert suggest_mapping(p.columns) == {"ts": "when", "tenant": "who", "input_tokens": "prompt_tokens",
                                          "output_tokens": "completion_tokens"}


def test_a_value_the_typed_reading_cannot_take_previews_as_the_load_rejects_it(con, tmp_path):
    """``n/a`` where a canonical CSV's cost belongs: DuckDB's typed reading stops on it ("Conversion Error") and
    the load reads the file untyped, rejecting that row by name. The preview stopped instead, which left the Data
    page's load button off: the file could be loaded from the command line only."""
    f = tmp_path / "costs.csv"
    f.write_text("request_id,ts,model,tenant,input_tokens,output_tokens,cost_usd,total_ms\n"
                 "r1,2026-11-20 10:00:00,gpt-4o,acme,100,20,n/a,1234.5\n"
                 "r2,2026-11-20 10:00:01,gpt-4o,acme,100,20,0.0013,999\n")
    p = preview_path(con, f)
    assert p.ready and p.message is None and p.format == "canonical"
    assert p.rows["_reject"].iloc[0] == "cost_usd: cannot read n/a as a number" and pd.isna(p.rows["_reject"].iloc[1])
    assert p.rows["cost_usd"].iloc[1] == 0.0013 and p.rows["total_ms"].tolist() == [1234.5, 999.0]
    assert _nothing_written(con)
    [r] = ingest_path(con, f)
    assert (r.rows_ingested, [x["reason"] for x in r.rejects]) == (1, [p.rows["_reject"].iloc[0]])


def test_a_semicolon_csv_reads_decimal_commas_in_the_preview_as_in_the_load(con, tmp_path):
    """A spreadsheet's export in much of Europe: semicolons between fields, a comma before the decimals. Its
    numbers were rejected ("cannot read 0,0012 as a number")."""
    f = tmp_path / "semi.csv"
    f.write_text("request_id;ts;model;tenant;input_tokens;output_tokens;cost_usd;total_ms\n"
                 "r1;2026-11-20 10:00:00;gpt-4o;acme;100;20;0,0012;1234,5\n"
                 "r2;2026-11-20 10:00:01;gpt-4o;acme;1,5;20;0.0013;999\n")
    p = preview_path(con, f)
    assert p.rows["cost_usd"].tolist() == [0.0012, 0.0013] and p.rows["total_ms"].tolist() == [1234.5, 999.0]
    assert pd.isna(p.rows["_reject"].iloc[0]) and p.rows["_reject"].iloc[1] == "input_tokens: cannot read 1,5 as a whole number"
    [r] = ingest_path(con, f)
    assert (r.rows_ingested, r.rows_rejected) == (1, 1)
    assert con.execute("SELECT cost_usd, total_ms, input_tokens FROM requests").fetchall() == [(0.0012, 1234.5, 100)]


def test_rejected_rows_are_read_back_with_the_reason(con, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2026-01-01 10:00:00,5,7\nnot a time,1,2\n"
                 "2026-01-01 10:00:02,-4,2\n")
    [r] = ingest_path(con, f, IngestOptions(mapping=AZURE_MAP, model="m"))
    assert r.rows_rejected == 2
    back = rejected_rows(con, f, "bad.csv", r.rejects)
    assert list(back["row"]) == [3, 4]
    assert list(back.columns[:3]) == ["row", "field", "reason"]
    assert back["TIMESTAMP"].iloc[0] == "not a time" and back["ContextTokens"].iloc[1] == "-4"
    assert "negative" in back["reason"].iloc[1]


def test_compressed_files_and_archives(con, tmp_path):
    gz = tmp_path / "trace.csv.gz"
    gz.write_bytes(gzip.compress((DATA / "azure_code_excerpt.csv").read_bytes()))
    p = preview_path(con, gz, name="trace.csv.gz", options=IngestOptions(model="m"))
    assert p.container == "gzip" and p.ready
    z = tmp_path / "logs.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.write(DATA / "seed_gateway_verbatim.log", "a/gateway.log")
        zf.write(DATA / "azure_code_excerpt.csv", "b/azure.csv")
    p = preview_path(con, z, name="logs.zip")
    assert p.container == "zip" and p.members == ["logs.zip:a/gateway.log", "logs.zip:b/azure.csv"]
    assert p.format == "gateway-log" and p.ready and p.file == "logs.zip"


@pytest.mark.parametrize("content, match", [(b"", "empty"), (b"\x00\x01\x02" * 100, "binary")])
def test_unreadable_files_are_refused_by_name(con, tmp_path, content, match):
    f = tmp_path / "upload.bin"
    f.write_bytes(content)
    with pytest.raises(InputError, match=f"file upload.bin: .*{match}"):
        preview_path(con, f)


def test_a_utf16_upload_previews_as_its_text(con, tmp_path):
    """Excel's "Unicode Text" (UTF-16, tab-separated) was refused as binary by the preview as by the load; it
    previews as the canonical CSV it is, its container the file itself (not a zip)."""
    f = tmp_path / "excel.txt"
    f.write_bytes("request_id\tts\tmodel\ttenant\ne1\t2026-11-20 10:00:00\tgpt-4o\tZürich\n".encode("utf-16"))
    p = preview_path(con, f)
    assert (p.container, p.kind, p.format, p.ready) == ("text", "csv", "canonical", True)
    assert list(p.rows["tenant"]) == ["Zürich"] and list(p.rows["model"]) == ["gpt-4o"]
    assert _nothing_written(con)


def test_a_file_of_more_columns_than_the_limit_is_refused_by_the_preview_too(con, tmp_path):
    f = tmp_path / "wide.csv"
    f.write_text(",".join(["ts", "model"] + [f"c{i}" for i in range(5_000)]) + "\n")
    with pytest.raises(InputError, match="file wide.csv: the file has 5,002 columns, more than the 1,000"):
        preview_path(con, f)
    assert _nothing_written(con)
