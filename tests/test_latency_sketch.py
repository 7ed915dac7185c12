"""The hourly latency sketch (store.latency_hourly): its error bound, its upkeep, and when it is not used."""
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.filters import Filters
from finops.ingest import IngestOptions, ingest_frame, ingest_path
from finops.latency import stats as latency

T0 = datetime(2026, 5, 4, 10, 0)
QS = (0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)


def _frame(n: int, seed: int) -> pd.DataFrame:
    """Heavy-tailed latencies over six decades, ties, zeros, two models, two tenants, three hours."""
    rng = np.random.default_rng(seed)
    total = np.exp(rng.normal(6.0, 2.5, n))
    total[rng.random(n) < 0.05] = 250.0                     # a block of identical values
    queue = np.where(rng.random(n) < 0.5, 0.0, rng.exponential(200.0, n))
    return pd.DataFrame({
        "request_id": [f"s{seed}-{i}" for i in range(n)],
        "ts": [T0 + timedelta(seconds=float(s)) for s in rng.uniform(0, 3 * 3600, n)],
        "model": rng.choice(["m1", "m2"], n), "tenant": rng.choice(["t1", "t2"], n),
        "total_ms": total, "queue_ms": queue, "service_ms": total * 0.7,
        "ttft_ms": total * 0.2, "output_tokens": rng.integers(1, 300, n),
    })


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_sketched_percentile_is_within_the_stated_bound(seed):
    df = _frame(5000, seed)
    con = store.connect(":memory:")
    ingest_frame(con, df)
    keys = ["model", "hour"]
    got = latency.sketch_quantiles(con, Filters(), keys, ["total_ms", "queue_ms"], QS)
    df["hour"] = df.ts.dt.floor("h")
    worst = 0.0
    for (model, hour), g in df.groupby(["model", "hour"]):
        for field in ("total_ms", "queue_ms"):
            row = got[(got.model == model) & (got.hour == hour) & (got.field == field)].iloc[0]
            assert row.n == len(g)
            exact = np.percentile(g[field], [q * 100 for q in QS])
            mine = row[[latency.p_label(q) for q in QS]].to_numpy(dtype=float)
            zero = exact == 0
            assert (mine[zero] == 0).all()                  # the zeros of queue_ms are exact
            rel = np.abs(mine[~zero] - exact[~zero]) / exact[~zero]
            worst = max(worst, rel.max())
    assert worst <= store.SKETCH_ALPHA * (1 + 1e-9)
    assert worst > 1e-4                                     # an approximation, really: not exact by chance


def test_filters_the_sketch_cannot_answer_fall_back_to_exact():
    df = _frame(3000, 4)
    con = store.connect(":memory:")
    ingest_frame(con, df)
    t1 = df[df.tenant == "t1"]
    by_tenant = latency.percentiles(con, Filters(tenants=("t1",)), by=("model",))
    assert by_tenant.attrs["max_rel_error"] == 0.0
    row = by_tenant.set_index("model").loc["m1"]
    assert_allclose(row.total_ms_p99, np.percentile(t1[t1.model == "m1"].total_ms, 99), rtol=1e-12)
    # half an hour: not whole hours, so exact
    half = Filters(since=T0 + timedelta(minutes=30), until=T0 + timedelta(hours=2))
    assert latency.percentiles(con, half).attrs["max_rel_error"] == 0.0
    # whole hours: the sketch, and the right hours
    whole = Filters(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=2))
    out = latency.percentiles(con, whole, by=())
    sub = df[(df.ts >= whole.since) & (df.ts < whole.until)]
    assert out.attrs["max_rel_error"] == store.SKETCH_ALPHA and out.requests.iloc[0] == len(sub)
    assert_allclose(out.total_ms_p50.iloc[0], np.percentile(sub.total_ms, 50), rtol=store.SKETCH_ALPHA)
    # grouping by tenant: exact
    assert latency.percentiles(con, Filters(), by=("tenant",)).attrs["max_rel_error"] == 0.0


def test_sketch_follows_loads_and_deletions(tmp_path):
    path = tmp_path / "a.jsonl"
    _frame(2000, 5).to_json(path, orient="records", lines=True, date_format="iso")
    con = store.connect(":memory:")
    [first] = ingest_path(con, path, IngestOptions())
    count = con.execute("SELECT count(*), sum(n) FROM latency_hourly").fetchall()[0]
    assert count[0] > 0
    ingest_path(con, path, IngestOptions())                 # the same file again: nothing changes
    assert con.execute("SELECT count(*), sum(n) FROM latency_hourly").fetchall()[0] == count
    store.delete_batch(con, first.batch_id)
    assert con.execute("SELECT count(*) FROM latency_hourly").fetchall()[0][0] == 0
    assert latency.percentiles(con, Filters()).empty


def test_a_store_older_than_the_sketch_gets_one(tmp_path):
    db = str(tmp_path / "old.duckdb")
    con = store.connect(db)
    ingest_frame(con, _frame(2000, 6))
    before = latency.percentiles(con, Filters())
    # make it look like a store written before the sketch existed
    con.execute("DROP TABLE latency_hourly")
    con.execute("DELETE FROM settings WHERE key = 'latency_sketch_version'")
    con.close()
    ro = store.connect(db, read_only=True)                  # read-only: cannot build it, so exact figures
    assert not store.sketch_ready(ro)
    assert latency.percentiles(ro, Filters()).attrs["max_rel_error"] == 0.0
    ro.close()
    con = store.connect(db)                                 # read-write: built on opening
    assert store.sketch_ready(con)
    after = latency.percentiles(con, Filters())
    assert after.attrs["max_rel_error"] == store.SKETCH_ALPHA
    pd.testing.assert_frame_equal(before, after)
