"""``python -m finops fleet`` and ``plan``, and ``report --idle-policy`` / ``--focus``: the schedule loaded from a
CSV and shown, reservations, the default idle policy, the plan against the schedule by hand."""
import io
import json

import pandas as pd
import pytest

from finops import store
from finops.cli import main
from finops.ingest import ingest_frame
from helpers import add_test_models, fleet_day_store, march, spend_frame

SCHEDULE = ("model,from,to,replicas,gpus_per_replica,gpu_hour_usd,gpu_type,site\n"
            "gpu-model,2026-03-02T00:00:00Z,2026-03-02T12:00:00Z,2,,,L4,cloud\n")


@pytest.fixture()
def db(tmp_path):
    """gpu-model ($2 a GPU-hour, 1 GPU a replica) with tenant a busy 7 slot-hours and b 3 on 2 March 00:00-06:59."""
    path = str(tmp_path / "fleet.duckdb")
    con = store.connect(path)
    add_test_models(con)
    rows = [(f"a{h}", march(2, h, 5), "a", "premium", "gpu-model", 100, 10, 0, 3.6e6, 3.6e6, None, False, "ok", None,
             None) for h in range(7)]
    rows += [(f"b{h}", march(2, h, 6), "b", "batch", "gpu-model", 100, 10, 0, 3.6e6, 3.6e6, None, False, "ok", None,
              None) for h in range(3)]
    ingest_frame(con, spend_frame(rows))
    con.close()
    (tmp_path / "fleet.csv").write_text(SCHEDULE)
    return path


def _json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_fleet_load_show_and_the_bill_it_gives(db, tmp_path, capsys):
    assert main(["fleet", "load", str(tmp_path / "fleet.csv"), "--db", db]) == 0
    assert capsys.readouterr().out.strip() == f"1 period loaded from {tmp_path / 'fleet.csv'}"
    assert main(["fleet", "load", str(tmp_path / "fleet.csv"), "--db", db]) == 0      # twice: the same one period
    capsys.readouterr()
    shown = _json(capsys, "fleet", "show", "--json", "--db", db)
    assert [p["replicas"] for p in shown["periods"]] == [2] and shown["idle_policy"] == "apart"
    basis = {b["model"]: b for b in shown["basis"]}
    assert basis["gpu-model"]["billed_by"] == "declared"
    assert basis["llama-3.1-8b"]["how"].startswith("billed while the model served traffic")
    # 12 h x 2 GPUs x $2 = $48: a's $14 and b's $6 busy time, $28 idle
    rows = _json(capsys, "report", "--by", "tenant", "--json", "--db", db)
    assert {r["tenant"]: r["cost_usd"] for r in rows} == pytest.approx({"a": 14.0, "b": 6.0, "(idle capacity)": 28.0})
    assert main(["fleet", "show", "--db", db]) == 0
    text = capsys.readouterr().out
    assert "gpu-model: billed by its declared schedule (1 period)" in text and "idle policy: apart" in text


