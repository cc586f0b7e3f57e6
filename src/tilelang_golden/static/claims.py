"""A family's claims about its variants' schedules, judged on fresh facts against what the family records.

The one verdict that the static check fails a group on (test_family_checks) and that the upgrade
preview lists as a changed check: a claim whose outcome differs from the record (`holds != expected`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tilelang_golden.family import CaseFacts, Claim, Family


class NoClaims(ValueError):
    """The family's checks returned nothing for a group: a check that checks nothing cannot pass."""


@dataclass(frozen=True)
class ClaimVerdict:
    claims: tuple[Claim, ...]

    @property
    def unexpected(self) -> tuple[Claim, ...]:
        """Claims whose outcome differs from the record: one that fails though it should hold, or a recorded
        deviation (`expected=False`) that holds now."""
        return tuple(claim for claim in self.claims if claim.holds != claim.expected)

    @property
    def deviations(self) -> tuple[Claim, ...]:
        """Recorded deviations that are still false: findings a reviewer sees, not failures."""
        return tuple(claim for claim in self.claims if not claim.holds and not claim.expected)


def judge_claims(family: Family, group: str, seen: Sequence[CaseFacts]) -> ClaimVerdict:
    """The family's checks on the group's fresh facts; NoClaims when they return nothing."""
    claims = tuple(family.checks(seen)) if family.checks else ()
    if not claims:
        raise NoClaims(
            f"{family.file}: its checks returned nothing for {group}; a check that checks nothing cannot pass"
        )
    return ClaimVerdict(claims)
