"""The A/B timing gate (`nox -s gpu -- --against REF`): which variants are compared with the base commit's, the
verdict on their time ratio with its confirmation, and a run on a fake clock end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path, PurePath

import gpu_fakes as fake
import pytest
from scratch_repo import FAMILIES, make_scratch_repo

from tilelang_golden.catalog.cases import Case
from tilelang_golden.gpu import check
from tilelang_golden.gpu.baseline_use import BaselineUse
from tilelang_golden.gpu.check import CheckPlan, run_gpu_check
from tilelang_golden.gpu.gate import ab_gate, gate
from tilelang_golden.gpu.kernel_session import Kernels, KernelSession
from tilelang_golden.gpu.measure.timing import interleaved_bench
from tilelang_golden.gpu.run.against import (
    NEW,
    AbPairs,
    BaseUnavailable,
    load_base,
    load_bases,
    load_package,
    pair_with_base,
    resolve,
)

# -- the verdict ------------------------------------------------------------------------------------


def rounds(slower: float, count: int = 7, noise: float = 0.002) -> list[float]:
    """A measurement's per-round time ratios around 1 + slower, spread by +-noise."""
    return [1 + slower + noise * ((i % 3) - 1) for i in range(count)]


@pytest.mark.parametrize(
    ("first", "again", "level"),
    [
        (0.025, 0.024, ab_gate.FAIL),  # slower by 2 % or more, twice: fails
        (0.025, 0.005, ab_gate.WARN),  # the second measurement does not agree: a warning
        (0.02, 0.02, ab_gate.FAIL),  # 2 % is "2 % or more"
        (0.015, None, ab_gate.WARN),  # from 1 %: a warning, not measured again
        (0.009, None, ab_gate.OK),
        (-0.015, None, ab_gate.FASTER),
        (-0.009, None, ab_gate.OK),
    ],
)
def test_the_verdict_on_a_time_ratio_and_its_confirmation(first, again, level):
    asked: list[list[str]] = []

    def confirm(keys):
        asked.append(list(keys))
        return {key: rounds(again) for key in keys}

    comparison = ab_gate.compare_ab("main (abc)", {"f/v": rounds(first)}, confirm)
    verdict = comparison.verdicts["f/v"]
    assert verdict.level == level
    assert verdict.slower_by == pytest.approx(first)
    # only a suspect (2 % or more) is measured a second time
    assert asked == ([["f/v"]] if first >= ab_gate.AB_FAIL_SLOWER else [])


def test_the_spread_is_the_range_of_the_rounds_over_their_median():
    verdict = ab_gate.judge_ab("f/v", [1.00, 1.01, 1.03])
    assert verdict.spread == pytest.approx(0.03 / 1.01)


def test_a_confirmed_slowdown_fails_the_variant_and_a_warning_does_not():
    passing = fake.result(fake.case(fake.gemm_family("f", [fake.variant("v")]), "v"), 0).numerics
    ab = ab_gate.compare_ab("main (abc)", {"f/v": rounds(0.03)}, lambda keys: {k: rounds(0.03) for k in keys})
    judged = gate.judge_variant([], True, passing, None, ab.verdicts["f/v"])
    assert judged.status == gate.FAIL
    assert "timing against the base: 3.0% slower than the base" in judged.failures[0]
    assert gate.judge_variant([], True, passing, None, ab_gate.judge_ab("f/v", rounds(0.015))).status == gate.PASS


# -- which variants are compared ------------------------------------------------------------------

FAMILY_FILE = """\
import gpu_fakes as fake

FAMILY = fake.gemm_family("tiny", [{variants}], shape=fake.SMALL)
"""


