"""Readers of the small files a person uploads or names on the command line, other than request logs.

* **Uploads as files** (:func:`upload_file`, :func:`read_upload`, :func:`save_upload`): the readers
  work on paths (DuckDB, the benchmark readers, pandas), so an upload's bytes are written to a file
  under the upload's own name first; error messages name the upload, not the temporary file.
* **The upload area** (:func:`session_folder`, :func:`sweep_uploads`, :func:`make_room`): the Data page
  keeps each session's uploads in its own folder under one area; a browser closed mid-upload leaves its
  folder behind, so folders idle longer than :data:`UPLOAD_MAX_IDLE_S` are swept (at app start and on
  each upload) and the area's bytes are bounded by :data:`UPLOAD_AREA_MAX_BYTES`.
* **Text CSVs** (:func:`read_text_csv`, :func:`read_csv`): a user's CSV, or a clear
  :class:`~finops.errors.InputError` naming the file.
* **Eval CSVs** (:func:`load_eval_csv`, :func:`eval_from_upload`, :func:`eval_csv_columns`,
  :func:`guess_mapping`, :func:`parse_mapping`): one row per query with the small and the large model's
  quality, optionally the small model's confidence (without it, no threshold to sweep) and per-query costs,
  as :class:`EvalData` for the cascade sweep (:mod:`finops.cascade.sweep`).
* **Threshold tables** (:func:`load_parametric_csv`): a hand-made tau table.
* **RTT samples** (:func:`load_rtt_samples`, :func:`rtt_samples_from_upload`): round-trip times in ms
  for the edge-versus-cloud policies (:mod:`finops.cascade.edge`).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from finops.errors import InputError

T = TypeVar("T")


# ---------------------------------------------------------------- uploads as files

def save_upload(data: bytes | memoryview, name: str, folder: str | Path) -> Path:
    """The upload written to ``folder`` under its own name (the last part of ``name`` only), once: a
    file already there is kept. Detection reads content, but DuckDB and pandas read ``.gz`` by the name."""
    path = Path(folder) / (Path(name).name or "upload")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


# ---------------------------------------------------------------- the upload area

#: a session's upload folder untouched for this long is abandoned (the page touches it on every run)
UPLOAD_MAX_IDLE_S = 2 * 3600
#: the upload area holds at most this many bytes, every session's folders together
#: ($FINOPS_UPLOAD_AREA_MAX_BYTES overrides)
UPLOAD_AREA_MAX_BYTES = 4 * 1024 ** 3
SESSION_PREFIX = "session-"


def upload_area() -> Path:
    """The one folder every session's upload folder lives in: ``$FINOPS_UPLOAD_DIR``, else
    ``finops-uploads`` in the system's temporary folder."""
    return Path(os.environ.get("FINOPS_UPLOAD_DIR") or Path(tempfile.gettempdir()) / "finops-uploads")


def session_folder(area: Path | None = None) -> Path:
    """A new, empty folder for one browser session's uploads."""
    area = area or upload_area()
    area.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=area))


