"""The static session as a command: pytest with the golden plugin and its items, on every core. `tilelang-golden
static` and `regen` run it, and so does the upgrade preview, whose cost is then a static run's."""

from __future__ import annotations

from collections.abc import Sequence

# The static session's items live in the package; --pyargs collects that module by its name. The repository's own
# conftest.py files serve its tests, not this session: pytest would import them (testpaths) in every process, and a
# tests/conftest.py that imports TileLang and torch costs each worker seconds.
GOLDEN = ["-p", "tilelang_golden.static.plugin", "--noconftest", "--pyargs", "tilelang_golden.static.session_items"]
# Lowerings of one group stay on one worker (docs/internals.md); -n auto starts none when the cache holds them.
WORKERS = ["-n", "auto", "--dist", "loadgroup"]


def static_session(argv: Sequence[str]) -> int:
    """The session with these options (pytest's and the plugin's); its exit status."""
    import pytest

    return int(pytest.main([*GOLDEN, *WORKERS, *argv]))
