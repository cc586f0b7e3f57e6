"""Every refusal of the golden sessions reaches the user the same way with and without xdist
workers: the same message and the same exit status, through the real session in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import GOLDEN_TEST, REPO, SMALL_CASE, SUBPROCESS_LIMIT_S

import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.catalog.cases import all_cases
from tilelang_golden.static.report.job_summary import error_annotations, static_report
from tilelang_golden.static.snapshots.results import read_results

WORKERS = ("0", "2")  # -n 0: no xdist; -n 2: what `nox -s static` runs (-n auto on 2 cores)


def session(tmp_path, workers: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "TL_LOWER_TRACE")}
    environ.update(env)
    command = [
        sys.executable, "-m", "pytest", "-p", "tilelang_golden.static.plugin", str(GOLDEN_TEST),
        "-p", "no:cacheprovider", f"--golden-dir={tmp_path / 'golden'}", f"--pending-dir={tmp_path / 'pending'}",
        f"--lowering-cache={tmp_path / 'lowering-cache'}", "-n", workers, "--dist", "loadgroup", *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=REPO, env=environ, capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)


REFUSALS = {
    "empty -k": (("-k", "no_such_variant"), {}, "no golden case matches this selection (-k 'no_such_variant'"),
    "empty shard": (("-k", SMALL_CASE, "--shard", "2/2"), {}, "no golden case matches this selection"),
    "bad shard": (("--shard", "4/3"), {}, "--shard '4/3': need 1 <= I <= N"),
    "regen under CI": (("--regen", "-k", SMALL_CASE), {"CI": "true"}, "refusing to rewrite golden/ while CI='true'"),
    "TL_LOWER_TRACE": (("-k", SMALL_CASE), {"TL_LOWER_TRACE": "html"}, "TL_LOWER_TRACE='html' is set"),
}


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_refusal_says_why_with_a_usage_error_status(tmp_path, refusal, workers):
    args, env, message = REFUSALS[refusal]
    result = session(tmp_path, workers, *args, **env)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert f"ERROR: {message}" in result.stderr
    assert not (tmp_path / "golden").exists()


@pytest.mark.parametrize("workers", WORKERS)
def test_a_family_file_that_does_not_import_fails_with_its_message(tmp_path, workers):
    """Not a refusal: the other families still run, and the broken file fails with its own item."""
    kernels = tmp_path / "more_kernels"
    kernels.mkdir()
    (kernels / "tiny_typo.py").write_text("FAMILY = Famly()\n")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "more_kernels.py").write_text(f"import kernels\n\nkernels.__path__.append({str(kernels)!r})\n")
    pythonpath = os.pathsep.join([str(plugins), os.environ.get("PYTHONPATH", "")])
    result = session(tmp_path, workers, "-p", "more_kernels", "-k", "tiny_typo", PYTHONPATH=pythonpath)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    assert "kernels/tiny_typo.py: importing it raised NameError: name 'Famly' is not defined" in result.stdout


def test_the_items_of_one_group_run_on_one_worker_and_the_report_names_them_by_case_id(tmp_path):
    """So each case is lowered once per run: the checks and summaries reuse their group's lowerings.
    The group suffix that keeps them together stays out of the names the CI summary gives them."""
    import re

    # Two targets are enough to show a family's cases staying together (each family is one group on every target).
    result = session(tmp_path, "2", "-v", "--regen", "-k", "(rms_norm or linear_bf16) and (sm_90 or gfx942)")
    assert result.returncode == 0, result.stdout + result.stderr
    workers: dict[str, set[str]] = {}
    # These families' cases are one group each, the family: named by their snapshots' path, golden/<family>/...
    for worker, group in re.findall(r"^\[(gw\d)\].*PASSED golden/([^/\s]+)/", result.stdout, re.MULTILINE):
        workers.setdefault(group, set()).add(worker)
    assert set(workers) == {"rms_norm", "linear_bf16"}, result.stdout
    assert all(len(ran_on) == 1 for ran_on in workers.values()), workers

    cases = all_cases(tilelang_golden.catalog.loading.load_families())
    case = next(c for c in cases if c.family.name == "rms_norm" and c.target == "sm_90")
    cuda = tmp_path / "golden" / f"{case.id}.cu"
    cuda.write_text(cuda.read_text() + "// tampered\n")
    result = session(tmp_path, "2", "-k", case.id)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    (failed,) = [line for line in result.stdout.splitlines() if line.startswith("FAILED ")]
    assert failed.startswith(f"FAILED golden/{case.id} - "), failed  # the case by its snapshots, no group suffix
    report = static_report(read_results(tmp_path / "pending"))  # written by the worker that ran the case
    (check,) = report.failed
    assert check.check == case.id and check.case == (case.family.name, case.variant.name, case.target)
    (annotation,) = error_annotations(report)
    assert annotation.startswith(f"::error file=golden/{case.id}.cu,line=1,title=") and "comments changed only" in (
        annotation
    )
