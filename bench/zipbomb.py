"""Issue 17's acceptance figure: a ~5 MB archive that expands to ~5 GB is refused within 5 s with under
100 MB written.

Builds the archives in a temporary folder (zipfile streaming zeros, so building never holds them in
memory), then loads each with ``finops.ingest.ingest_path`` in a fresh process into an empty store and
prints the time to the refusal, the bytes that process wrote (``wchar`` of ``/proc/self/io``: every byte
passed to ``write``, the store's own included) and the message. Shapes:

* ``one-member``: a single 5 GiB member (one ratio check refuses it);
* ``many-small``: 5,120 members of 1 MiB each (each under the per-member ratio threshold: the archive's
  whole expansion has to be judged);
* ``under-total``: 3,900 members of 1 MiB (3.8 GiB, under the 4 GiB total cap: only a ratio over the
  whole archive refuses it);
* ``gzip``: a ``.csv.gz`` of 5 GiB of zeros (no extraction: the reader streams it).

    python bench/zipbomb.py [--only one-member,gzip] [--keep DIR]
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
ZEROS = b"\0" * MIB

CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from finops import store
from finops.errors import InputError
from finops.ingest import ingest_path

def wchar():
    for line in open("/proc/self/io"):
        if line.startswith("wchar:"):
            return int(line.split()[1])

con = store.connect(sys.argv[2])
w0, t0 = wchar(), time.perf_counter()
try:
    ingest_path(con, sys.argv[1])
    outcome = "loaded"
except InputError as exc:
    outcome = "refused: " + str(exc)
print(json.dumps({{"s": time.perf_counter() - t0, "written": wchar() - w0, "outcome": outcome,
                  "rows": store.row_count(con)}}))
"""


def _zip(path: Path, members: int, mib_each: int) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for i in range(members):
            with zf.open(f"part{i:05d}.csv", "w", force_zip64=mib_each * MIB >= (1 << 31)) as out:
                for _ in range(mib_each):
                    out.write(ZEROS)
    return path


def _gzip(path: Path, mib: int) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as out:
        for _ in range(mib):
            out.write(ZEROS)
    return path


SHAPES = {
    "one-member": ("bomb_one.zip", lambda p: _zip(p, 1, 5 * 1024), 5 * 1024 * MIB),
    "many-small": ("bomb_many.zip", lambda p: _zip(p, 5 * 1024, 1), 5 * 1024 * MIB),
    "under-total": ("bomb_under.zip", lambda p: _zip(p, 3900, 1), 3900 * MIB),
    "gzip": ("bomb.csv.gz", lambda p: _gzip(p, 5 * 1024), 5 * 1024 * MIB),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SHAPES), help="comma-separated shapes: " + ", ".join(SHAPES))
    ap.add_argument("--keep", help="build (or reuse) the archives in this folder instead of a temporary one")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="finops-bench-bomb-") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"{'shape':<12} {'archive':>10} {'expands to':>12} {'refused in':>11} {'written':>12}  outcome")
        for shape in args.only.split(","):
            name, build, expanded = SHAPES[shape]
            path = folder / name
            if not path.exists():
                build(path)
            db = Path(tmp) / f"{shape}.duckdb"
            out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), str(path), str(db)],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{shape:<12} {path.stat().st_size / 1e6:>8.1f} MB {expanded / 1e9:>9.2f} GB "
                  f"{r['s']:>9.2f} s {r['written'] / 1e6:>9.1f} MB  {r['outcome'][:110]} (rows stored: {r['rows']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
