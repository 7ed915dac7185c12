"""finops.store.connect: a store made before a column existed gets it, empty, when opened read-write."""
from finops import schema, store


def test_a_store_missing_columns_gets_them_empty_on_open(tmp_path):
    path = str(tmp_path / "old.duckdb")
    con = store.connect(path)
    con.execute("INSERT INTO requests (request_id, ts, model) VALUES ('r1', TIMESTAMP '2026-11-01 10:00', 'm')")
    con.execute("ALTER TABLE requests DROP COLUMN reasoning_tokens")
    con.execute("ALTER TABLE prices DROP COLUMN cache_write_1h_usd_per_1m")
    con.close()
    con = store.connect(path)
    names = [r[0] for r in con.execute("SELECT name FROM pragma_table_info('requests')").fetchall()]
    assert {c.name for c in schema.COLUMNS} <= set(names) and names[-1] == "reasoning_tokens"
    assert con.execute("SELECT request_id, reasoning_tokens FROM requests").fetchall() == [("r1", None)]
    assert "cache_write_1h_usd_per_1m" in {r[0] for r in con.execute("SELECT name FROM pragma_table_info('prices')")
                                             .fetchall()}
    con.close()
    store.connect(path).close()           # opened again: nothing to add, no error
