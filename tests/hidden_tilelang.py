"""Run a command-line module (`seeds.lower_num_stages`) as `python -m` runs it from the repository root, in a fresh
interpreter that cannot import TileLang."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, SUBPROCESS_LIMIT_S

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
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""

# "hidden": TileLang blocked in this environment; "no site-packages": -S, only the standard
# library, as on a machine where nothing was installed. Both ignore the environment's PYTHONPATH
# and the user's site-packages (-E -s) and run in the repository root, whose folder `-c` and `-m`
# put first on the path, as `python -m` there does.
HOW = ("hidden", "no site-packages")


def run_without_tilelang(module: str, *args: str, how: str = "hidden") -> subprocess.CompletedProcess[str]:
    if how == "hidden":
        command = [sys.executable, "-E", "-s", "-c", _HIDE_TILELANG, module, *args]
    else:
        command = [sys.executable, "-E", "-s", "-S", "-m", module, *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=SUBPROCESS_LIMIT_S)
