"""TileLang's own warnings as a fact of the snapshot, and a read before initialization as a failing check."""

from __future__ import annotations

import dataclasses
import os

import kernel_styles as styles
import pytest

import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.family import FamilyError
from tilelang_golden.static.produce.facts import extract_facts
from tilelang_golden.static.produce.lowering import captured_output
from tilelang_golden.static.produce.lowering_cache import LoweringCache
from tilelang_golden.static.produce.produced import unacknowledged_warnings
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots.normalize import normalize_warnings
from tilelang_golden.static.snapshots.snapshot import load_yaml

READ_BEFORE_WRITE = "read before initialization"
PRINTED = """[11:12:10] : Warning: Buffer read before initialization: 1 buffer(s) read before anything writes them
  [1] `m` is read before anything writes it
  --> /home/someone/venv/lib/python3.11/site-packages/tilelang/language/reduce_op.py:160:1
Initialize the buffer before its first read.
[11:12:11] /build/src/transform/x.cc:42: Warning: object at 0x7f00deadbeef
[11:12:12] : Warning: Unable to detect ROCm version, assuming >= 3.5
"""


def uncleared(**variant_fields) -> Case:
    """The row maximum into a fragment nothing wrote, for sm_80, as a family declares it."""
    family = styles.family(
        styles.row_max_uncleared_factory, {"block_rows": 4, "threads": 128}, name="uncleared", outputs=[1]
    )
    variant = dataclasses.replace(family.variants[0], **variant_fields)
    family = dataclasses.replace(family, variants=[variant], targets=["sm_80"])
    return Case(family, variant, "sm_80")


def test_printed_warnings_are_normalized_to_be_the_same_on_every_machine():
    twice = normalize_warnings(PRINTED + PRINTED.replace("11:12", "09:01").replace("someone", "other"))
    assert twice == [
        "Warning: Buffer read before initialization: 1 buffer(s) read before anything writes them\n"
        "  [1] `m` is read before anything writes it\n"
        "  --> reduce_op.py\n"  # no folder, no line: an edit above it must not change the snapshot
        "Initialize the buffer before its first read.",
        "Warning: object at 0x<hex>",
    ]  # one of each, sorted; the ROCm install's message is about the machine, not the kernel
    assert normalize_warnings("") == []


def test_what_tilelangs_cpp_log_prints_on_the_file_descriptor_is_captured_and_passed_on(capfd):
    with captured_output() as output:
        os.write(2, b"[10:00:00] : Warning: from C++\n")
    assert "".join(output) == "[10:00:00] : Warning: from C++\n"
    assert "Warning: from C++" in capfd.readouterr().err  # still shown to whoever ran it


def test_python_logging_and_warnings_are_captured_too():
    import logging
    import warnings

    with captured_output() as output:
        logging.getLogger("tilelang.some_pass").warning("a Python warning of TileLang's")
        warnings.warn("deprecated spelling", DeprecationWarning, stacklevel=1)
    assert normalize_warnings("".join(output)) == [
        "Warning: DeprecationWarning: deprecated spelling",
        "Warning: a Python warning of TileLang's",
    ]


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_a_read_before_initialization_is_a_fact_of_the_case(target, lowerings):
    case = dataclasses.replace(uncleared(), target=target)
    (warning,) = extract_facts(lowerings.lower(case))["warnings"]
    assert warning.startswith("Warning: Buffer read before initialization") and "`largest`" in warning
    assert "/" not in warning.split("-->")[1].splitlines()[0]  # the file's name, not its folder


def test_a_kernel_without_warnings_has_an_empty_list(lowerings):
    family = styles.family(styles.scale_factory, outputs=[1], targets=["sm_80"])
    assert extract_facts(lowerings.lower(Case(family, family.variants[0], "sm_80")))["warnings"] == []


def test_an_unacknowledged_read_before_initialization_fails_naming_the_fix(lowerings):
    case = uncleared()
    refusal = unacknowledged_warnings(case, extract_facts(lowerings.lower(case)))
    assert refusal.startswith(
        "uncleared/only/sm_80: what its lowering warned about fails its check:\nWarning: Buffer read"
    )
    assert "Fix the kernel in kernels/uncleared.py" in refusal
    assert "Variant(acknowledged_warnings={'read before initialization': \"<why>\"})" in refusal


def test_an_acknowledged_one_passes(lowerings):
    case = uncleared(acknowledged_warnings={"Read before initialization": "the maximum starts from Y's values"})
    assert unacknowledged_warnings(case, extract_facts(lowerings.lower(case))) is None


def test_an_acknowledgment_of_another_warning_does_not_cover_it(lowerings):
    case = uncleared(acknowledged_warnings={"lowered as a serial loop": "scalar accumulation"})
    assert unacknowledged_warnings(case, extract_facts(lowerings.lower(case))) is not None


@pytest.mark.parametrize("acknowledged", [{"": "why"}, {READ_BEFORE_WRITE: " "}])
def test_an_acknowledgment_names_part_of_a_warning_and_why(acknowledged):
    with pytest.raises(FamilyError, match="variant 'only' acknowledges compiler warnings .* without naming"):
        uncleared(acknowledged_warnings=acknowledged).family.__post_init__()


def test_the_lowering_cache_holds_the_warnings(tmp_path):
    case = uncleared()
    files = LoweringSession(LoweringCache(tmp_path)).files(case)
    warm = LoweringSession(LoweringCache(tmp_path))  # another run: only the folder is shared
    cached = warm.files(case)
    assert warm.sources == {case.id: "cache"}
    assert cached == files
    (warning,) = load_yaml(cached[f"{case.id}.yaml"])["warnings"]
    assert READ_BEFORE_WRITE in warning


def test_the_static_check_snapshots_the_warning_and_fails_until_it_is_acknowledged(golden_session, monkeypatch):
    case = uncleared()
    monkeypatch.setattr(
        tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: Registry((case.family,), ())
    )
    first = golden_session("-k", case.id)  # no snapshot yet: the warning is said beside it
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(["*uncleared/only/sm_80: what its lowering warned about fails its check:*"])
    result = golden_session("--regen", "-k", case.id)
    result.assert_outcomes(failed=1)  # written for review only: a regen does not accept it silently
    result.stdout.fnmatch_lines(["*uncleared/only/sm_80: what its lowering warned about fails its check, so nothing*"])
    assert not (golden_session.golden / f"{case.id}.yaml").exists()
    assert READ_BEFORE_WRITE in (golden_session.pending / f"{case.id}.yaml").read_text()
    acknowledged = uncleared(acknowledged_warnings={READ_BEFORE_WRITE: "Y holds the running maximum"})
    monkeypatch.setattr(
        tilelang_golden.catalog.loading,
        "load_families",
        lambda *packages, **options: Registry((acknowledged.family,), ()),
    )
    golden_session("--regen", "-k", case.id).assert_outcomes(passed=1)
    assert READ_BEFORE_WRITE in (golden_session.golden / f"{case.id}.yaml").read_text()  # a fact of the snapshot
    golden_session("-k", case.id).assert_outcomes(passed=1)