def test_idle_policy_per_report_and_as_the_default(db, tmp_path, capsys):
    main(["fleet", "load", str(tmp_path / "fleet.csv"), "--db", db])
    capsys.readouterr()
    usage = _json(capsys, "report", "--by", "tenant", "--json", "--idle-policy", "usage", "--db", db)
    assert {r["tenant"]: r["cost_usd"] for r in usage} == pytest.approx({"a": 14 + 0.7 * 28, "b": 6 + 0.3 * 28})
    assert main(["fleet", "reserve", "gpu-model", "a", "1", "--db", db]) == 0
    assert main(["fleet", "reserve", "gpu-model", "b", "3", "--db", db]) == 0
    assert main(["fleet", "policy", "reservations", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "idle policy: reservations: spread by reservations"
    reserved = _json(capsys, "report", "--by", "tenant", "--json", "--db", db)
    assert {r["tenant"]: r["cost_usd"] for r in reserved} == pytest.approx({"a": 14 + 7, "b": 6 + 21})
    assert main(["fleet", "reserve", "gpu-model", "b", "--remove", "--db", db]) == 0
    capsys.readouterr()
    alone = _json(capsys, "report", "--by", "tenant", "--json", "--db", db)
    assert {r["tenant"]: r["cost_usd"] for r in alone} == pytest.approx({"a": 14 + 28, "b": 6})
    # the FOCUS file under the default: no idle row, the fleet's $48 billed
    assert main(["report", "--focus", "--db", db]) == 0
    focus = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert focus["BilledCost"].sum() == pytest.approx(48.0) and not focus["Tags"].str.contains("idle capacity").any()


@pytest.mark.parametrize(("argv", "message"), [
    (["report", "--idle-policy", "evenly"], "unknown idle policy 'evenly'"),
    (["fleet", "policy", "centre:"], "name the cost centre"),
    (["fleet", "reserve", "gpu-model", "a"], "give the replicas"),
    (["fleet", "reserve", "api-model", "a", "1"], "not a self-hosted model"),
])
def test_bad_fleet_input_exits_1_with_a_sentence(db, capsys, argv, message):
    assert main([*argv, "--db", db]) == 1
    assert message in capsys.readouterr().err


def test_a_bad_schedule_file_exits_1_and_changes_nothing(db, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,from,to,replicas\ngpu-model,2026-03-02,2026-03-01,2\n")
    assert main(["fleet", "load", str(bad), "--db", db]) == 1
    # the file, its row and field named (a schedule's checks saw rows, not the file: "error: row 1, ...")
    err = capsys.readouterr().err
    assert err.startswith(f"error: file {bad}, row 1, field to: ") and "ends (2026-03-01 00:00) before it starts" in err
    assert _json(capsys, "fleet", "show", "--json", "--db", db)["periods"] == []


def test_fleet_infer_from_replica_ids(tmp_path, capsys):
    path = str(tmp_path / "r.duckdb")
    con = store.connect(path)
    add_test_models(con)
    ingest_frame(con, pd.DataFrame([("i1", march(2, 10, 1), "gpu-model", "r0"), ("i2", march(2, 10, 2), "gpu-model",
                                                                                   "r1")],
                                   columns=["request_id", "ts", "model", "replica"]))
    con.close()
    periods = _json(capsys, "fleet", "infer", "--save", "--json", "--db", path)
    assert [(p["replicas"], p["source"]) for p in periods] == [(2, "inferred")]
    shown = _json(capsys, "fleet", "show", "--json", "--db", path)
    assert {b["model"]: b["billed_by"] for b in shown["basis"]}["gpu-model"] == "inferred"


def test_plan_by_hand_against_a_flat_schedule(tmp_path, capsys):
    """m-self declared with 4 replicas for a day; at rho <= 0.5 and no wait SLA its traffic needs 2 replicas in the
    16 off-peak hours and 4 in the 8 peak ones: 32 replica-hours ($64) too many."""
    path = str(tmp_path / "p.duckdb")
    con = fleet_day_store(4)
    con.execute(f"ATTACH '{path}' AS out")
    con.execute("COPY FROM DATABASE memory TO out")
    con.close()
    out = _json(capsys, "plan", "--model", "m-self", "--target-utilization", "0.5", "--wait-sla-s", "0",
                "--redundancy", "0", "--mean-service-s", "10", "--json", "--db", path)
    past = out["past"]
    assert (past["replica_hours_billed"], past["replica_hours_planned"], past["surplus_replica_hours"]) == (96, 64, 32)
    assert past["saving_usd"] == pytest.approx(64.0) and past["short_hours"] == 0
    assert past["sentence"].startswith("scaling to the plan would have saved $64.00 over the period")
    assert main(["plan", "--model", "m-self", "--db", path, "--target-utilization", "0.5", "--wait-sla-s", "0",
                 "--redundancy", "0", "--mean-service-s", "10"]) == 0
    assert "would have saved $64.00" in capsys.readouterr().out
    assert main(["plan", "--model", "gpt-4o", "--db", path]) == 1
    assert "not a self-hosted model" in capsys.readouterr().out


def test_the_example_schedule_loads_and_bills_by_hand(tmp_path, capsys):
    """examples/fleet_schedule.csv: llama-3.1-70b on 3 replicas x 4 H100 x $2.50 to 22 Nov, then 2 (open-ended);
    llama-3.1-8b 3 + 1 (edge) H100 at $2.50."""
    from helpers import ROOT

    path = str(tmp_path / "ex.duckdb")
    store.connect(path).close()
    assert main(["fleet", "load", str(ROOT / "examples" / "fleet_schedule.csv"), "--db", path]) == 0
    assert capsys.readouterr().out.startswith("4 periods loaded")
    rows = _json(capsys, "report", "--by", "model", "--since", "2026-11-21T00:00:00", "--until", "2026-11-23T00:00:00",
                 "--json", "--db", path)
    # no traffic at all: every dollar is idle; 21 Nov 24 h x 30 $/h, 22 Nov 24 h x 20 $/h; 8b 48 h x 4 x $2.50
    assert {r["model"]: r["cost_usd"] for r in rows} == pytest.approx({"llama-3.1-70b": 24 * 30 + 24 * 20,
                                                                       "llama-3.1-8b": 48 * 10.0})


@pytest.mark.parametrize("name, message", [
    ("missing.csv", "no such file"),            # it said "[Errno 2] No such file or directory: '...'"
    (".", "is a folder: give the CSV file"),     # and "[Errno 21] Is a directory: '...'"
])
def test_fleet_load_of_no_file_says_so_in_a_sentence(db, tmp_path, capsys, name, message):
    path = tmp_path / name
    assert main(["fleet", "load", str(path), "--db", db]) == 1
    assert capsys.readouterr().err == f"error: file {path}: {message}\n"


def test_fleet_show_writes_the_gpu_hour_in_dollars(db, tmp_path, capsys):
    # a period at $2.50 a GPU-hour read "2.5000" (no $, four places) beside a blank one; times as the loader stores them
    (tmp_path / "priced.csv").write_text("model,from,to,replicas,gpus_per_replica,gpu_hour_usd,gpu_type,site\n"
                                         "gpu-model,2026-03-02,2026-03-03,2,4,2.5,H100,cloud\n")
    assert main(["fleet", "load", str(tmp_path / "priced.csv"), "--db", db]) == 0
    capsys.readouterr()
    assert main(["fleet", "show", "--db", db]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.endswith("declared"))
    assert line.split() == ["gpu-model", "2026-03-02", "2026-03-03", "2", "4", "$2.50", "H100", "cloud", "declared"]
