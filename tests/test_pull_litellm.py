"""``pull litellm``: LiteLLM_SpendLogs read from a real PostgreSQL on 127.0.0.1, incrementally and resumably.

The server is Debian's PostgreSQL 15 (``initdb`` + ``pg_ctl`` in a temporary folder, password auth on TCP);
the table is made by LiteLLM's own migrations (``tests/data/litellm/migrations``: litellm-proxy-extras 0.2.11,
as LiteLLM 1.74.9 ships them; the baseline alone is LiteLLM 1.65's table) and filled with the rows LiteLLM's
own code wrote (``tests/data/litellm/spendlogs_v1_74.csv``, see tests/data/README.md), plus copies of them
under new ids and times.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest

from helpers import ROOT, free_port

psycopg = pytest.importorskip("psycopg")

DATA = ROOT / "tests" / "data" / "litellm"
MIGRATIONS = sorted((DATA / "migrations").glob("2*/migration.sql"))
PASSWORD = "s3cret-pg-pass"


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(dirs[-1]).parent if dirs else None


class Postgres:
    def __init__(self, root: Path, port: int, bindir: Path):
        self.root, self.port, self.bindir = root, port, bindir

    def dsn(self, db: str, password: str | None = PASSWORD) -> str:
        auth = f"postgres:{password}" if password is not None else "postgres"
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def connect(self, db: str = "postgres"):
        return psycopg.connect(self.dsn(db), autocommit=True)


def _run_as_postgres(cmd: list[str]) -> None:
    if os.geteuid() == 0:               # initdb refuses root: run as Debian's postgres user
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def pg():
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries not installed (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="finops-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    (root / "pw").write_text(PASSWORD + "\n")
    port = free_port()
    _run_as_postgres([str(bindir / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth-local=trust",
                      "--auth-host=scram-sha-256", f"--pwfile={root / 'pw'}"])
    _run_as_postgres([str(bindir / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "log"), "-w", "-o",
                      f"-k {root} -c listen_addresses=127.0.0.1 -p {port} -c fsync=off", "start"])
    try:
        yield Postgres(root, port, bindir)
    finally:
        _run_as_postgres([str(bindir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


def _litellm_db(pg: Postgres, name: str, migrations: list[Path], csv: Path) -> None:
    with pg.connect() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    with pg.connect(name) as c:
        for m in migrations:
            c.execute(m.read_text())
        with c.cursor().copy('COPY "LiteLLM_SpendLogs" FROM STDIN WITH (FORMAT csv, HEADER)') as copy:
            copy.write(csv.read_bytes())


def _clone(pg: Postgres, db: str, suffix: str, minutes: float) -> None:
    """Every row again under a new id, its times moved by ``minutes`` (0: the same startTime, a tie)."""
    with pg.connect(db) as c:
        c.execute('CREATE TEMP TABLE t AS SELECT * FROM "LiteLLM_SpendLogs" WHERE request_id !~ %s',
                  ["-(tie|k1|late|c[0-9]+)$"])
        c.execute("UPDATE t SET request_id = request_id || %s, \"startTime\" = \"startTime\" + %s, "
                  "\"endTime\" = \"endTime\" + %s, \"completionStartTime\" = \"completionStartTime\" + %s",
                  [suffix] + [timedelta(minutes=minutes)] * 3)
        c.execute('INSERT INTO "LiteLLM_SpendLogs" SELECT * FROM t')


def _pg_order(pg: Postgres, db: str) -> list[str]:
    with pg.connect(db) as c:
        return [r[0] for r in c.execute('SELECT request_id FROM "LiteLLM_SpendLogs" '
                                        'ORDER BY "startTime", request_id').fetchall()]


def _pg_ids(pg: Postgres, db: str) -> list[str]:
    with pg.connect(db) as c:
        return sorted(r[0] for r in c.execute('SELECT request_id FROM "LiteLLM_SpendLogs"').fetchall())


def _store_ids(con) -> list[str]:
    """The ids as LiteLLM logged them: its failed call's ``"None"`` (str(None)) is stored under a content
    hash, the logged text kept in attrs."""
    return sorted(r[0] for r in con.execute(
        "SELECT coalesce(json_extract_string(attrs, '$.request_id_logged'), request_id) FROM requests").fetchall())


class Crash(Exception):
    pass


def test_pull_interrupted_and_restarted_loads_every_row_once(pg, tmp_path):
    from finops import store
    from finops.ingest import pulls

    _litellm_db(pg, "litellm", MIGRATIONS, DATA / "spendlogs_v1_74.csv")
    _clone(pg, "litellm", "-tie", 0)            # the same startTimes: pages split ties by request_id
    _clone(pg, "litellm", "-k1", 60)
    ids = _pg_ids(pg, "litellm")
    assert len(ids) == 18
    con = store.connect(str(tmp_path / "s.duckdb"))

    def crash_on_third(page, result):
        assert result.rows_read == 2
        if page == 3:
            raise Crash("killed after page 3 was committed, before its cursor was stored")

    with pytest.raises(Crash):
        pulls.pull_litellm(con, pg.dsn("litellm"), page_size=2, on_page=crash_on_third)
    assert len(_store_ids(con)) == 6            # three pages committed
    ident = f"litellm postgresql://postgres@127.0.0.1:{pg.port}/litellm"
    after_two = pulls.cursor(con, "litellm", ident)
    order = _pg_order(pg, "litellm")
    assert after_two["request_id"] == order[3]  # page 2's last row: page 3 committed, its cursor not stored

    result = pulls.pull_litellm(con, pg.dsn("litellm"), page_size=2)
    assert _store_ids(con) == ids               # every row, once
    assert con.execute("SELECT count(*) - count(DISTINCT request_id) FROM requests").fetchall()[0][0] == 0
    assert result.rows_ingested == 12
    # the restart re-read the page whose cursor was never stored: its rows were skipped, not doubled
    assert result.duplicates_skipped >= 2
    assert result.cursor["request_id"] == order[-1]

    # nothing new: a pull reads the overlap again and adds nothing
    again = pulls.pull_litellm(con, pg.dsn("litellm"), page_size=2)
    assert again.rows_ingested == 0 and _store_ids(con) == ids

    # a row LiteLLM wrote late (its request started before the cursor, within the overlap) and a new one
    _clone(pg, "litellm", "-late", 55)
    late = pulls.pull_litellm(con, pg.dsn("litellm"), page_size=4)
    assert late.rows_ingested == 6 and _store_ids(con) == _pg_ids(pg, "litellm")

    # the rows went through the litellm adapter: LiteLLM's real shapes read as ever
    row = con.execute("SELECT model, provider, tenant, cached_input_tokens, cache_hit, status FROM requests "
                      "WHERE request_id = 'chatcmpl-279706369277'").fetchall()[0]
    assert row == ("gpt-4o-mini", "openai", "team-search", 1024, None, "ok")   # cache_hit "None": no lookup
    hit = con.execute("SELECT cache_hit, cost_usd FROM requests WHERE request_id LIKE "
                      "'chatcmpl-279706369277_cache_hit%-tie'").fetchall()
    assert [(h, float(c)) for h, c in hit] == [(True, 0.0)]
    assert con.execute("SELECT count(*) FROM requests WHERE status = 'error'").fetchall()[0][0] == 4
    assert con.execute("SELECT count(DISTINCT batch_id) FROM requests").fetchall()[0][0] >= 9


def test_pull_litellm_1_65_table(pg, tmp_path):
    """LiteLLM 1.65's table (the baseline migration: no session_id, status, proxy_server_request)."""
    from finops import store
    from finops.ingest import pulls

    _litellm_db(pg, "litellm_v1_65", MIGRATIONS[:1], DATA / "spendlogs_v1_65.csv")
    con = store.connect(str(tmp_path / "s.duckdb"))
    result = pulls.pull_litellm(con, pg.dsn("litellm_v1_65"), page_size=4)
    assert result.rows_ingested == 6 and _store_ids(con) == _pg_ids(pg, "litellm_v1_65")
    assert con.execute("SELECT count(*) FROM requests WHERE status = 'error'").fetchall()[0][0] == 1


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "finops", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_cli_password_from_pgpassword_and_never_printed(pg, tmp_path):
    with pg.connect() as c:
        exists = c.execute("SELECT 1 FROM pg_database WHERE datname = 'litellm_cli'").fetchall()
    if not exists:
        _litellm_db(pg, "litellm_cli", MIGRATIONS, DATA / "spendlogs_v1_74.csv")
    db = str(tmp_path / "cli.duckdb")
    ok = _cli("pull", "litellm", "--dsn", pg.dsn("litellm_cli", password=None), "--page-size", "4", "--db", db,
              env={"PGPASSWORD": PASSWORD})
    assert ok.returncode == 0, ok.stderr
    assert "6 ingested" in ok.stdout and PASSWORD not in ok.stdout + ok.stderr
    again = _cli("pull", "litellm", "--dsn", pg.dsn("litellm_cli"), "--db", db, "--json")
    assert again.returncode == 0 and '"rows_ingested": 0' in again.stdout and PASSWORD not in again.stdout

    wrong = _cli("pull", "litellm", "--dsn", pg.dsn("litellm_cli", password="not-the-password"), "--db", db)
    assert wrong.returncode == 1
    assert wrong.stderr.count("\n") == 1 and "refused the password" in wrong.stderr
    assert "not-the-password" not in wrong.stderr + wrong.stdout

    no_table = _cli("pull", "litellm", "--dsn", pg.dsn("postgres"), "--db", db)
    assert no_table.returncode == 1 and "no LiteLLM_SpendLogs table" in no_table.stderr
    assert no_table.stderr.count("\n") == 1


