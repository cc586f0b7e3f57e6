"""The files a case's snapshot is made of: which a case produces and what each is called.

In the snapshot layer, which both checks read: the static check's kinds (tilelang_golden.static.kinds) render and
compare these files, each kind the files of its suffix; the GPU check reads them. A case declared not to lower has its
error alone; any other its kernel source (`.cu` on a CUDA target, `.hip` on a HIP one), its facts and, on CUDA, its
machine facts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tilelang_golden.targets import SOURCE_SUFFIXES, TARGETS

if TYPE_CHECKING:
    from tilelang_golden.catalog.cases import Case

FACTS_SUFFIX = ".yaml"
MACHINE_SUFFIX = ".machine.yaml"
ERROR_SUFFIX = ".error"


def _lowers(case: Case) -> bool:
    return case.does_not_lower is None


def _on(backend: str) -> Callable[[Case], bool]:
    return lambda case: _lowers(case) and TARGETS[case.target].backend == backend


# Each file a case may have, by how its name ends, in the order a case's files are listed (its source first), with
# the cases that have it. A new kind of snapshot file is a line here (its name) and a class of
# tilelang_golden.static.kinds (its content).
SNAPSHOT_FILES: tuple[tuple[str, Callable[[Case], bool]], ...] = (
    (SOURCE_SUFFIXES["cuda"], _on("cuda")),
    (SOURCE_SUFFIXES["hip"], _on("hip")),
    (MACHINE_SUFFIX, _on("cuda")),
    (FACTS_SUFFIX, _lowers),
    (ERROR_SUFFIX, lambda case: not _lowers(case)),
)


def case_suffixes(case: Case) -> tuple[str, ...]:
    """How the names of the case's files end, its source first."""
    return tuple(suffix for suffix, has in SNAPSHOT_FILES if has(case))


def case_files(case: Case) -> tuple[str, ...]:
    """The snapshot files a case produces, as paths under the snapshot folder (`<family>/<variant>/<target>.cu`)."""
    return tuple(f"{case.id}{suffix}" for suffix in case_suffixes(case))


def source_file(case: Case) -> str:
    """The kernel source snapshot: `<id>.cu` for a CUDA target, `<id>.hip` for a HIP one."""
    return f"{case.id}{SOURCE_SUFFIXES[TARGETS[case.target].backend]}"


def facts_file(case: Case) -> str:
    return f"{case.id}{FACTS_SUFFIX}"


def machine_file(case: Case) -> str | None:
    """The machine facts snapshot, `<id>.machine.yaml`, of a case that has one (on a CUDA target); else None."""
    return f"{case.id}{MACHINE_SUFFIX}" if MACHINE_SUFFIX in case_suffixes(case) else None