def touch(folder: Path) -> None:
    """Mark a session's folder as in use now (it is swept once idle for :data:`UPLOAD_MAX_IDLE_S`)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.utime(folder)


def _usage(folder: Path) -> tuple[float, int]:
    """The newest modification time in ``folder`` (itself included) and the bytes its files hold."""
    newest, size = folder.stat().st_mtime, 0
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(root, name))
            except FileNotFoundError:        # removed meanwhile by its own session
                continue
            newest = max(newest, st.st_mtime)
            if name in files:
                size += st.st_size
    return newest, size


@dataclass(frozen=True)
class Sweep:
    """What :func:`sweep_uploads` found and removed."""

    removed: int             #: abandoned session folders deleted
    removed_bytes: int
    kept: int                #: session folders still in use
    kept_bytes: int          #: the bytes those hold: the area's size after the sweep


def sweep_uploads(area: Path | None = None, *, max_idle_s: float = UPLOAD_MAX_IDLE_S,
                  now: float | None = None) -> Sweep:
    """Delete the session folders of ``area`` idle for more than ``max_idle_s`` (nothing in them
    written or touched since): a browser that closed before its upload was loaded or removed."""
    area = area or upload_area()
    now = time.time() if now is None else now
    removed = removed_bytes = kept = kept_bytes = 0
    if not area.is_dir():
        return Sweep(0, 0, 0, 0)
    for folder in area.iterdir():
        if not folder.name.startswith(SESSION_PREFIX) or not folder.is_dir() or folder.is_symlink():
            continue
        try:
            newest, size = _usage(folder)
        except FileNotFoundError:
            continue
        if now - newest > max_idle_s:
            shutil.rmtree(folder, ignore_errors=True)
            removed, removed_bytes = removed + 1, removed_bytes + size
        else:
            kept, kept_bytes = kept + 1, kept_bytes + size
    return Sweep(removed, removed_bytes, kept, kept_bytes)


def area_limit() -> int:
    """The upload area's byte limit: ``$FINOPS_UPLOAD_AREA_MAX_BYTES``, else :data:`UPLOAD_AREA_MAX_BYTES`."""
    text = os.environ.get("FINOPS_UPLOAD_AREA_MAX_BYTES", "")
    return int(text) if text.isdigit() else UPLOAD_AREA_MAX_BYTES


def make_room(size: int, name: str, area: Path | None = None, *, max_bytes: int | None = None,
              max_idle_s: float = UPLOAD_MAX_IDLE_S) -> Sweep:
    """Before an upload of ``size`` bytes is written: sweep the abandoned folders, then refuse it (an
    :class:`InputError` naming the file) when the area would hold more than ``max_bytes`` (default
    :func:`area_limit`) or the disk has not the room. Live sessions' files are never deleted to make room."""
    area = area or upload_area()
    max_bytes = area_limit() if max_bytes is None else max_bytes
    swept = sweep_uploads(area, max_idle_s=max_idle_s)
    if swept.kept_bytes + size > max_bytes:
        raise InputError(f"the upload area is full: {size:,} more bytes would make {swept.kept_bytes + size:,}, "
                         f"more than the {max_bytes:,} allowed for every session's uploads together. Load or "
                         "remove the files already uploaded, or load this one from the command line "
                         "(python -m finops ingest PATH)", file=name)
    area.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(area).free
    if size > free:
        raise InputError(f"the server has {free:,} bytes of free disk for this {size:,}-byte upload: load it from "
                         "the command line (python -m finops ingest PATH)", file=name)
    return swept


@contextmanager
def upload_file(data: bytes, name: str) -> Iterator[Path]:
    """The upload as a file under its own name in a temporary folder, removed on leaving."""
    with tempfile.TemporaryDirectory(prefix="finops-upload-") as tmp:
        yield save_upload(data, name, tmp)


def read_upload(data: bytes, name: str, read: Callable[[Path], T]) -> T:
    """``read(path)`` on the upload written to a temporary file; error messages name the upload
    (``name``), not the temporary file."""
    with upload_file(data, name) as path:
        try:
            return read(path)
        except InputError as exc:       # the same error, its file the upload's name (row and field kept)
            file = name if exc.file == str(path) else exc.file
            raise InputError(exc.message.replace(f"file {path}", f"file {name}"), file=file, row=exc.row,
                             field=exc.field) from None


# ---------------------------------------------------------------- CSVs

def read_csv(path, **options) -> pd.DataFrame:
    """``pandas.read_csv(path, **options)``, or an InputError naming the file (missing, unreadable)."""
    try:
        return pd.read_csv(path, **options)
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a folder: give the CSV file", file=str(path)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable CSV ({exc})", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror}", file=str(path)) from None


