"""What the harness produces for a case: normalized CUDA and facts, and the snapshot files for them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from harness.family import CaseFacts
from harness.static.cases import Case
from harness.static.facts import extract_facts
from harness.static.lowering import LoweringError, lower
from harness.static.normalize import normalize_cuda, normalize_error
from harness.static.snapshot import cuda_header, render_error, render_facts


class NowLowers(RuntimeError):
    """A case declared not to lower (`Variant.does_not_lower`) lowered: the declaration is out of date."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.remedy = (
            f"now lowers on {case.target}: remove the declaration in {case.family.file} and run "
            f'`nox -s regen-golden -- -k "{case.id}"`'
        )
        super().__init__(f"{case.id}: {self.remedy}")


@dataclass(frozen=True)
class Produced:
    cuda: str  # normalized kernel source, without the snapshot header
    facts: dict[str, Any]


def produce(case: Case, *, fresh: bool = False) -> Produced:
    """Lower, normalize and extract one case: once per process, or again when `fresh`."""
    return _produce(case) if fresh else _produce_cached(case)


def _produce(case: Case) -> Produced:
    lowering = lower(case, fresh=True)
    return Produced(normalize_cuda(lowering.cuda), extract_facts(lowering))


@functools.cache
def _produce_cached(case: Case) -> Produced:
    lowering = lower(case)
    return Produced(normalize_cuda(lowering.cuda), extract_facts(lowering))


def case_facts(case: Case) -> CaseFacts:
    """What a family check sees of a case, from its (cached) lowering."""
    produced = produce(case)
    return CaseFacts(case.variant, case.target, case.params, produced.facts, produced.cuda)


def error_text(case: Case, *, fresh: bool = False) -> str:
    """The `.error` snapshot of a case declared not to lower; NowLowers when it lowers."""
    try:
        lower(case, fresh=fresh)
    except LoweringError as error:
        cause = error.__cause__ or error  # TileLang's own error, not the harness's advice around it
        return render_error(
            case.id, case.target, case.does_not_lower, normalize_error(f"{type(cause).__name__}: {cause}")
        )
    raise NowLowers(case)


def case_files(case: Case, *, fresh: bool = False) -> dict[str, str]:
    """`{"<id>.cu": ..., "<id>.yaml": ...}` for one case, as snapshotted under golden/; `{"<id>.error": ...}` for
    one declared not to lower."""
    if case.does_not_lower is not None:
        (path,) = case.snapshot_files
        return {path: error_text(case, fresh=fresh)}
    produced = produce(case, fresh=fresh)
    cuda, facts = case.snapshot_files
    return {cuda: cuda_header(case.id, case.target) + produced.cuda, facts: render_facts(produced.facts)}
