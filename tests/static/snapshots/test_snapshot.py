from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from tilelang_golden.environment import running_under_ci
from tilelang_golden.files import atomic_write
from tilelang_golden.static.snapshots.golden import RegenRefused, check_may_write, regen_files
from tilelang_golden.static.snapshots.snapshot import (
    CUDA_FORMAT_VERSION,
    FACTS_SCHEMA,
    FORMAT_CHANGELOG,
    FORMAT_VERSION,
    KERNEL_SCHEMA,
    CorruptSnapshot,
    SnapshotStore,
    cuda_header,
    parse_facts,
)


def test_atomic_write_interrupted_keeps_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "golden" / "a.cu"
    atomic_write(target, "old\n")

    def interrupted(src, dst):
        raise KeyboardInterrupt  # as if the regen was stopped between write and rename

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(target.parent) == ["a.cu"]


def test_atomic_write_failure_while_writing(tmp_path, monkeypatch):
    target = tmp_path / "a.yaml"
    atomic_write(target, "old\n")
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["a.yaml"]


def test_store_write_reports_outcome_and_keeps_bytes(tmp_path):
    store = SnapshotStore(tmp_path)
    assert store.write("f/x.cu", "a\n") == "created"
    assert store.write("f/x.cu", "a\n") == "unchanged"
    assert store.write("f/x.cu", "b\n") == "updated"
    assert (tmp_path / "f" / "x.cu").read_bytes() == b"b\n"
    assert store.files() == {"f/x.cu"}
    store.delete("f/x.cu")
    assert not (tmp_path / "f").exists() and tmp_path.exists()


def test_regen_files_refuses_disagreeing_lowerings_and_writes_nothing(tmp_path):
    store = SnapshotStore(tmp_path)
    with pytest.raises(RegenRefused, match="two lowerings of the same case differ.*x.cu"):
        regen_files({"x.cu": "a\n", "x.yaml": "k: 1\n"}, {"x.cu": "b\n", "x.yaml": "k: 1\n"}, store)
    assert store.files() == set()
    assert regen_files({"x.cu": "a\n"}, {"x.cu": "a\n"}, store) == {"x.cu": "created"}


@pytest.mark.parametrize(
    "value, expected", [("true", True), ("1", True), ("Yes", True), ("false", False), ("0", False), ("", False)]
)
def test_ci_detection(value, expected):
    assert running_under_ci({"CI": value}) is expected


def test_write_policy():
    check_may_write(force=False, folder=Path("golden"), environ={})
    check_may_write(force=True, folder=Path("golden"), environ={"CI": "true"})
    with pytest.raises(RegenRefused, match="refusing to rewrite tests/golden/ .*--force-regen-under-ci"):
        check_may_write(force=False, folder=Path("tests/golden"), environ={"CI": "true"})


def test_every_format_has_a_changelog_entry_and_the_cu_header_names_the_last_that_changed_it():
    assert sorted(FORMAT_CHANGELOG) == list(range(1, FORMAT_VERSION + 1))
    assert CUDA_FORMAT_VERSION <= FORMAT_VERSION
    assert f"(snapshot format {CUDA_FORMAT_VERSION})" in cuda_header("f/v/sm_80", "sm_80")
    for key in ("layouts", "instructions", "loops", "vector_stores", "shared_addressing"):
        assert key in FORMAT_CHANGELOG[3] and key in KERNEL_SCHEMA
    for key in ("kernels", "warnings"):
        assert key in FORMAT_CHANGELOG[6] and key in FACTS_SCHEMA


def test_a_facts_file_of_an_earlier_format_is_refused_with_the_fix():
    text = (REPO / "golden" / "rms_norm" / "threads256" / "sm_80.yaml").read_text()
    assert parse_facts(text, "x.yaml")["format"] == FORMAT_VERSION
    with pytest.raises(CorruptSnapshot, match="snapshot format 2, .*run `nox -s regen-golden`"):
        parse_facts(text.replace(f"format: {FORMAT_VERSION}", "format: 2"), "x.yaml")
    facts = yaml.safe_load(text)
    without = {key: value for key, value in facts.items() if key != "warnings"}
    with pytest.raises(CorruptSnapshot, match="missing keys \\['warnings'\\]"):
        parse_facts(yaml.safe_dump(without), "x.yaml")
    (kernel,) = facts["kernels"]
    without = {**facts, "kernels": [{key: value for key, value in kernel.items() if key != "loops"}]}
    with pytest.raises(CorruptSnapshot, match=f"kernel {kernel['name']}: missing keys \\['loops'\\]"):
        parse_facts(yaml.safe_dump(without), "x.yaml")
    with pytest.raises(CorruptSnapshot, match="kernels is empty, expected one entry per device kernel"):
        parse_facts(yaml.safe_dump({**facts, "kernels": []}), "x.yaml")


def test_two_differing_lowerings_are_refused_in_one_readable_message(tmp_path):
    from tilelang_golden.static.snapshots.golden import RegenRefused, regen_files
    from tilelang_golden.static.snapshots.snapshot import SnapshotStore

    golden = SnapshotStore(tmp_path)
    first = {"f/v/sm_80.cu": "a\nworkspace\n"}
    second = {"f/v/sm_80.cu": "a\nworkspace_1\n"}
    try:
        regen_files(first, second, golden)
    except RegenRefused as refused:
        message = str(refused)
    else:
        raise AssertionError("two differing lowerings were written")
    assert "-workspace" in message and "+workspace_1" in message
    assert "first lowering/f/v/sm_80.cu" in message and "docs/nondeterminism.md" in message
    assert golden.files() == set()


def test_one_changed_count_is_one_changed_line_of_the_facts():
    """Mappings are written one entry per line, so a reviewer's diff shows the count that moved, alone."""
    import difflib

    import yaml

    from tilelang_golden.static.snapshots.snapshot import render_facts

    facts = yaml.safe_load((REPO / "golden/layer_norm/threads256/sm_90.yaml").read_text())
    before = render_facts(facts)
    (kernel,) = facts["kernels"]
    name = sorted(kernel["instructions"])[0]
    kernel["instructions"][name] += 1
    kernel["layouts"]["x"] = "fragment 00000000"
    after = render_facts(facts)
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    old_x = yaml.safe_load(before)["kernels"][0]["layouts"]["x"]
    count = kernel["instructions"][name]
    assert sorted(changed) == sorted(
        [f"-    x: {old_x}", "+    x: fragment 00000000", f"-    {name}: {count - 1}", f"+    {name}: {count}"]
    )
    assert yaml.safe_load(after) == facts
