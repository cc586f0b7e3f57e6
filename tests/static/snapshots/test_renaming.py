"""Renaming-aware comparison of CUDA texts, on pairs that two TileLang versions really emitted."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

from tilelang_golden.static.kinds import describe_mismatch
from tilelang_golden.static.snapshots.changes import FileChange
from tilelang_golden.static.snapshots.renaming import all_tokens, classify

DATA = REPO / "tests" / "data" / "renaming"


def pair(name: str) -> tuple[str, str]:
    return (DATA / f"{name}.tilelang-0.1.13.cu").read_text(), (DATA / f"{name}.tilelang-0.1.15.cu").read_text()


def changed_lines(diff: list[str]) -> list[str]:
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


@pytest.mark.parametrize("name", ["ns2_128x128x32_sm_90", "ns0_64x64x32_sm_80"])
def test_tokens_keep_every_character(name):
    for text in pair(name):
        assert "".join(token.text for token in all_tokens(text)) == text


def test_a_real_upgrade_diff_keeps_the_real_change_and_drops_the_renaming():
    """0.1.13 -> 0.1.15 on sm_90: the B tile's two TMA loads became a loop, and loop variables were
    renumbered all through the kernel (i -> i_1, i_1 -> i_2, ...)."""
    old, new = pair("ns2_128x128x32_sm_90")
    found = classify(old, new)
    assert not found.renamed_only
    changed = changed_lines(found.canonical_diff)
    removed = [line for line in changed if line.startswith("-")]
    added = [line[1:].strip() for line in changed if line.startswith("+")]
    assert len(removed) == 2 and all("tma_load(B_desc" in line for line in removed), changed
    assert added[0] == "#pragma unroll" and added[1].startswith("for (int i = 0; i < 2; ++i)"), changed
    assert "tma_load(B_desc" in added[2] and added[3] == "}" and len(added) == 4, changed
    raw_changes = sum(1 for a, b in zip(old.splitlines(), new.splitlines(), strict=False) if a != b)
    assert raw_changes > 10, "the raw texts differ on many more lines: the renaming"


def test_a_look_alike_that_differs_in_one_index_expression_is_a_cuda_change():
    old, new = pair("ns0_64x64x32_sm_80")
    found = classify(old, new)
    assert not found.renamed_only
    (removed, added) = changed_lines(found.canonical_diff)
    assert removed.startswith("-") and added.startswith("+")
    assert "ptx_ldmatrix_x4_trans" in removed and "ptx_ldmatrix_x4_trans" in added


def test_the_same_kernel_with_only_the_renaming_is_identifiers_renamed_only():
    """The 0.1.13 text with its one real change (the TMA loop) taken over from 0.1.15: what is
    left between the two is the real renaming, which must be recognized as such."""
    old, new = pair("ns2_128x128x32_sm_90")
    old_lines, new_lines = old.splitlines(), new.splitlines()
    start = next(i for i, line in enumerate(old_lines) if "tma_load(B_desc" in line)
    loop = next(i for i, line in enumerate(new_lines) if "tma_load(B_desc" in line) - 2
    spliced = "\n".join(old_lines[:start] + new_lines[loop : loop + 4] + old_lines[start + 2 :]) + "\n"
    found = classify(spliced, new)
    assert found.renamed_only, "\n".join(found.canonical_diff)
    assert found.renaming["i"] == "i_1" and len(found.renaming) >= 3


def test_swapping_two_locals_is_not_a_renaming():
    old = "__global__ void k(float* A) {\n  int x = 1;\n  int y = 2;\n  A[x] = y;\n}\n"
    new = "__global__ void k(float* A) {\n  int x = 1;\n  int y = 2;\n  A[y] = x;\n}\n"
    assert not classify(old, new).renamed_only


def test_a_failing_cu_says_which_kind_it_is():
    old, new = pair("ns0_64x64x32_sm_80")
    changed = describe_mismatch("f/v/sm_80.cu", old, new, "golden/")
    assert changed.kind is FileChange.SOURCE
    assert changed.lines()[0] == "golden/f/v/sm_80.cu: CUDA changed (local names canonicalized)"
    assert changed.diff[0] == "--- golden/f/v/sm_80.cu (locals renamed as produced)"
    renamed = describe_mismatch("f/v/sm_80.cu", new, re.sub(r"\bC_l\b", "accumulator", new), "golden/")
    assert (renamed.kind, renamed.renaming) == (FileChange.RENAMED, (("C_l", "accumulator"),))
    assert renamed.lines()[0] == "golden/f/v/sm_80.cu: identifiers renamed only (1: C_l -> accumulator)"
    assert describe_mismatch("f/v/sm_80.cu", new, new, "golden/") is None


def test_comment_and_whitespace_edits_get_their_own_kind():
    from tilelang_golden.static.snapshots.snapshot import cuda_header

    header = cuda_header("f/v/sm_80", "sm_80")
    code = "int main() {\n  int i = 0;\n  return i;\n}\n"
    commented = describe_mismatch("f/v/sm_80.cu", header + code, header + code.replace("{\n", "{\n  // note\n"), "g/")
    spaced = describe_mismatch("f/v/sm_80.cu", header + code, header + code.replace("int i", "int  i"), "g/")
    assert (commented.kind, spaced.kind) == (FileChange.COMMENTS, FileChange.WHITESPACE)
    assert commented.lines()[0] == "g/f/v/sm_80.cu: comments changed only (the code is the same token for token)"
    assert spaced.lines()[0] == "g/f/v/sm_80.cu: whitespace changed only (the code is the same token for token)"
    assert spaced.lines()[1:3] == ["  --- g/f/v/sm_80.cu", "  +++ produced/f/v/sm_80.cu"], "named by the store's prefix"


MOVED_OLD = """__global__ void k(float* C, half_t* D) {
  float C_l[8];
  for (int i = 0; i < 4; ++i) {
    half_t C_local_cast[4];
    C_local_cast[0] = (half_t)C_l[i];
    D[i] = C_local_cast[0];
  }
}
"""
# TileLang hoists the cast buffer out of the loop and renumbers the loop variable.
MOVED_NEW = """__global__ void k(float* C, half_t* D) {
  float C_l[8];
  half_t C_local_cast[4];
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    C_local_cast[0] = (half_t)C_l[i_1];
    D[i_1] = C_local_cast[0];
  }
}
"""


def test_a_declaration_moved_between_scopes_and_nothing_else_is_its_own_class():
    found = classify(MOVED_OLD, MOVED_NEW)
    assert not found.renamed_only and found.moved == ("half_t C_local_cast[4];",)
    moved = describe_mismatch("f/v/gfx942.hip", MOVED_OLD, MOVED_NEW, "golden/")
    assert moved.kind is FileChange.MOVED and moved.moved == ("half_t C_local_cast[4];",)
    assert moved.lines()[0].startswith("golden/f/v/gfx942.hip: declarations moved only (half_t C_local_cast[4];")


def test_a_moved_declaration_beside_a_real_change_is_a_source_change_named_by_its_language():
    changed = MOVED_NEW.replace("D[i_1] = ", "D[i_1 + 1] = ")
    assert changed != MOVED_NEW
    found = classify(MOVED_OLD, changed)
    assert not found.renamed_only and found.moved == ()
    mismatch = describe_mismatch("f/v/gfx942.hip", MOVED_OLD, changed, "golden/")
    assert mismatch.kind is FileChange.SOURCE and mismatch.headline == "HIP changed (local names canonicalized)"
    resized = MOVED_NEW.replace("C_local_cast[4];", "C_local_cast[8];", 1)
    assert classify(MOVED_OLD, resized).moved == (), "a declaration that changed did not only move"