def read_text_csv(path) -> pd.DataFrame:
    """A user's CSV with every cell as text (cells are checked by the caller), or a clear InputError."""
    return read_csv(path, dtype=str, keep_default_na=False)


def load_parametric_csv(path: str | Path) -> pd.DataFrame:
    """Read a hand-made tau table (columns ``threshold, escalation_rate, avg_quality``)
    for :func:`finops.cascade.sweep.parametric_curve`, which validates the values."""
    return read_csv(Path(path))


# ---------------------------------------------------------------- eval CSVs

@dataclass(frozen=True)
class EvalData:
    """Per-query evaluation data ready for :func:`finops.cascade.sweep.sweep`.

    ``cost_small``/``cost_large`` are per-query arrays when the file had cost
    columns, else ``None`` (use flat prices). ``confidence`` is ``None`` when the file has none (an eval of
    two models alone, as RouteLLM's): no threshold to sweep, only :func:`finops.cascade.sweep.baselines`.
    """

    confidence: np.ndarray | None
    small_quality: np.ndarray
    large_quality: np.ndarray
    cost_small: np.ndarray | None
    cost_large: np.ndarray | None
    source: str

    @property
    def n_queries(self) -> int:
        return int(self.small_quality.size)

    def per_1k_queries(self) -> EvalData:
        """The same data with its per-query costs in USD per 1,000 queries (the Cascade page's unit, as the store's
        shadow evaluation gives them); a file's cost columns are USD per query.

        >>> d = EvalData(None, np.array([1.0]), np.array([1.0]), np.array([0.002]), np.array([0.03]), "f")
        >>> d.per_1k_queries().cost_small.tolist(), d.per_1k_queries().cost_large.tolist()
        ([2.0], [30.0])
        """
        def scaled(cost):
            return None if cost is None else cost * 1000.0
        return replace(self, cost_small=scaled(self.cost_small), cost_large=scaled(self.cost_large))


MAPPING_KEYS: tuple[str, ...] = ("confidence", "small_quality", "large_quality", "cost_small", "cost_large")
#: an eval needs the two models' qualities; without a confidence it gives the baselines but no threshold
REQUIRED_KEYS: tuple[str, ...] = ("small_quality", "large_quality")
_BOOL_WORDS = {"true": 1.0, "false": 0.0, "t": 1.0, "f": 0.0, "yes": 1.0, "no": 0.0}


def mapping_pairs(text: str | list[str] | None, *, named: str = "mapping",
                  malformed: str = "mapping entry {part!r} is not KEY=COLUMN") -> dict[str, str]:
    """``KEY=COLUMN`` pairs, comma-separated, of one text or of each in a list (a flag given more than once:
    ``--map a=x --map b=y``). An entry without a key or a column is refused with ``malformed`` (``{part!r}`` the
    entry), a key given two different columns with ``named`` (the later one silently won)."""
    pairs: dict[str, str] = {}
    texts = [text] if isinstance(text, str) else (text or [])
    for part in (p.strip() for t in texts for p in t.split(",")):
        if not part:
            continue
        key, sep, col = (x.strip() for x in part.partition("="))
        if not sep or not key or not col:
            raise InputError(malformed.format(part=part), field="map")
        if pairs.get(key, col) != col:
            raise InputError(f"{named} gives {key} twice: {pairs[key]!r} and {col!r}", field="map")
        pairs[key] = col
    return pairs


