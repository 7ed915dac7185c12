"""Raw rows on demand for a rollup-only store: a bounded slice of the dataset the attached output was
computed from, read with DuckDB where the store's sections expect raw rows.

An admin records the dataset's folder when attaching (``attach-rollups DIR --dataset DATASET``): a local
path or a mount, checked then (:func:`check_dataset`: a folder of ``date=YYYY-MM-DD/`` partitions of
Parquet files) and kept in the store's settings (:data:`DATASET_SETTING`); nothing typed on a page or read
from a URL ever names the files read. :func:`open_slice` then reads, for one model and at most
:data:`MAX_SLICE_HOURS` hours, the rows of the date partitions that period touches only (``read_parquet``
with hive partitioning, every value a bound parameter), narrowed to the raw-row budget
(``store.raw_scope``, counted in the attached rollups before anything is read), into temporary tables of
one cursor: ``requests`` and the tables the loader derives from it (rollups, sketches, queue windows),
computed by the loader's own SQL. Every analysis that reads raw rows runs on that cursor unchanged and
answers as on a store that had loaded the slice; other cursors of the store see nothing of it.
"""
from __future__ import annotations

import glob
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import duckdb

from finops import sql, store
from finops.errors import InputError
from finops.filters import Filters
from finops.scale import duck

#: the store setting holding the dataset folder recorded by ``attach-rollups --dataset``
DATASET_SETTING = "scale.dataset"
#: the longest period a slice reads, in hours: "a few hours" of one model
MAX_SLICE_HOURS = 24
#: the folders of a hive-partitioned dataset by day, as the Spark job reads it
DATE_PARTITION = re.compile(r"date=(\d{4}-\d{2}-\d{2})")
#: what a raw-row section of a page says on a rollup-only store with a dataset recorded, before what to pick
SLICE_NEEDED = ("this needs single requests; this store holds only the hourly rollups attached with "
                "`python -m finops attach-rollups`, but can read them from the dataset the rollups were computed from")
#: the format of the one batch a slice's ``batches`` holds
SLICE_FORMAT = "dataset-slice"
#: the slices a dashboard process keeps read at once (each holds up to store.RAW_ROW_BUDGET rows in memory)
MAX_KEPT_SLICES = 3


def check_dataset(path: str | os.PathLike) -> str:
    """The absolute path of ``path`` if it is a local folder (or a mount) of ``date=YYYY-MM-DD/`` partitions
    holding Parquet files, else an InputError saying what it is not. A URL is refused: the dashboard reads
    local files only (copy or mount the dataset)."""
    text = os.fspath(path)
    if "://" in text:
        raise InputError(f"--dataset {text}: give a local folder or a mount of the dataset, not a URL (the dashboard "
                         "reads the slices it needs with DuckDB from local files)")
    real = os.path.realpath(text)
    if not os.path.isdir(real):
        raise InputError(f"--dataset {text}: no such folder")
    days = [d for d in os.listdir(real) if DATE_PARTITION.fullmatch(d) and glob.glob(os.path.join(real, d, "*.parquet"))]
    if not days:
        raise InputError(f"--dataset {text}: no date=YYYY-MM-DD/ folders of .parquet files in it (the layout "
                         "`python -m finops rollup` reads)")
    return real


