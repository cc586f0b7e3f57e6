"""The content-addressed lowering cache (tilelang_golden/static/produce/lowering_cache.py): never wrong, and used by the
session."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
import weakref

import pytest
import tilelang
import tilelang.language as T
from conftest import SMALL_CASE

import tilelang_golden.static.produce.lowering as lowering_module
import tilelang_golden.static.produce.lowering_cache as lowering_cache
from tilelang_golden.catalog.cases import Case, all_cases, family_cases
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.family import Variant
from tilelang_golden.static.produce.lowering import lower as lower_case
from tilelang_golden.static.produce.lowering_cache import CorruptEntry, LoweringCache, StaleCacheEntry
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.results import PENDING_DIR
from tilelang_golden.targets import TARGETS

SMALL = next(c for c in all_cases(load_families()) if c.id == SMALL_CASE)
# A variant on every target, and one declared not to lower (its file is the `.error`).
EVERY_TARGET = family_cases(dataclasses.replace(SMALL.family, variants=[SMALL.variant], targets=None))
DECLARED = next(c for c in all_cases(load_families()) if c.does_not_lower is not None)


def never_lowered() -> dict[str, str]:
    raise AssertionError("a cache hit must not lower")


def case_key(case: Case) -> str:
    """The case's key as a run that has not seen it yet computes it: its kernel traced afresh."""
    return LoweringSession().key(case)


def cached(cache: LoweringCache, case: Case, lower) -> tuple[dict[str, str], str]:
    return cache.files(case, case_key(case), lower, case_files(case))


@pytest.mark.parametrize("case", [*EVERY_TARGET, DECLARED], ids=lambda c: c.id)
def test_a_warm_case_is_byte_identical_to_its_cold_lowering(tmp_path, case):
    cold = LoweringSession(LoweringCache(tmp_path))
    warm = LoweringSession(LoweringCache(tmp_path))  # another process: only the folder is shared
    # Each process keys a variant before lowering it; two sessions in one process share the PrimFunc TileLang's jit
    # hands out, which a lowering rewrites in place (DECLARED's, that fails halfway), so both read it first.
    assert warm.key(case) == cold.key(case)
    files = cold.files(case)
    assert cold.sources == {case.id: "lowered"}
    assert set(files) == set(case_files(case))
    assert warm.files(case) == files == LoweringSession().files(case, fresh=True)
    assert warm.sources == {case.id: "cache"}
    assert warm._lowered == {}, "a cache hit must not lower"


def test_a_produced_case_keeps_no_ir(monkeypatch):
    """A run holds its cases' files, not their lowerings, whose IR made its memory grow with every case."""
    lowerings = []

    def lower(case, built):
        lowering = lower_case(case, built)
        lowerings.append(weakref.ref(lowering))
        return lowering

    monkeypatch.setattr("tilelang_golden.static.session.lower", lower)
    session = LoweringSession()
    files = session.files(SMALL)
    gc.collect()
    assert len(lowerings) == 1 and lowerings[0]() is None, "the session still holds the case's IR"
    capture = lowering_module._capture_passes()
    instruments = [o for o in gc.get_objects() if type(o) is capture]
    assert instruments and not any(i.captured for i in instruments), "TVM's pass instruments still hold IR"
    assert session.files(SMALL) is files  # and its files once per run still


# -- every input of the key makes a miss -------------------------------------------------------------------


