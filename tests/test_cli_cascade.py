"""``python -m finops cascade`` and ``python -m finops edge``: JSON shape, exit codes, help."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from numpy.testing import assert_allclose

from finops.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
GSM8K = str(Path(__file__).resolve().parent / "data" / "routellm_gsm8k_cascade.csv")
MAP = "confidence=confidence,small_quality=mixtral_correct,large_quality=gpt4_correct"
POINT_KEYS = {"threshold", "escalation_rate", "avg_cost", "avg_quality"}


def _no_nan(text: str):
    def bad(const):
        raise AssertionError(f"JSON contains {const}")
    return json.loads(text, parse_constant=bad)


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return _no_nan(capsys.readouterr().out)


def test_cascade_json_has_exactly_four_keys(capsys):
    out = run_json(capsys, "cascade", GSM8K, "--map", MAP, "--cost-small", "1", "--cost-large", "8",
                   "--quality-floor", "0.8")
    assert set(out) == {"curve", "frontier", "choice", "metrics"}
    assert len(out["curve"]) == 644                      # 643 distinct confidences + escalate-all
    assert all(set(p) == POINT_KEYS for p in out["curve"] + out["frontier"])
    assert set(out["choice"]) == POINT_KEYS and out["choice"]["avg_quality"] >= 0.8
    assert set(out["metrics"]) == {"apgr", "cpt50", "cpt80"}
    assert out["metrics"]["apgr"] == pytest.approx(0.648, abs=5e-4)
    assert out["curve"][0]["escalation_rate"] == 0 and out["curve"][-1]["escalation_rate"] == 1


def test_cascade_json_choice_null_when_floor_unreachable(capsys):
    out = run_json(capsys, "cascade", GSM8K, "--map", MAP, "--cost-small", "1", "--cost-large", "8",
                   "--quality-floor", "0.95")
    assert out["choice"] is None


def test_cascade_json_per_query_costs(capsys):
    out = run_json(capsys, "cascade", GSM8K, "--map",
                   MAP + ",cost_small=mixtral_cost_usd_est,cost_large=gpt4_cost_usd_est")
    # the file's USD per query, returned per 1,000 queries as the page and the text give them: Mixtral alone at
    # its column's mean 0.0000816 $ a query, every query escalated at both calls' 0.003835 $
    assert (out["curve"][0]["avg_cost"], out["curve"][-1]["avg_cost"]) == pytest.approx((0.0815982, 3.835002), rel=1e-6)
    assert out["choice"] is None                                               # no floor given


def test_cascade_map_repeated_is_one_mapping(capsys):
    """``--map`` once per column gives the same curve as one comma-separated ``--map``; a key mapped to two
    columns is refused, naming it."""
    one = run_json(capsys, "cascade", GSM8K, "--map", MAP, "--cost-small", "1", "--cost-large", "8")
    argv = [x for part in MAP.split(",") for x in ("--map", part)]
    assert run_json(capsys, "cascade", GSM8K, *argv, "--cost-small", "1", "--cost-large", "8") == one
    assert main(["cascade", GSM8K, *argv, "--map", "confidence=gpt4_correct", "--cost-small", "1",
                 "--cost-large", "8"]) == 1
    assert "mapping gives confidence twice: 'confidence' and 'gpt4_correct'" in capsys.readouterr().err


def test_cascade_seed_table_json(capsys):
    out = run_json(capsys, "cascade", "--example-table", "--quality-floor", "0.9")
    assert [round(p["avg_cost"], 6) for p in out["curve"]] == [1.96, 3.4, 5.8]
    assert out["choice"]["threshold"] == 0.8 and out["choice"]["avg_cost"] == pytest.approx(3.4)
    assert out["metrics"] == {"apgr": None, "cpt50": None, "cpt80": None}   # the table has no ends


def test_cascade_parametric_file(tmp_path, capsys):
    f = tmp_path / "tau.csv"
    f.write_text("threshold,escalation_rate,avg_quality\n0.0,0,0.8\n0.8,0.3,0.93\n1.01,1,0.96\n")
    out = run_json(capsys, "cascade", str(f), "--parametric", "--cost-small", "1", "--cost-large", "8")
    assert out["metrics"]["cpt50"] == pytest.approx(0.3 * (0.08 / 0.13))


MMLU = str(Path(__file__).resolve().parent / "data" / "routellm_mmlu_abstract_algebra.csv")
MMLU_MAP = "small_quality=mistralai/Mixtral-8x7B-Instruct-v0.1,large_quality=gpt-4-1106-preview"


def test_cascade_without_a_confidence_gives_the_baselines(capsys):
    """RouteLLM's MMLU abstract algebra: 100 questions, Mixtral right on 32, GPT-4 on 46, GPT-4 alone right on
    23 (counted from the file's True/False). At $1 and $8 per 1,000: the oracle cascade pays every small call and
    23 large ones, 1 + 0.23 x 8 = 2.84; the oracle router 0.77 x 1 + 0.23 x 8 = 2.61; both score 32 + 23 = 55 %."""
    out = run_json(capsys, "cascade", MMLU, "--map", MMLU_MAP, "--cost-small", "1", "--cost-large", "8")
    assert set(out) == {"baselines", "random_routing", "note"} and "no confidence column" in out["note"]
    rows = {b["name"]: (b["large_call_rate"], b["avg_cost"], b["avg_quality"]) for b in out["baselines"]}
    expected = {"small only": (0, 1, 0.32), "direct to large": (1, 8, 0.46), "oracle cascade": (0.23, 2.84, 0.55),
                "oracle router": (0.23, 2.61, 0.55)}
    assert rows.keys() == expected.keys()
    for name, values in expected.items():
        assert_allclose(rows[name], values, err_msg=name)
    half = next(r for r in out["random_routing"] if r["escalation_rate"] == 0.5)   # half of each model at random
    assert_allclose((half["avg_cost"], half["avg_quality"]), (0.5 * 1 + 0.5 * 8, 0.39))
    assert main(["cascade", MMLU, "--map", MMLU_MAP, "--cost-small", "1", "--cost-large", "8"]) == 0
    text = capsys.readouterr().out
    assert "no threshold to sweep" in text and "oracle router          23.0%        $2.61   0.5500" in text


@pytest.mark.parametrize("floor, expected", [
    # 0.40 is 8 of the 14 points from Mixtral's 32 % to GPT-4's 46 %: 8/14 of requests to GPT-4, 1 + 7 x 8/14 = 5
    ("0.4", "quality floor 0.4: sending a random 57.1% of requests to the large model meets it, cost $5.00 per 1,000 "
            "queries;"),
    ("0.3", "quality floor 0.3: small only meets it, cost $1.00 per 1,000 queries, quality 0.3200"),
    ("0.46", "quality floor 0.46: direct to large meets it, cost $8.00 per 1,000 queries, quality 0.4600"),
    ("0.5", "quality floor 0.5: neither model alone reaches it; only a router better than random can (the oracle "
            "router reaches 0.5500)"),
    ("0.6", "quality floor 0.6: no router reaches it on these queries (the oracle router's ceiling is 0.5500)")])
def test_cascade_without_a_confidence_answers_the_quality_floor(capsys, floor, expected):
    """--quality-floor was ignored with no confidence; it now names the cheapest policy needing no signal."""
    argv = ["cascade", MMLU, "--map", MMLU_MAP, "--cost-small", "1", "--cost-large", "8", "--quality-floor", floor]
    assert main(argv) == 0
    assert expected in capsys.readouterr().out
    choice = run_json(capsys, *argv)["choice"]
    if floor == "0.4":
        assert choice["name"] == "random routing"
        assert_allclose((choice["large_call_rate"], choice["avg_cost"], choice["avg_quality"]), (8 / 14, 5, 0.4))
    elif float(floor) >= 0.5:
        assert choice is None


@pytest.mark.parametrize("argv", [["--example-table"], [MMLU, "--map", MMLU_MAP]])
def test_a_floor_typed_as_a_percent_is_refused_with_the_share_it_means(capsys, argv):
    """--quality-floor 80 over qualities that are shares (0-1) answered "no threshold meets it" (and, with no
    confidence, "no router reaches it"): a percent typed for a share. It is refused, naming the share."""
    assert main(["cascade", *argv, "--cost-small", "1", "--cost-large", "8", "--quality-floor", "80"]) == 1
    err = capsys.readouterr().err
    assert "--quality-floor 80 is above 1, but quality here is a share of answers correct" in err
    assert "for 80 % give 0.8" in err


def test_cascade_reads_several_files_of_one_eval_as_one(capsys):
    """Two MMLU subjects: abstract algebra (100 questions: Mixtral 32 right, GPT-4 46, GPT-4 alone 23) and
    management (103: Mixtral 87, GPT-4 93, GPT-4 alone 12), counted from the files. 203 queries, 35 that only GPT-4
    gets; at $1 and $8 the oracle router costs (168 x 1 + 35 x 8) / 203 and scores (119 + 35) / 203."""
    management = MMLU.replace("abstract_algebra", "management")
    out = run_json(capsys, "cascade", MMLU, management, "--map", MMLU_MAP, "--cost-small", "1", "--cost-large", "8")
    rows = {b["name"]: (b["large_call_rate"], b["avg_cost"], b["avg_quality"]) for b in out["baselines"]}
    assert_allclose(rows["small only"], (0, 1, 119 / 203))
    assert_allclose(rows["direct to large"], (1, 8, 139 / 203))
    assert_allclose(rows["oracle router"], (35 / 203, (168 + 35 * 8) / 203, 154 / 203))
    assert main(["cascade", MMLU, management, "--parametric", "--cost-small", "1", "--cost-large", "8"]) == 1
    assert "--parametric needs one FILE" in capsys.readouterr().err


def test_cascade_text_output(capsys):
    assert main(["cascade", "--example-table", "--quality-floor", "0.9"]) == 0
    text = capsys.readouterr().out
    # the seed's table at $1 and $8 per 1,000: (3.40 − 1.96) / 5 points = $0.288 a point, shown with cents
    assert "tau 0.8, escalate 30.0%, cost $3.40 per 1,000 queries" in text and "$0.29" in text


def test_cascade_text_prints_money_per_1000_queries_never_an_exponent(capsys):
    """GSM8K with its per-query cost columns (USD per query): the text printed "8.15982e-05" and "5.429e-05". It
    now prints dollars per 1,000 queries, the Cascade page's unit (``EvalData.per_1k_queries``), through fmt.usd.
    Hand count from the file: Mixtral alone costs its column's mean, 0.0000815982 $ a query = $0.082 per 1,000;
    escalating every query pays both calls, 0.003835002 $ = $3.84 per 1,000."""
    import re

    import pandas as pd

    from finops.fmt import usd
    argv = ["cascade", GSM8K, "--map", MAP + ",cost_small=mixtral_cost_usd_est,cost_large=gpt4_cost_usd_est",
            "--quality-floor", "0.75"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert not re.search(r"\d[eE][+-]?\d", text), text
    assert "costs in USD per 1,000 queries" in text
    rows = {line.split()[1]: line.split()[2] for line in text.splitlines() if re.match(r"\s+[\d.]+\s+[\d.]+%", line)}
    assert rows["0.0%"] == "$0.082" and rows["100.0%"] == "$3.84"
    evals = pd.read_csv(GSM8K)
    out = run_json(capsys, *argv)                        # the same unit in JSON, as raw numbers
    assert out["curve"][0]["avg_cost"] == pytest.approx(evals["mixtral_cost_usd_est"].mean() * 1000)
    assert out["curve"][0]["avg_cost"] == pytest.approx(0.0815982, rel=1e-6)
    assert out["curve"][-1]["avg_cost"] == pytest.approx(3.835002, rel=1e-6)
    assert f"cost {usd(out['choice']['avg_cost'])} per 1,000 queries, quality 0.7506" in text


@pytest.mark.parametrize("argv, message", [
    (["cascade", GSM8K, "--cost-small", "1", "--cost-large", "8"], "column 'small_quality'"),
    (["cascade", GSM8K, "--map", MAP, "--cost-small", "1"], "needs --cost-large"),
    (["cascade", GSM8K, "--map", MAP + ",cost_small=mixtral_cost_usd_est", "--cost-small", "1",
      "--cost-large", "8"], "not both"),
    (["cascade", GSM8K, "--map", MAP, "--cost-small", "-1", "--cost-large", "8"], "cost >= 0"),
    (["cascade", GSM8K, "--map", MAP, "--cost-small", "nan", "--cost-large", "8"], "cost >= 0"),
    (["cascade", GSM8K, "--map", MAP, "--cost-small", "1", "--cost-large", "8", "--quality-floor", "inf"],
     "quality floor"),
    (["cascade", "missing.csv", "--cost-small", "1", "--cost-large", "8"], "file missing.csv: no such file"),
    (["cascade", "--cost-small", "1", "--cost-large", "8"], "needs FILE"),
    (["edge", "--rtt-ms", "-5"], "field rtt_ms"),
    (["edge", "--delta-q", "nan"], "field quality_gain"),
    # a number past what the inequality takes printed a cost of 300 digits (1e308 ms of RTT), a draw count
    # past memory took 7.8 GB (3e8 draws), a negative one or seed a numpy traceback
    (["edge", "--rtt-ms", "1e308"], "field rtt_ms: must be at most 600,000 ms"),
    (["edge", "--value-usd", "1e308"], "field value_usd: must be at most $1,000,000"),
    (["edge", "--rtt-dist", "normal", "--samples", "-1"], "field samples: draw 1 to 1,000,000"),
    (["edge", "--rtt-dist", "normal", "--samples", "300000000"], "field samples"),
    (["edge", "--rtt-dist", "lognormal", "--seed", "-1"], "field seed"),
    (["edge", "--rtt-dist", "normal", "--jitter-ms", "1e308"], "at most 600,000 ms"),
    # a cost of 1e308 a call averaged to inf
    (["cascade", GSM8K, "--map", MAP, "--cost-small", "1e308", "--cost-large", "8"],
     "field cost_small: must be a cost of at most 1,000,000,000,000 a call"),
])
def test_bad_input_exits_1_with_a_clear_message(capsys, argv, message):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_a_folder_given_as_a_csv_is_a_sentence(tmp_path, capsys):
    """cascade FOLDER and edge --rtt-samples FOLDER stopped with IsADirectoryError's traceback."""
    for argv in (["cascade", str(tmp_path), "--cost-small", "1", "--cost-large", "8"],
                 ["edge", "--rtt-samples", str(tmp_path)]):
        assert main(argv) == 1
        assert capsys.readouterr().err == f"error: file {tmp_path}: is a folder: give the CSV file\n"


def test_cascade_bad_cell_names_file_row_field(tmp_path, capsys):
    f = tmp_path / "eval.csv"
    f.write_text("confidence,small_quality,large_quality\n0.9,1,1\n0.4,1,oops\n")
    assert main(["cascade", str(f), "--cost-small", "1", "--cost-large", "8"]) == 1
    err = capsys.readouterr().err
    assert f"file {f}, row 2, field large_quality: 'oops'" in err
    # a quality past 1e12 made the curve's sums inf: named like any bad cell
    f.write_text("confidence,small_quality,large_quality\n0.9,1,1\n0.4,1e300,0\n")
    assert main(["cascade", str(f), "--cost-small", "1", "--cost-large", "8"]) == 1
    assert f"file {f}, row 2, field small_quality: '1e300' is past 1,000,000,000,000" in capsys.readouterr().err


def test_edge_json_defaults_are_the_seed(capsys):
    out = run_json(capsys, "edge")
    assert set(out) == {"inputs", "decision", "break_even", "curve", "policies"}
    assert out["decision"]["escalate"] is True
    assert out["decision"]["benefit_usd"] == pytest.approx(0.075)
    assert out["decision"]["cost_usd"] == pytest.approx(0.04)
    assert out["break_even"]["rtt_ms"] == pytest.approx(523.33, abs=0.01)
    assert out["policies"] is None
    flips = [a["rtt_ms"] for a, b in zip(out["curve"], out["curve"][1:], strict=False) if a["escalate"] != b["escalate"]]
    assert flips == [500.0]                                   # 50 ms steps: 500 pays, 550 does not


def test_edge_json_rtt_1500_and_alias(capsys):
    out = run_json(capsys, "edge", "--rtt-ms", "1500", "--value-per-point", "0.5")
    assert out["decision"]["escalate"] is False and out["decision"]["cost_usd"] > 0.13


def test_edge_json_with_jitter_and_samples(tmp_path, capsys):
    out = run_json(capsys, "edge", "--rtt-dist", "lognormal", "--rtt-ms", "400", "--jitter-ms", "300",
                   "--samples", "20000")
    pol = out["policies"]
    assert set(pol) == {"share_pays", "n_samples", "never", "always", "when_it_pays"}
    assert pol["n_samples"] == 20000 and 0.6 < pol["share_pays"] < 0.9
    assert pol["when_it_pays"]["net_benefit_usd"] >= pol["always"]["net_benefit_usd"]
    f = tmp_path / "rtt.csv"
    f.write_text("rtt_ms\n80\n2000\n")
    out = run_json(capsys, "edge", "--rtt-samples", str(f))
    assert out["policies"]["share_pays"] == 0.5


def test_every_option_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("cascade", "edge"):
        p = sub.choices[name]
        assert p.description
        for action in p._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.option_strings or action.dest} has no help"


