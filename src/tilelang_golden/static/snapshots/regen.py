"""The command that writes snapshots, as every message of both checks names it."""

from __future__ import annotations

from collections.abc import Iterable

from tilelang_golden.regressions import accept_options


def regen_command(accept: str = "", regressions: Iterable[str] = ()) -> str:
    """The command that writes snapshots: a regen of the `-k` expression `accept` (a case's id, a result's
    selector), or an unfiltered one, acknowledging the regression classes named in `regressions` (each with a reason
    to fill in); every message that names it builds it here."""
    options = accept_options(regressions)
    if accept:
        return f'nox -s regen-golden -- -k "{accept}"{options}'
    return f"nox -s regen-golden --{options}" if options else "nox -s regen-golden"
