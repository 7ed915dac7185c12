"""The CLI: exit codes, JSON shapes, quoting, and report totals recomputed independently from raw rows."""
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from finops import store
from finops.cli import build_parser, main
from helpers import DATA, ROOT

BAD_TENANT = "o'brien\"; DROP TABLE requests; --"


def cli(*args, db=None):
    cmd = [sys.executable, "-m", "finops", *args] + (["--db", str(db)] if db else [])
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_every_command_and_option_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) >= 3
    for name, p in sub.choices.items():
        assert p.description, name
        for action in p._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.dest} has no help text"


COURSE_WORDS = re.compile(r"\bseed\b|\bseed's|\bsection \d|\b(routing|deployment|course) text|(?<![.,\d])00\d\b|000_|"
                          r"\.txt\b|exercise|worked (problem|example)|problems? \d of", re.IGNORECASE)


def _help_texts() -> dict[str, str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out = {}
    for name, p in sub.choices.items():
        out[name] = p.description or ""
        for action in p._actions:
            if action.help and action.dest != "seed":      # --seed is a random seed: the word is its name
                out[f"{name} {action.dest}"] = action.help
    return out


def test_no_help_text_names_the_documents_the_product_was_designed_from():
    named = {k: v for k, v in _help_texts().items() if COURSE_WORDS.search(v)}
    assert named == {}


def test_until_includes_the_day_like_the_dashboards_to():
    """``--until 2026-11-30`` is the sidebar's To = 2026-11-30: the whole day, SQL end 2026-12-01 00:00."""
    from datetime import date, datetime

    from finops.commands._common import filters_from
    from finops.filters import filters_for

    args = build_parser().parse_args(["report", "--since", "2026-11-17", "--until", "2026-11-30"])
    assert filters_from(args) == filters_for(date(2026, 11, 17), date(2026, 11, 30))
    assert filters_from(args).until == datetime(2026, 12, 1)
    one_day = build_parser().parse_args(["report", "--since", "2026-11-30", "--until", "2026-11-30"])
    assert filters_from(one_day).until - filters_from(one_day).since == datetime(2026, 12, 1) - datetime(2026, 11, 30)
    instant = build_parser().parse_args(["report", "--until", "2026-11-30T12:00:00"])
    assert filters_from(instant).until == datetime(2026, 11, 30, 12)     # a time of day: that instant, excluded


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for name in ("ingest", "report", "demo"):
        assert name in out


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["report", "--by"])
    assert e.value.code == 2


