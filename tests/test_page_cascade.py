"""AppTest smoke tests of the Cascade page (pages/cascade.py)."""
from __future__ import annotations

import shutil

import pandas as pd
import pyarrow as pa
import pytest
from numpy.testing import assert_allclose

from finops import store
from finops.cascade import shadow as cascade_store
from finops.fmt import MISSING
from helpers import run_page, texts

PAGE = "views/cascade.py"
NASTY = "o'brien; drop table requests"


def _frame(at, column: str):
    """The first dataframe on the page that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with a {column!r} column")


def _open(db: str, source: str | None = None):
    """The page on ``db``, with the data source radio set to ``source`` (query parameters do not
    survive AppTest's switch_page)."""
    at = run_page(db, PAGE)
    if source is not None:
        at.radio(key="source").set_value(source).run()
    return at


def _charts(at) -> int:
    return len(at.get("vega_lite_chart"))


def _assert_key_elements(at):
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.select_slider) == 1 and "Confidence threshold" in at.select_slider[0].label
    _frame(at, "marginal_cost_per_point")
    assert _charts(at) >= 3                       # frontier, net benefit vs RTT, RTT histogram
    assert "break-even" in texts(at).lower()


@pytest.fixture()
def demo_copy(demo_db, tmp_path) -> str:
    path = str(tmp_path / "demo_copy.duckdb")
    shutil.copy(demo_db, path)
    return path


def test_empty_store_falls_back_to_the_seeds_table(empty_db):
    at = _open(empty_db)
    _assert_key_elements(at)
    assert at.radio(key="source").value == "example"


def test_empty_store_asked_for_shadow_evaluation_says_there_is_none(empty_db):
    at = _open(empty_db, "store")
    assert not at.exception
    assert "carries a confidence score" in texts(at)
    assert "Edge vs cloud" in texts(at)           # the calculator still works without data
    assert _charts(at) >= 2


def test_parametric_mode_shows_the_seeds_figures(empty_db):
    at = _open(empty_db, "example")
    table = _frame(at, "marginal_cost_per_point")
    assert_allclose(table["avg_cost"], [5.8, 3.4, 1.96])
    assert_allclose(table["escalation_rate"], [0.60, 0.30, 0.12])
    assert_allclose(table["marginal_cost_per_point"].iloc[1:], [0.8, 0.288])
    body = texts(at)
    assert "floor: **0.8**" in body and "$3.40 per 1,000" in body      # 90 % floor -> threshold 0.80


def test_parametric_mode_follows_the_floor(empty_db):
    at = _open(empty_db, "example")
    at.number_input(key="floor").set_value(95.0).run()
    assert not at.exception
    assert "floor: **0.95**" in texts(at) and "$5.80 per 1,000" in texts(at)
    at.number_input(key="floor").set_value(99.0).run()
    assert "No threshold reaches the 99 % quality floor" in texts(at)


def test_parametric_metrics_need_the_ends(empty_db):
    at = _open(empty_db, "example")
    assert "Metrics not computed" in texts(at)
    ends = [n for n in at.number_input if "alone: quality" in n.label]
    ends[0].set_value(0.80)
    ends[1].set_value(0.97).run()
    assert not at.exception
    apgr = next(m for m in at.metric if m.label == "Quality gap recovered (APGR)")
    assert apgr.value != MISSING
    assert "small only" in _frame(at, "large_call_rate")["name"].tolist()


def test_edge_section_shows_the_seeds_worked_example(empty_db):
    at = _open(empty_db)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Gain worth ($/request)"] == "$0.075"
    assert metrics["Escalating ($/request)"] == "$0.040"
    assert metrics["Decision at this RTT"] == "Escalate"
    assert metrics["Break-even RTT (ms)"] == "523 ms"
    at.number_input(key="rtt_ms").set_value(1500.0).run()
    assert {m.label: m.value for m in at.metric}["Decision at this RTT"] == "Stay on the edge"


def test_sample_fleet_store_source(demo_db):
    at = _open(demo_db)
    _assert_key_elements(at)
    assert at.radio(key="source").value == "store"
    body = texts(at)
    assert "carry both shadow labels" in body and "per-query costs" in body
    assert {m.label for m in at.metric} >= {"Quality gap recovered (APGR)", "CPT 50 %", "CPT 80 %"}
    # the floor starts where the sample can meet it, and says how it was chosen
    assert not any("No threshold reaches" in w.value for w in at.warning)
    assert any("Cheapest confidence threshold meeting" in s.value for s in at.success)
    assert "Floor chosen for you: halfway between the lowest" in body
    assert "oracle router" in _frame(at, "large_call_rate")["name"].tolist()


