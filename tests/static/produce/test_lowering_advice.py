"""What a case that does not lower is told: the known cause of its error, and one change that covers every target its
variant fails on, whatever `-k` selected (lowered for real on the CPU where that is cheap)."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

import kernel_styles as styles
import pytest
import tilelang
import tilelang.language as T
from conftest import REPO, num_stages_case

import tilelang_golden.catalog.loading
import tilelang_golden.static.session
from tilelang_golden.catalog.build import build_kernel
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import Registry, load_families
from tilelang_golden.family import targets_where
from tilelang_golden.static.produce.known_failures import KNOWN_FAILURES, known_failure
from tilelang_golden.static.produce.lowering import LoweringRefused, lower
from tilelang_golden.static.produce.lowering_advice import CONDITIONS, PLACEHOLDER, lowering_advice
from tilelang_golden.static.produce.machine_code import CompileError
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.targets import TARGETS

DOWNCAST = "TypeError: Downcast from tirx.Sub to ir.IntImm failed."
# Where TileLang 0.1.15 pipelines through async-copy groups: the targets the Downcast failure occurs on.
WAIT_GROUP_TARGETS = ("sm_80", "sm_89", "gfx950")


@tilelang.jit
def prefix_tiles(X, block_rows: int = 64, threads: int = 128, num_stages: int = 2):
    """Each row block sums the tiles up to its own, two copies a step: a pipelined loop whose trip count depends on
    the block index, as a causal attention's key loop, which TileLang 0.1.15 cannot pipeline through wait groups."""
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        across = T.alloc_shared((block_rows, block_rows), T.float16)
        down = T.alloc_shared((block_rows, block_rows), T.float16)
        acc = T.alloc_fragment((block_rows, block_rows), T.float32)
        T.clear(acc)
        for k in T.Pipelined(bx + 1, num_stages=num_stages):
            T.copy(X[bx * block_rows, k * block_rows], across)
            for i, j in T.Parallel(block_rows, block_rows):
                acc[i, j] += across[i, j]
            T.copy(X[k * block_rows, bx * block_rows], down)
            for i, j in T.Parallel(block_rows, block_rows):
                acc[i, j] += down[i, j]
        T.copy(acc, Y[bx * block_rows, bx * block_rows])
    return Y


@tilelang.jit
def one_warp_gemm(X, block_rows: int = 32, threads: int = 32):
    """A GEMM of one 32-thread warp: CUDA lowers it, a wave64 HIP target needs 64 threads for T.gemm."""
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        tile = T.alloc_shared((block_rows, block_rows), T.float16)
        acc = T.alloc_fragment((block_rows, block_rows), T.float32)
        T.clear(acc)
        for k in T.serial(T.ceildiv(cols, block_rows)):
            T.copy(X[bx * block_rows, k * block_rows], tile)
            T.gemm(tile, tile, acc, transpose_B=True)
        T.copy(acc, Y[bx * block_rows, 0])
    return Y


def cases(kernel, params: dict, name: str, **overrides) -> dict[str, Case]:
    """target -> the case of a one-variant family around `kernel`, one Variant object for all (the session's memos
    key on it)."""
    family = styles.family(kernel, params, name=name, **overrides)
    return {target: Case(family, family.variants[0], target) for target in family.target_names}


PREFIX = cases(prefix_tiles, {"block_rows": 64, "threads": 128, "num_stages": 2}, "prefix")
ONE_WARP = cases(one_warp_gemm, {"block_rows": 32, "threads": 32}, "one_warp")


@pytest.fixture
def lowered(monkeypatch) -> collections.Counter:
    """Counts the session's lowerings per case id."""
    counts: collections.Counter = collections.Counter()
    real = tilelang_golden.static.session.lower

    def counting(case, built):
        counts[case.id] += 1
        return real(case, built)

    monkeypatch.setattr(tilelang_golden.static.session, "lower", counting)
    return counts


