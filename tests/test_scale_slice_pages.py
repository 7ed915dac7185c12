"""Raw rows on demand on the pages (issue 18): on a rollup-only store whose dataset folder was recorded at attach
time, the raw-row sections run on a slice of that dataset when the sidebar picks one model and one day, and show
the figures a store that loaded the same rows shows. Built without Spark: the sample fleet's rows written as a
date-partitioned Parquet dataset by DuckDB, rolled up by ``finops.scale.duck`` (``rollup --engine duckdb``)."""
from __future__ import annotations

import shutil
import threading
from datetime import datetime, timedelta

import duckdb
import numpy as np
import pandas as pd
import pytest

from finops import store
from finops.cli import main
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import ingest_frame
from finops.latency import stats
from finops.sample import synth
from finops.scale import duck, slices
from helpers import run_page, texts

MODEL = "llama-3.1-8b"
DAY = "2026-11-19"
TENANT = "acme-support"
ONE_DAY = {"model": MODEL, "from": DAY, "to": DAY}


def _attach(tmp, name: str, dataset=None) -> str:
    path = str(tmp / f"{name}.duckdb")
    assert main(["attach-rollups", str(tmp / "out"), "--db", path, *(["--dataset", str(dataset)] if dataset else [])]) == 0
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(the rows, a store that loaded them, a rollup-only store with the dataset recorded, the tmp dir)."""
    tmp = tmp_path_factory.mktemp("slice_pages")
    gen = duckdb.connect()
    gen.execute("SET TimeZone = 'UTC'")
    gen.register("f", synth.generate(days=5, seed=3, requests_per_day=4_000))
    gen.execute("COPY (SELECT *, CAST(ts AS DATE) AS date FROM f) TO ? (FORMAT parquet, PARTITION_BY (date))",
                [str(tmp / "dataset")])
    rows = gen.execute("SELECT * EXCLUDE (date) FROM read_parquet(?, hive_partitioning = true)",
                       [str(tmp / "dataset" / "*" / "*.parquet")]).df()
    loaded = str(tmp / "loaded.duckdb")
    con = store.connect(loaded)
    assert ingest_frame(con, rows, "dataset").rows_rejected == 0
    con.close()
    duck.run_rollup(str(tmp / "dataset"), str(tmp / "out"))
    attached = _attach(tmp, "attached", tmp / "dataset")
    yield rows, loaded, attached, tmp


def _day_rows(rows: pd.DataFrame, tenant: str | None = None) -> pd.DataFrame:
    since = datetime.fromisoformat(DAY)
    out = rows[(rows["model"] == MODEL) & (rows["ts"] >= since) & (rows["ts"] < since + timedelta(days=1))]
    return out[out["tenant"] == tenant] if tenant else out


def _frames(at) -> list[pd.DataFrame]:
    return [d.value.reset_index(drop=True) for d in at.dataframe]


def test_the_latency_page_on_a_slice_shows_the_loaded_stores_figures(built):
    rows, loaded, attached, _ = built
    on_slice, on_store = run_page(attached, "views/latency.py", query_params=ONE_DAY), \
        run_page(loaded, "views/latency.py", query_params=ONE_DAY)
    for at in (on_slice, on_store):
        assert not at.exception, [e.value for e in at.exception]
    said = texts(on_slice)
    day = _day_rows(rows)
    assert (f"these figures were read from the dataset the rollups were computed from, for {MODEL}, {DAY} to {DAY} "
            f"(UTC): {len(day):,} requests, from 1 daily partition ({DAY}).") in said
    assert store.RAW_ROWS_NEEDED not in said and "Engine view" in said and "The slowest requests" in said
    # every table of the page as the store that loaded the rows shows it (the sketches, the slowest requests)
    got, want = _frames(on_slice), _frames(on_store)
    assert len(got) == len(want) >= 2
    for a, b in zip(got, want, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    # the slowest request, found here in the rows themselves
    served = day[~day["cache_hit"].fillna(False) & day["total_ms"].notna()]
    slowest = served.sort_values(["total_ms", "request_id"], ascending=[False, True])
    table = next(t for t in got if "request_id" in t)
    assert table["request_id"].tolist() == slowest["request_id"].head(len(table)).tolist() and len(table) == 15
    # the headline captions agree too (counts of requests, queue waits)
    assert [c.value for c in on_slice.main.caption if "Source:" not in c.value] == \
        [c.value for c in on_store.main.caption if "Source:" not in c.value]


def test_with_a_tenant_the_slice_gives_exact_percentiles(built):
    """A tenant filter makes the page read exact percentiles (not the sketch): the slice's equal numpy's."""
    rows, _, attached, _ = built
    at = run_page(attached, "views/latency.py", query_params={**ONE_DAY, "tenant": TENANT})
    assert not at.exception, [e.value for e in at.exception]
    served = _day_rows(rows, TENANT)
    served = served[~served["cache_hit"].fillna(False)]
    assert "Exact percentiles" in texts(at)
    tt = next(t for t in _frames(at) if "ttft_ms_p50" in t)
    ttft = served["ttft_ms"].dropna().to_numpy()
    assert int(tt["requests"].iloc[0]) == len(served) > 100
    assert tt["ttft_ms_p99"].max() < 1000          # shown in ms
    for p in (50, 95, 99):
        assert tt[f"ttft_ms_p{p}"].iloc[0] == pytest.approx(np.percentile(ttft, p), rel=1e-12)


def test_too_wide_filters_say_what_to_pick(built):
    _, _, attached, _ = built
    for params, sentence in (({}, "pick one model and at most 24 hours to read its requests from the dataset"),
                             ({"from": DAY, "to": DAY}, "pick one model and at most 24 hours"),
                             ({"model": MODEL, "from": "2026-11-15", "to": DAY},
                              "narrow the period to at most 24 hours to read its requests from the dataset")):
        at = run_page(attached, "views/latency.py", query_params=params)
        assert not at.exception, [e.value for e in at.exception]
        said = texts(at)
        assert ("The diagnosis, alerts, breakdowns and exact percentiles: this needs single requests; this store "
                "holds only the hourly rollups attached with `python -m finops attach-rollups`, but can read them "
                f"from the dataset the rollups were computed from: {sentence}") in said, params
        assert store.RAW_ROWS_NEEDED not in said and "these figures were read" not in said
        assert "The slowest requests" not in said and "Percentiles" in said     # the sketch's, as before


def test_without_a_recorded_dataset_the_sentence_is_as_before(built):
    _, _, _, tmp = built
    at = run_page(_attach(tmp, "no_dataset"), "views/latency.py", query_params=ONE_DAY)
    assert not at.exception
    assert f"The diagnosis, alerts, breakdowns and exact percentiles: {store.RAW_ROWS_NEEDED}" in texts(at)


def test_a_moved_dataset_or_a_damaged_file_is_a_sentence_naming_no_path(built, tmp_path):
    _, _, _, tmp = built
    moved = tmp_path / "moved"
    shutil.copytree(tmp / "dataset", moved)
    path = _attach(tmp, "moved", moved)
    shutil.move(moved, tmp_path / "elsewhere")
    at = run_page(path, "views/latency.py", query_params=ONE_DAY)
    assert not at.exception
    said = texts(at)
    assert ("the requests could not be read from the dataset: the dataset folder recorded when the rollups were "
            "attached is gone") in said and str(tmp_path) not in said and "The slowest requests" not in said

    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "elsewhere", damaged)
    path = _attach(tmp, "damaged", damaged)
    for part in (damaged / f"date={DAY}").glob("*.parquet"):
        part.write_bytes(b"PAR1 not a parquet file")
    at = run_page(path, "views/latency.py", query_params=ONE_DAY)
    assert not at.exception
    said = texts(at)
    assert f"the dataset's Parquet files for {DAY} could not be read" in said, said
    assert str(tmp_path) not in said and "The slowest requests" not in said
    # another day's files are whole: that slice reads
    at = run_page(path, "views/latency.py", query_params={**ONE_DAY, "from": "2026-11-15", "to": "2026-11-15"})
    assert "1 daily partition (2026-11-15)" in texts(at)


def test_a_dataset_changed_since_the_rollups_is_refused_with_the_hour_and_counts(built, tmp_path):
    """A dataset folder whose rows are not the ones the attached rollups were computed from (here the picked
    day's partition rewritten without every other request of the model at 14:00) gives a sentence naming the first
    hour that differs and both counts, not figures that do not reconcile with the page's totals."""
    rows, _, _, tmp = built
    changed = tmp_path / "changed"
    shutil.copytree(tmp / "dataset", changed)
    path = _attach(tmp, "changed", changed)
    gen = duckdb.connect()
    gen.execute("SET TimeZone = 'UTC'")
    part = changed / f"date={DAY}"
    files = [str(p) for p in part.glob("*.parquet")]
    whole = gen.execute("SELECT * FROM read_parquet(?)", [files]).df()
    at14 = whole[(whole["ts"].dt.hour == 14) & (whole["model"] == MODEL)]
    dropped = set(sorted(at14["request_id"])[::2])
    for p in part.glob("*.parquet"):
        p.unlink()
    gen.register("kept", whole[~whole["request_id"].isin(dropped)])
    gen.execute("COPY kept TO ? (FORMAT parquet)", [str(part / "kept.parquet")])
    assert len(at14) == len(_day_rows(rows).query("ts.dt.hour == 14")) and 0 < len(dropped) < len(at14)
    at = run_page(path, "views/latency.py", query_params=ONE_DAY)
    assert not at.exception
    said = texts(at).replace("\\", "")     # the page escapes Markdown ("14\\:00")
    assert (f"the dataset's requests do not match the attached rollups: {DAY} 14:00 UTC "
            f"({len(at14) - len(dropped):,} requests read from the dataset, {len(at14):,} in the rollups)") in said, said
    assert "The slowest requests" not in said and str(tmp_path) not in said
    # another day's partition is unchanged: its slice reads
    at = run_page(path, "views/latency.py", query_params={**ONE_DAY, "from": "2026-11-15", "to": "2026-11-15"})
    assert "1 daily partition (2026-11-15)" in texts(at)


def test_the_slice_is_read_once_kept_bounded_and_closed_when_dropped(built, monkeypatch):
    rows, _, attached, _ = built
    read: list[slices.RawSlice] = []
    real = slices.open_slice

    def counted(con, f, budget=None):
        read.append(real(con, f, budget))
        return read[-1]

    monkeypatch.setattr(slices, "open_slice", counted)
    days = ["2026-11-15", "2026-11-17", "2026-11-16", "2026-11-15"]
    params = [{"model": "gpt-4o-mini", "from": d, "to": d} for d in days]
    at = run_page(attached, "views/latency.py", query_params=params[0])
    at.run()                                      # a rerun with the same filters reads no Parquet file
    assert len(read) == 1 and "these figures were read" in texts(at)
    first = read[0]
    assert first.con.execute("SELECT count(*) FROM requests").fetchall()[0][0] == first.requests > 0
    for p in params[1:slices.MAX_KEPT_SLICES]:
        run_page(attached, "views/latency.py", query_params=p)
    assert len(read) == slices.MAX_KEPT_SLICES
    run_page(attached, "views/latency.py", query_params={**params[0], "model": "gpt-4o"})   # one too many
    assert len(read) == slices.MAX_KEPT_SLICES + 1
    with pytest.raises(duckdb.ConnectionException):    # the oldest slice's cursor was closed when dropped
        first.con.execute("SELECT 1")
    assert read[1].con.execute("SELECT 1").fetchall() == [(1,)]
    at = run_page(attached, "views/latency.py", query_params=params[0])         # read again once asked again
    assert len(read) == slices.MAX_KEPT_SLICES + 2 and "these figures were read" in texts(at)


def test_a_shared_slice_serves_one_use_at_a_time_and_closes_after_it(built):
    _, _, _, tmp = built
    con = store.connect(_attach(tmp, "shared", tmp / "dataset"))
    f = Filters(since=datetime(2026, 11, 16), until=datetime(2026, 11, 17), models=(MODEL,))
    shared = slices.SharedSlice(slices.open_slice(con, f))
    inside, release, closed = threading.Event(), threading.Event(), threading.Event()

    def blocking(cur):
        inside.set()
        release.wait(10)
        return cur.execute("SELECT count(*) FROM requests").fetchall()[0][0]

    result = []
    user = threading.Thread(target=lambda: result.append(shared.run(blocking)))
    user.start()
    assert inside.wait(10)
    closer = threading.Thread(target=lambda: (shared.close(), closed.set()))
    closer.start()
    assert not closed.wait(0.3)                  # close waits for the use in progress
    release.set()
    user.join(10)
    closer.join(10)
    assert closed.is_set() and result == [shared.slice.requests]
    with pytest.raises(slices.SliceClosed):
        shared.run(stats.percentiles, f)
    assert isinstance(slices.SliceClosed("x"), InputError)
    con.close()


def test_the_percentiles_page_per_tenant_on_a_slice(built):
    rows, loaded, attached, _ = built
    params = {**ONE_DAY, "lat_by": "tenant", "pct_field": "total_ms"}
    on_slice, on_store = run_page(attached, "views/percentiles.py", query_params=params), \
        run_page(loaded, "views/percentiles.py", query_params=params)
    assert not on_slice.exception and not on_store.exception
    assert "Percentiles per tenant, tier, route or replica: these figures were read from the dataset" in texts(on_slice)
    table = next(t for t in _frames(on_slice) if "tenant" in t)
    pd.testing.assert_frame_equal(table, next(t for t in _frames(on_store) if "tenant" in t), check_exact=True)
    served = _day_rows(rows, TENANT)
    served = served[~served["cache_hit"].fillna(False)]
    mine = table.set_index("tenant").loc[TENANT]
    unit = "s" if "total_s_p99" in table.columns else "ms"           # the table's unit, in its columns' names
    scale = 1000.0 if unit == "s" else 1.0
    assert int(mine["requests"]) == len(served) > 100
    for p in (50, 95, 99):
        assert mine[f"total_{unit}_p{p}"] * scale == pytest.approx(np.percentile(served["total_ms"].dropna(), p),
                                                                  rel=1e-12)


@pytest.mark.parametrize("page, what, params", [
    ("views/incidents.py", "Incidents (the diagnosis and the alerts read request rows)", {}),
    ("views/cost.py", "The distribution of one request's cost", {"cost_dist": "true"}),
    ("views/routing.py", "Misrouting candidates (each request's prompt length)", {}),
    ("views/overview.py", "Incidents on latency, errors and queues", {}),
    ("views/capacity.py", "This table (each request's service time on a replica)", {})])
def test_the_other_raw_row_sections_read_the_slice(built, page, what, params):
    """Each says where its figures come from, and its tables are the loaded store's (the spend tables around a
    section read the store again after it, as they did)."""
    rows, loaded, attached, _ = built
    on_slice, on_store = (run_page(db, page, query_params={**ONE_DAY, **params}) for db in (attached, loaded))
    assert not on_slice.exception and not on_store.exception, [e.value for e in on_slice.exception]
    said = texts(on_slice)
    assert f"{what}: these figures were read from the dataset" in said and said.count("these figures were read") == 1
    if page == "views/incidents.py":            # the sample fleet's decode tail of that afternoon, found on the slice
        assert [e.label for e in on_slice.expander] == [e.label for e in on_store.expander]
        assert any(f"Slow decode on {MODEL} from 13" in e.label for e in on_slice.expander)
    mine, theirs = _frames(on_slice), _frames(on_store)
    raw_tables = {"views/incidents.py": "why", "views/cost.py": "p99_usd", "views/routing.py": "right_size_model",
                  "views/capacity.py": "observed_queue_p99_ms"}
    if page in raw_tables:
        col = raw_tables[page]
        pd.testing.assert_frame_equal(next(t for t in mine if col in t), next(t for t in theirs if col in t),
                                      check_exact=True)


def test_the_sla_latency_on_a_rollup_only_store_is_the_loaded_stores(built):
    """The SLA is on TTFT where the logs carry one: a store of attached rollups tells it from their field counts
    (it used to look for TTFT in its empty requests table and fall back to total latency)."""
    from finops.ops import alerts
    rows, loaded, attached, _ = built
    assert rows["ttft_ms"].notna().any()
    day = Filters(since=datetime.fromisoformat(DAY), until=datetime.fromisoformat(DAY) + timedelta(days=1))
    # the stores as the pages open them (the earlier tests' pages may hold them open in this process)
    a, b = store.connect(loaded), store.connect(attached)
    try:
        assert store.rollup_only(b) and not store.rollup_only(a)
        for f in (Filters(), day):
            assert alerts.sla_metric(b, f) == alerts.sla_metric(a, f) == "ttft_ms"
        # a period with no requests at all: neither store has a TTFT to judge by
        empty = Filters(since=datetime(2020, 1, 1), until=datetime(2020, 1, 2))
        assert alerts.sla_metric(b, empty) == alerts.sla_metric(a, empty) == "total_ms"
    finally:
        a.close()
        b.close()
