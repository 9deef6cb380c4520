"""docs/benchmarks.md is generated from the committed benchmark JSON (`invkin bench page`), so the
page's tables and comparisons cannot drift from the measured numbers."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from invkin.bench.page import render_page, trim

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"


def _load(name):
    return json.loads((RESULTS / name).read_text())


@pytest.fixture(scope="module")
def acc():
    return _load("bench_accuracy.json")


@pytest.fixture(scope="module")
def suite():
    return _load("bench_suite.json")


def test_the_committed_page_is_exactly_what_the_committed_json_gives(acc, suite):
    assert render_page(acc, suite) == PAGE.read_text()


def test_bench_page_check_reports_a_page_that_drifted(tmp_path):
    args = [sys.executable, "-m", "invkin.cli", "bench", "page", str(RESULTS / "bench_accuracy.json"),
            str(RESULTS / "bench_suite.json")]
    ok = subprocess.run(args + ["--check", "-o", str(PAGE)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    drifted = tmp_path / "benchmarks.md"
    drifted.write_text(PAGE.read_text().replace("| lm |", "| lm (edited) |", 1))
    bad = subprocess.run(args + ["--check", "-o", str(drifted)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "DIFFERS" in bad.stdout
    out = tmp_path / "page.md"
    wrote = subprocess.run(args + ["-o", str(out)], capture_output=True, text=True, timeout=120)
    assert wrote.returncode == 0 and out.read_text() == PAGE.read_text()
    missing = subprocess.run(args[:5] + [str(tmp_path / "nope.json")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "nope.json" in missing.stderr


def _set_time(acc, sname, method, ms):
    for r in acc["sets"][sname]["methods"][method]:
        r["time_ms_median"] = ms


def test_the_comparisons_follow_the_numbers_not_a_fixed_text(acc):
    ref = acc["settings"]["reference_accuracy"]
    a = copy.deepcopy(acc)
    _set_time(a, "boundary", "ccd", 3.0)
    _set_time(a, "boundary", "transpose", 1.0)
    page = render_page(a)
    assert "**Against the transpose: no." in page
    assert "transpose 3× faster" in page
    b = copy.deepcopy(acc)
    _set_time(b, "boundary", "ccd", 1.0)
    _set_time(b, "boundary", "transpose", 1.6)
    page = render_page(b)
    assert "**Against the transpose: yes." in page and "CCD 1.6× faster" in page
    # inside: equal times are "about the same", whatever the iterations say
    c = copy.deepcopy(acc)
    _set_time(c, "inside", "ccd", 0.05)
    _set_time(c, "inside", "transpose", 0.045)
    assert "about the same" in render_page(c).split("Inside the workspace")[1].split("|")[0]
    # a table cell is the JSON's number
    row = next(r for r in acc["sets"]["seed8dof"]["methods"]["lm"] if r["accuracy"] == ref)
    d = copy.deepcopy(acc)
    for r in d["sets"]["seed8dof"]["methods"]["lm"]:
        if r["accuracy"] == ref:
            r["iterations_median"] = row["iterations_median"] + 1000
    assert f"({row['iterations_median'] + 1000:.0f})" in render_page(d)


def test_trim_drops_the_per_goal_lists_and_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = {"sets": {"s": {"targets": [[1, 2, 3]], "methods": {"lm": [{"per_goal": {"x": [1]}, "success": 1.0}]}}},
           "command": f"invkin bench suite --json {tmp_path}/a.json --peers-python {Path.home()}/venv/bin/python"}
    t = trim(res)
    assert t["sets"]["s"] == {"methods": {"lm": [{"success": 1.0}]}}
    assert t["command"] == "invkin bench suite --json a.json --peers-python ~/venv/bin/python"
