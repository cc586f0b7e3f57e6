from __future__ import annotations

import os

import pytest

from harness.static.golden import RegenRefused, check_may_write, regen_files, running_under_ci
from harness.static.snapshot import SnapshotStore, atomic_write


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
    check_may_write(force=False, environ={})
    check_may_write(force=True, environ={"CI": "true"})
    with pytest.raises(RegenRefused, match="--force-regen-under-ci"):
        check_may_write(force=False, environ={"CI": "true"})
