import duckdb

from finops import schema, store


def test_required_columns():
    assert set(schema.REQUIRED) == {"request_id", "ts", "model"}
    assert schema.NAMES[0] == "request_id" and "attrs" in schema.NAMES


def test_every_ms_column_says_ms_and_types_are_sql():
    assert all(schema.TYPES[c] == "DOUBLE" for c in schema.MS_COLUMNS)
    assert {"route_ms", "queue_ms", "prefill_ms", "decode_ms", "service_ms", "ttft_ms", "total_ms"} == set(
        schema.MS_COLUMNS)
    con = duckdb.connect()
    con.execute(schema.create_table_sql("t"))
    described = {r[0]: r[1] for r in con.execute("DESCRIBE t").fetchall()}
    assert described == schema.TYPES


def test_store_tables_and_price_book_seeded():
    con = store.connect(":memory:")
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"requests", "batches", "rollup_hourly", "prices", "budgets", "settings"} <= tables
    models = {r[0] for r in con.execute("SELECT model FROM prices").fetchall()}
    assert {"llama-3.1-8b", "llama-3.1-70b", "gpt-4o-mini", "gpt-4o"} <= models


def test_missing_fields():
    assert schema.missing_fields({"queue_ms": 0, "total_ms": 5}, ["queue_ms", "total_ms"]) == ["queue_ms"]