def refusal(session: LoweringSession, case: Case) -> str:
    with pytest.raises(LoweringRefused) as refused:
        session.files(case)
    return str(refused.value)


def declaration(message: str) -> dict[str, str]:
    """What the `does_not_lower=` of the message's declaration line holds, evaluated as a family file would."""
    line = next(line for line in message.splitlines() if "does_not_lower=" in line)
    return eval(line.split("does_not_lower=", 1)[1].removesuffix(")"), {"targets_where": targets_where})


def family_targets(message: str) -> tuple[str, ...]:
    """What the `Family(..., targets=...)` the message advises selects."""
    line = next(line for line in message.splitlines() if "Family(..., targets=" in line)
    return tuple(eval(line.split("targets=", 1)[1].removesuffix(")"), {"targets_where": targets_where}))


def test_a_known_failure_under_a_narrowed_selection_is_advised_over_every_target_it_fails_on(lowered):
    """Only sm_80 and gfx942 selected: the message still names sm_89 and gfx950, gives the cause, and one declaration
    for the three targets whose reason is that cause."""
    session = LoweringSession(planned={PREFIX["sm_80"].id, PREFIX["gfx942"].id})
    session.files(PREFIX["gfx942"])
    message = refusal(session, PREFIX["sm_80"])
    assert message.startswith(f"prefix/only/sm_80: TileLang could not lower this variant ({DOWNCAST})")
    known = known_failure(DOWNCAST)
    assert f"Known TileLang failure (seen with TileLang 0.1.15): {known.cause}" in message
    assert f"What to do: {known.workaround}" in message
    assert "It fails on sm_80, sm_89 and gfx950 and lowers on sm_90, sm_100a, sm_120 and gfx942." in message
    assert declaration(message) == {target: known.reason for target in WAIT_GROUP_TARGETS}
    assert "for target in targets_where(lambda t: t.features.software_pipelining and not t.features.tma)" in message
    ids = " or ".join(f"prefix/only/{target}" for target in WAIT_GROUP_TARGETS)
    assert f'nox -s regen-golden -- -k "{ids}"' in message
    # each target lowered once: the survey reuses gfx942's lowering, the other cases reuse the survey's
    for target in ("sm_89", "gfx950", "sm_80"):
        assert refusal(session, PREFIX[target]).splitlines()[1:] == message.splitlines()[1:]
    assert set(lowered.values()) == {1} and len(lowered) == len(PREFIX)


def test_a_passing_run_lowers_nothing_for_the_advice(lowered):
    session = LoweringSession(planned={PREFIX["gfx942"].id})
    session.files(PREFIX["gfx942"])
    assert list(lowered) == [PREFIX["gfx942"].id]


def test_the_static_session_under_a_narrowed_selection_names_every_failing_target(golden_session, monkeypatch):
    family = PREFIX["sm_80"].family
    monkeypatch.setattr(
        tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: Registry((family,), ())
    )
    result = golden_session("-k", PREFIX["sm_80"].id)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*prefix/only/sm_80: TileLang could not lower this variant (TypeError: Downcast*",
            "*It fails on sm_80, sm_89 and gfx950 and lowers on sm_90, sm_100a, sm_120 and gfx942.*",
            '*nox -s regen-golden -- -k "prefix/only/sm_80 or prefix/only/sm_89 or prefix/only/gfx950"*',
        ]
    )


def test_a_kernel_that_fails_on_every_hip_target_is_told_to_name_the_familys_targets(lowered):
    message = refusal(LoweringSession(), ONE_WARP["gfx950"])
    assert "T.gemm needs at least one full wavefront" in message.splitlines()[0]
    assert "Known TileLang failure" not in message  # no entry explains it: the advice says where, not why
    assert "It fails on every HIP target of its family and lowers on the others" in message
    assert 'Family(..., targets=targets_where(lambda t: t.backend == "cuda"))' in message
    assert family_targets(message) == tuple(name for name, t in TARGETS.items() if t.backend == "cuda")
    assert "does_not_lower" not in message  # one variant: the family is what is written for CUDA
    assert message.splitlines()[-1] == "    nox -s regen-golden"  # unfiltered: it deletes the HIP snapshots