def scaled(factor: float):
    """A lazy jit factory whose kernel multiplies by `factor`: one constant of the kernel's text."""

    def scale(rows: int, cols: int, block_rows: int = 8, threads: int = 128):
        @T.prim_func
        def kernel(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
            with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
                for i, j in T.Parallel(block_rows, cols):
                    Y[bx * block_rows + i, j] = X[bx * block_rows + i, j] * factor

        return kernel

    return scale


def scale_case(factor: float = 2.0, target: str = "sm_80", **jit: object) -> Case:
    variant = Variant("v", tilelang.jit(out_idx=[1], **jit)(scaled(factor)), {"block_rows": 8, "threads": 128})
    fields = {"name": "tiny_key", "shape": {"rows": 256, "cols": 128}, "variants": [variant], "targets": None}
    family = dataclasses.replace(
        SMALL.family, **fields, outputs=None, checks=None, group=None, sweep=None, sanitize_shape=None
    )
    return Case(family, variant, target)


def test_the_key_is_stable_for_one_case():
    assert case_key(scale_case()) == case_key(scale_case())


def test_a_kernel_change_is_a_miss():
    assert case_key(scale_case(2.0)) != case_key(scale_case(3.0))


def test_a_pass_config_is_a_miss():
    configured = scale_case(pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    assert case_key(configured) != case_key(scale_case(pass_configs={}))


def test_another_target_is_a_miss():
    assert len({case_key(scale_case(target=t)) for t in TARGETS}) == len(TARGETS)


def test_a_variable_tilelang_reads_is_a_miss_and_another_is_not(monkeypatch):
    before = case_key(scale_case())
    monkeypatch.setenv("HOME_OF_SOMETHING_ELSE", "x")
    assert case_key(scale_case()) == before
    for name in ("TL_DISABLE_CACHE", "TVM_NUM_THREADS", "TILELANG_PRINT_ON_COMPILATION"):
        monkeypatch.setenv(name, "1")
        assert case_key(scale_case()) != before, name
        monkeypatch.delenv(name)


def test_another_tilelang_build_is_a_miss(monkeypatch):
    before = case_key(scale_case())
    monkeypatch.setattr(lowering_cache, "tilelang_build", lambda: "0.1.16 0123")
    assert case_key(scale_case()) != before


def reworded(reason: str) -> Case:
    """DECLARED with this reason why it does not lower on its target: a Variant of its own, so traced afresh
    (DECLARED's own trace may predate a lowering that rewrote its PrimFunc in place)."""
    declared = {**DECLARED.variant.does_not_lower, DECLARED.target: reason}
    return dataclasses.replace(DECLARED, variant=dataclasses.replace(DECLARED.variant, does_not_lower=declared))


def test_a_changed_does_not_lower_reason_is_a_miss(tmp_path):
    """The reason is written into the case's `.error` snapshot: a cached one would keep the old words."""
    before, again = reworded(DECLARED.does_not_lower), reworded(DECLARED.does_not_lower)
    case = reworded("codegen needs a constant wait count")
    assert case_key(before) == case_key(again) != case_key(case)

    def error_file(declared: Case) -> dict[str, str]:  # what a lowering writes, reduced to the reason
        return {case_files(declared)[0]: declared.not_lowering_note}

    cached(LoweringCache(tmp_path), before, lambda: error_file(before))
    assert cached(LoweringCache(tmp_path), case, lambda: error_file(case)) == (error_file(case), "lowered")


def test_a_change_to_the_code_that_writes_snapshots_is_a_miss(monkeypatch, tmp_path):
    """A new normalization rule (one more line in normalize.py) changes every key."""
    copy = tmp_path / "harness"
    shutil.copytree(lowering_cache.HARNESS_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(lowering_cache, "HARNESS_ROOT", copy)
    before = case_key(scale_case())
    normalize = copy / "static" / "snapshots" / "normalize.py"
    normalize.write_text(normalize.read_text() + "\n# one more rule\n")
    assert case_key(scale_case()) != before


def test_the_fingerprint_reads_every_module_that_writes_snapshot_files():
    modules = lowering_cache.producing_modules()
    expected = {
        "static.session",
        "static.kinds",
        "static.snapshots.normalize",
        "static.produce.facts",
        "static.produce.lowering",
        "static.produce.lowering_cache",
        "static.produce.produced",
        "static.snapshots.snapshot",
        "catalog.cases",
        "catalog.build",
        "targets",
    }
    assert {f"tilelang_golden.{name}" for name in expected} <= modules


# -- a bad entry is a miss, never a hit or a crash ---------------------------------------------------------


def stored(tmp_path, case: Case):
    files = LoweringSession(LoweringCache(tmp_path)).files(case)
    (entry,) = tmp_path.glob("??/*.json")
    return files, entry


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: "",  # empty
        lambda text: "not json at all",
        lambda text: json.dumps({**json.loads(text), "digest": "0" * 64}),  # a file changed after writing
        lambda text: json.dumps({**json.loads(text), "case": "other/case/sm_80"}),
        lambda text: json.dumps({**json.loads(text), "format": 0}),
    ],
    ids=["truncated", "empty", "not-json", "digest", "case", "format"],
)
def test_a_corrupt_entry_is_a_miss_with_a_warning_and_is_rewritten(tmp_path, damage):
    case = EVERY_TARGET[0]
    files, entry = stored(tmp_path, case)
    entry.write_text(damage(entry.read_text()))
    with pytest.warns(CorruptEntry, match="lowering cache entry ignored"):
        assert cached(LoweringCache(tmp_path), case, lambda: files) == (files, "lowered")
    assert cached(LoweringCache(tmp_path), case, never_lowered) == (files, "cache")  # rewritten, now a hit


def test_a_refresh_refuses_an_entry_that_differs_from_a_fresh_lowering(tmp_path):
    """An entry that is well formed but not what the lowering gives: the key missed an input."""
    case = EVERY_TARGET[0]
    files, entry = stored(tmp_path, case)
    forged = {path: text + "// not what TileLang emitted\n" for path, text in files.items()}
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, "files": forged, "digest": lowering_cache._digest(forged)}))
    assert cached(LoweringCache(tmp_path), case, never_lowered) == (forged, "cache")  # a check trusts the key
    with pytest.raises(StaleCacheEntry, match="the key misses an input"):
        cached(LoweringCache(tmp_path, read=False), case, lambda: files)


