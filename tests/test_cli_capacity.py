"""``python -m finops mmc`` and ``python -m finops size``."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from finops.cli import build_parser, main
from finops.commands import mmc as mmc_cmd
from finops.commands import size as size_cmd
from helpers import ROOT


def _strict(text: str) -> dict:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c} in output"))


def run_json(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return _strict(capsys.readouterr().out)


def test_mmc_json_fields(capsys):
    out = run_json(capsys, "mmc", "--arrival-rate", "10", "--service-rate", "2", "--servers", "8")
    assert set(out) == {"utilization", "p_wait", "wq_s", "w_s", "lq", "l", "wait_p50_s", "wait_p90_s",
                        "wait_p95_s", "wait_p99_s", "stable", "state", "message", "model"}
    assert out["state"] == "ok" and out["stable"] is True and out["model"] == "M/M/c"
    assert out["utilization"] == pytest.approx(0.625)
    assert out["p_wait"] == pytest.approx(0.16726650666, rel=1e-9)


def test_mmc_json_unstable_is_null_not_inf(capsys):
    out = run_json(capsys, "mmc", "--arrival-rate", "30", "--service-rate", "2", "--servers", "8")
    assert out["state"] == "unstable" and out["message"].startswith("unstable: the queue grows without bound")
    assert out["wq_s"] is None and out["wait_p99_s"] is None and out["utilization"] == 1.875


@pytest.mark.parametrize("argv, state", [
    (["--arrival-rate", "0", "--service-rate", "2", "--servers", "8"], "no_traffic"),
    (["--arrival-rate", "3", "--service-rate", "0", "--servers", "8"], "no_service"),
    (["--arrival-rate", "3", "--service-rate", "2", "--servers", "0"], "no_servers"),
])
def test_mmc_degenerate_states(capsys, argv, state):
    assert run_json(capsys, "mmc", *argv)["state"] == state


def test_mmc_mean_service_and_cv(capsys):
    a = run_json(capsys, "mmc", "--arrival-rate", "10", "--mean-service-s", "0.5", "--servers", "8")
    b = run_json(capsys, "mmc", "--arrival-rate", "10", "--mean-service-s", "0.5", "--servers", "8",
                 "--cv-service", "0")
    assert b["model"].startswith("M/G/c") and b["wq_s"] == pytest.approx(a["wq_s"] / 2)


def test_mmc_text_table_has_units(capsys):
    assert main(["mmc", "--arrival-rate", "10", "--service-rate", "2", "--servers", "8"]) == 0
    text = capsys.readouterr().out
    assert "ok: stable queue" in text and "queue wait p99" in text and " s\n" in text and "requests" in text
    assert main(["mmc", "--arrival-rate", "30", "--service-rate", "2", "--servers", "8"]) == 0
    assert "unbounded" in capsys.readouterr().out


def test_size_acceptance_36(capsys):
    out = run_json(capsys, "size", "--arrival-rate", "50", "--mean-service-s", "0.5",
                   "--target-utilization", "0.7")
    assert out["servers"] == 36 and out["servers_with_redundancy"] == 36
    assert out["mmc"]["state"] == "ok" and out["mmc"]["utilization"] <= 0.7


def test_size_redundancy_buffer_and_sla(capsys):
    out = run_json(capsys, "size", "--arrival-rate", "50", "--service-rate", "2", "--target-utilization", "0.7",
                   "--wait-sla-s", "2", "--wait-percentile", "0.99", "--redundancy", "0.25",
                   "--cold-start-buffer", "2")
    assert out["servers"] == 36 and out["servers_with_redundancy"] == 47
    assert out["binding_constraint"] == "utilization"
    tight = run_json(capsys, "size", "--arrival-rate", "50", "--service-rate", "2", "--wait-sla-s", "0.01",
                     "--max-p-wait", "0.05")
    assert tight["servers"] > 36 and tight["mmc"]["wait_p99_s"] <= 0.01 and tight["mmc"]["p_wait"] <= 0.05


def test_size_text_output(capsys):
    assert main(["size", "--arrival-rate", "50", "--service-rate", "2", "--target-utilization", "0.7",
                 "--redundancy", "0.25"]) == 0
    text = capsys.readouterr().out
    assert "36 (binding: utilization)" in text and "45" in text and "erlangs" in text


@pytest.mark.parametrize("argv, message", [
    (["size", "--arrival-rate", "-5", "--service-rate", "2"], "arrival_rate: must be >= 0"),
    (["mmc", "--arrival-rate", "5", "--service-rate", "-2", "--servers", "3"], "service_rate: must be >= 0"),
    (["size", "--arrival-rate", "5", "--mean-service-s", "0"], "mean_service_s: must be > 0"),
    (["size", "--arrival-rate", "5", "--service-rate", "0"], "service_rate: must be > 0"),
    (["size", "--arrival-rate", "5", "--service-rate", "2", "--target-utilization", "1.5"], "(0, 1]"),
    (["size", "--arrival-rate", "5", "--service-rate", "2", "--wait-percentile", "0.9"], "needs wait_sla_s"),
    (["mmc", "--arrival-rate", "nan", "--service-rate", "2", "--servers", "3"], "must be a finite number, got nan"),
    # a CV of 1e308 squared to inf: the message named wait_factor, no option of the command ("np.float64(inf)")
    (["mmc", "--arrival-rate", "10", "--service-rate", "1", "--servers", "11", "--cv-service", "1e308"],
     "field cv_service: must be at most 10"),
])
def test_bad_input_exits_1_with_a_clear_message(capsys, argv, message):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_every_option_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in (mmc_cmd.NAME, size_cmd.NAME):
        assert name in sub.choices
        for action in sub.choices[name]._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.option_strings} has no help"


def test_issue_command_verbatim():
    proc = subprocess.run([sys.executable, "-m", "finops", "mmc", "--arrival-rate", "10", "--service-rate", "2",
                           "--servers", "8", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _strict(proc.stdout)["state"] == "ok"


def test_figures_read_without_exponents(capsys):
    """1e12 req/s printed 'lambda = 1e+12', 'mean in system L 2e+12 requests' and servers without separators."""
    assert main(["size", "--arrival-rate", "1e12", "--service-rate", "1"]) == 0
    out = capsys.readouterr().out
    assert "lambda = 1,000,000,000,000 req/s" in out and "servers                  1,000,000,000,001" in out
    assert "e+" not in out


@pytest.mark.parametrize("flag, value, message", [
    # a redundancy of nan printed "+nan% redundancy"; 1e13 minimum replicas planned $8.4e15; a wait SLA of
    # 1e308 s was "a P99 wait under 1e+308 s"
    ("--redundancy", "nan", "field redundancy: must be >= 0 and finite, got nan"),
    ("--redundancy", "1e308", "field redundancy: must be at most 1"),
    ("--min-replicas", "10000000000000", "field min_replicas: must be at most 100,000, got 10,000,000,000,000"),
    ("--wait-sla-s", "1e308", "field wait_sla_s: must be at most 3,600"),
    ("--mean-service-s", "1e308", "field mean_service_s: must be at most 3,600"),
    ("--slots", "0", "field slots_per_replica"),
    ("--slots", "10001", "field slots_per_replica: must be at most 10,000, got 10,001"),
])
def test_plan_refuses_a_figure_past_what_it_can_mean(demo_db, tmp_path, capsys, flag, value, message):
    import shutil
    db = tmp_path / "plan.duckdb"
    shutil.copy(demo_db, db)
    assert main(["plan", "--model", "llama-3.1-8b", "--db", str(db), flag, value]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_text_lines_count_in_words_with_separators(capsys):
    # "c = 1 servers" (mmc) and "of 100000 requests" (edge's jitter policies)
    assert main(["mmc", "--arrival-rate", "0.5", "--service-rate", "1", "--servers", "1"]) == 0
    assert "c = 1 server, offered load A = 0.5 erlangs" in capsys.readouterr().out
    assert main(["mmc", "--arrival-rate", "10", "--service-rate", "2", "--servers", "8"]) == 0
    assert "c = 8 servers, offered load A = 5 erlangs" in capsys.readouterr().out
    assert main(["edge", "--rtt-dist", "normal", "--jitter-ms", "20", "--samples", "100000"]) == 0
    assert "of 100,000 requests" in capsys.readouterr().out
