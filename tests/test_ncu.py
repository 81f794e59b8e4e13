"""Lesson 04's hardware count: ncu's command line and CSV parser, the workload, and the join with the ledger.

The CSV below is a PARSER FIXTURE in the format `ncu --csv --print-units base`
prints (one row per kernel and metric, quoted, with a thousands separator in one
value; tests/ncu_support.py writes the table). Its numbers are made up, not measurements.
"""

import json

import pytest

import helpers
from helpers import results
from helpers.device import l2_bytes
from helpers.lessons.dram import measure, ncu, record, report
from ncu_support import ncu_csv

FIXTURE = """\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
some line the workload printed
==PROF== Profiling "add_kernel" - 0: 0%....50%....100% - 1 pass
==PROF== Profiling "fused_kernel" - 1: 0%....50%....100% - 1 pass
==PROF== Disconnected from process 4242
""" + ncu_csv(("4242", "python3.12", "127.0.0.1"), "(1, 1, 1)", {
    "add_kernel": {"dram__bytes_read.sum": ("byte", "2,048"), "dram__bytes_write.sum": ("byte", "1024")},
    "fused_kernel": {"dram__bytes_read.sum": ("Kbyte", "3.072"), "dram__bytes_write.sum": ("byte", "0")},
})


def test_parser_reads_kernels_in_order_in_bytes():
    kernels = ncu.parse_ncu_csv(FIXTURE)
    assert [k.kernel for k in kernels] == ["add_kernel", "fused_kernel"]
    assert [(k.dram_bytes_read, k.dram_bytes_write) for k in kernels] == [(2048, 1024), (3072, 0)]
    assert kernels[0].threads == 256


def test_parser_errors_are_clear():
    with pytest.raises(ncu.NcuError, match="no CSV header"):
        ncu.parse_ncu_csv("==PROF== nothing profiled\n")
    one_metric = "\n".join(FIXTURE.splitlines()[:7])
    with pytest.raises(ncu.NcuError, match="dram__bytes_write.sum"):
        ncu.parse_ncu_csv(one_metric)
    with pytest.raises(ncu.NcuError, match="unit"):
        ncu.parse_ncu_csv(FIXTURE.replace('"Kbyte"', '"furlong"'))


@pytest.mark.parametrize("name", [
    "add_kernel",
    "helpers::pipeline::add_kernel[abi:v1][abi:cw51cXTLSUwv1sDU](Array<float, 1, C, mutable, aligned>)",
    "_ZN7helpers8pipeline10add_kernelB2v1B92cw51cXTLSUwv1sDUaKthE5ArrayIfLi1E1C7mutable7alignedE",
])
def test_kernel_names_are_shortened(name):
    assert ncu.short_kernel_name(name) == "add_kernel"


def test_command_leaves_the_clocks_alone_and_names_the_cache_policy():
    cmd = ncu.ncu_command(["python3", "x.py"], "none", launch_count=8)
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert cmd[cmd.index("--cache-control") + 1] == "none"
    assert "dram__bytes_read.sum,dram__bytes_write.sum" in cmd and "--csv" in cmd
    assert cmd[-2:] == ["python3", "x.py"] and "-c" in cmd
    with pytest.raises(ValueError):
        ncu.ncu_command(["x"], "some")


def test_workload_ledger_joins_with_ncu_rows(tmp_path):
    path = tmp_path / "ledger.json"
    measure.workload([2**8], str(path))
    ledger = json.loads(path.read_text())
    assert [r["kernel"] for r in ledger] == list(measure.PIPELINE_KERNELS)
    assert [r["ledger_bytes_read"] + r["ledger_bytes_written"] for r in ledger] == [12 * 256, 12 * 256, 8 * 256, 16 * 256]
    fake = [record.KernelCounters(i, r["kernel"], r["kernel"], "(1, 1, 1)", "(256, 1, 1)",
                               r["ledger_bytes_read"] * 0.99, r["ledger_bytes_written"] * 0.5) for i, r in enumerate(ledger)]
    rows = measure.dram_launches(measure.join(ledger, fake), l2=None)
    assert all(r.within_3_percent is None for r in rows)  # unknown L2: no verdict
    rows = measure.dram_launches(measure.join(ledger, fake), l2=100)  # arrays of 1 KB are "large" against a 100-byte L2
    assert [r.within_3_percent for r in rows] == [False] * 4
    modes = {"all": record.NcuMode("ncu ...", rows, fake), "none": record.NcuMode(error="ncu exited with 1")}
    check = measure.agreement_check(modes)
    assert check.by_cache_policy["all"].launches_checked == 4 and not check.by_cache_policy["all"].passed
    assert check.by_cache_policy["all"].worst.kernel == "scale_kernel"  # 0.745 of the ledger: farthest from 1
    assert check.by_cache_policy["none"].worst is None and not check.passed  # no verdict without the L2 kept
    dram = record.NcuDram(what="", metrics=[], l2_cache_bytes=None, sizes=[8], modes=modes, agreement_check=check)
    totals = report.pipeline_totals(dram)
    assert [(t.pipeline, t.ledger) for t in totals] == [("fused", 16 * 256), ("three kernels", 32 * 256)]
    assert report.pipeline_totals(dram, "none") == []
    back = results.from_json(record.NcuDram, results.to_json(dram))
    assert back == dram  # nested records (launches, verdicts, ncu's rows) read back as records
    data = results.to_json(dram)
    data["modes"]["all"]["launches"][0]["ratio"] = "high"
    with pytest.raises(results.ResultError, match=r"modes\['all'\]\.launches\[0\]\.ratio"):
        results.from_json(record.NcuDram, data)
    with pytest.raises(ncu.NcuError, match="order"):
        measure.join(ledger, fake[::-1])


