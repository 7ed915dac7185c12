"""Bad values at the boundary: each is one rejected row (file, row, field, reason), never a poisoned total."""
import zipfile

import pytest

from finops import store
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_path
from finops.ingest.loader import MAX_ZIP_RATIO, expand
from finops.spend import report as spend

HEADER = "request_id,ts,model,tenant,input_tokens,output_tokens,cached_input_tokens,total_ms,cost_usd\n"
GOOD = "g1,2026-11-20T10:00:00Z,gpt-4o,acme,1000,100,0,900,0.25\n"


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _load(con, tmp_path, *lines, name="rows.csv"):
    f = tmp_path / name
    f.write_text(HEADER + GOOD + "".join(lines))
    return ingest_path(con, f)[0]


@pytest.mark.parametrize("value", ["NaN", "nan", "inf", "-inf", "Infinity"])
def test_nan_or_inf_cost_usd_is_a_rejected_row_not_a_poisoned_spend(con, tmp_path, value):
    r = _load(con, tmp_path, f"b1,2026-11-20T11:00:00Z,gpt-4o,acme,1000,100,0,900,{value}\n")
    assert (r.rows_ingested, r.rows_rejected) == (1, 1)
    [rej] = r.rejects
    assert rej["row"] == 3 and rej["field"] == "cost_usd"      # the line in the file (the header is line 1) and "finite" in rej["reason"]
    total = spend.report(con, Filters(), by=[])["cost_usd"].sum()
    assert total == pytest.approx(0.25)


def test_inf_total_ms_is_a_rejected_row_not_a_failed_file(con, tmp_path):
    r = _load(con, tmp_path, "b1,2026-11-20T11:00:00Z,gpt-4o,acme,1000,100,0,inf,0.1\n")
    assert (r.rows_ingested, r.rows_rejected) == (1, 1)
    assert r.rejects[0]["field"] == "total_ms" and "finite" in r.rejects[0]["reason"]


def test_a_latency_above_a_week_is_rejected(con, tmp_path):
    r = _load(con, tmp_path, "b1,2026-11-20T11:00:00Z,gpt-4o,acme,1000,100,0,1e12,0.1\n")
    assert r.rows_rejected == 1 and r.rejects[0]["field"] == "total_ms" and "limit" in r.rejects[0]["reason"]


@pytest.mark.parametrize("ts", ["9999-12-31T00:00:00Z", "1970-01-02T00:00:00Z", "2014-12-31T23:59:59Z"])
def test_a_row_dated_outside_the_window_is_rejected_and_the_period_stays(con, tmp_path, ts):
    r = _load(con, tmp_path, f"b1,{ts},gpt-4o,acme,1000,100,0,900,0.1\n")
    assert (r.rows_ingested, r.rows_rejected) == (1, 1)
    assert r.rejects[0]["field"] == "ts" and "outside" in r.rejects[0]["reason"]
    lo, hi = store.time_span(con)
    assert lo.year == hi.year == 2026


def test_the_timestamp_window_is_configurable(con, tmp_path, monkeypatch):
    monkeypatch.setenv("FINOPS_TS_MIN", "1960-01-01")
    r = _load(con, tmp_path, "b1,1970-01-02T00:00:00Z,gpt-4o,acme,1000,100,0,900,0.1\n")
    assert (r.rows_ingested, r.rows_rejected) == (2, 0)


def test_a_bad_window_setting_is_a_sentence(con, tmp_path, monkeypatch):
    monkeypatch.setenv("FINOPS_TS_MAX", "next tuesday")
    with pytest.raises(InputError, match="FINOPS_TS_MAX"):
        _load(con, tmp_path)
    assert store.row_count(con) == 0


def test_cached_input_tokens_above_input_tokens_is_rejected(con, tmp_path):
    r = _load(con, tmp_path, "b1,2026-11-20T11:00:00Z,gpt-4o,acme,1000,100,1500,900,0.1\n")
    assert (r.rows_ingested, r.rows_rejected) == (1, 1)
    assert r.rejects[0]["field"] == "cached_input_tokens" and "exceeds input_tokens 1000" in r.rejects[0]["reason"]


def test_a_negative_whole_is_rejected_as_negative_alone(con, tmp_path):
    # input_tokens -5 with cached_input_tokens 0: the reason said "negative value -5" and "cached_input_tokens = 0
    # exceeds input_tokens -5" beside it, which sent the reader to the cached tokens
    r = _load(con, tmp_path, "b1,2026-11-20T11:00:00Z,gpt-4o,acme,-5,100,0,900,0.1\n")
    assert (r.rows_ingested, r.rows_rejected) == (1, 1)
    reason = r.rejects[0]["reason"]
    assert r.rejects[0]["field"] == "input_tokens" and "-5" in reason and "exceeds" not in reason, reason