def test_cli_killed_mid_pull_and_run_again_loads_every_row_once(pg, tmp_path):
    """The real thing: the CLI process is SIGKILLed while it pulls (after its third page is committed, in the
    middle of a later one), then run again on the same store."""
    import signal

    from finops import store

    _litellm_db(pg, "litellm_kill", MIGRATIONS, DATA / "spendlogs_v1_74.csv")
    for k in range(1, 30):
        _clone(pg, "litellm_kill", f"-c{k}", k)
    ids = _pg_ids(pg, "litellm_kill")
    assert len(ids) == 180
    db = str(tmp_path / "kill.duckdb")
    args = [sys.executable, "-m", "finops", "pull", "litellm", "--dsn", pg.dsn("litellm_kill"), "--page-size", "1",
            "--verbose", "--db", db]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if line.startswith("page 3 committed"):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    con = store.connect(db)
    loaded = _store_ids(con)
    assert 3 <= len(loaded) < len(ids) and len(set(loaded)) == len(loaded)
    con.close()
    again = _cli("pull", "litellm", "--dsn", pg.dsn("litellm_kill"), "--page-size", "50", "--db", db)
    assert again.returncode == 0, again.stderr
    con = store.connect(db)
    assert _store_ids(con) == ids
    assert con.execute("SELECT count(*) - count(DISTINCT request_id) FROM requests").fetchall()[0][0] == 0