def parse_mapping(text: str | list[str] | Mapping[str, str] | None) -> dict[str, str]:
    """``"confidence=conf,small_quality=mixtral"`` -> a dict (:func:`mapping_pairs`); the two qualities
    unmapped map to columns of their own names; the costs and the confidence only when given (a dict may give
    the confidence ``None``: no confidence column, even if the file has one named so).

    >>> parse_mapping("confidence=c, small_quality=s")["large_quality"]
    'large_quality'
    >>> sorted(parse_mapping({"small_quality": "s", "large_quality": "l", "confidence": None, "cost_small": None}).items())
    [('confidence', None), ('large_quality', 'l'), ('small_quality', 's')]
    """
    pairs = dict(text) if isinstance(text, Mapping) else mapping_pairs(text)
    unknown = sorted(set(pairs) - set(MAPPING_KEYS))
    if unknown:
        raise InputError(f"unknown mapping key(s) {unknown}; use {', '.join(MAPPING_KEYS)}", field="map")
    mapping = {k: pairs.get(k) or k for k in REQUIRED_KEYS}
    mapping.update({k: pairs[k] for k in MAPPING_KEYS if k not in REQUIRED_KEYS and pairs.get(k)})
    if "confidence" in pairs and not pairs["confidence"]:
        mapping["confidence"] = None
    return mapping


#: the largest magnitude of an eval's confidence, quality or cost (finops.cascade.sweep takes no larger): the
#: curve's sums over millions of queries stay finite (a cost of 1e308 a call averaged to inf)
MAX_ABS_VALUE = 1e12


def _parse_column(raw: pd.Series, *, file: str, key: str, column: str, cost: bool) -> np.ndarray:
    text = raw.astype(str).str.strip()
    lowered = text.str.lower()
    values = pd.to_numeric(text.where(~lowered.isin(_BOOL_WORDS.keys()), lowered.map(_BOOL_WORDS)),
                           errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) | ((values < 0) if cost else False) | (np.abs(values) > MAX_ABS_VALUE))
    if bad.size:
        i = int(bad[0])
        why = "is empty" if text.iloc[i] == "" else (
            "is not a finite number (or True/False)" if not np.isfinite(values[i]) else
            f"is past {MAX_ABS_VALUE:,.0f}" if abs(values[i]) > MAX_ABS_VALUE else "is a negative cost")
        raise InputError(f"{text.iloc[i]!r} {why} (column {column!r}, mapped to {key}); "
                         f"{bad.size} bad value(s) in this column", file=file, row=i + 1, field=column)
    return values + 0.0


def load_eval_csv(path: str | Path, mapping: str | list[str] | Mapping[str, str] | None = None) -> EvalData:
    """Read an eval CSV: one row per query, columns mapped by ``mapping``.

    ``mapping`` names the columns for ``small_quality`` and ``large_quality``
    (default: columns with those names) and optionally ``confidence`` (default:
    a column named so, if the file has one; else the eval has no confidence)
    and ``cost_small``/``cost_large`` (per-query costs, >= 0). Quality cells may
    be numbers or True/False. Rows are numbered from 1 = first data row in
    error messages, which name the file, row and column.
    """
    path = Path(path)
    cols = parse_mapping(mapping)
    frame = read_text_csv(path)
    if "confidence" not in cols and "confidence" in frame.columns:
        cols["confidence"] = "confidence"
    cols = {key: column for key, column in cols.items() if column is not None}
    if cols["small_quality"] == cols["large_quality"]:
        raise InputError(f"small_quality and large_quality are both column {cols['small_quality']!r}: map each model's "
                         "grades to its own column", file=str(path), field=cols["small_quality"])
    for key, column in cols.items():
        if column not in frame.columns:
            raise InputError(f"column {column!r} (for {key}) is not in the file; columns are "
                             f"{list(frame.columns)}. Map it with --map {key}=COLUMN", file=str(path), field=key)
    if frame.empty:
        raise InputError("the file has a header but no rows", file=str(path))
    data = {key: _parse_column(frame[column], file=str(path), key=key, column=column,
                               cost=key.startswith("cost_")) for key, column in cols.items()}
    return EvalData(data.get("confidence"), data["small_quality"], data["large_quality"],
                    data.get("cost_small"), data.get("cost_large"), str(path))


def eval_csv_columns(data: bytes) -> list[str]:
    """Column names of an uploaded CSV (its header), for the mapping form."""
    import io

    try:
        return [str(c) for c in pd.read_csv(io.BytesIO(data), nrows=0).columns]
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable CSV ({exc})") from None