def test_store_floors_round_trip_through_the_page(demo_copy):
    con = store.connect(demo_copy)
    cascade_store.save_quality_floors(con, {"globex-search": 0.80, NASTY: 0.90})
    con.close()
    at = _open(demo_copy)
    assert not at.exception
    choices = _frame(at, "meets")
    assert choices["tenant"].tolist() == ["globex-search", NASTY]
    assert choices["curve"].tolist() == ["this tenant's queries", "all queries"]
    assert bool(choices["meets"].iloc[0])
    save = next(b for b in at.button if b.label == "Save floors")
    save.click().run()                           # writes the table back unchanged
    assert not at.exception
    con = store.connect(demo_copy)
    assert cascade_store.quality_floors(con) == pytest.approx({"globex-search": 0.80, NASTY: 0.90})
    con.close()


def test_sample_fleet_one_pair_at_flat_prices(demo_db):
    at = _open(demo_db)
    pair = next(sb for sb in at.selectbox if sb.label == "Cascade pair")
    pair.set_value("gpt-4o-mini").run()
    _costs_radio(at).set_value("flat").run()
    assert not at.exception
    body = texts(at)
    assert "of gpt-4o-mini" in body and "flat prices $1.00 and $8.00 per 1,000" in body
    table = _frame(at, "marginal_cost_per_point")
    assert table["avg_cost"].between(1.0, 9.0).all()          # flat: 1 + rate x 8