@pytest.mark.parametrize("argv, message", [
    (["report", "--until", "9999-12-31"], "argument --until: '9999-12-31' is outside the years 1900 to 2999"),
    (["alerts", "--since", "0001-01-01"], "argument --since: '0001-01-01' is outside the years 1900 to 2999"),
    (["report", "--since", "2026-13-01"], "argument --since: '2026-13-01' is not an ISO date and time"),
])
def test_a_time_datetime_cannot_take_a_window_of_is_a_usage_error(capsys, argv, message):
    """``--until 9999-12-31`` (a day is added to include it) and ``alerts --since 0001-01-01`` (its spend
    baseline starts days before) stopped with OverflowError's traceback."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_tenant_with_sql_in_its_name_round_trips(tmp_path):
    db = tmp_path / "s.duckdb"
    r = cli("ingest", str(DATA / "azure_code_excerpt.csv"), "--map",
            "ts=TIMESTAMP,input_tokens=ContextTokens,output_tokens=GeneratedTokens", "--model", "gpt-4o",
            "--tenant", BAD_TENANT, "--json", db=db)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {k: out[k] for k in ("rows_read", "rows_ingested", "rows_rejected", "duplicates_skipped")} == {
        "rows_read": 500, "rows_ingested": 500, "rows_rejected": 0, "duplicates_skipped": 0}
    r = cli("report", "--by", "model,tenant", "--tenant", BAD_TENANT, "--json", db=db)
    assert r.returncode == 0, r.stderr
    [row] = json.loads(r.stdout)
    assert row["tenant"] == BAD_TENANT and row["requests"] == 500
    assert set(row) == {"model", "tenant", "requests", "input_tokens", "output_tokens", "cached_input_tokens",
                        "cache_write_tokens", "reasoning_tokens", "served_tokens", "cost_usd", "cost_per_1m_tokens",
                        "error_rate"}


def test_map_repeated_is_one_mapping_and_a_field_mapped_twice_is_refused(tmp_path):
    """``--map`` given once per field: every pair counts (argparse kept only the last, so the file's time was
    "missing" on every row), the same as one comma-separated ``--map``; a field given two columns is refused."""
    db = tmp_path / "s.duckdb"
    r = cli("ingest", str(DATA / "azure_code_excerpt.csv"), "--map", "ts=TIMESTAMP", "--map",
            "input_tokens=ContextTokens", "--map", "output_tokens=GeneratedTokens", "--model", "m", "--json", db=db)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["rows_ingested"], out["rows_rejected"]) == (500, 0)
    con = store.connect(str(db), read_only=True)
    raw = pd.read_csv(DATA / "azure_code_excerpt.csv")
    assert con.execute("SELECT sum(input_tokens), sum(output_tokens) FROM requests").fetchall()[0] == (
        raw["ContextTokens"].sum(), raw["GeneratedTokens"].sum())
    con.close()
    r = cli("ingest", str(DATA / "azure_code_excerpt.csv"), "--map", "ts=TIMESTAMP,input_tokens=ContextTokens",
            "--map", "input_tokens=GeneratedTokens", "--model", "m", db=tmp_path / "t.duckdb")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "field map: --map gives input_tokens twice: 'ContextTokens' and 'GeneratedTokens'" in r.stderr
    assert not (tmp_path / "t.duckdb").exists() or store.row_count(store.connect(str(tmp_path / "t.duckdb"))) == 0


def test_bad_file_exits_1_and_leaves_store(tmp_path):
    db = tmp_path / "s.duckdb"
    cli("ingest", str(DATA / "azure_code_excerpt.csv"), "--map", "ts=TIMESTAMP", "--model", "m", db=db)
    bad = tmp_path / "cut.jsonl"
    bad.write_text('{"ts": "2026-01-01 00:00:00", "model": "a", "tenant": "x"}\n{"ts": "2026-')
    r = cli("ingest", str(bad), db=db)
    assert r.returncode == 1 and "cut.jsonl" in r.stderr and "truncated" in r.stderr
    assert "Traceback" not in r.stderr
    con = store.connect(str(db), read_only=True)
    assert store.row_count(con) == 500
    con.close()


def test_a_refused_file_among_several_is_said_and_the_others_still_load(tmp_path):
    """``ingest a b c`` stopped at the first refused file: the files after it were never loaded and the ones
    before it (committed) were never reported. Now each file's line is printed as it is done, a refused file is
    an error line, the rest load, and the exit code is 1; --json lists the errors."""
    db = tmp_path / "s.duckdb"
    canonical = str(DATA / "canonical_sample.csv")
    other = tmp_path / "more.jsonl"
    other.write_text('{"request_id": "m1", "ts": "2026-11-20T10:00:00Z", "model": "gpt-4o", "input_tokens": 7}\n')
    r = cli("ingest", canonical, str(tmp_path / "nope.csv"), str(other), db=db)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        "canonical_sample.csv [canonical]: 4 read, 4 ingested, 0 rejected, 0 duplicates skipped",
        "more.jsonl [canonical]: 1 read, 1 ingested, 0 rejected, 0 duplicates skipped"]
    assert r.stderr.splitlines() == [f"error: file {tmp_path / 'nope.csv'}: no such file",
                                     "1 of 3 files refused: the others are loaded"]
    con = store.connect(str(db), read_only=True)
    assert store.row_count(con) == 5
    con.close()
    again = cli("ingest", canonical, str(tmp_path / "nope.csv"), "--json", db=db)
    out = json.loads(again.stdout)
    assert again.returncode == 1 and out["rows_ingested"] == 0 and out["duplicates_skipped"] == 4
    assert out["errors"] == [{"file": str(tmp_path / "nope.csv"), "error": f"file {tmp_path / 'nope.csv'}: no such file"}]


def test_a_file_whose_every_row_is_rejected_exits_1_saying_nothing_loaded(tmp_path):
    """A file read the wrong way (here the Azure trace forced as LiteLLM) rejected all its rows and exited 0."""
    db = tmp_path / "s.duckdb"
    r = cli("ingest", str(DATA / "azure_code_excerpt.csv"), "--format", "litellm", db=db)
    assert r.returncode == 1
    assert r.stdout == "azure_code_excerpt.csv [litellm]: 500 read, 0 ingested, 500 rejected, 0 duplicates skipped\n"
    assert r.stderr.splitlines()[-1] == (
        "error: file azure_code_excerpt.csv: every row was rejected, nothing loaded (read as litellm: see the reasons "
        "above; --format picks another reading, --map maps its columns)")
    ok = cli("ingest", str(DATA / "azure_code_excerpt.csv"), "--map", "ts=TIMESTAMP", "--model", "m", db=db)
    assert ok.returncode == 0 and "500 ingested" in ok.stdout


def _independent_costs(con) -> pd.DataFrame:
    """Per (model, tenant) cost from raw rows and the price book, in pandas, without finops' SQL."""
    raw = con.execute("SELECT * FROM requests").df()
    prices = con.execute("SELECT * FROM prices").df().set_index("model")
    raw["hour"] = raw["ts"].dt.floor("h")
    cost = pd.Series(0.0, index=raw.index)
    api = raw["model"].map(prices["kind"]).fillna("api") == "api"
    p = prices.reindex(raw["model"]).reset_index(drop=True)
    p.index = raw.index
    inp, cached, out = (raw[c].fillna(0).astype(float) for c in ("input_tokens", "cached_input_tokens",
                                                                   "output_tokens"))
    token = ((inp - cached).clip(lower=0) * p["input_usd_per_1m"].fillna(0)
             + cached * p["cached_input_usd_per_1m"].fillna(p["input_usd_per_1m"]).fillna(0)
             + out * p["output_usd_per_1m"].fillna(0)) / 1e6 + p["request_usd"].fillna(0)
    hit = raw["cache_hit"].fillna(False).astype(bool)
    recorded = raw["cost_usd"]
    cost[api] = np.where(recorded[api].notna(), recorded[api], np.where(hit[api], 0.0, token[api]))
    # self-hosted: allocate utilisation x fleet cost by busy time; idle is the rest of every paid hour, from the
    # model's first to its last hour of served traffic (no schedule declared)
    busy = raw["service_ms"].fillna(raw["prefill_ms"] + raw["decode_ms"]).fillna(
        raw["total_ms"] - raw["queue_ms"].fillna(0) - raw["route_ms"].fillna(0)).fillna(0)
    busy[hit] = 0.0
    raw["busy"] = busy
    idle_rows = []
    for model, pr in prices[prices["kind"] == "self_hosted"].iterrows():
        mine = raw["model"] == model
        if not mine.any():
            continue
        served = raw.loc[mine & ~hit, "hour"]
        hours = pd.date_range(served.min(), served.max(), freq="h")
        fleet = pr.replicas * pr.gpus_per_replica * pr.gpu_hour_usd
        capacity = pr.replicas * pr.slots_per_replica * 3.6e6
        per_hour = raw[mine].groupby("hour")["busy"].sum().reindex(hours, fill_value=0.0)
        util = (per_hour / capacity).clip(upper=1.0)
        allocated = fleet * util
        share = raw.loc[mine, "busy"] / raw.loc[mine, "hour"].map(per_hour)
        cost[mine] = (raw.loc[mine, "cost_usd"].fillna(0)
                      + share.fillna(0) * raw.loc[mine, "hour"].map(allocated))
        idle_rows.append({"model": model, "tenant": "(idle capacity)", "cost_usd": float((fleet - allocated).sum())})
    raw["cost"] = cost
    got = raw.groupby(["model", "tenant"]).agg(requests=("model", "size"), cost_usd=("cost", "sum"),
                                               input_tokens=("input_tokens", "sum")).reset_index()
    return pd.concat([got, pd.DataFrame(idle_rows)], ignore_index=True)