def record_dataset(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Keep the checked dataset folder (:func:`check_dataset`) in the store's settings."""
    store.set_setting(con, DATASET_SETTING, check_dataset(path))


def dataset_of(con: duckdb.DuckDBPyConnection) -> str | None:
    """The dataset folder recorded for this store, or None."""
    return store.get_setting(con, DATASET_SETTING)


def dataset_recorded(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a dataset folder is recorded for this store (what a page may know of it: not its path)."""
    return dataset_of(con) is not None


def slice_problem(con: duckdb.DuckDBPyConnection, f: Filters) -> str:
    """Why ``f`` cannot be read as a slice of the dataset (a sentence), or '' when it can."""
    if dataset_of(con) is None:
        return ("no dataset folder is recorded for this store (attach the rollups with "
                "`python -m finops attach-rollups DIR --dataset DATASET`)")
    if len(f.models) != 1:
        return f"pick one model and at most {MAX_SLICE_HOURS} hours to read its requests from the dataset"
    if f.since is None or f.until is None or f.until - f.since > timedelta(hours=MAX_SLICE_HOURS):
        return f"narrow the period to at most {MAX_SLICE_HOURS} hours to read its requests from the dataset"
    return ""


@dataclass
class RawSlice:
    """The slice read (:func:`open_slice`): ``con`` is the cursor whose temporary tables hold it."""
    con: duckdb.DuckDBPyConnection
    filters: Filters          # the slice's filters (the budget may have narrowed the period: scope.note())
    scope: store.RawScope
    requests: int             # rows read into the slice
    files: list[str]          # the Parquet files read (the partitions of the period's days)

    @property
    def days(self) -> list[str]:
        """The days (``YYYY-MM-DD``) whose date partitions were read: what a page may say of the files."""
        return _days(self.files)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> RawSlice:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SliceClosed(InputError):
    """The slice was closed (evicted from a dashboard's cache) before this use: read it again."""


@dataclass
class SharedSlice:
    """A :class:`RawSlice` kept by a server process for several sessions' threads: DuckDB's cursor serves one
    statement at a time, and its temporary tables are that cursor's alone (another cursor of the store cannot
    read them), so every use holds the slice's lock (:meth:`run`), and :meth:`close` waits for the use in
    progress."""
    slice: RawSlice
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    closed: bool = False

    def run(self, fn: Callable, *args, **kwargs):
        """``fn(cursor, *args, **kwargs)`` on the slice's cursor, one use at a time. Spend functions share no
        costed rows with the store's own cursors here (a costing of the slice is the slice's alone)."""
        from finops.spend.report import shared_costing
        with self._lock:
            if self.closed:
                raise SliceClosed("The requests read from the dataset were dropped from memory meanwhile; "
                                  "reload the page to read them again.")
            with shared_costing():
                return fn(self.slice.con, *args, **kwargs)

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self.slice.close()


def _days(files: list[str]) -> list[str]:
    """The days (``YYYY-MM-DD``) of the date partitions ``files`` lie in, sorted."""
    return sorted({m.group(1) for p in files for m in [DATE_PARTITION.search(p)] if m})


def _day_files(root: str, since: datetime, until: datetime) -> list[str]:
    """The Parquet files of the date partitions ``[since, until)`` touches."""
    files, day = [], since.date()
    while day <= (until - timedelta(microseconds=1)).date():
        files += sorted(glob.glob(os.path.join(root, f"date={day.isoformat()}", "*.parquet")))
        day += timedelta(days=1)
    return files


def _hours_differing(con: duckdb.DuckDBPyConnection, cur: duckdb.DuckDBPyConnection, g: Filters) -> list[tuple]:
    """The whole hours of ``g``'s period where the slice read on ``cur`` holds another number of requests than
    the store's attached rollups for the same filters: ``(hour, read, attached)``, by hour. A partial hour at
    either end is not compared (the rollups count whole hours)."""
    lo = g.since.replace(minute=0, second=0, microsecond=0)
    if lo < g.since:
        lo += timedelta(hours=1)
    hi = g.until.replace(minute=0, second=0, microsecond=0)
    if lo >= hi:
        return []
    where, params = Filters(tenants=g.tenants, models=g.models, sla_tiers=g.sla_tiers).where(ts_col="hour")
    attached = dict(con.execute(f"SELECT hour, sum(requests) FROM rollup_hourly WHERE {where} AND hour >= ? "
                                "AND hour < ? GROUP BY 1", [*params, lo, hi]).fetchall())
    read = dict(cur.execute("SELECT hour, sum(requests) FROM rollup_hourly WHERE hour >= ? AND hour < ? GROUP BY 1",
                            [lo, hi]).fetchall())
    counts = [(h, int(read.get(h, 0)), int(attached.get(h, 0))) for h in sorted(set(read) | set(attached))]
    return [(h, n_read, n_attached) for h, n_read, n_attached in counts if n_read != n_attached]


def open_slice(con: duckdb.DuckDBPyConnection, f: Filters, budget: int | None = None) -> RawSlice:
    """Read the dataset's requests matching ``f`` (one model, at most :data:`MAX_SLICE_HOURS` hours, within
    ``budget`` raw rows: store.raw_scope) into a new cursor's temporary tables; use as a context manager.
    An InputError says why when it cannot (:func:`slice_problem`)."""
    problem = slice_problem(con, f)
    if problem:
        raise InputError(f"Reading raw rows on demand: {problem}.")
    try:
        root = check_dataset(dataset_of(con))      # checked again: the folder may have moved since
    except InputError:                             # said without the folder's path (a page shows this)
        raise InputError("the dataset folder recorded when the rollups were attached is gone or holds no "
                         "date=YYYY-MM-DD/ partitions of Parquet files any more (moved or deleted since?): an "
                         "admin can attach the rollups again with --dataset naming where it is now") from None
    scope = store.raw_scope(con, f, budget)
    g = scope.filters
    files = _day_files(root, g.since, g.until)
    cur = con.cursor()
    try:
        cur.execute("SET TimeZone = 'UTC'")
        batch_id = cur.execute("SELECT coalesce(max(batch_id), 0) FROM batches").fetchall()[0][0]
        for table in ("requests", "batches", "rollup_hourly", *(t for t, *_ in store.DERIVED)):
            name = sql.column(table, ("requests", "batches", "rollup_hourly", *(t for t, *_ in store.DERIVED)), "table")
            cur.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM {name} WHERE false")
        if files:
            canonical, canonical_params = duck.canonical_sql(cur, files)
            where, params = g.where()
            cur.execute(f"INSERT INTO requests SELECT * REPLACE (CAST(? AS BIGINT) AS batch_id) FROM ({canonical}) "
                        f"WHERE {where}", [batch_id, *canonical_params, *params])
        cur.execute(f"INSERT INTO rollup_hourly {store.rollup_select_sql('requests')}")
        store.insert_derived(cur, batch_id)
        rows, lo, hi = cur.execute("SELECT count(*), min(ts), max(ts) FROM requests").fetchall()[0]
        cur.execute("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [batch_id, "the dataset's slice", None, SLICE_FORMAT, None, rows, rows, 0, 0, None, lo, hi])
        differing = _hours_differing(con, cur, g)
    except duckdb.Error as exc:                    # a corrupt or vanished file: said without its path
        cur.close()
        days = _days(files)
        raise InputError(f"the dataset's Parquet files for {', '.join(days) or 'this period'} could not be read "
                         f"({type(exc).__name__}: a file is damaged, or changed while it was read); an admin can "
                         "check them, or copy the dataset again") from None
    except BaseException:
        cur.close()
        raise
    if differing:
        # the folder holds other rows than the rollups were computed from (replaced, grown or pruned since):
        # its figures would not reconcile with the page's totals, so none are shown
        cur.close()
        hour, read, attached = differing[0]
        more = f" and {len(differing) - 1:,} more hours" if len(differing) > 1 else ""
        raise InputError(f"the dataset's requests do not match the attached rollups: {hour:%Y-%m-%d %H}:00 UTC"
                         f"{more} ({read:,} requests read from the dataset, {attached:,} in the rollups). The "
                         "dataset folder may have been replaced or changed since the rollups were computed: an "
                         "admin can run the rollup job again and attach its output, or attach the rollups again "
                         "with --dataset naming the dataset they were computed from")
    return RawSlice(cur, replace(g), scope, int(rows), files)
