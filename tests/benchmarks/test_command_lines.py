"""Each benchmark's `--help` names the command that runs it (`python -m benchmarks.NAME`), not its file."""

from __future__ import annotations

import importlib
import sys

import pytest
from conftest import REPO

BENCHMARKS = sorted(path.stem for path in (REPO / "benchmarks").glob("*.py") if path.stem != "__init__")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_help_names_the_command(name, monkeypatch, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--help"])
    with pytest.raises(SystemExit) as stopped:
        module.main()
    assert stopped.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m benchmarks.{name} "), name