def test_python_dash_m_runs_verbatim():
    res = subprocess.run([sys.executable, "-m", "finops", "cascade", GSM8K, "--map", MAP, "--cost-small", "1",
                          "--cost-large", "8", "--quality-floor", "0.8", "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert set(_no_nan(res.stdout)) == {"curve", "frontier", "choice", "metrics"}


def test_an_unreachable_floor_names_the_best_quality_a_threshold_reaches(capsys):
    """GSM8K at a 0.95 floor: the text said "no threshold meets it" and no more, where the page says the best. The
    best threshold escalates every query to GPT-4, right on 1,130 of 1,319 (0.8567)."""
    assert main(["cascade", GSM8K, "--map", MAP, "--cost-small", "1", "--cost-large", "8",
                 "--quality-floor", "0.95"]) == 0
    text = capsys.readouterr().out
    assert "quality floor 0.95: no threshold meets it; the best any threshold reaches is 0.8567" in text
    assert 1130 / 1319 == pytest.approx(0.8567, abs=5e-5)


def test_edge_policies_table_writes_money_shares_and_times_for_people(tmp_path, capsys):
    # two measured RTTs, V_lat $0.10 a second, the other inputs at their defaults (dQ 0.15 x V_q $0.5 = $0.075,
    # dC_infer + C_net = $0.010, T_cloud 300 ms, T_edge 0): at 80 ms the extra time is 380 ms ($0.038, pays:
    # 0.075 - 0.010 - 0.038 = 0.027); at 2,000 ms it is 2,300 ms ($0.23, does not pay).
    # always: share 1, quality 0.8 + 0.15 = 0.95, money $0.010, latency (0.038 + 0.23) / 2 = $0.134,
    #   extra (380 + 2300) / 2 = 1,340 ms, net 0.075 - 0.010 - 0.134 = -$0.069
    # when it pays: share 0.5, quality 0.875, money $0.005, latency $0.019, extra 190 ms
    rtts = tmp_path / "rtt.csv"
    rtts.write_text("rtt_ms\n80\n2000\n")
    assert main(["edge", "--rtt-samples", str(rtts), "--latency-value-usd-per-s", "0.1"]) == 0
    out = capsys.readouterr().out
    rows = {next(p for p in ("never", "always", "when it pays") if line.strip().startswith(p)): line.split()
            for line in out.splitlines()[5:]}
    assert out.splitlines()[4].split() == ["policy", "escalation_share", "expected_quality", "money_cost_usd",
                                           "latency_cost_usd", "extra_latency_ms", "net_benefit_usd"]
    assert rows["always"] == ["always", "100.0%", "0.95", "$0.010", "$0.13", "1.34", "s", "−$0.069"]
    assert rows["when it pays"][3:9] == ["50.0%", "0.875", "$0.0050", "$0.019", "190", "ms"]
    assert rows["never"] == ["never", "0.0%", "0.8", "$0.00", "$0.00", "0", "ms", "$0.00"]


def test_edge_policies_table_has_no_exponent_near_break_even(capsys):
    # at the break-even RTT the net benefit of escalating is a few hundred-thousandths of a dollar: %g wrote 2.6387e-05
    assert main(["edge", "--rtt-dist", "normal", "--rtt-ms", "523", "--jitter-ms", "1"]) == 0
    table = capsys.readouterr().out.split("requests\n", 1)[1]
    assert "e-0" not in table and "e+0" not in table
    assert "$0.000026" in table.splitlines()[2]