def family_text(*names: str, block: int = 1) -> str:
    variants = ", ".join(f"fake.variant({name!r}, block={block})" for name in names)
    return FAMILY_FILE.format(variants=variants)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def snapshot(root: Path, key: str, text: str, target: str = fake.TARGET) -> None:
    folder = root / "golden" / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{target}.cu").write_text(f"// {text}\n")
    (folder / f"{target}.yaml").write_text(f"facts: {text}\n")


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A clone whose base commit has tiny/{same, changed, gone}; the working tree changes `changed`'s snapshot,
    removes `gone` and adds `added`."""
    root = tmp_path / "repo"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("")
    (root / "kernels" / "tiny.py").write_text(family_text("same", "changed", "gone"))
    for name in ("same", "changed", "gone"):
        snapshot(root, f"tiny/{name}", name)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (root / "kernels" / "tiny.py").write_text(family_text("same", "changed", "added", block=2))
    snapshot(root, "tiny/changed", "changed, with another schedule")
    snapshot(root, "tiny/added", "added")
    subprocess.run(["rm", "-r", str(root / "golden" / "tiny" / "gone")], check=True)
    monkeypatch.chdir(root)
    return root


def working_cases():
    variants = [fake.variant(name, block=2) for name in ("same", "changed", "added")]
    family = fake.gemm_family("tiny", variants, shape=fake.SMALL)
    return [Case(family, v, fake.TARGET) for v in family.variants]


def test_only_a_variant_whose_snapshot_changed_is_paired_with_the_bases_kernel(repo):
    base = resolve("HEAD")
    cases = working_cases()
    found = pair_with_base(base, cases, fake.TARGET, Path("golden"), [c.key for c in cases])
    assert list(found.pairs) == ["tiny/changed"]
    paired = found.pairs["tiny/changed"]
    # the base's own family file: its parameters, under a name of its own
    assert paired.key == "tiny@base/changed" and paired.params["block"] == 1
    assert paired.family.file == f"build/against/{base.short}/kernels/tiny.py"
    assert found.unchanged == ["tiny/same"]
    assert found.not_compared == {"tiny/added": NEW}
    assert found.gone == ["tiny/gone"]


def test_every_variant_is_paired_when_asked_although_unchanged(repo):
    cases = working_cases()
    found = pair_with_base(resolve("HEAD"), cases, fake.TARGET, Path("golden"), [c.key for c in cases], every=True)
    assert list(found.pairs) == ["tiny/same", "tiny/changed"] and found.unchanged == []


def test_a_snapshot_of_another_target_changing_pairs_nothing(repo):
    snapshot(repo, "tiny/same", "same on another target", target="sm_80")
    cases = working_cases()
    found = pair_with_base(resolve("HEAD"), cases, fake.TARGET, Path("golden"), [c.key for c in cases])
    assert "tiny/same" in found.unchanged


def test_the_base_is_imported_beside_this_checkouts_kernels_and_leaves_them_in_place(repo):
    import kernels

    before = sys.modules["kernels"]
    base = resolve("HEAD")
    loaded = load_base(base.tree / base.folders["kernels"], "kernels")
    assert [f.name for f in loaded.families] == ["tiny@base"]
    assert sys.modules["kernels"] is before is kernels
    assert "kernels.tiny" not in sys.modules


def test_a_repositorys_own_package_under_src_is_read_from_the_base_by_its_folder(tmp_path, monkeypatch):
    """An adopting repository's families (`acme.ops` in src/acme/ops/): the base's copy is unpacked from that
    folder and imported under the package's name, and this checkout's modules are back afterwards."""
    root = tmp_path / "acme"
    make_scratch_repo(root)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root / "src"))
    for name in [name for name in sys.modules if name == "acme" or name.startswith("acme.")]:
        monkeypatch.delitem(sys.modules, name)
    import acme.ops.softmax

    base = resolve("HEAD", ["acme.ops"])
    assert base.folders == {"acme.ops": PurePath("src/acme/ops")}
    loaded = load_bases(base)
    assert sorted(f.name for f in loaded.families) == sorted(f"{name}@base" for name in FAMILIES), loaded.broken
    softmax = next(f for f in loaded.families if f.name == "softmax@base")
    assert softmax.file == f"build/against/{base.short}/src/acme/ops/softmax.py"
    assert [f.name for f in load_package(softmax.package).families] == [f.name for f in loaded.families]
    assert sys.modules["acme.ops.softmax"] is acme.ops.softmax, "this checkout's module is back"


def test_a_ref_that_is_not_a_commit_here_says_to_fetch_it(repo):
    with pytest.raises(BaseUnavailable, match="not a commit of this clone; fetch it first"):
        resolve("no-such-branch")


def test_a_base_family_file_that_does_not_load_is_said_per_variant(repo):
    (repo / "kernels" / "tiny.py").write_text("raise ImportError('the old API')\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "broken base", "kernels/tiny.py")
    cases = working_cases()
    found = pair_with_base(resolve("HEAD"), cases, fake.TARGET, Path("golden"), [c.key for c in cases])
    assert "the base's family file does not load with this harness" in found.not_compared["tiny/changed"]
    assert "the old API" in found.not_compared["tiny/changed"]


# -- a run on a fake clock ------------------------------------------------------------------------


def ab_run(tmp_path, monkeypatch, pr_ms: float, base_ms: float = 1.0):
    """A run of two variants of which `changed` is timed against its base kernel: the exit status and report."""
    clock = fake.FakeClock()

    def costing(ms):
        def write(a, b, c):
            clock.now += ms
            fake.small_gemm_right(a, b, c)

        return write

    def compiler(cases):
        built = fake.cpu_compiler(cases)
        for c in built:
            ms = base_ms if c.case.family.name.endswith("@base") else pr_ms if c.case.variant.name == "changed" else 1
            outputs = [c.arguments[i] for i in fake.GEMM_OUTPUTS]
            object.__setattr__(c, "kernel", fake.returning(costing(ms), outputs, fake.CPU_CACHE))
            c.kernel.kernel_source = f"// {c.case.key}"
        return built

    def speed_reference(p, a, b):
        clock.now += 1.0
        return fake.torch_matmul(p, a, b)

    declared = {"shape": fake.SMALL, "speed_reference": speed_reference}
    family = fake.gemm_family("tiny", [fake.variant("same"), fake.variant("changed")], **declared)
    base_family = fake.gemm_family("tiny@base", [fake.variant("changed")], **declared)
    cases = [Case(family, v, fake.TARGET) for v in family.variants]
    base_case = Case(base_family, base_family.variants[0], fake.TARGET)
    from tilelang_golden.gpu.run.against import Base

    base = Base("main", "a" * 40, Path("build/against/aaaaaaaaaaaa"))
    session = KernelSession(
        device="cpu", memory=fake.CPU_CACHE, bench=interleaved_bench(clock.timer, 5, 20), compiler=compiler
    )
    monkeypatch.setattr(check, "require_cuda", fake.device)
    plan = CheckPlan(
        lambda device: cases, seeds=[1, 2, 3], rounds=3, timing_seed=5, golden=tmp_path / "golden",
        snapshotted=lambda case: False,
        against=lambda device, selected: AbPairs(base, {"tiny/changed": base_case}, unchanged=["tiny/same"]),
    )  # fmt: skip
    status = run_gpu_check(
        plan, output=tmp_path / "report", baseline=BaselineUse(tmp_path / "timing"), environ={},
        kernels=Kernels.in_process(session), log=lambda line: None,
    )  # fmt: skip
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    summary = (tmp_path / "report" / "summary.md").read_text()
    return status, report, summary


def test_a_kernel_3_percent_slower_than_the_bases_fails_the_run(tmp_path, monkeypatch):
    status, report, summary = ab_run(tmp_path, monkeypatch, pr_ms=1.03)
    verdict = report["against"]["verdicts"]["tiny/changed"]
    assert status == 1 and verdict["level"] == ab_gate.FAIL
    assert verdict["slower_by"] == pytest.approx(0.03) and verdict["again"]
    assert report["against"]["unchanged"] == ["tiny/same"]
    assert "tiny/same" not in report["against"]["verdicts"]
    # the A/B table comes first in the summary, before the run's own figures
    assert summary.index("### Against main (aaaaaaaaaaaa)") < summary.index("### Variants")
    assert "| tiny/changed | +3.0% |" in summary


def test_the_same_time_as_the_bases_passes(tmp_path, monkeypatch):
    status, report, _ = ab_run(tmp_path, monkeypatch, pr_ms=1.0)
    assert status == 0 and report["against"]["verdicts"]["tiny/changed"]["level"] == ab_gate.OK


def test_a_kernel_faster_than_the_bases_is_reported(tmp_path, monkeypatch):
    status, report, summary = ab_run(tmp_path, monkeypatch, pr_ms=0.95)
    assert status == 0 and report["against"]["verdicts"]["tiny/changed"]["level"] == ab_gate.FASTER
    assert "5.0% faster than the base" in json.dumps(report)


def test_the_command_hands_the_check_an_ab_plan_it_can_call(monkeypatch):
    """`tilelang-golden gpu --against REF` end to end up to the check: its closure plans against the base (it once
    called the CheckPlan it was handed, named like the planning function, and every A/B run stopped there)."""
    from tilelang_golden.gpu import command
    from tilelang_golden.gpu.run import against

    handed = {}
    monkeypatch.setattr(command, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(
        "tilelang_golden.gpu.check.run_gpu_check", lambda plan, **_: handed.setdefault("plan", plan) and 0
    )
    monkeypatch.setattr(against, "resolve", lambda ref, packages: f"base {ref}")
    monkeypatch.setattr(
        against, "pair_with_base", lambda base, cases, target, golden, known, every: (base, target, every)
    )
    assert command.main(["--against", "HEAD", "--select", "gemm_relu_schedules/v4_tuned"]) == 0
    assert handed["plan"].against(fake.device(), []) == ("base HEAD", fake.TARGET, False)
