"""finops.ingest.uploads: uploads as files, eval CSVs, tau tables and RTT samples, errors naming the file."""
from __future__ import annotations

from pathlib import Path

import pytest
from numpy.testing import assert_allclose, assert_array_equal

from finops.errors import InputError
from finops.ingest import uploads

DATA = Path(__file__).resolve().parent / "data"


# ---------------------------------------------------------------------------------------
# uploads as files
# ---------------------------------------------------------------------------------------
def test_an_upload_is_a_file_under_its_own_name_removed_afterwards():
    with uploads.upload_file(b"a,b\n1,2\n", "../../etc/costs.csv") as path:
        assert path.name == "costs.csv" and path.read_bytes() == b"a,b\n1,2\n"
        assert path.parent.name.startswith("finops-upload-")      # the folder part of the name is dropped
    assert not path.exists() and not path.parent.exists()


def test_a_saved_upload_is_written_once(tmp_path):
    first = uploads.save_upload(b"one", "log.jsonl", tmp_path / "id-1")
    again = uploads.save_upload(b"two", "log.jsonl", tmp_path / "id-1")
    assert first == again == tmp_path / "id-1" / "log.jsonl" and first.read_bytes() == b"one"


def test_read_upload_names_the_upload_in_errors():
    def fail(path):
        raise InputError("broken", file=str(path), row=3)

    with pytest.raises(InputError, match=r"^file mine\.csv, row 3: broken$"):
        uploads.read_upload(b"x", "mine.csv", fail)
    assert uploads.read_upload(b"hello", "a.txt", lambda p: p.read_text()) == "hello"


