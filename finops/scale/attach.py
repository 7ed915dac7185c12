"""Load the Spark job's output (finops.scale.spark) into a dashboard store: rollups, no raw rows.

``rollup_hourly`` and ``latency_hourly`` get the output's rows under a new batch, ``batches`` one row
(format ``spark-rollup``, its time span the rollups' hours), the price book stays as it is and
``requests`` stays empty: the spend pages read rollups only, and what needs raw rows says so
(store.RAW_ROWS_NEEDED). Attaching the same run twice adds nothing.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from finops import sql, store
from finops.errors import InputError
from finops.scale.spark import MANIFEST_DIR, OUTPUT_FORMAT, ROLLUP_DIR, SKETCH_DIR


@dataclass(frozen=True)
class AttachResult:
    output: str
    batch_id: int
    run_id: str
    requests: int
    rollup_rows: int
    sketch_rows: int
    already_attached: bool = False

    def as_dict(self) -> dict:
        return {"output": self.output, "batch_id": self.batch_id, "run_id": self.run_id, "requests": self.requests,
                "rollup_rows": self.rollup_rows, "sketch_rows": self.sketch_rows,
                "already_attached": self.already_attached}


def _parts(directory: str, sub: str, ext: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(directory, sub, f"*.{ext}")))
    if not files:
        raise InputError(f"{directory} has no {sub}/*.{ext}: not the output of "
                         "`python -m finops rollup --engine spark` (or the run did not finish)")
    return files


def read_manifest(directory: str) -> dict:
    """The run's manifest (finops.scale.spark.run_rollup), checked against this store's rollup and sketch
    versions: rollups of other keys or measures would be summed with the wrong meaning."""
    lines = [line for f in _parts(directory, MANIFEST_DIR, "txt")
             for line in open(f, encoding="utf-8").read().splitlines() if line.strip()]
    if len(lines) != 1:
        raise InputError(f"{directory}/{MANIFEST_DIR} holds {len(lines)} manifests, not one")
    manifest = json.loads(lines[0])
    for key, want in (("rollup_version", store.ROLLUP_VERSION), ("sketch_version", store.SKETCH_VERSION)):
        if manifest.get(key) != want:
            raise InputError(f"{directory} was written with {key} {manifest.get(key)}, this finops reads {want}: "
                             "run `python -m finops rollup --engine spark` again with this version")
    return manifest


def attach_rollups(con: duckdb.DuckDBPyConnection, directory: str | os.PathLike) -> AttachResult:
    """Attach one output folder of the Spark job to the store (one transaction). A run already attached
    (its run id) is reported, not added again."""
    directory = str(directory).rstrip("/")
    manifest = read_manifest(directory)
    run_id = manifest["run_id"]
    rollups = _parts(directory, ROLLUP_DIR, "parquet")
    sketches = _parts(directory, SKETCH_DIR, "parquet")
    seen = con.execute("SELECT batch_id FROM batches WHERE format = ? AND sha256 = ?",
                       [OUTPUT_FORMAT, run_id]).fetchall()
    if seen:
        return AttachResult(directory, seen[0][0], run_id, int(manifest["rows"]), int(manifest["rollup_rows"]),
                            int(manifest["sketch_rows"]), already_attached=True)
    key_types = [("hour", "TIMESTAMP"), *((d, "VARCHAR") for d in sql.ROLLUP_DIMS), ("input_band", "BIGINT")]
    keys = ", ".join(f"CAST({n} AS {t})" for n, t in key_types)
    measures = ", ".join(f"CAST({n} AS {t})" for n, t, _ in store.ROLLUP_MEASURES)
    with store.transaction(con):
        batch_id = con.execute("SELECT coalesce(max(batch_id), 0) + 1 FROM batches").fetchall()[0][0]
        con.execute(f"INSERT INTO rollup_hourly SELECT {keys}, ?, {measures} FROM read_parquet(?)",
                    [batch_id, rollups])
        con.execute("INSERT INTO latency_hourly SELECT CAST(hour AS TIMESTAMP), model, ?, field, k, n, lo, hi "
                    "FROM read_parquet(?)", [batch_id, sketches])
        requests, rollup_rows, lo, hi = con.execute(
            "SELECT coalesce(sum(requests), 0), count(*), min(hour), "
            "max(hour) + INTERVAL 1 HOUR - INTERVAL 1 MICROSECOND FROM rollup_hourly WHERE batch_id = ?",
            [batch_id]).fetchall()[0]
        sketch_rows = con.execute("SELECT count(*) FROM latency_hourly WHERE batch_id = ?",
                                  [batch_id]).fetchall()[0][0]
        if requests != manifest["rows"] or rollup_rows != manifest["rollup_rows"] \
                or sketch_rows != manifest["sketch_rows"]:
            raise InputError(f"{directory} holds {rollup_rows:,} rollup rows of {requests:,} requests and "
                             f"{sketch_rows:,} sketch rows; its manifest says {manifest['rollup_rows']:,}, "
                             f"{manifest['rows']:,} and {manifest['sketch_rows']:,}: a partial copy? Nothing attached")
        store.refresh_resolution(con)
        options = json.dumps({"dataset": manifest.get("dataset"), "spark_version": manifest.get("spark_version"),
                              "written_at": manifest.get("written_at")}, sort_keys=True)
        con.execute("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [batch_id, directory, run_id, OUTPUT_FORMAT, options, requests, 0, 0, 0,
                     datetime.now(UTC).replace(tzinfo=None), lo, hi])
        store.bump_data_version(con)
    return AttachResult(directory, batch_id, run_id, int(requests), int(rollup_rows), int(sketch_rows))
