"""A static run checks every case a pytest configuration of the checkout would hide, and fails, first, where anything
but its own -k, -m or --shard deselected a check (tilelang_golden.static.command, tilelang_golden.static.selection).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, SMALL_CASE, SUBPROCESS_LIMIT_S, collected_cases, collected_items

from tilelang_golden.static.command import GOLDEN, OWN_CONFIGURATION, ignore_pytest_environment
from tilelang_golden.static.report.verdict import build_verdict
from tilelang_golden.static.snapshots.results import HIDING, CheckResult, Status

HIDDEN = SMALL_CASE  # the case every planted setting tries to hide
# Each way a checkout could hand pytest options, with a setting that hides HIDDEN (or, by -k, every case of its
# variant): file -> text.
PLANTED = {
    ".pytest.ini": f"[pytest]\naddopts = -ra -k 'not {HIDDEN.split('/')[1]}'\n",
    "pytest.ini": f"[pytest]\naddopts = --deselect golden/{HIDDEN}\n",
    "tox.ini": f"[pytest]\naddopts = -k 'not {HIDDEN.split('/')[1]}'\n",
    "setup.cfg": f"[tool:pytest]\naddopts = --deselect golden/{HIDDEN}\n",
    "pyproject.toml -k": f"[tool.pytest.ini_options]\naddopts = \"-ra -k 'not {HIDDEN.split('/')[1]}'\"\n",
    "pyproject.toml --deselect": f'[tool.pytest.ini_options]\naddopts = "--deselect golden/{HIDDEN}"\n',
}


def _collect(pytester: pytest.Pytester, *options: str) -> list[str]:
    """The ids `--collect-only -q` lists in pytester's folder, in one process, with these pytest options: the session's
    items by module name, as the command collects them (a path would make pytest look for its configuration there)."""
    result = pytester.runpytest_inprocess(*options, *GOLDEN, "--collect-only", "-q")
    return collected_items(result.stdout.lines)


@pytest.fixture
def planted(pytester: pytest.Pytester, request) -> pytest.Pytester:
    pytester.chdir()
    file = request.param.split()[0]
    (pytester.path / file).write_text(PLANTED[request.param])
    return pytester


@pytest.fixture(scope="module")
def every_case() -> list[str]:
    """What the session collects with no configuration planted."""
    listed = subprocess.run(
        [sys.executable, "-m", "tilelang_golden", "static", "--collect-only", "-q", "-n", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_LIMIT_S,
    )
    return collected_cases(collected_items(listed.stdout.splitlines()))


@pytest.mark.parametrize("planted", list(PLANTED), indirect=True)
def test_a_configuration_file_of_the_checkout_hides_no_case(planted, every_case):
    """The setting hides the case from a plain pytest run of the session's items (the attack works), and from none
    under the session's own configuration."""
    rootdir = ["--rootdir", str(planted.path)]
    hidden_by_it = collected_cases(_collect(planted, *rootdir))
    assert HIDDEN in every_case and HIDDEN not in hidden_by_it, "the planted setting does not hide the case"
    assert collected_cases(_collect(planted, *OWN_CONFIGURATION, *rootdir)) == every_case


def test_the_environment_s_pytest_options_are_dropped_and_named(monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--deselect golden/{HIDDEN}")
    monkeypatch.setenv("PYTEST_PLUGINS", "acme.hide")
    lines = ignore_pytest_environment()
    assert "PYTEST_ADDOPTS" not in os.environ and "PYTEST_PLUGINS" not in os.environ
    assert [line.split("=")[0] for line in lines] == ["PYTEST_ADDOPTS", "PYTEST_PLUGINS"]


def test_the_command_runs_every_case_whatever_the_checkout_and_its_environment_say(tmp_path, every_case):
    """The command itself, in a checkout carrying pytest.ini and PYTEST_ADDOPTS that each hide a case."""
    (tmp_path / "pytest.ini").write_text(PLANTED["pytest.ini"])
    environment = {**os.environ, "PYTEST_ADDOPTS": f"-k 'not {HIDDEN.split('/')[1]}'", "PYTHONPATH": str(REPO)}
    options = ["--collect-only", "-q", "-n", "0", "--golden-dir", str(REPO / "golden")]
    listed = subprocess.run(
        [sys.executable, "-m", "tilelang_golden", "static", *options],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_LIMIT_S,
    )
    assert "PYTEST_ADDOPTS=" in listed.stderr and "ignored" in listed.stderr
    assert collected_cases(collected_items(listed.stdout.splitlines())) == every_case


def test_a_check_deselected_by_anything_but_the_command_line_fails_the_run(golden_session):
    result = golden_session("-k", SMALL_CASE, "--deselect", f"golden/{SMALL_CASE}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*1 check(s) were deselected by neither this run's -k or -m nor its --shard*",
            f"*{SMALL_CASE}",
            "*--deselect*",
        ]
    )


def test_a_check_dealt_to_another_shard_or_left_out_by_k_is_not_hidden_and_a_hidden_one_fails_every_shard(
    golden_session,
):
    """A shard's run does not count the other shards' checks as hidden; a check hidden from the run fails each shard,
    the one it would have run on or not (--deselect changes what the groups cost, hence their dealing)."""

    def listed(*options: str) -> list[str]:
        return collected_items(golden_session("--collect-only", "-q", *options).stdout.lines)

    assert not any("hidden_checks" in line for line in listed("-k", "gemm_num_stages"))
    assert not any("hidden_checks" in line for line in listed("--shard", "1/2") + listed("--shard", "2/2"))
    away = collected_cases(listed("--shard", "2/2"))[0]
    assert "golden/::hidden_checks" in listed("--shard", "1/2", "--deselect", f"golden/{away}")


def test_what_hid_checks_leads_the_verdict():
    hidden = CheckResult(HIDING, Status.FAILED, text="2 check(s) were deselected ...")
    other = CheckResult("kernels/gemm.py::declaration", Status.FAILED, text="gemm does not declare")
    verdict = build_verdict([other, hidden])
    assert verdict.entries[0].checks == (HIDING,)
