"""Result records: written and read by helpers.results, with their provenance, and clear errors for bad files."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import helpers
from helpers import results
from helpers.lessons.dram.record import NcuDram
from helpers.lessons.fuser.record import FuserVsCompile
from helpers.lessons.roofline.record import Roofline
from helpers.lessons.sweep.record import LaunchOverhead, Sweep
from helpers.lessons.transfers.record import Transfers

COMMITTED = Path(__file__).resolve().parent.parent / "results" / "h200"
RECORDS = [Sweep, LaunchOverhead, Roofline, Transfers, NcuDram, FuserVsCompile]


@dataclass
class Point:
    x: float
    label: str | None = None


@dataclass(kw_only=True)
class Example(results.Record):
    SCHEMA: ClassVar[str] = "example"
    VERSION: ClassVar[int] = 3
    points: list[Point]
    by_size: dict[int, Point] = field(default_factory=dict)


def _example() -> Example:
    return Example(points=[Point(1.5, "a"), Point(2)], by_size={1024: Point(3.0)})


def test_a_record_reads_back_equal_with_provenance(tmp_path):
    path = results.save(_example(), folder=tmp_path)
    back = results.load(Example, tmp_path)
    assert back.points == [Point(1.5, "a"), Point(2.0)] and back.by_size == {1024: Point(3.0)}
    assert back.provenance.backend == ("simulator" if helpers.is_simulator() else "gpu")
    assert back.provenance.describe().endswith(back.provenance.date[:10])
    data = json.loads(path.read_text())
    assert data["schema"] == "example" and data["version"] == 3


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(schema="roofline"), "field 'schema' is 'roofline', not 'example'"),
    (lambda d: d.update(version=2), "field 'version' is 2, but this code reads example version 3"),
    (lambda d: d["points"][1].pop("x"), "field 'points[1].x' is missing"),
    (lambda d: d["points"][0].update(x="fast"), "field 'points[0].x' should be a number"),
    (lambda d: d.update(extra=1), "field 'extra' is not part of Example"),
    (lambda d: d["by_size"].update({"big": {"x": 1.0}}), "field 'by_size' has key 'big', not a int"),
])
def test_an_old_or_foreign_file_names_the_file_and_the_field(tmp_path, edit, message):
    path = results.save(_example(), folder=tmp_path)
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultError) as error:
        results.load(Example, tmp_path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_a_missing_file_and_a_file_that_is_not_json_are_named(tmp_path):
    with pytest.raises(results.ResultError, match="no such result"):
        results.load(Example, tmp_path)
    (tmp_path / "example.json").write_text("{not json")
    with pytest.raises(results.ResultError, match="example.json: not JSON"):
        results.load(Example, tmp_path)


def test_save_refuses_what_is_not_a_record(tmp_path):
    with pytest.raises(TypeError, match="result record"):
        results.save({"a": 1}, folder=tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.SCHEMA)
def test_every_committed_h200_result_reads_into_its_record(record):
    loaded = results.load(record)
    assert loaded.provenance.device == "NVIDIA H200" and loaded.provenance.backend == "gpu"


def test_load_or_measure_says_where_the_numbers_come_from(tmp_path, capsys):
    results.save(_example(), folder=tmp_path)
    measured = []
    got = results.load_or_measure(Example, measure=lambda: measured.append(1) or _example(),
                                  remeasure=helpers.is_simulator(), folder=tmp_path)
    line = capsys.readouterr().out
    assert got.points[0] == Point(1.5, "a") and measured == []
    assert line.startswith("committed result: ") and got.provenance.describe() in line
    if helpers.is_simulator():
        assert "the simulator cannot time kernels" in line


def test_load_or_measure_names_the_peers_versions_when_asked(tmp_path, capsys):
    record = _example()
    here = results.Provenance.here()
    record.provenance = replace(here, versions={**here.versions, "torch": "9.9.9"}, cpu="a test CPU")
    results.save(record, folder=tmp_path)
    results.load_or_measure(Example, measure=_example, folder=tmp_path)
    assert "torch" not in capsys.readouterr().out
    results.load_or_measure(Example, measure=_example, folder=tmp_path, peers=True)
    line = capsys.readouterr().out
    assert line.startswith("committed result: ") and "torch 9.9.9" in line and "CPU a test CPU" in line


@pytest.mark.skipif(helpers.is_simulator(), reason="re-measuring needs a GPU")
def test_load_or_measure_measures_on_a_gpu_when_asked(tmp_path, capsys):
    got = results.load_or_measure(Example, measure=_example, remeasure=True, folder=tmp_path)
    assert capsys.readouterr().out.startswith("measured now: ") and got.provenance is not None


def test_claims_read_as_sentences():
    assert results.Claim("fused is >= 2x faster", 2.27, ">= 2", True, "2.27x").line() == "fused is >= 2x faster: yes, 2.27x"
    assert results.Claim("x", None, "", None).line() == "x: not checked (not measured)"


def test_claims_in_brief_print_the_cited_and_check_the_rest():
    claims = [results.Claim("a graph is >= 3x faster", 11.9, ">= 3", True, "11.9x"),
              results.Claim("fused is no slower than cupy", 0.9, "<= 1", True, "0.90x"),
              results.Claim("fused is no slower than torch.compile", 1.09, "<= 1", False, "1.09x"),
              results.Claim("within 10% of the earlier probe", None, "", None, "measured on another GPU")]
    lines = results.claims_in_brief(claims, cited=("fused is no slower than torch", "a graph"))
    assert lines == ["fused is no slower than torch.compile: no, 1.09x", "a graph is >= 3x faster: yes, 11.9x",
                     "1 further claim holds on this data; 1 not checked here"]  # in the order cited
    assert results.claims_in_brief(claims[:2]) == ["2 claims hold on this data"]
    with pytest.raises(results.ClaimFailed, match="does not hold on this data: fused is no slower than torch.compile"):
        results.claims_in_brief(claims, cited=("a graph",))
    # claim lines as the lessons' reports write them: a verdict after the claim, or none (a measured statement)
    written = ["fused at least as fast as torch at 4096 x 1024: no, 0.87x", "fused reaches 62% of the copy's bandwidth",
               "fused >= 3x faster than unfused at 4096 x 1024: yes, 5.84x"]
    assert results.claims_in_brief(written[1:]) == ["2 claims hold on this data"]
    with pytest.raises(results.ClaimFailed, match="at 4096 x 1024: no, 0.87x"):
        results.claims_in_brief(written)


# --- bad input: every refusal names the argument or the field, and what to do --------------------


def test_a_folder_may_be_a_str_or_a_path(tmp_path):
    path = results.save(_example(), folder=str(tmp_path))
    assert path == tmp_path / "example.json"
    assert results.load(Example, str(tmp_path)).points == results.load(Example, tmp_path).points
    assert results.path_of(Example, str(tmp_path)) == path
    with pytest.raises(TypeError, match="`folder` must be a path .*got int"):
        results.load(Example, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`folder` must be a path"):
        results.save(_example(), folder=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("what, message", [
    ("sweep", r"got 'sweep' \(str\)"),
    (dict, "got the class dict, which is not a result record"),
    (results.Record, "got Record itself, the base class"),
    (Point, "got the class Point, which is not a result record"),
])
def test_load_needs_a_record_class(what, message):
    for call in (lambda: results.load(what), lambda: results.from_json(what, {}), lambda: results.path_of(what)):
        with pytest.raises(TypeError, match=f"expected a result record class .*{message}.*results.load\\(Sweep\\)"):
            call()


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "example.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(results.ResultError, match=f"{path}: not UTF-8 text"):
        results.load(Example, tmp_path)


def test_numpy_numbers_are_saved_as_plain_numbers(tmp_path):
    record = Example(points=[Point(np.float32(1.5), "a"), Point(np.float64(2.0))], by_size={np.int64(1024): Point(3.0)})
    path = results.save(record, folder=tmp_path)
    back = results.load(Example, tmp_path)
    assert back.points == [Point(1.5, "a"), Point(2.0)] and back.by_size == {1024: Point(3.0)}
    assert type(back.points[0].x) is float and json.loads(path.read_text())["points"][0]["x"] == 1.5


@pytest.mark.parametrize("record, message", [
    (Example(points=[Point("1.5")]), r"field 'points\[0\].x' should be a number, not '1.5'"),
    (Example(points=[Point(1.0, 7)]), r"field 'points\[0\].label' should be str, not 7"),
    (Example(points=[Point(True)]), r"field 'points\[0\].x' should be a number, not True"),
    (Example(points=Point(1.0)), "field 'points' should be a list"),  # type: ignore[arg-type]
])
def test_save_refuses_what_load_would_refuse_and_writes_nothing(tmp_path, record, message):
    with pytest.raises(results.ResultError, match=f"Example \\(not saved\\): {message}"):
        results.save(record, folder=tmp_path)
    assert not (tmp_path / "example.json").exists()


def test_save_names_a_field_that_json_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match=r"field 'points\[0\].x' holds a ndarray.*tolist"):
        results.save(Example(points=[Point(np.ones(2))]), folder=tmp_path)  # type: ignore[arg-type]
    assert not (tmp_path / "example.json").exists()


def test_nan_and_infinities_are_written_as_standard_json_and_read_back(tmp_path):
    record = Example(points=[Point(float("nan")), Point(float("inf")), Point(-float("inf")), Point(np.float32("nan"))])
    path = results.save(record, folder=tmp_path)
    text = path.read_text()
    data = json.loads(text, parse_constant=lambda token: pytest.fail(f"non-standard JSON token {token}"))
    assert [p["x"] for p in data["points"]] == ["NaN", "Infinity", "-Infinity", "NaN"]
    xs = [p.x for p in results.load(Example, tmp_path).points]
    assert np.isnan(xs[0]) and xs[1] == float("inf") and xs[2] == -float("inf") and np.isnan(xs[3])
    # a file written before this spelling (bare NaN tokens) still reads, to the same values
    path.write_text(text.replace('"NaN"', "NaN").replace('"-Infinity"', "-Infinity").replace('"Infinity"', "Infinity"))
    old = [p.x for p in results.load(Example, tmp_path).points]
    assert np.isnan(old[0]) and old[1:3] == xs[1:3] and np.isnan(old[3])


@pytest.mark.parametrize("edit, message", [
    # a file from a NEWER copy of the project must not be read as if its layout were this one's
    (lambda d: d.update(version=4), "field 'version' is 4, newer than the example version 3 .*update this one"),
    (lambda d: d.update(version=True), "field 'version' is True, but this code reads example version 3"),
    # JSON `true` is no number, though Python's True == 1
    (lambda d: d["points"][0].update(x=True), r"field 'points\[0\].x' should be a number, not True"),
    (lambda d: d["provenance"].update(sm_count=True), "field 'provenance.sm_count' should be int, not True"),
    (lambda d: d["points"][0].update(x="nan"), r"field 'points\[0\].x' should be a number, not 'nan'"),
])
def test_a_newer_layout_and_true_in_a_number_field_are_refused(tmp_path, edit, message):
    path = results.save(_example(), folder=tmp_path)
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultError, match=message):
        results.load(Example, tmp_path)


def test_version_true_is_refused_where_the_layout_is_version_1(tmp_path):
    @dataclass(kw_only=True)
    class First(results.Record):
        SCHEMA: ClassVar[str] = "first"
        VERSION: ClassVar[int] = 1  # True == 1 in Python: the comparison alone would take it

    with pytest.raises(results.ResultError, match="field 'version' is True"):
        results.from_json(First, {"schema": "first", "version": True})
    assert results.from_json(First, {"schema": "first", "version": 1}).provenance is None


@pytest.mark.parametrize("holds", ["no", "yes", 0, 1.0, [True]])
def test_a_claim_holds_only_true_false_or_none(holds):
    with pytest.raises(TypeError, match=f"`holds` must be True, False or None .*got {re.escape(repr(holds))}"):
        results.Claim("x", None, "", holds)


def test_a_claim_takes_numpys_booleans_and_says_no_when_it_does_not_hold():
    ratio = np.float64(1.5)
    claim = results.Claim("fused is >= 2x faster", float(ratio), ">= 2", ratio >= 2, "1.5x")
    assert claim.holds is False and claim.line() == "fused is >= 2x faster: no, 1.5x"
    assert results.Claim("x", None, "", np.bool_(True)).holds is True
