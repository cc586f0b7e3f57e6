"""`tilelang-golden`: the harness's commands, in the repository that runs them (its settings: tilelang_golden.config).

    tilelang-golden static [PYTEST OPTIONS]   compare every snapshot (what `nox -s static` runs)
    tilelang-golden regen [PYTEST OPTIONS]    rewrite the selected snapshots (what `nox -s regen-golden` runs)
    tilelang-golden gpu [OPTIONS]             numerics and timing on the GPU at hand (`nox -s gpu`)
    tilelang-golden upgrade-preview [OPTIONS] what another TileLang would change (`nox -s upgrade-preview`)
    tilelang-golden history record|page ...   add a GPU run of main to the history; render its site (`nox -s history`)
    tilelang-golden summary [OPTIONS]         a static run's results -> GitHub job summary and annotations
    tilelang-golden costs [--record PENDING]  what each case costs to lower, and the shards it predicts
    tilelang-golden config KEY                one of the repository's settings, as the harness reads it
    tilelang-golden init --families PKG       write the sessions, workflows, locks' inputs and runner set-up here

Each runs in the calling Python: a session installs the locks, the harness and the repository's own package of
families, then calls it as `python -m tilelang_golden COMMAND`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def static(argv: Sequence[str]) -> int:
    from tilelang_golden.static.command import static_session

    return static_session(argv)


def regen(argv: Sequence[str]) -> int:
    return static(["--regen", *argv])


def gpu(argv: Sequence[str]) -> int:
    from tilelang_golden.gpu.command import main

    return main(list(argv))


def upgrade_preview(argv: Sequence[str]) -> int:
    from tilelang_golden.upgrade.command import main

    return main(list(argv))


def history(argv: Sequence[str]) -> int:
    from tilelang_golden.history.command import main

    return main(list(argv))


def summary(argv: Sequence[str]) -> int:
    from tilelang_golden.static.report.job_summary import main

    return main(argv)


def costs(argv: Sequence[str]) -> int:
    from tilelang_golden.static.snapshots.costs import main

    return main(argv)


def config(argv: Sequence[str]) -> int:
    from tilelang_golden.config import main

    return main(argv)


def init(argv: Sequence[str]) -> int:
    from tilelang_golden.init import main

    return main(argv)


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "static": static,
    "regen": regen,
    "gpu": gpu,
    "upgrade-preview": upgrade_preview,
    "history": history,
    "summary": summary,
    "costs": costs,
    "config": config,
    "init": init,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        given = f"unknown command {args[0]!r}; " if args and args[0] not in ("-h", "--help") else ""
        print(f"{given}{__doc__.strip()}", file=sys.stderr if given else sys.stdout)
        return 2 if given or not args else 0
    return COMMANDS[args[0]](args[1:])