def test_load_parametric_csv(tmp_path):
    f = tmp_path / "tau.csv"
    f.write_text("threshold,escalation_rate,avg_quality\n0.8,0.4,0.9\n")
    assert uploads.load_parametric_csv(f).to_dict("records") == [
        {"threshold": 0.8, "escalation_rate": 0.4, "avg_quality": 0.9}]
    with pytest.raises(InputError, match="no such file"):
        uploads.load_parametric_csv(tmp_path / "nope.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match=r"empty\.csv: not a readable CSV"):
        uploads.load_parametric_csv(tmp_path / "empty.csv")


# ---------------------------------------------------------------------------------------
# eval CSVs
# ---------------------------------------------------------------------------------------
def test_load_eval_csv_mapping_booleans_and_costs(tmp_path):
    f = tmp_path / "eval.csv"
    f.write_text("conf,small,large,cs,cl\n0.9,True,true,0.001,0.008\n0.2,False,1,0.002,0.009\n")
    data = uploads.load_eval_csv(f, "confidence=conf,small_quality=small,large_quality=large,"
                                    "cost_small=cs,cost_large=cl")
    assert_array_equal(data.small_quality, [1, 0])
    assert_array_equal(data.large_quality, [1, 1])
    assert_allclose(data.cost_large, [0.008, 0.009])
    plain = uploads.load_eval_csv(f, {"confidence": "conf", "small_quality": "small", "large_quality": "large"})
    assert plain.cost_small is None


@pytest.mark.parametrize("body, mapping, match", [
    ("confidence,small_quality,large_quality\n0.9,1,1\n0.5,maybe,1\n", None,
     r"file .*eval\.csv, row 2, field small_quality: 'maybe' is not a finite number"),
    ("confidence,small_quality,large_quality\n,1,1\n", None, r"row 1, field confidence: '' is empty"),
    ("c,s,l\n0.9,1,1\n", None, r"column 'small_quality' \(for small_quality\) is not in the file"),
    ("c,s,l\n0.9,1,1\n", "confidence=conf,small_quality=s,large_quality=l",
     r"column 'conf' \(for confidence\) is not in the file"),
    ("c,s,l,x\n0.9,1,1,-2\n", "confidence=c,small_quality=s,large_quality=l,cost_small=x",
     r"row 1, field x: '-2' is a negative cost"),
    ("c,s,l\n", "confidence=c,small_quality=s,large_quality=l", "no rows"),
    ("c,s,l\n0.9,1,1\n", "confidence=c,quality=s", r"unknown mapping key\(s\) \['quality'\]"),
    ("c,s,l\n0.9,1,1\n", "confidence", "is not KEY=COLUMN"),
    # the same column for both models compared a model with itself: every policy the same quality
    ("c,s,l\n0.9,1,1\n", "small_quality=s,large_quality=s", "small_quality and large_quality are both column 's'"),
])
def test_load_eval_csv_errors_name_file_row_field(tmp_path, body, mapping, match):
    f = tmp_path / "eval.csv"
    f.write_text(body)
    with pytest.raises(InputError, match=match):
        uploads.load_eval_csv(f, mapping)


def test_load_eval_csv_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        uploads.load_eval_csv(tmp_path / "nope.csv")


def test_upload_reads_the_routellm_excerpt():
    raw = (DATA / "routellm_gsm8k_cascade.csv").read_bytes()
    columns = uploads.eval_csv_columns(raw)
    guess = uploads.guess_mapping(columns)
    assert guess["confidence"] == "confidence"
    mapping = {"confidence": "confidence", "small_quality": "mixtral_correct", "large_quality": "gpt4_correct"}
    data = uploads.eval_from_upload(raw, "gsm8k.csv", mapping)
    assert data.n_queries == 1319 and data.source == "gsm8k.csv" and data.cost_small is None


MMLU_SMALL, MMLU_LARGE = "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"


def test_an_eval_of_two_models_alone_has_no_confidence():
    """RouteLLM's MMLU files grade Mixtral and GPT-4 per question with no confidence: they load (the cascade
    page and CLI show the baselines), where the confidence was required and no column could be chosen."""
    raw = (DATA / "routellm_mmlu_abstract_algebra.csv").read_bytes()
    columns = uploads.eval_csv_columns(raw)
    assert columns == ["prompt", MMLU_SMALL, MMLU_LARGE]
    assert uploads.guess_mapping(columns)["confidence"] is None
    data = uploads.eval_from_upload(raw, "algebra.csv", {"confidence": None, "small_quality": MMLU_SMALL,
                                                          "large_quality": MMLU_LARGE})
    # the file's True/False, counted by hand: 9 questions only Mixtral gets, 23 only GPT-4, 23 both, 45 neither
    assert data.confidence is None and data.n_queries == 100
    assert (data.small_quality.sum(), data.large_quality.sum()) == (32, 46)
    assert ((data.large_quality > data.small_quality).sum()) == 23


def test_evals_of_several_files_are_one_with_a_confidence_only_where_every_file_has_one(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("confidence,small_quality,large_quality,cs\n0.9,1,1,0.5\n0.2,0,1,0.25\n")
    b.write_text("confidence,small_quality,large_quality\n0.4,1,0\n")
    both = uploads.concat_evals([uploads.load_eval_csv(a), uploads.load_eval_csv(b)], "a and b")
    assert_allclose(both.confidence, [0.9, 0.2, 0.4])
    assert_allclose(both.small_quality, [1, 0, 1]) and both.source == "a and b" and both.n_queries == 3
    assert both.cost_small is None                   # one file's costs alone cannot price all queries
    bare = uploads.concat_evals([uploads.load_eval_csv(a), uploads.load_eval_csv(b, {"confidence": None})], "x")
    assert bare.confidence is None
    assert uploads.files_label(["a.csv"]) == "a.csv"
    assert uploads.files_label(["a.csv", "b.csv", "c.csv", "d.csv", "e.csv"]) == \
        "5 files (a.csv, b.csv, c.csv and 2 more)"
    with pytest.raises(InputError, match="no eval file"):
        uploads.concat_evals([], "none")


def test_a_confidence_column_is_taken_by_its_name_unless_the_mapping_says_none(tmp_path):
    f = tmp_path / "eval.csv"
    f.write_text("confidence,small_quality,large_quality\n0.9,1,1\n0.2,0,1\n")
    assert_allclose(uploads.load_eval_csv(f).confidence, [0.9, 0.2])
    assert_allclose(uploads.load_eval_csv(f, "small_quality=small_quality").confidence, [0.9, 0.2])
    assert uploads.load_eval_csv(f, {"confidence": None}).confidence is None
    g = tmp_path / "graded.csv"
    g.write_text("small_quality,large_quality\n1,1\n0,1\n")
    assert uploads.load_eval_csv(g).confidence is None


def test_upload_refuses_qualities_outside_0_1():
    raw = b"confidence,small,large,prompt_id\n0.5,1,0,17\n0.9,0,1,18\n"
    mapping = {"confidence": "confidence", "small_quality": "prompt_id", "large_quality": "large"}
    with pytest.raises(InputError, match="share between 0 and 1") as exc:
        uploads.eval_from_upload(raw, "mine.csv", mapping)
    assert "mine.csv" in str(exc.value) and "row 1" in str(exc.value)
    assert uploads.guess_mapping(["confidence", "small", "large", "prompt_id"]) == {
        "confidence": "confidence", "small_quality": "small", "large_quality": "large",
        "cost_small": None, "cost_large": None}


def test_upload_errors_name_the_upload_not_the_temp_file():
    with pytest.raises(InputError) as exc:
        uploads.eval_from_upload(b"confidence,small_quality,large_quality\n0.5,yes please,1\n", "mine.csv", {})
    assert "mine.csv" in str(exc.value) and "finops-upload" not in str(exc.value)


def test_rtt_samples_from_upload():
    assert_allclose(uploads.rtt_samples_from_upload(b"rtt_ms\n80\n1500\n", "rtt.csv", max_ms=600_000), [80, 1500])
    with pytest.raises(InputError, match="rtt.csv"):
        uploads.rtt_samples_from_upload(b"rtt_ms\n-3\n", "rtt.csv", max_ms=600_000)


# ---------------------------------------------------------------------------------------
# RTT samples
# ---------------------------------------------------------------------------------------
def test_load_rtt_samples(tmp_path):
    f = tmp_path / "rtt.csv"
    f.write_text("rtt_ms,region\n80,eu\n95.5,eu\n")
    assert_allclose(uploads.load_rtt_samples(f, max_ms=600_000), [80, 95.5])
    f.write_text("rtt_ms\n80\nlate\n")
    with pytest.raises(InputError, match=r"rtt\.csv, row 2, field rtt_ms: 'late'"):
        uploads.load_rtt_samples(f, max_ms=600_000)
    f.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="name the RTT column"):
        uploads.load_rtt_samples(f, max_ms=600_000)


# ---------------------------------------------------------------------------------------
# the upload area: abandoned sessions' folders swept, the area's bytes bounded
# ---------------------------------------------------------------------------------------
def _aged(folder, seconds):
    """Set every mtime in ``folder`` ``seconds`` into the past (no sleeping: times are set, not waited for)."""
    import os
    import time
    then = time.time() - seconds
    for p in [folder, *folder.rglob("*")]:
        os.utime(p, (then, then))


def test_an_abandoned_sessions_upload_folder_is_swept(tmp_path):
    area = tmp_path / "area"
    gone = uploads.session_folder(area)
    uploads.save_upload(b"x" * 1000, "left.csv", gone / "file-1")
    _aged(gone, uploads.UPLOAD_MAX_IDLE_S + 60)
    live = uploads.session_folder(area)
    uploads.save_upload(b"y" * 10, "mine.csv", live / "file-2")
    (area / "not-a-session").mkdir()           # nothing but session folders is touched
    swept = uploads.sweep_uploads(area)
    assert (swept.removed, swept.removed_bytes, swept.kept, swept.kept_bytes) == (1, 1000, 1, 10)
    assert not gone.exists() and (live / "file-2" / "mine.csv").exists() and (area / "not-a-session").exists()


def test_a_session_touched_recently_is_kept_though_its_files_are_old(tmp_path):
    area = tmp_path / "area"
    folder = uploads.session_folder(area)
    uploads.save_upload(b"x", "old.csv", folder / "f")
    _aged(folder, uploads.UPLOAD_MAX_IDLE_S + 60)
    uploads.touch(folder)                      # the page touches its folder on every run
    assert uploads.sweep_uploads(area).removed == 0 and (folder / "f" / "old.csv").exists()


def test_the_upload_area_is_bounded_in_bytes(tmp_path):
    area = tmp_path / "area"
    other = uploads.session_folder(area)
    uploads.save_upload(b"x" * 600, "big.csv", other / "f")
    with pytest.raises(InputError, match=r"^file next\.csv: the upload area is full: 500 more bytes would make "
                                         r"1,100, more than the 1,000 allowed"):
        uploads.make_room(500, "next.csv", area, max_bytes=1000)
    assert (other / "f" / "big.csv").exists()      # a live session's file is never deleted to make room
    _aged(other, uploads.UPLOAD_MAX_IDLE_S + 60)   # once abandoned, it is swept and the upload fits
    swept = uploads.make_room(500, "next.csv", area, max_bytes=1000)
    assert swept.removed == 1 and not other.exists()


def test_the_data_page_sweeps_abandoned_uploads_and_refuses_a_full_area(empty_db, tmp_path, monkeypatch):
    from tests.helpers import run_page
    area = tmp_path / "area"
    monkeypatch.setenv("FINOPS_UPLOAD_DIR", str(area))
    gone = uploads.session_folder(area)
    uploads.save_upload(b"x" * 100, "left.csv", gone / "f")
    _aged(gone, uploads.UPLOAD_MAX_IDLE_S + 60)
    at = run_page(empty_db, "views/data.py")
    at.file_uploader(key="uploads").set_value(("a.csv", b"request_id,ts,model\nr1,2026-11-20T10:00:00Z,m\n",
                                               "text/csv"))
    at.run()
    assert not at.exception and not gone.exists()
    assert str(area) in at.session_state["_upload_dir"]
    monkeypatch.setenv("FINOPS_UPLOAD_AREA_MAX_BYTES", "40")      # under b.csv's 46 bytes
    at.file_uploader(key="uploads").set_value(("b.csv", b"request_id,ts,model\nr2,2026-11-20T10:00:00Z,m\n",
                                               "text/csv"))
    at.run()
    assert not at.exception
    assert any("the upload area is full" in e.value for e in at.error)
