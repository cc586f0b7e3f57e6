"""Run a script of scripts/ in a fresh interpreter that cannot import TileLang."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import SUBPROCESS_LIMIT_S

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

# Makes `import tilelang` fail exactly as it does where TileLang is not installed, while the
# rest of this environment (torch, yaml, ...) stays importable.
_HIDE_TILELANG = """
import runpy, sys

class HideTileLang:
    def find_spec(self, name, path=None, target=None):
        if name == "tilelang" or name.startswith("tilelang."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, HideTileLang())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

# "hidden": TileLang blocked in this environment; "no site-packages": -I -S, only the standard
# library, as on a machine where nothing was installed.
HOW = ("hidden", "no site-packages")


def run_without_tilelang(script: str, *args: str, how: str = "hidden") -> subprocess.CompletedProcess[str]:
    path = str(SCRIPTS / script)
    if how == "hidden":
        command = [sys.executable, "-I", "-c", _HIDE_TILELANG, path, *args]
    else:
        command = [sys.executable, "-I", "-S", path, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)
