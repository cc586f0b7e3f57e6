"""The verdict of a failing static run (tilelang_golden/static/report/verdict.py): grouping, order, words, caps,
commands."""

from __future__ import annotations

import dataclasses

import pytest

from tilelang_golden.static.report.markdown import (
    MARKDOWN_UNFOLDED_LINES,
    entries_markdown,
    overview_lines,
    unfolded_lines,
)
from tilelang_golden.static.report.topics import facts_headline
from tilelang_golden.static.report.verdict import (
    FAILURE_TEXT_LINES,
    TERMINAL_BODY_LINES,
    build_verdict,
    footer_lines,
    terminal_lines,
)
from tilelang_golden.static.snapshots.changes import FactChange, FileChange, Mismatch
from tilelang_golden.static.snapshots.diff import fact_changes
from tilelang_golden.static.snapshots.results import CheckResult, Status

TARGETS = ("sm_80", "sm_89", "sm_90", "sm_100a", "sm_120", "gfx942", "gfx950")
# Same change per pair of targets that emit the same source, as the FullCol warp policy change does.
SAME_AS = {"sm_80": "sm_80", "sm_89": "sm_80", "sm_100a": "sm_100a", "sm_120": "sm_100a", "gfx942": "gfx942",
           "gfx950": "gfx942"}  # fmt: skip


