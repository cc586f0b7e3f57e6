"""What the harness produces for a case: normalized CUDA and facts, and the snapshot files for them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from harness.family import CaseFacts
from harness.static.cases import Case
from harness.static.facts import extract_facts
from harness.static.lowering import lower
from harness.static.normalize import normalize_cuda
from harness.static.snapshot import cuda_header, render_facts


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


def case_files(case: Case, *, fresh: bool = False) -> dict[str, str]:
    """`{"<id>.cu": ..., "<id>.yaml": ...}` for one case, as snapshotted under golden/."""
    produced = produce(case, fresh=fresh)
    return {
        f"{case.id}.cu": cuda_header(case.id, case.target) + produced.cuda,
        f"{case.id}.yaml": render_facts(produced.facts),
    }