def _upload(at, name: str, path):
    at.file_uploader(key="eval_upload").set_value((name, path.read_bytes(), "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_uploaded_eval_without_a_confidence_shows_the_baselines(empty_db):
    """RouteLLM's MMLU files grade two models per question and carry no confidence. The page required a
    confidence column, so such a file could not be used at all; now it shows the two models, random routing and
    the oracles. Hand-counted on abstract algebra (100 questions): Mixtral right on 32, GPT-4 on 46, GPT-4 alone
    on 23; at the default $1 and $8 per 1,000 the oracle router costs 0.77 x 1 + 0.23 x 8 = $2.61."""
    from pathlib import Path
    at = _upload(_open(empty_db, "upload"), "algebra.csv",
                 Path(__file__).parent / "data" / "routellm_mmlu_abstract_algebra.csv")
    boxes = {s.label: s for s in at.selectbox}
    assert boxes["Small model's confidence"].value is None       # optional now: "(none)"
    boxes["Small model right / score"].set_value("mistralai/Mixtral-8x7B-Instruct-v0.1")
    boxes["Large model right / score"].set_value("gpt-4-1106-preview")
    next(b for b in at.button if b.label == "Use these columns").click().run()
    assert not at.exception, [e.value for e in at.exception]
    body = texts(at)
    assert "has no confidence column" in body and not at.select_slider
    assert ("On these 100 queries the small model alone scores **32.00%** at $1.00 per 1,000 requests and the "
            "large one **46.00%** at $8.00. The large model does better on **23.00%** of them: a router sending "
            "exactly those to it would score **55.00%** at $2.61 per 1,000") in body
    table = _frame(at, "large_call_rate").set_index("name")
    assert_allclose(table.loc[["small only", "direct to large", "oracle cascade", "oracle router"], "avg_cost"],
                    [1.0, 8.0, 2.84, 2.61])
    assert at.number_input(key="floor").value == 39.0             # halfway between 32 % and 46 %
    chart = at.get("vega_lite_chart")[0]
    series = {s for named in chart.proto.datasets
              for s in pa.ipc.open_stream(named.data.data).read_all().to_pydict().get("series", [])}
    assert series == {"random routing", "small only", "direct to large", "oracle cascade", "oracle router",
                      "random at the floor"}
    # with no cascade to run, random routing sends its share straight to the large model: the segment between the
    # two models' diamonds (was priced as escalation, the small call paid too: $9.00 at 100 %, above the large model)
    line = next(frame for frame in (pa.ipc.open_stream(named.data.data).read_all().to_pandas()
                                    for named in chart.proto.datasets)
                if "series" in frame and (frame["series"] == "random routing").any())
    assert_allclose(line["avg_cost"], 1 + 7 * line["escalation_rate"])
    # the floor is answered: 39 % is 7 of the 14 points between the models, half the requests to GPT-4 at random
    assert ("Sending a random **50.0%** of requests to the large model (the rest to the small one) meets the 39 % "
            "floor at **$4.50** per 1,000 requests") in body
    # and the chart marks that point on the random line
    pick = _series_rows(chart, "random at the floor")
    assert_allclose(pick[["large_call_rate", "avg_cost", "avg_quality"]].to_numpy()[0], [0.5, 4.5, 0.39])
    assert pick["label"][0] == "50.0% at random to the large model"
    at.number_input(key="floor").set_value(50.0).run()
    assert _series_rows(at.get("vega_lite_chart")[0], "random at the floor").empty   # no random share does
    assert "Neither model alone reaches the 50 % quality floor. Only a router that picks better than at random " \
           "can: the oracle router reaches 55.00%." in texts(at)
    at.number_input(key="floor").set_value(60.0).run()
    assert "No router reaches it on these queries: the oracle router's ceiling is 55.00%." in texts(at)
    at.number_input(key="floor").set_value(30.0).run()
    assert "The small model alone meets the 30 % floor: **32.00%** at **$1.00** per 1,000 requests." in texts(at)


def _series_rows(chart, name: str) -> pd.DataFrame:
    """The rows of a chart's datasets whose ``series`` is ``name`` (empty when none)."""
    frames = [pa.ipc.open_stream(named.data.data).read_all().to_pandas() for named in chart.proto.datasets]
    hits = [f[f["series"] == name] for f in frames if "series" in f]
    return pd.concat(hits, ignore_index=True) if hits else pd.DataFrame()


def test_several_uploaded_files_of_one_eval_are_read_as_one(empty_db):
    """RouteLLM's MMLU eval is one file per subject: two uploaded together are 203 queries (counted from the
    files: Mixtral right on 32 + 87, GPT-4 on 46 + 93, GPT-4 alone on 23 + 12)."""
    from pathlib import Path
    data = Path(__file__).parent / "data"
    at = _open(empty_db, "upload")
    at.file_uploader(key="eval_upload").set_value(
        [(name, (data / f"routellm_mmlu_{name}").read_bytes(), "text/csv") for name in ("abstract_algebra.csv",
                                                                                      "management.csv")]).run()
    boxes = {s.label: s for s in at.selectbox}
    boxes["Small model right / score"].set_value("mistralai/Mixtral-8x7B-Instruct-v0.1")
    boxes["Large model right / score"].set_value("gpt-4-1106-preview")
    next(b for b in at.button if b.label == "Use these columns").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert ("On these 203 queries the small model alone scores **58.62%** at $1.00 per 1,000 requests and the "
            "large one **68.47%** at $8.00. The large model does better on **17.24%** of them: a router sending "
            "exactly those to it would score **75.86%** at $2.21 per 1,000") in texts(at)
    assert "203 queries in 2 files (abstract_algebra.csv, management.csv)" in texts(at)



def _upload_gsm8k_with_costs(db):
    """The Cascade page with RouteLLM's GSM8K excerpt uploaded and its four columns mapped."""
    from pathlib import Path
    at = _upload(_open(db, "upload"), "gsm8k.csv", Path(__file__).parent / "data" / "routellm_gsm8k_cascade.csv")
    boxes = {s.label: s for s in at.selectbox}
    boxes["Small model right / score"].set_value("mixtral_correct")
    boxes["Large model right / score"].set_value("gpt4_correct")
    boxes["Small cost (USD per query)"].set_value("mixtral_cost_usd_est")
    boxes["Large cost (USD per query)"].set_value("gpt4_cost_usd_est")
    next(b for b in at.button if b.label == "Use these columns").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _costs_radio(at):
    return next(r for r in at.radio if any("Flat price" in str(o) for o in r.options))


def test_an_uploaded_evals_cost_columns_read_per_1000_requests_as_labelled(empty_db):
    """The file's cost columns are USD per query; every cost on the page is labelled "$ per 1,000 requests". Priced
    per query, GSM8K's small-only row read $0.000 per 1,000 and direct-to-large $0.004 (8.16e-05 and 3.75e-03: the
    per-query figures under the per-1,000 label), 1,000 times too cheap. The columns' means times 1,000: Mixtral
    $0.0816 and GPT-4 $3.7534 per 1,000."""
    at = _upload_gsm8k_with_costs(empty_db)
    _costs_radio(at).set_value("per_query").run()
    assert "1,319 queries in gsm8k.csv; per-query costs." in texts(at)
    table = _frame(at, "large_call_rate").set_index("name")
    assert_allclose(table.loc[["small only", "direct to large"], "avg_cost"], [0.0815982, 3.7534041], rtol=1e-6)
    # every threshold costs the small call and, escalated, the large one: between $0.08 and $3.84 per 1,000
    curve = _frame(at, "marginal_cost_per_point")
    assert curve["avg_cost"].between(0.0815, 0.0816 + 3.7535).all()
    # the flat prices are per 1,000 already
    _costs_radio(at).set_value("flat").run()
    assert "flat prices $1.00 and $8.00 per 1,000 (your inputs)" in texts(at)
    assert_allclose(_frame(at, "large_call_rate").set_index("name").loc[["small only", "direct to large"], "avg_cost"],
                    [1.0, 8.0])


def test_an_uploaded_eval_with_cost_columns_starts_priced_by_them(empty_db):
    """The costs radio starts on "per query" where the data carries per-query costs (as the store's shadow evaluation
    does). For an upload it was first drawn before the file, with "flat" alone, kept that value once the file's cost
    columns were mapped, and the page priced GSM8K at the illustrative $1 and $8 per 1,000 ($2.69 at the chosen
    threshold) though the file gives each query's cost."""
    at = _upload_gsm8k_with_costs(empty_db)
    assert _costs_radio(at).value == "per_query"
    assert "1,319 queries in gsm8k.csv; per-query costs." in texts(at)
    assert_allclose(_frame(at, "large_call_rate").set_index("name").loc["direct to large", "avg_cost"], 3.7534041,
                    rtol=1e-6)