def test_demo_report_matches_an_independent_recomputation(demo_db, tmp_path):
    # the CLI is another process: it gets its own copy, since a page test in this one may hold the shared store
    own = tmp_path / "demo_cli.duckdb"
    shutil.copy(demo_db, own)
    demo_db = str(own)
    r = cli("report", "--by", "model,tenant", "--json", db=demo_db)
    assert r.returncode == 0, r.stderr
    rep = pd.DataFrame(json.loads(r.stdout))
    con = store.connect(demo_db)       # read-write, as a page test in this process may hold it open already
    ref = _independent_costs(con)
    con.close()
    merged = rep.merge(ref, on=["model", "tenant"], how="outer", suffixes=("", "_ref"), indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"]
    assert rep["requests"].sum() == ref["requests"].sum() > 0
    np.testing.assert_allclose(merged["cost_usd"], merged["cost_usd_ref"], rtol=1e-9, atol=1e-6)
    assert len(rep["model"].unique()) >= 4 and len(rep["tenant"].unique()) >= 7   # 6+ tenants and the idle line


def test_a_filter_flag_repeated_adds_to_the_filter(demo_db, tmp_path, capsys):
    """``--tenant a --tenant b`` reports a and b, as ``--tenant a,b`` does (argparse kept only b: one tenant's
    spend shown as the two asked for); the same for --model and --sla-tier."""
    own = tmp_path / "demo_cli.duckdb"
    shutil.copy(demo_db, own)
    con = store.connect(str(own), read_only=True)
    tenants = [t for (t,) in con.execute("SELECT DISTINCT tenant FROM requests ORDER BY tenant LIMIT 2").fetchall()]
    models = [m for (m,) in con.execute("SELECT model FROM requests WHERE tenant IN (?, ?) GROUP BY model "
                                        "ORDER BY count(*) DESC, model LIMIT 2", tenants).fetchall()]
    expected = con.execute("SELECT count(*) FROM requests WHERE tenant IN (?, ?) AND model IN (?, ?)",
                           [*tenants, *models]).fetchall()[0][0]
    con.close()

    def report(*argv):
        assert main(["report", "--by", "model,tenant", "--no-idle", "--json", "--db", str(own), *argv]) == 0
        return sorted(json.loads(capsys.readouterr().out), key=lambda r: (r["model"], r["tenant"]))

    joined = report("--tenant", ",".join(tenants), "--model", ",".join(models))
    repeated = report("--tenant", tenants[0], "--tenant", tenants[1], "--model", models[0], "--model", models[1])
    assert repeated == joined
    assert {r["model"] for r in repeated} == set(models) and {r["tenant"] for r in repeated} <= set(tenants)
    assert sum(r["requests"] for r in repeated) == expected > 0


@pytest.mark.parametrize("command", [["report"], ["latency"], ["diagnose"], ["incidents"], ["alerts"],
                                     ["plan", "--model", "m"], ["billing", "show"], ["fleet", "show"],
                                     ["fleet", "infer"], ["prices", "list"], ["prices", "show", "gpt-4o"]])
def test_a_command_that_reads_a_store_that_is_not_there_says_so_and_makes_none(tmp_path, capsys, command):
    """A mistyped ``--db`` made an empty store at that path and read "no requests yet" from it."""
    db = tmp_path / "typo.duckdb"
    assert main([*command, "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: file {db}: no store at this path: load requests into it with python -m finops "
                          f"ingest FILE --db {db}")
    assert list(tmp_path.iterdir()) == []


def test_a_period_that_ends_before_it_starts_is_refused(demo_db, tmp_path, capsys):
    """``--since`` after ``--until`` read "No requests match these filters", as if the logs held none."""
    demo_db = str(shutil.copy(demo_db, tmp_path / "demo.duckdb"))
    assert main(["report", "--db", demo_db, "--since", "2026-12-05", "--until", "2026-12-01"]) == 1
    assert capsys.readouterr().err == ("error: field since: --since 2026-12-05 00:00 is not before --until's end "
                                       "2026-12-02 00:00: the period holds no time\n")
    assert main(["report", "--db", demo_db, "--since", "2026-12-01", "--until", "2026-12-01", "--json"]) == 0


@pytest.mark.parametrize("argv, end", [
    # billing show read it as "no billing lines with an amount in this period", exit 0; plan as "the logs carry no
    # service time for llama-3.1-8b" (its --until is an instant, excluded)
    (["billing", "show", "--since", "2026-12-05", "--until", "2026-12-01"], "2026-12-02 00:00"),
    (["plan", "--model", "llama-3.1-8b", "--since", "2026-12-05", "--until", "2026-12-01"], "2026-12-01 00:00"),
])
def test_every_command_refuses_a_period_that_ends_before_it_starts(demo_db, tmp_path, capsys, argv, end):
    demo_db = str(shutil.copy(demo_db, tmp_path / "demo.duckdb"))
    assert main([*argv, "--db", demo_db]) == 1
    assert capsys.readouterr().err == (f"error: field since: --since 2026-12-05 00:00 is not before --until's end "
                                       f"{end}: the period holds no time\n")


@pytest.mark.parametrize("argv, message", [
    (["--days", "100000"], "field days: must be a whole number of days from 1 to 31, got 100000"),
    (["--days", "0"], "field days: must be a whole number of days from 1 to 31, got 0"),
    (["--days", "1", "--seed", "-1"], "field seed: must be a whole number from 0 to 4,294,967,295, got -1"),
])
def test_a_sample_fleet_too_long_or_a_bad_seed_is_refused_before_a_store_is_made(tmp_path, capsys, argv, message):
    """``demo --days 100000`` began generating 100,000 days in memory (about 50 MB a day); 0 days and a negative
    seed stopped with numpy's ValueError and its traceback, after making the store file."""
    db = tmp_path / "demo.duckdb"
    assert main(["demo", "--db", str(db), *argv]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not db.exists()


def test_a_report_with_no_rows_says_so_in_a_sentence(tmp_path):
    db = tmp_path / "empty.duckdb"
    store.connect(str(db)).close()
    out = cli("report", db=db)
    assert out.returncode == 0 and out.stdout.strip() == (
        "The store holds no requests yet: load some with python -m finops ingest FILE.")
    for command in ("diagnose", "incidents"):        # not "no finding stands out", as if the logs were judged
        assert cli(command, db=db).stdout.strip() == out.stdout.strip(), command
    cli("ingest", str(DATA / "canonical_sample.csv"), db=db)
    for extra in (["--tenant", "nobody"], ["--unit-costs", "--model", "nobody"], ["--reconcile", "--model", "nobody"]):
        out = cli("report", *extra, db=db)
        assert out.returncode == 0 and out.stdout.strip() == "No requests match these filters.", extra
        assert "DataFrame" not in out.stdout + out.stderr
    assert json.loads(cli("report", "--json", "--tenant", "nobody", db=db).stdout) == []


@pytest.mark.parametrize("argv, message", [
    # nan passed "<= 0" and scraped back to back; inf slept for ever; a timeout of nan reached the HTTP client
    (["scrape", "vllm", "--url", "http://127.0.0.1:9/metrics", "--every", "nan"],
     "field every: --every is a number of seconds above 0 and at most 604,800 (a week), not nan"),
    (["scrape", "vllm", "--url", "http://127.0.0.1:9/metrics", "--every", "inf"], "field every"),
    (["scrape", "vllm", "--url", "http://127.0.0.1:9/metrics", "--timeout", "nan"], "field timeout"),
    (["scrape", "vllm", "--url", "http://127.0.0.1:9/metrics", "--count", "-1"], "field count"),
    # a tick of nan or 1e308 started an ingester whose passes never came
    (["serve-ingest", "--tick", "nan"], "field tick: --tick is a number of seconds above 0 and at most 3,600"),
    (["serve-ingest", "--tick", "1e308"], "field tick"),
    # a source's interval of inf was stored, and the source never ran again
    (["serve-ingest", "--add-scrape", "vllm", "--url", "http://127.0.0.1:9/metrics", "--every", "inf"],
     "field every_s: a pull or scrape runs every 1 to 604,800 seconds (a week), not inf"),
])
def test_an_interval_that_is_no_time_is_refused(tmp_path, capsys, argv, message):
    assert main([*argv, "--db", str(tmp_path / "s.duckdb")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


@pytest.mark.parametrize("argv, message", [
    # nan or 1e308 stopped in timedelta() with a traceback; a negative window or wait went on to the pull
    (["pull", "langfuse", "--window-hours", "nan"], "field window_hours: --window-hours is a number of hours"),
    (["pull", "langfuse", "--window-hours", "1e308"], "field window_hours"),
    (["pull", "langfuse", "--window-hours", "-1"], "field window_hours"),
    (["pull", "langfuse", "--max-wait", "nan"], "field max_wait"),
    (["pull", "langfuse", "--overlap-minutes", "1e308"],
     "field overlap_minutes: --overlap-minutes is a number of minutes (a day) from 0 to 1,440, not 1e+308"),
    (["pull", "litellm", "--overlap-minutes", "nan"], "field overlap_minutes"),
    (["pull", "langfuse", "--page-size", "100000000"],
     "field page_size: --page-size is a number of rows from 1 to 100,000, not 100,000,000"),
])
def test_a_pull_window_that_is_no_time_is_refused_before_any_request(tmp_path, capsys, argv, message):
    assert main([*argv, "--db", str(tmp_path / "s.duckdb")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_diagnose_and_incidents_on_logs_with_no_latency_say_nothing_was_read(tmp_path):
    """The Azure trace carries times and tokens only: `diagnose` said "no queue build-up, prefill or decode tail,
    or P99 spike stands out", as of a healthy fleet, and `incidents` did not say what it could not judge."""
    db = tmp_path / "az.duckdb"
    assert cli("ingest", str(DATA / "azure_conv.csv"), "--format", "azure-trace", "--model", "gpt-4o", db=db).returncode == 0
    rows = len(pd.read_csv(DATA / "azure_conv.csv"))
    r = cli("diagnose", db=db)
    assert r.returncode == 0 and r.stdout.strip() == (
        "no slow-path diagnosis: these logs carry no latency (total, queue, prefill, decode or first token), so there "
        "is nothing to read for a queue build-up, a decode tail or a P99 spike")
    r = cli("incidents", db=db)
    assert r.returncode == 0
    assert r.stdout.splitlines() == [
        "no incident: no alert fired and no slow-path finding stands out in this period",
        f"not judged: Error rate above 1 %: the logs of gpt-4o carry no request status ({rows:,} requests): there is "
        "nothing to judge",
        f"not judged: P99 latency above 1.5 x the tier's SLA: the logs of gpt-4o carry no total latency ({rows:,} "
        "requests): there is nothing to judge",
        "no slow-path diagnosis: these logs carry no latency (total, queue, prefill, decode or first token), so there "
        "is nothing to read for a queue build-up, a decode tail or a P99 spike"]


def test_report_shows_sub_cent_spend_rather_than_zero(tmp_path, capsys):
    # the real tools' fixtures cost fractions of a cent a request: `report` printed cost_usd 0.00 beside a unit
    # cost of 3.2 $ per 1M tokens; a column with such an amount gets the decimals of its first two figures
    from helpers import store_of_records
    rows = [{"request_id": "t", "ts": "2026-03-02T10:00:00Z", "model": "tiny", "input_tokens": 100, "output_tokens": 10,
             "cost_usd": 0.0043},
            {"request_id": "b", "ts": "2026-03-02T10:05:00Z", "model": "big", "input_tokens": 1000, "output_tokens": 10,
             "cost_usd": 12.5}]
    db = store_of_records(tmp_path, rows)
    assert main(["report", "--db", db]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    header = lines["model"]
    assert lines["tiny"][header.index("cost_usd")] == "0.0043" and lines["big"][header.index("cost_usd")] == "12.5000"


def test_latency_text_writes_a_second_and_more_in_seconds(tmp_path, capsys):
    # canonical_sample.csv has one request per model, so each percentile is that request's time: llama-3.1-70b
    # total 6,031.1 ms (6.03 s), ttft 902.7 ms, queue 812.3 ms, service 5,210.0 ms (5.21 s); llama-3.1-8b's queue
    # 0.2 ms is not "0"; the counts (requests, requests_with_*) stay counts
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(DATA / "canonical_sample.csv"), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["latency", "--db", str(db)]) == 0
    rows = {line.split()[0]: " ".join(line.split()) for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["llama-3.1-70b"] == ("llama-3.1-70b 1 6.03 s 6.03 s 6.03 s 1 903 ms 903 ms 903 ms 1 "
                                     "812 ms 812 ms 812 ms 1 5.21 s 5.21 s 5.21 s 1")
    assert rows["llama-3.1-8b"] == ("llama-3.1-8b 1 885 ms 885 ms 885 ms 1 120 ms 120 ms 120 ms 1 "
                                    "0.2 ms 0.2 ms 0.2 ms 1 880 ms 880 ms 880 ms 1")
    assert rows["gpt-4o"] == "gpt-4o 1 1.50 s 1.50 s 1.50 s 1 — — — 0 — — — 0 — — — 0"


def test_report_text_writes_an_error_rate_a_count_says_exists_as_a_share(tmp_path, capsys):
    # 1 failed request in 20,001 read "0.0000" (four places), as if none failed; as a share it is "< 0.1%", and
    # 2 in 200 are "1.0%"
    rows = ["request_id,ts,tenant,model,input_tokens,output_tokens,status"]
    rows += [f"a{i},2026-01-05 09:{i // 3600 % 60:02d}:{i % 60:02d},t,gpt-4o,10,5,{'error' if i == 0 else 'ok'}"
             for i in range(20_001)]
    rows += [f"b{i},2026-01-05 10:00:{i % 60:02d},t,gpt-4o-mini,10,5,{'error' if i < 2 else 'ok'}" for i in range(200)]
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(rows) + "\n")
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", str(path), "--db", db]) == 0
    capsys.readouterr()
    assert main(["report", "--db", db]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["gpt-4o"][1] == "20,001" and lines["gpt-4o"][-2:] == ["<", "0.1%"]
    assert lines["gpt-4o-mini"][1] == "200" and lines["gpt-4o-mini"][-1] == "1.0%"