def test_missing_results_give_a_note_not_an_error(monkeypatch, tmp_path, capsys):

    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    assert report.load_results() is None
    assert report.load_results(record.NcuCorpus) is None
    assert "note:" in capsys.readouterr().out


@pytest.mark.gpu_alone  # ncu's DRAM bytes and the L2 are the whole device's: other tests' kernels would count
@pytest.mark.skipif(helpers.is_simulator() or not ncu.ncu_available(), reason="needs a GPU and ncu")
def test_ledger_within_3_percent_of_ncu_for_large_arrays():
    # L2 kept between kernels, as the pipeline runs (see helpers.lessons.dram.measure.agreement_check).
    kernels, _ = ncu.run_ncu(["python3", "-m", "helpers.lessons.dram", "workload", "--log2-sizes", "26",
                              "--ledger", "/tmp/ncu_test_ledger.json"], "none", launch_count=4)
    ledger = json.load(open("/tmp/ncu_test_ledger.json"))
    rows = measure.dram_launches(measure.join(ledger, kernels), l2_bytes())
    assert all(r.within_3_percent for r in rows), rows


# --- the corpus measurement -----------------------------------------------------------


def _corpus_kernels(names, read=1000.0, written=500.0):
    return [record.KernelCounters(i, k, k, "(2, 1, 1)", "(256, 1, 1)", read, written) for i, k in enumerate(names)]


def test_corpus_join_puts_ncu_beside_the_ledger_and_keeps_refusals():
    ledger = [
        {"n": 512, "shape": "copy", "kernel": "copy_guard_size", "threads": 512,
         "ledger_bytes_read": 2048, "ledger_bytes_written": 2048, "uncounted": None},
        {"n": 512, "shape": "gather", "kernel": "gather", "threads": 512,
         "ledger_bytes_read": None, "ledger_bytes_written": None, "uncounted": "cannot count gather: ..."},
    ]
    rows = measure.corpus_launches(measure.join(ledger, _corpus_kernels(["copy_guard_size", "gather"])))
    assert rows[0].ratio == pytest.approx(1500 / 4096)
    assert rows[1].ratio is None and rows[1].uncounted.startswith("cannot count")
    corpus = record.NcuCorpus(what="", metrics=list(ncu.METRICS), l2_cache_bytes=None, n=512, cache_control="none",
                              launches=rows)
    table = report.corpus_table(corpus)
    back = results.from_json(record.NcuCorpus, results.to_json(corpus))
    assert back.launches[1].uncounted == rows[1].uncounted
    assert "not counted" in table.splitlines()[2] and "0.366" in table.splitlines()[1]
    with pytest.raises(ncu.NcuError, match="launch order differs"):
        measure.join(ledger, _corpus_kernels(["gather", "copy_guard_size"]))
    with pytest.raises(ncu.NcuError, match="recorded 2 launches but ncu profiled 1"):
        measure.join(ledger, _corpus_kernels(["copy_guard_size"]))


def test_the_corpus_workload_records_every_launch_in_the_simulator(tmp_path):
    path = tmp_path / "ledger.json"
    measure.workload([300], str(path), measure.CORPUS_SHAPES_FILE)
    records = json.loads(path.read_text())
    shapes = [s for s in measure.load_shapes().SHAPES if s.ncu]
    assert [r["kernel"] for r in records][:4] == ["add_kernel", "multiply_kernel", "scale_kernel", "fused_kernel"]
    assert len(records) == 4 + len(shapes)
    assert all(r["uncounted"] is None for r in records)
    stencil = next(r for r in records if r["shape"] == "three_point_interior")
    assert stencil["ledger_bytes_read"] == 3 * 4 * (300 - 2)


def test_the_corpus_kernel_pattern_matches_ncus_names_for_numba_kernels():
    import re

    pattern = re.compile(measure.corpus_kernel_regex().removeprefix("regex:"))
    full = "add_kernel[v1,cw51cXTLSUwv1sDUaKthqaNgoKmjgOR3W3Cw6igA9duC0hkwnNGiHEkYkrqQBFBT](Array<float, 1, C>)"
    assert pattern.search(full) and pattern.search("block_max[v9,cw51c](Array<float, 1, C>)")
    assert not pattern.search("series_fused[v1](Array<float, 1, C>)")