def test_a_token_count_past_a_billion_is_rejected(con, tmp_path):
    r = _load(con, tmp_path, "b1,2026-11-20T11:00:00Z,gpt-4o,acme,2000000000,100,0,900,0.1\n")
    assert r.rows_rejected == 1 and r.rejects[0]["field"] == "input_tokens"


def _bomb(path, members=1, size=200 * 1024 * 1024):
    """A zip whose members are ``size`` zero bytes each (a few hundred KB on disk for 200 MB)."""
    chunk = b"\0" * (1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(members):
            with zf.open(f"part{i}.csv", "w") as out:
                for _ in range(size // len(chunk)):
                    out.write(chunk)
    return path


def _written(folder):
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_zip_bomb_is_refused_before_it_is_extracted(con, tmp_path):
    bomb = _bomb(tmp_path / "bomb.zip")
    assert bomb.stat().st_size * MAX_ZIP_RATIO < 200 * 1024 * 1024
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(InputError, match="expands"):
        expand(bomb, work)
    assert _written(work) < 1024 * 1024
    with pytest.raises(InputError, match="expands"):
        ingest_path(con, bomb)
    assert store.row_count(con) == 0


def test_a_zip_of_many_small_members_is_refused_by_its_whole_ratio(con, tmp_path):
    """Each 1 MiB member is too small to judge by its own ratio, and 100 MiB is under the total cap:
    the whole archive's expansion (about 1,000×) refuses it before a byte is written (bench/zipbomb.py's
    ``under-total``: 3.9 GiB of such members were written in full before)."""
    bomb = _bomb(tmp_path / "many.zip", members=100, size=1024 * 1024)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(InputError, match=r"members expand [0-9,]+× in all"):
        expand(bomb, work)
    assert _written(work) == 0
    with pytest.raises(InputError, match="zip bomb"):
        ingest_path(con, bomb)
    assert store.row_count(con) == 0 and store.batches(con).empty


def test_a_zip_that_lies_about_its_sizes_stops_at_the_declared_size(tmp_path):
    """A member whose header under-states its size: the copy stops at the declared size and refuses."""
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("a.csv", HEADER + GOOD * 1000)
    data = bytearray(path.read_bytes())
    real = len(HEADER + GOOD * 1000)
    # patch the declared uncompressed size (local header offset 22, central directory +24) down to 100 bytes
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        i = data.index(sig)
        data[i + off:i + off + 4] = (100).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(InputError):
        expand(path, work)
    assert _written(work) <= 100 + 1024 * 1024
    assert real > 100


@pytest.mark.parametrize("column,value,message", [
    ("replicas", 2_147_483_647, "replicas"),
    ("replicas", -4, "replicas"),
    ("replicas", 2.5, "whole number"),
    ("gpu_hour_usd", float("inf"), "gpu_hour_usd"),
    ("gpus_per_replica", 0, "gpus_per_replica"),
    # an emptied cell made the fleet's GPU cost vanish from every page ($3,360 of the sample's llama-3.1-8b)
    ("replicas", None, "needs its replicas: its fleet is billed from them"),
    ("gpus_per_replica", float("nan"), "needs its GPUs per replica"),
    ("gpu_hour_usd", None, r"needs its \$ per GPU-hour"),
])
def test_the_price_book_refuses_values_no_fleet_has(con, column, value, message):
    from finops.spend import pricing
    book = pricing.price_book(con)
    before = book.copy()
    row = book.index[book["kind"] == "self_hosted"][0]
    book[column] = book[column].astype(object)
    book.loc[row, column] = value
    with pytest.raises(InputError, match=message) as exc:
        pricing.save_price_book(con, book)
    assert exc.value.field == column
    assert pricing.price_book(con).equals(before)


@pytest.mark.parametrize("value", [float("inf"), -0.5])
def test_the_price_book_refuses_an_infinite_or_negative_token_price(con, value):
    from finops.spend import pricing
    book = pricing.price_book(con)
    row = book.index[book["kind"] == "api"][0]
    book.loc[row, "input_usd_per_1m"] = value
    with pytest.raises(InputError, match="input_usd_per_1m"):
        pricing.save_price_book(con, book)


def test_an_rtt_curve_to_1e8_ms_is_refused_and_a_fine_step_is_coarsened():
    from finops.cascade import edge
    with pytest.raises(InputError, match="ten minutes"):
        edge.net_benefit_curve(max_rtt_ms=1e8, step_ms=1)
    curve = edge.net_benefit_curve(max_rtt_ms=edge.MAX_RTT_MS, step_ms=1)
    assert len(curve) == edge.MAX_CURVE_POINTS
    assert curve.attrs["step_ms"] == pytest.approx(300.0)
    assert curve["rtt_ms"].iloc[-1] == pytest.approx(edge.MAX_RTT_MS)


def test_the_edge_command_with_1e8_ms_is_a_sentence_not_gigabytes(capsys):
    from finops.cli import main
    assert main(["edge", "--max-rtt-ms", "1e8", "--step-ms", "1"]) == 1
    assert "ten minutes" in capsys.readouterr().err


def test_cache_reads_and_writes_together_above_input_tokens_are_rejected(con, tmp_path):
    f = tmp_path / "classes.csv"
    f.write_text("request_id,ts,model,input_tokens,cached_input_tokens,cache_write_tokens,output_tokens,"
                 "reasoning_tokens\n"
                 "ok1,2026-11-20T10:00:00Z,m,3500,2000,500,300,100\n"
                 "in1,2026-11-20T10:00:01Z,m,3500,2000,1600,300,0\n"
                 "out1,2026-11-20T10:00:02Z,m,3500,2000,500,300,301\n")
    r = ingest_path(con, f)[0]
    assert (r.rows_ingested, r.rows_rejected) == (1, 2)
    by_row = {x["row"]: x for x in r.rejects}
    assert by_row[3]["field"] == "cached_input_tokens" and "exceeds input_tokens 3500" in by_row[3]["reason"]
    assert by_row[4]["field"] == "reasoning_tokens" and "exceeds output_tokens 300" in by_row[4]["reason"]
    got = con.execute("SELECT cache_write_tokens, reasoning_tokens FROM requests").fetchall()
    assert got == [(500, 100)]


def test_a_store_made_before_the_new_token_columns_gets_them_when_opened(tmp_path):
    import duckdb
    path = tmp_path / "old.duckdb"
    old = store.connect(path)
    old.execute("ALTER TABLE requests DROP COLUMN reasoning_tokens")
    old.execute("ALTER TABLE requests DROP COLUMN provider")
    old.close()
    with duckdb.connect(str(path)) as raw:
        cols = {r[0] for r in raw.execute("DESCRIBE requests").fetchall()}
    assert "provider" not in cols
    con = store.connect(path)
    cols = {r[0] for r in con.execute("DESCRIBE requests").fetchall()}
    assert {"provider", "reasoning_tokens", "service_tier", "cache_write_tokens"} <= cols
    con.close()


@pytest.mark.parametrize("params,shown", [
    ({"cap_lambda": "1e300"}, {"cap_lambda": 1_000_000.0}),
    ({"cap_lambda": "1e6", "cap_service_s": "1e300"}, {"cap_lambda": 1_000_000.0, "cap_service_s": 3_600.0}),
    ({"cap_lambda": "0", "cap_replicas": "0"}, {"cap_lambda": 0.0, "cap_replicas": 0}),
    ({"cap_slots": "99999999"}, {"cap_slots": 10_000}),
])
def test_an_extreme_capacity_url_is_clamped_and_said_and_a_zero_is_a_zero(tmp_path, params, shown):
    from helpers import run_page, texts
    db = str(tmp_path / "empty.duckdb")
    store.connect(db).close()
    at = run_page(db, "views/capacity.py", query_params=params)
    assert not at.exception
    values = {n.key: n.value for n in at.number_input}
    for key, value in shown.items():
        assert values[key] == value
    if any(float(v) > 1e6 for v in params.values()) or params.get("cap_slots"):
        assert "does not take" in texts(at)


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
@pytest.mark.parametrize("value", ["9223372036854775807", "9223372036854775808", "100000000000000000000",
                                   "-100000000000000000000"])
def test_a_token_count_past_what_a_bigint_holds_is_above_the_limit_not_unreadable(con, tmp_path, kind, value):
    """2**63-1 and more were "cannot read 9223372036854775807 as a whole number" in a CSV (and 2**63 in JSON
    Lines too): a whole number it is, above the store's limit of a billion tokens (schema.RANGES)."""
    f = tmp_path / f"big.{kind}"
    if kind == "csv":
        f.write_text("request_id,ts,model,input_tokens\nb1,2026-11-20T11:00:00Z,gpt-4o,1000\n"
                     f"b2,2026-11-20T11:00:00Z,gpt-4o,{value}\n")
    else:
        f.write_text('{"request_id":"b1","ts":"2026-11-20T11:00:00Z","model":"gpt-4o","input_tokens":1000}\n'
                     f'{{"request_id":"b2","ts":"2026-11-20T11:00:00Z","model":"gpt-4o","input_tokens":{value}}}\n')
    [r] = ingest_path(con, f)
    assert (r.file, r.rows_ingested, r.rows_rejected) == (f"big.{kind}", 1, 1)
    [rej] = r.rejects
    if kind == "jsonl" and value.endswith("0" * 20):
        value = value.replace("100000000000000000000", "1e+20")     # DuckDB's JSON reader holds it as a double
    reason = (f"input_tokens: negative value {value}" if value.startswith("-") else
              f"input_tokens: {value} is above the limit of 1,000,000,000")
    assert (rej["row"], rej["field"], rej["reason"]) == (3 if kind == "csv" else 2, "input_tokens", reason)


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_model_name_past_256_characters_is_a_rejected_row_not_stored_whole(con, tmp_path, kind):
    """A 100 kB model name was stored whole (and then shown, grouped and priced by); a name of 256 characters
    loads, one of 257 or 100,000 is rejected naming the row, the field model and the limit."""
    names = ["m" * 256, "n" * 257, "x" * 100_000]
    f = tmp_path / f"names.{kind}"
    if kind == "csv":
        f.write_text("request_id,ts,model\n" + "".join(f"k{i},2026-11-20T11:00:00Z,{n}\n" for i, n in enumerate(names)))
    else:
        f.write_text("".join(f'{{"request_id":"k{i}","ts":"2026-11-20T11:00:00Z","model":"{n}"}}\n'
                             for i, n in enumerate(names)))
    [r] = ingest_path(con, f)
    assert (r.rows_read, r.rows_ingested, r.rows_rejected) == (3, 1, 2)
    first = 2 if kind == "csv" else 1
    assert r.rejects == [
        {"row": first + 1, "field": "model",
         "reason": f"model: {'n' * 60}... is 257 characters long, above the limit of 256"},
        {"row": first + 2, "field": "model",
         "reason": f"model: {'x' * 60}... is 100,000 characters long, above the limit of 256"}]
    assert con.execute("SELECT request_id, length(model) FROM requests").fetchall() == [("k0", 256)]


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_a_cost_of_minus_zero_is_stored_as_zero(con, tmp_path, kind):
    """-0.0 passed the checks (it is not below 0) and was stored as -0.0: a table's printf format showed it as
    "$-0.00". It is stored as 0.0 now, as is a latency of -0.0; a cost of -0.01 is still rejected as negative."""
    import math

    import pandas as pd
    rows = [("z1", "-0.0", "-0.0"), ("z2", "-0", "0.5"), ("z3", "-0.01", "1")]
    f = tmp_path / f"zero.{kind}"
    if kind == "csv":
        f.write_text("request_id,ts,model,cost_usd,queue_ms\n"
                     + "".join(f"{i},2026-11-20T11:00:00Z,gpt-4o,{c},{q}\n" for i, c, q in rows))
    elif kind == "jsonl":
        f.write_text("".join(f'{{"request_id":"{i}","ts":"2026-11-20T11:00:00Z","model":"gpt-4o","cost_usd":{c},'
                             f'"queue_ms":{q}}}\n' for i, c, q in rows))
    else:
        pd.DataFrame({"request_id": [i for i, _, _ in rows], "ts": pd.to_datetime(["2026-11-20T11:00:00"] * 3),
                      "model": ["gpt-4o"] * 3, "cost_usd": [float(c) for _, c, _ in rows],
                      "queue_ms": [float(q) for _, _, q in rows]}).to_parquet(f)
    [r] = ingest_path(con, f)
    assert (r.rows_ingested, r.rows_rejected) == (2, 1)
    assert [(x["field"], x["reason"]) for x in r.rejects] == [("cost_usd", "cost_usd: negative value -0.01")]
    stored = con.execute("SELECT request_id, cost_usd, queue_ms FROM requests ORDER BY 1").fetchall()
    assert stored == [("z1", 0.0, 0.0), ("z2", 0.0, 0.5)]
    assert [(math.copysign(1, c), math.copysign(1, q)) for _, c, q in stored] == [(1.0, 1.0), (1.0, 1.0)]
