"""The GPU half of the upgrade preview, with fake environments: the alternation, the statistics,
the worker protocol over real pipes, and the refusals."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from argparse import Namespace

import pytest
from conftest import REPO

from tilelang_golden.upgrade.speed import (
    FASTER_BELOW,
    MAYBE_SLOWER_ABOVE,
    SLOWER_ABOVE,
    ProcessWorker,
    SpeedRow,
    WorkerFailed,
    compare_speed,
    render_markdown,
    serve,
)


class FakeWorker:
    def __init__(self, name: str, ratios: list[dict[str, float]], calls: list[str]) -> None:
        self.name, self.ratios, self.calls = name, iter(ratios), calls
        self.hello = {"tilelang": name, "device": "Fake GPU", "variants": {"f/a": {"status": "pass", "problems": []}}}

    def time(self, rounds: int, seed: int) -> dict[str, float]:
        self.calls.append(f"{self.name} {rounds} {seed}")
        return next(self.ratios)


def test_the_environments_take_turns_and_who_goes_first_alternates():
    calls: list[str] = []
    pinned = FakeWorker("pinned", [{"f/a": 0.5}] * 4, calls)
    candidate = FakeWorker("candidate", [{"f/a": 0.5}] * 4, calls)
    compare_speed(pinned, candidate, blocks=4, rounds=3, seed=10, log=lambda line: None)
    assert calls == [
        "pinned 3 10", "candidate 3 10", "candidate 3 11", "pinned 3 11",
        "pinned 3 12", "candidate 3 12", "candidate 3 13", "pinned 3 13",
    ]  # fmt: skip


def test_a_variant_is_compared_block_by_block_and_only_where_both_timed_it():
    pinned = FakeWorker("pinned", [{"f/a": 0.50, "f/b": 1.0}, {"f/a": 0.52, "f/b": 1.0}, {"f/a": 0.51}], [])
    candidate = FakeWorker("candidate", [{"f/a": 0.45, "f/b": 1.0}, {"f/a": 0.47, "f/b": 1.0}, {"f/a": 0.46}], [])
    comparison = compare_speed(pinned, candidate, blocks=3, rounds=2, seed=0, log=lambda line: None)
    assert [r.variant for r in comparison.rows] == ["f/a"], "f/b was not timed in every block"
    row = comparison.rows[0]
    assert row.changes == pytest.approx([0.50 / 0.45 - 1, 0.52 / 0.47 - 1, 0.51 / 0.46 - 1])
    assert row.change == pytest.approx(0.51 / 0.46 - 1)
    assert row.noise == pytest.approx(0.52 / 0.50 - 1)
    assert row.verdict == "slower"


@pytest.mark.parametrize(
    ("candidate", "verdict"),
    [
        ([1 / (1 + SLOWER_ABOVE + 0.01)] * 3, "slower"),
        ([1 / (1 + SLOWER_ABOVE + 0.01)] * 2 + [1.0], "unchanged"),  # one block disagrees: no verdict
        ([1 / (1 + (MAYBE_SLOWER_ABOVE + SLOWER_ABOVE) / 2)] * 3, "maybe slower"),
        ([1 / (1 + FASTER_BELOW - 0.01)] * 3, "faster"),
        ([1.0] * 3, "unchanged"),
    ],
)
def test_a_verdict_needs_every_block_beyond_the_threshold(candidate, verdict):
    assert SpeedRow("f/a", [1.0] * 3, candidate).verdict == verdict


def test_fewer_than_two_blocks_cannot_show_the_noise():
    with pytest.raises(ValueError, match="at least 2 blocks"):
        compare_speed(FakeWorker("p", [], []), FakeWorker("c", [], []), 1, 3, 0, log=print)


def test_the_report_names_both_versions_every_compared_variant_and_the_candidates_failures():
    pinned = FakeWorker("pinned", [{"f/a": 0.5}] * 2, [])
    candidate = FakeWorker("candidate", [{"f/a": 0.4}] * 2, [])
    candidate.hello["variants"]["f/b"] = {"status": "fail", "problems": ["numerics: seed 1 max error 3.0"]}
    text = render_markdown(compare_speed(pinned, candidate, 2, 2, 5, log=lambda line: None))
    assert "TileLang candidate against the pinned pinned" in text
    assert "| f/a | 0.500 | 0.400 | +25.0% |" in text and "| slower |" in text
    assert "1 of 2 variants pass" in text and "- f/b: fail: numerics: seed 1 max error 3.0" in text
    assert "Not compared (not timed in both environments): f/b" in text


def test_the_worker_says_hello_then_answers_each_request_in_order():
    answers = io.StringIO()
    requests = io.StringIO('{"rounds": 2, "seed": 7}\n{"rounds": 3, "seed": 8}\n')
    serve({"tilelang": "x"}, lambda rounds, seed: {"f/a": rounds + seed / 10}, requests, answers)
    assert [json.loads(line) for line in answers.getvalue().splitlines()] == [
        {"tilelang": "x"},
        {"f/a": 2.7},
        {"f/a": 3.8},
    ]


def fake_environment(tmp_path, body: str) -> str:
    """A Python command whose "worker" is the given script (ProcessWorker appends `-m` and the real worker's module)."""
    script = tmp_path / "fake_worker.py"
    script.write_text("import sys\n" + textwrap.dedent(body))
    return f"{sys.executable} {script}"


def test_a_worker_process_answers_over_its_pipes(tmp_path):
    command = fake_environment(
        tmp_path,
        """
        from tilelang_golden.upgrade.speed import serve
        serve({"tilelang": "0.0.1", "argv": sys.argv[3:]}, lambda r, s: {"f/a": r * s}, sys.stdin, sys.stdout)
        """,
    )
    worker = ProcessWorker("candidate", command, ["--seeds", "1", "2", "3"])
    assert worker.hello["tilelang"] == "0.0.1" and worker.hello["argv"] == ["--seeds", "1", "2", "3"]
    assert worker.time(3, 5) == {"f/a": 15.0}
    worker.close()
    assert worker.process.returncode == 0


def test_a_worker_that_dies_is_named_with_its_command_and_status(tmp_path):
    command = fake_environment(tmp_path, "sys.exit(3)\n")
    worker = ProcessWorker("pinned", command, [])
    with pytest.raises(
        WorkerFailed, match=r"the pinned environment `.*fake_worker.py` stopped during its GPU check \(exit status 3\)"
    ):
        worker.hello  # noqa: B018


def test_a_missing_python_is_a_clear_failure():
    with pytest.raises(WorkerFailed, match="the pinned environment `no-such-python-here` could not start"):
        ProcessWorker("pinned", "no-such-python-here", [])


def test_without_a_gpu_the_speed_preview_stops_with_status_2(monkeypatch, capsys):
    from tilelang_golden.gpu.run import device
    from tilelang_golden.upgrade import command as upgrade_command

    def no_gpu() -> None:
        raise device.NoCudaDevice("no CUDA device is visible")

    monkeypatch.setattr(device, "require_cuda", no_gpu)
    options = Namespace(golden_dir=REPO / "golden", against="python3", blocks=2, rounds=2, output=None)
    assert upgrade_command.gpu_preview(options, pinned="0.1.15") == 2
    assert "upgrade preview --gpu: no CUDA device is visible" in capsys.readouterr().err