def guess_mapping(columns) -> dict[str, str | None]:
    """Mapping key -> the column with that name, or one that contains it (else None)."""
    cols = list(columns)
    hints = {"confidence": ("confidence", "conf"), "small_quality": ("small",), "large_quality": ("large",)}
    out: dict[str, str | None] = {}
    for key in MAPPING_KEYS:
        exact = [c for c in cols if c.lower() == key]
        fuzzy = [c for c in cols if any(h in c.lower() for h in hints[key])] if key in hints else []
        out[key] = (exact or fuzzy or [None])[0]
    return out


def eval_from_upload(data: bytes, name: str, mapping: Mapping[str, str]) -> EvalData:
    """An uploaded eval CSV read by :func:`load_eval_csv` with ``mapping``.

    Qualities must be shares between 0 and 1 (0/1 correctness, or a score scaled to 0-1), the
    unit of the cascade page's quality axes; a column outside that range is most likely the wrong one.
    """
    loaded = read_upload(data, name, lambda path: load_eval_csv(path, dict(mapping)))
    for key in ("small_quality", "large_quality"):
        values = getattr(loaded, key)
        bad = np.flatnonzero((values < 0) | (values > 1))
        if bad.size:
            raise InputError(f"{values[bad[0]]:g} is not a share between 0 and 1: map {key} to a 0/1 correctness "
                             "column, or scale scores to 0-1", file=name, row=int(bad[0]) + 1,
                             field=str(mapping.get(key, key)))
    return replace(loaded, source=name)


def concat_evals(parts: list[EvalData], source: str) -> EvalData:
    """Evals of the same two models read from several files (RouteLLM's MMLU eval is one file per subject) as
    one: a confidence or a per-query cost only where every file has it."""
    if not parts:
        raise InputError("no eval file given")
    if len(parts) == 1:
        return replace(parts[0], source=source)

    def joined(key: str) -> np.ndarray | None:
        arrays = [getattr(part, key) for part in parts]
        return None if any(a is None for a in arrays) else np.concatenate(arrays)

    return EvalData(joined("confidence"), joined("small_quality"), joined("large_quality"), joined("cost_small"),
                    joined("cost_large"), source)


def files_label(names: list[str]) -> str:
    """``a.csv`` or ``3 files (a.csv, b.csv, c.csv)``, the first few named."""
    if len(names) == 1:
        return names[0]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
    return f"{len(names):,} files ({shown})"


# ---------------------------------------------------------------- RTT samples

def load_rtt_samples(path, column: str | None = None, *, max_ms: float) -> np.ndarray:
    """RTT samples in ms from a CSV: ``column``, else a column named ``rtt_ms``, else the
    only column; each from 0 to ``max_ms``. Errors name the file, row (1 = first data row) and column."""
    path = Path(path)
    frame = read_text_csv(path)
    if column is None:
        column = "rtt_ms" if "rtt_ms" in frame.columns else (frame.columns[0] if len(frame.columns) == 1 else None)
    if column is None or column not in frame.columns:
        raise InputError(f"name the RTT column (ms); columns are {list(frame.columns)}", file=str(path),
                         field=column or "rtt_ms")
    values = pd.to_numeric(frame[column].str.strip(), errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > max_ms))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{frame[column].iloc[i]!r} is not an RTT in ms (a number from 0 to {max_ms:,.0f})",
                         file=str(path), row=i + 1, field=column)
    if values.size == 0:
        raise InputError("no RTT samples in the file", file=str(path))
    return values


def rtt_samples_from_upload(data: bytes, name: str, column: str | None = None, *, max_ms: float) -> np.ndarray:
    """Uploaded RTT samples (ms) read by :func:`load_rtt_samples`."""
    return read_upload(data, name, lambda path: load_rtt_samples(path, column, max_ms=max_ms))