# -- the session -------------------------------------------------------------------------------------------


def test_the_session_reports_lowered_and_cached_cases_and_regen_never_reads_the_cache(golden_session, tmp_path):
    cache = f"--lowering-cache={tmp_path / 'cache'}"
    golden_session("--regen", "-k", SMALL_CASE, cache).stdout.fnmatch_lines(["*1 cases lowered, 0 from the*"])
    warm = golden_session("-k", SMALL_CASE, cache)
    warm.assert_outcomes(passed=1)
    warm.stdout.fnmatch_lines(["*0 cases lowered, 1 from the lowering cache*"])
    # A forged entry: the check reads it and fails against golden/; a regen lowers and refuses the entry.
    (entry,) = (tmp_path / "cache").glob("??/*.json")
    data = json.loads(entry.read_text())
    forged = {path: text.replace("__syncthreads", "__syncwarp") for path, text in data["files"].items()}
    entry.write_text(json.dumps({**data, "files": forged, "digest": lowering_cache._digest(forged)}))
    golden_session("-k", SMALL_CASE, cache).assert_outcomes(failed=1)
    regen = golden_session("--regen", "-k", SMALL_CASE, cache)
    regen.stdout.fnmatch_lines(["*the key misses an input*"])
    assert golden_session("-k", SMALL_CASE, "--no-cache").ret == 0  # golden/ was never touched


# -- how many workers `-n auto` starts -------------------------------------------------------------------


class FakeConfig:
    def __init__(self, **options: object) -> None:
        self.options = {"--regen": False, "--refresh-cache": False, "--no-cache": False, "--families": ["kernels"],
                        "--machine-code-cache": None,
                        "--golden-dir": None, "--pending-dir": PENDING_DIR}  # fmt: skip
        self.options.update(options)
        self.options.setdefault("--lowering-cache", "unused")
        self.stash = pytest.Stash()

    def getoption(self, name: str) -> object:
        return self.options[name]


def workers_for(monkeypatch, missing: dict[str, str], **options: object) -> int | None:
    """`pytest_xdist_auto_num_workers` over fake cases: case id -> its group, for the cases the cache lacks."""
    from tilelang_golden.static import plugin

    cases = [dataclasses.replace(SMALL, target=t) for t in TARGETS]  # ids differ by target
    monkeypatch.setattr(plugin, "all_cases", lambda registry: cases)
    monkeypatch.setattr(LoweringCache, "holds", lambda self, case, key, names: case.id not in missing)
    monkeypatch.setattr(Case, "group", property(lambda case: missing.get(case.id, "held")))
    return plugin.pytest_xdist_auto_num_workers(FakeConfig(**options))


def test_a_warm_cache_runs_in_one_process_and_a_cold_one_on_workers(monkeypatch):
    ids = [dataclasses.replace(SMALL, target=t).id for t in TARGETS]
    assert workers_for(monkeypatch, {}) == 0, "nothing to lower"
    assert workers_for(monkeypatch, {case_id: "one family" for case_id in ids}) == 0, "one group: one worker anyway"
    few = {case_id: f"group {i}" for i, case_id in enumerate(ids[:2])}
    assert workers_for(monkeypatch, few) == 0, "a few cases"
    monkeypatch.setattr("tilelang_golden.static.plugin.FEW_MISSES", 2)
    many = {case_id: f"group {i}" for i, case_id in enumerate(ids)}
    assert workers_for(monkeypatch, many) is None, "xdist's own count"
    for option in ("--regen", "--refresh-cache", "--no-cache"):
        assert workers_for(monkeypatch, {}, **{option: True}) is None, option


def test_the_key_does_not_depend_on_where_tilelang_is_installed(monkeypatch):
    """TileLang points TL_TEMPLATE_PATH and the like into its own installation on import: two venvs at two paths
    (a moved checkout, a CI cache restored elsewhere) must read each other's entries; another value must not."""
    home = lowering_cache.tilelang_home()
    assert home, "tilelang is installed here"
    for name in [name for name in os.environ if name.startswith(lowering_cache.ENVIRONMENT_PREFIXES)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TL_TEMPLATE_PATH", f"{home}/3rdparty/../src")
    here = lowering_cache.lowering_environment()
    monkeypatch.setattr(lowering_cache, "tilelang_home", lambda: "/elsewhere/site-packages/tilelang")
    monkeypatch.setenv("TL_TEMPLATE_PATH", "/elsewhere/site-packages/tilelang/3rdparty/../src")
    assert lowering_cache.lowering_environment() == here
    monkeypatch.setenv("TL_TEMPLATE_PATH", "/my/own/templates")
    assert lowering_cache.lowering_environment() != here
