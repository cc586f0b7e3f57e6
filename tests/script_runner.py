"""Running a command line's `main(argv)` in this process. The command lines are modules of the repository's folders
(seeds/, benchmarks/, tools/), run as `python -m seeds.lower_num_stages` from its root; tests import them by that
name (pytest's pythonpath puts the root on sys.path)."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout


def run_script(main: Callable[[Sequence[str]], int], *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `main(list(argv))`."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()
