"""Every store problem is a sentence (issue 16 item 5): a store held by another process, a file that is no
store, on the CLI (exit 1, one line) and on a page (an error box, no traceback). The lock is held by a real
second Python process, as the dashboard or a load would hold it."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from finops import store
from helpers import ROOT, run_page

HOLD = """
import sys, time
from finops import store
con = store.connect(sys.argv[1])
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture()
def held_store(tmp_path):
    path = tmp_path / "held.duckdb"
    store.connect(str(path)).close()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield path, proc.pid
    proc.kill()
    proc.wait()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "finops", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_store_held_by_another_process_is_a_sentence_on_the_cli(held_store):
    path, pid = held_store
    for args in (["report", "--db", str(path)], ["latency", "--db", str(path)],
                 ["ingest", str(ROOT / "tests" / "data" / "canonical_sample.csv"), "--db", str(path)]):
        started = time.monotonic()
        done = _cli(*args)
        assert done.returncode == 1, (args, done.stderr)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        assert lines == [lines[0]] and lines[0].startswith("error: The store held.duckdb is in use by process "
                                                           f"{pid}"), done.stderr
        assert "Traceback" not in done.stderr and "IOException" not in done.stderr and str(path.parent) not in lines[0]
        assert time.monotonic() - started < 60


def test_a_store_held_by_another_process_is_a_sentence_on_a_page(held_store):
    path, pid = held_store
    at = run_page(str(path))
    assert not at.exception, [e.value for e in at.exception]
    (err,) = at.error
    assert "in use by process" in err.value and str(pid) in err.value and "Traceback" not in err.value


def test_a_file_that_is_no_store_is_a_sentence(tmp_path):
    bad = tmp_path / "notes.duckdb"
    bad.write_text("these are my notes, not a database\n" * 100)
    done = _cli("report", "--db", str(bad))
    assert done.returncode == 1 and "could not be opened as a finops store" in done.stderr
    assert "Traceback" not in done.stderr
    at = run_page(str(bad))
    assert not at.exception and "could not be opened as a finops store" in at.error[0].value
    assert bad.read_text().startswith("these are my notes")      # left as it was


@pytest.mark.parametrize("command", [["report"], ["ingest", str(ROOT / "tests" / "data" / "canonical_sample.csv")]])
def test_a_folder_given_as_the_store_is_said_to_be_one(tmp_path, capsys, command):
    # --db DIR/ (a trailing slash) read "error:  could not be opened as a finops store": the name was empty, and
    # a folder is not "maybe damaged"
    from finops.cli import main
    folder = tmp_path / "stores"
    folder.mkdir()
    assert main([*command, "--db", f"{folder}/"]) == 1
    assert capsys.readouterr().err == ("error: stores is a folder, not a store file: give the store's file with --db "
                                       "or FINOPS_DB (e.g. stores/finops.duckdb).\n")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", [["report"], ["ingest", str(ROOT / "tests" / "data" / "canonical_sample.csv")]])
def test_a_log_file_given_as_the_store_is_refused(tmp_path, capsys, command):
    # DuckDB opens a CSV or JSON file given as a database: --db requests.csv (the file meant to be loaded) read
    # "The store holds no requests yet", and an ingest into it said "4 ingested", exit 0, and stored nothing
    from finops.cli import main
    given = tmp_path / "requests.csv"
    given.write_bytes((ROOT / "tests" / "data" / "canonical_sample.csv").read_bytes())
    assert main([*command, "--db", str(given)]) == 1
    assert capsys.readouterr().err == ("error: requests.csv could not be opened as a finops store (it may not be a "
                                       "DuckDB file, or be damaged or unreadable): check the path given with --db or "
                                       "FINOPS_DB.\n")
    assert given.read_bytes() == (ROOT / "tests" / "data" / "canonical_sample.csv").read_bytes()
