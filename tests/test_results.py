"""Result records: written and read by helpers.results, with their provenance, and clear errors for bad files."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

import helpers
from helpers import results
from helpers.lab.fuser_vs_compile import FuserVsCompile
from helpers.lab.ncu import NcuDram
from helpers.lab.roofline import Roofline
from helpers.lab.sweep_record import LaunchOverhead, Sweep
from helpers.lab.transfers import Transfers

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


@pytest.mark.skipif(helpers.is_simulator(), reason="re-measuring needs a GPU")
def test_load_or_measure_measures_on_a_gpu_when_asked(tmp_path, capsys):
    got = results.load_or_measure(Example, measure=_example, remeasure=True, folder=tmp_path)
    assert capsys.readouterr().out.startswith("measured now: ") and got.provenance is not None


def test_claims_read_as_sentences():
    assert results.Claim("fused is >= 2x faster", 2.27, ">= 2", True, "2.27x").line() == "fused is >= 2x faster: yes, 2.27x"
    assert results.Claim("x", None, "", None).line() == "x: not checked (not measured)"