def test_a_variant_of_several_may_declare_instead_and_a_narrowed_family_is_named_by_its_targets():
    family = styles.family(
        one_warp_gemm, {"block_rows": 32, "threads": 32}, name="one_warp", targets=["sm_90", "gfx942", "gfx950"]
    )
    variant = family.variants[0]
    family = dataclasses.replace(family, variants=[variant, dataclasses.replace(variant, name="other")])
    case = Case(family, variant, "gfx942")
    error = "InternalError: T.gemm needs at least one full wavefront"
    message = lowering_advice(case, error, {"sm_90": None, "gfx950": error})
    assert 'Family(..., targets=["sm_90"])' in message
    assert declaration(message) == {"gfx942": PLACEHOLDER, "gfx950": PLACEHOLDER}
    assert 'nox -s regen-golden -- -k "one_warp/only/gfx942 or one_warp/only/gfx950"' in message


def test_a_variant_that_fails_everywhere_is_a_broken_kernel():
    case = PREFIX["sm_90"]
    message = lowering_advice(case, "ValueError: boom", dict.fromkeys(PREFIX, "ValueError: boom"))
    broken = "It fails on every target of its family: the kernel is broken; fix it in kernels/prefix.py."
    assert message.splitlines()[-1] == broken
    assert "does_not_lower" not in message and "regen-golden" not in message


def test_the_declaration_keeps_the_variants_entries_and_gives_each_target_its_own_reason():
    """A declared target stays with its reason, a known failure's reason is its cause, an unknown one is left to fill
    in; a failing kind that holds declared targets says to drop them."""
    family = PREFIX["sm_80"].family
    variant = dataclasses.replace(family.variants[0], does_not_lower={"gfx950": "its LDS is too small"})
    family = dataclasses.replace(family, variants=[variant])
    case = Case(family, variant, "sm_80")
    outcomes = {"sm_89": "InternalError: something else", "sm_90": None, "sm_100a": None, "sm_120": None}
    message = lowering_advice(case, DOWNCAST, {**outcomes, "gfx942": None})
    assert "It fails on sm_80, sm_89 and gfx950 (declared) and lowers on sm_90, sm_100a, sm_120 and gfx942." in message
    assert declaration(message) == {
        "gfx950": "its LDS is too small",
        "sm_80": known_failure(DOWNCAST).reason,
        "sm_89": PLACEHOLDER,
    }
    assert 'nox -s regen-golden -- -k "prefix/only/sm_80 or prefix/only/sm_89"' in message
    hip = lowering_advice(Case(family, variant, "gfx942"), "InternalError: x", dict.fromkeys(PREFIX))
    assert "(and drop the variant's does_not_lower entries for gfx950)" in hip


def test_without_a_survey_the_advice_covers_the_cases_own_target():
    """A lowering outside a session (a script) knows its own target only: the declaration adds that one."""
    case = PREFIX["gfx950"]
    with pytest.raises(LoweringRefused) as refused:
        lower(case, build_kernel(case.family, case.variant))
    message = str(refused.value)
    assert "It fails on" not in message
    assert declaration(message) == {"gfx950": known_failure(DOWNCAST).reason}
    assert 'nox -s regen-golden -- -k "prefix/only/gfx950"' in message


def test_every_condition_the_advice_may_spell_selects_some_targets_of_its_own():
    selected = [frozenset(targets_where(eval(f"lambda t: {condition}"))) for condition in CONDITIONS]
    assert all(selected) and frozenset(TARGETS) not in selected and len(set(selected)) == len(CONDITIONS)


