"""The command lines under scripts/ as modules, and running a script's `main(argv)` in this process."""

from __future__ import annotations

import importlib.util
import io
import sys
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as a module (once per process): scripts are command lines, not a package."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        assert spec and spec.loader, f"no script scripts/{name}.py"
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def run_script(main: Callable[[Sequence[str]], int], *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `main(list(argv))`."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()
