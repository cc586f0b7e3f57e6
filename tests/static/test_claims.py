"""The family-claim verdict (tilelang_golden/static/claims.py) that the static check and the upgrade preview share."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tilelang_golden.catalog.loading import load_families
from tilelang_golden.family import Claim
from tilelang_golden.static.claims import NoClaims, judge_claims

FAMILY = next(f for f in load_families().families if f.checks is not None)
CLAIMS = [
    Claim("1. holds as recorded", True, "a"),
    Claim("2. fails, recorded to hold", False, "b"),
    Claim("3. recorded false, still false", False, "c", expected=False, why="known"),
    Claim("4. recorded false, holds now", True, "d", expected=False, why="known"),
]


def test_a_claim_differs_from_its_record_when_it_fails_unrecorded_or_a_recorded_deviation_holds():
    family = dataclasses.replace(FAMILY, checks=lambda seen: CLAIMS)
    verdict = judge_claims(family, "g", [])
    assert [c.name for c in verdict.unexpected] == ["2. fails, recorded to hold", "4. recorded false, holds now"]
    assert [c.name for c in verdict.deviations] == ["3. recorded false, still false"]


def test_checks_that_return_nothing_are_refused_naming_the_family_file_and_the_group():
    family = dataclasses.replace(FAMILY, checks=lambda seen: [])
    with pytest.raises(NoClaims, match=rf"^{re.escape(FAMILY.file)}: its checks returned nothing for g/v/sm_80; "):
        judge_claims(family, "g/v/sm_80", [])
