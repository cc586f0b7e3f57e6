"""What the harness writes for a case: normalized CUDA and facts YAML, keyed by path under golden/."""

from __future__ import annotations

from harness.cases import Case
from harness.facts import extract_facts
from harness.lowering import lower
from harness.normalize import normalize_cuda
from harness.snapshot import render_facts


def case_files(case: Case, *, fresh: bool = False) -> dict[str, str]:
    """`{"<id>.cu": ..., "<id>.yaml": ...}` for one case (lowered once, or again when `fresh`)."""
    lowering = lower(case, fresh=fresh)
    return {
        f"{case.id}.cu": normalize_cuda(lowering.cuda),
        f"{case.id}.yaml": render_facts(extract_facts(lowering)),
    }