def hunk(path: str, label: str, lines: int = 60) -> tuple[str, ...]:
    """A canonical diff of `path` whose body depends only on `label` (line numbers differ per file)."""
    body = [f"-      old {label} {i};" for i in range(lines // 2)] + [
        f"+      new {label} {i};" for i in range(lines // 2)
    ]
    return (f"--- golden/{path} (locals renamed as produced)", f"+++ produced/{path}", f"@@ -{len(path)},9 +9,9 @@",
            *body)  # fmt: skip


def changed_case(family: str, variant: str, target: str, label: str | None = None) -> CheckResult:
    label = label or SAME_AS[target]
    case_id = f"{family}/{variant}/{target}"
    suffix, language = (".hip", "HIP") if target.startswith("gfx") else (".cu", "CUDA")
    facts = (
        FactChange(("layouts", "Y_l"), "'fragment fc425f00'", "'fragment b0d81ea1'"),
        FactChange(("loops", "serial", 2), "<absent>", "3"),
        FactChange(("shared_addressing", "W_s", "load"), f"'{label}'", "'b94a4a0b'"),
    )
    return CheckResult(
        case_id,
        Status.FAILED,
        (family, variant, target),
        mismatches=(
            Mismatch(f"golden/{case_id}.yaml", FileChange.FACTS, facts=facts),
            Mismatch(f"golden/{case_id}{suffix}", FileChange.SOURCE, language, diff=hunk(f"{case_id}{suffix}", label)),
        ),
        accept=case_id,
    )


def full_col() -> tuple[list[CheckResult], list[tuple[str, str, str]]]:
    """12 failures (2 variants on 6 targets) and sm_90 unchanged: the FullCol change's shape."""
    failures = [changed_case("linear_bf16", v, t) for v in ("swizzle", "no_swizzle") for t in TARGETS if t != "sm_90"]
    return failures, [("linear_bf16", v, "sm_90") for v in ("swizzle", "no_swizzle")]


def test_identical_changes_across_targets_and_variants_are_one_entry_naming_where_it_applies():
    failures, unchanged = full_col()
    verdict = build_verdict(failures, unchanged)
    (entry,) = verdict.entries
    assert (
        entry.title
        == "linear_bf16/{no_swizzle,swizzle}: sm_80 = sm_89, sm_100a = sm_120, gfx942 = gfx950; sm_90 unchanged"
    )
    assert len(entry.checks) == 12
    assert entry.accept == 'nox -s regen-golden -- -k "linear_bf16"'
    assert verdict.accept_all == entry.accept
    # one facts diff and one source diff per class, never one per case
    labels = [section.label for section in entry.sections]
    assert labels == ["facts, sm_80 = sm_89", "facts, sm_100a = sm_120", "facts, gfx942 = gfx950",
                      "CUDA, sm_80 = sm_89: 60 changed lines", "CUDA, sm_100a = sm_120: 60 changed lines",
                      "HIP, gfx942 = gfx950: 60 changed lines"]  # fmt: skip


def test_different_diffs_are_not_grouped():
    failures, unchanged = full_col()
    failures[1] = changed_case("linear_bf16", "swizzle", "sm_89", label="sm_89")  # its own fingerprints and hunks
    (entry,) = build_verdict(failures, unchanged).entries  # the same topics: still one entry about the change
    assert entry.title.startswith("linear_bf16: {no_swizzle,swizzle}/sm_80 = sm_89, swizzle/sm_89, ")
    assert sum(section.label.startswith("CUDA") for section in entry.sections) == 3  # sm_80, sm_89, sm_100a


def test_an_entry_reads_headline_then_facts_then_source_then_command():
    failures, unchanged = full_col()
    lines = terminal_lines(build_verdict(failures, unchanged))
    headline = next(i for i, line in enumerate(lines) if "warp partition (layouts.Y_l)" in line)
    facts = next(i for i, line in enumerate(lines) if "layouts.Y_l: 'fragment fc425f00'" in line)
    source = next(i for i, line in enumerate(lines) if line.startswith("  CUDA, "))
    command = next(i for i, line in enumerate(lines) if line.startswith("  to accept: "))
    assert headline < facts < source < command
    markdown = entries_markdown(build_verdict(failures, unchanged))
    assert markdown.index("warp partition") < markdown.index("Facts, sm_80") < markdown.index("<details><summary>CUDA")
    assert markdown.index("<details><summary>HIP, gfx942 = gfx950") < markdown.index("To accept: `nox")


def test_the_terminal_caps_each_diff_and_names_the_full_one():
    failures, unchanged = full_col()
    lines = terminal_lines(build_verdict(failures, unchanged))
    assert len(lines) <= TERMINAL_BODY_LINES
    assert any(
        "more lines; the full diff: diff -u golden/linear_bf16/swizzle/sm_80.cu "
        "build/golden-pending/linear_bf16/swizzle/sm_80.cu" in line
        for line in lines
    )


def test_many_different_changes_stay_within_the_budgets():
    """40 entries of changes no two alike: the terminal and the summary's unfolded part keep their budgets."""
    failures = [changed_case(f"family_{i}", "v", "sm_80", label=f"l{i}") for i in range(40)]
    verdict = build_verdict(failures)
    assert len(verdict.entries) == 40
    assert len(terminal_lines(verdict)) <= TERMINAL_BODY_LINES + len(verdict.entries)
    markdown = "\n".join(overview_lines(verdict)) + "\n" + entries_markdown(verdict)
    assert unfolded_lines(markdown) <= MARKDOWN_UNFOLDED_LINES + len(overview_lines(verdict))
    assert "more changes</summary>" in markdown
    footer = footer_lines(verdict)
    assert len(footer) <= 15 and "nox -s regen-golden" in footer[-1]


def test_unfolded_lines_count_what_a_reader_sees_with_every_block_closed():
    text = "a\n<details><summary>s</summary>\n\nhidden\nhidden\n\n</details>\nb"
    assert unfolded_lines(text) == 3


def test_a_family_declaration_error_is_shown_once_and_short():
    """The same error for every case of a family (the case's names aside) is one entry of at most 20 lines."""
    trace = [f"  File 'tilelang_golden/x.py', line {i}, in f" for i in range(60)]
    failures = [
        CheckResult(
            f"fam/v{i}/sm_80",
            Status.FAILED,
            ("fam", f"v{i}", "sm_80"),
            text="\n".join([*trace, f"FamilyError: kernels/fam.py: variant v{i}: outputs= is missing"]),
        )
        for i in range(14)
    ]
    other = CheckResult(
        "other/v/sm_80", Status.FAILED, ("other", "v", "sm_80"), text="FamilyError: kernels/other.py: boom"
    )
    verdict = build_verdict([*failures, other])
    first, second = verdict.entries
    assert first.title == "fam/v0/sm_80 and 13 more with the same error" and len(first.checks) == 14
    (section,) = first.sections
    assert len(section.lines) <= FAILURE_TEXT_LINES
    assert section.lines[-1].endswith("variant v0: outputs= is missing")
    assert second.checks == ("other/v/sm_80",) and verdict.accept_all == ""


def test_headline_words_come_from_one_table_and_strip_the_kernel_level():
    old = {"format": 6, "kernels": [{"name": "main_kernel", "dynamic_shared_memory_bytes": 1,
                                     "gemms": [{"warps": "2 x 4", "policy": "Square"}]}]}  # fmt: skip
    new = {"format": 6, "kernels": [{"name": "main_kernel", "dynamic_shared_memory_bytes": 2,
                                     "gemms": [{"warps": "1 x 8", "policy": "FullCol"}]}]}  # fmt: skip
    changes = fact_changes(old, new)
    assert {c.name for c in changes} == {"dynamic_shared_memory_bytes", "gemms.0.warps", "gemms.0.policy"}
    assert facts_headline(changes) == (
        "warp partition (warps '2 x 4' -> '1 x 8', policy 'Square' -> 'FullCol'), "
        "shared memory (dynamic_shared_memory_bytes 1 -> 2) changed"
    )
    two = {"kernels": [new["kernels"][0], {"name": "reduce", "sync": {"syncthreads_main_loop": 1}}]}
    two_new = {"kernels": [new["kernels"][0], {"name": "reduce", "sync": {"syncthreads_main_loop": 2}}]}
    (change,) = fact_changes(two, two_new)
    assert change.name == "reduce: sync.syncthreads_main_loop"
    assert facts_headline([change]) == "synchronization (reduce: sync.syncthreads_main_loop) changed"
    unknown = FactChange(("brand_new", "x"), "1", "2")
    assert facts_headline([unknown]) == "brand_new (brand_new.x) changed", "an unknown key is named by its key"


@pytest.mark.parametrize(
    ("covered", "expected"),
    [
        (["f/a/sm_80", "f/b/sm_80"], 'nox -s regen-golden -- -k "f and sm_80"'),
        ([f"f/{v}/{t}" for v in "ab" for t in ("sm_80", "sm_89", "sm_90", "gfx942")], 'nox -s regen-golden -- -k "f"'),
        (["f/a/sm_80"], 'nox -s regen-golden -- -k "f/a/sm_80"'),
    ],
)
def test_each_entry_gets_a_command_that_selects_it_and_no_other_failure(covered, expected):
    failures = [changed_case("f", *case.split("/")[1:], label="same") for case in covered]
    known = [f"f/{v}/{t}" for v in ("a", "b") for t in ("sm_80", "sm_89", "sm_90", "gfx942")]
    assert build_verdict(failures, known=known).entries[0].accept == expected


def test_entries_of_one_family_are_accepted_by_its_shortest_selector_not_their_selectors_joined():
    """A change whose CUDA targets also changed machine facts (HIP has none) is two entries of one family; one
    command accepts both, as short as one entry's would be."""
    failures = [changed_case("inplace_update", "tile64x512", t, t[:2]) for t in TARGETS]
    machine = FactChange(("registers",), "138", "254")
    failures = [
        dataclasses.replace(
            f,
            mismatches=(*f.mismatches, Mismatch(f"golden/{f.check}.machine.yaml", FileChange.FACTS, facts=(machine,))),
        )
        if not f.check.endswith(("gfx942", "gfx950"))
        else f
        for f in failures
    ]
    known = [f"inplace_update/{v}/{t}" for v in ("tile64x512", "tile128x256") for t in TARGETS]
    verdict = build_verdict(failures, known=known)
    assert len(verdict.entries) > 1
    assert verdict.accept_all == 'nox -s regen-golden -- -k "inplace_update"'