def test_the_compilers_refusal_is_advised_over_every_target_too(monkeypatch):
    """nvcc rejecting the CUDA on every CUDA target of a family that also has a HIP one: the family is named by the
    target that lowers (by name: no condition selects gfx942 alone), the compiler's text as each target's error."""
    case = num_stages_case(0, "sm_90", (64, 64, 32))
    family = dataclasses.replace(case.family, variants=[case.variant], targets=["sm_80", "sm_90", "gfx942"])
    rejected = "nvcc failed (exit 1):\nkernel.cu(12): error: identifier is undefined"

    def rejecting(lowering):
        raise CompileError(lowering.case, rejected)

    monkeypatch.setattr(tilelang_golden.static.session, "compile_together", lambda lowerings: [None] * len(lowerings))
    monkeypatch.setattr(tilelang_golden.static.session, "compile_lowering", rejecting)
    with pytest.raises(CompileError) as refused:
        LoweringSession().files(Case(family, case.variant, "sm_90"))
    message = str(refused.value)
    assert message.startswith(f"gemm_num_stages/{case.variant.name}/sm_90: {rejected}")
    assert "It fails on sm_80 and sm_90 and lowers on gfx942." in message
    assert 'Family(..., targets=["gfx942"])' in message


# What the repository's own kernels fail with where they are not lowered (their family file says why), lowered here.
def streamk_with_warp_specialization():
    """gemm_streamk's num_stages=2 variant jitted as upstream jits it, warp specialization on."""
    family = next(f for f in load_families().families if f.name == "gemm_streamk")
    variant = family.variant("tile128x128_ns2")
    upstream = tilelang.jit(variant.kernel.func.orig_func)
    return family, dataclasses.replace(variant, kernel=upstream)


@tilelang.jit
def mbarrier_copy(X, block_rows: int = 8, threads: int = 128):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        arrived = T.alloc_barrier(threads)
        tile = T.alloc_shared((block_rows, cols), T.float16)
        T.copy(X[bx * block_rows, 0], tile)
        T.barrier_arrive(arrived)
        T.barrier_wait(arrived, 0)
        T.copy(tile, Y[bx * block_rows, 0])
    return Y


def registered(family: str, variant: str):
    found = next(f for f in load_families().families if f.name == family)
    return found, found.variant(variant)


def styled(kernel):
    family = styles.family(kernel)
    return family, family.variants[0]


# Part of each known failure's pattern -> what reproduces it: the kernel, and a target it fails on.
REPRODUCED = {
    "Downcast": (lambda: (PREFIX["sm_89"].family, PREFIX["sm_89"].variant), "sm_89"),
    "ReduceOp": (lambda: registered("rms_norm", "threads512"), "sm_120"),
    "ProducerConsumerWS": (streamk_with_warp_specialization, "sm_90"),
    "tcgen05_gemm": (lambda: registered("gemm_tcgen05", "ns4_128x256x64"), "sm_90"),
    "alloc_barrier": (lambda: styled(mbarrier_copy), "sm_80"),
}


def test_every_known_failure_is_reproduced_here():
    matched = [[known for known in KNOWN_FAILURES if part in known.pattern] for part in REPRODUCED]
    assert all(len(known) == 1 for known in matched) and {k for (k,) in matched} == set(KNOWN_FAILURES)


@pytest.mark.parametrize("part", list(REPRODUCED))
def test_each_known_failure_is_what_tilelang_says_for_the_kernel_it_explains(part):
    make, target = REPRODUCED[part]
    family, variant = make()
    with pytest.raises(LoweringRefused) as refused:
        lower(Case(family, variant, target), build_kernel(family, variant))
    known = known_failure(refused.value.error)
    assert known is not None and part in known.pattern
    assert known.cause in str(refused.value)


def test_every_declared_failure_of_the_repository_is_a_known_one():
    """Each `.error` snapshot holds TileLang's text for a failure a family file explains: the table knows each."""
    errors = sorted(Path(REPO, "golden").rglob("*.error"))
    assert errors
    unknown = [
        str(path.relative_to(REPO))
        for path in errors
        if known_failure(path.read_text().split("TileLang's error:\n", 1)[1]) is None
    ]
    assert not unknown, unknown
