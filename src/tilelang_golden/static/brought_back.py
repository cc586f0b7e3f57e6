"""What a filter drops that a run still owes its reader: items whose ids name no case (a family's load failure, the
orphan check), which `-k "attention and sm_90"` deselects while selecting that family's cases. The plugin
(tilelang_golden.static.plugin) remembers what pytest deselected and brings these back where the selection names them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from tilelang_golden.catalog.loading import Registry
from tilelang_golden.static.item_names import checks_nothing
from tilelang_golden.static.orphans import orphans
from tilelang_golden.static.snapshots.snapshot import SnapshotStore

# The load failures of families and the orphan check that -k or -m deselected, as pytest_deselected reports them:
# their ids name no case, so a filter on cases drops them.
DESELECTED = pytest.StashKey[list[pytest.Item]]()
BROUGHT_BACK = ("test_family_loads", "test_no_orphans")
KEYWORD_NAME = re.compile(r"[^\s()]+")


def remember_deselected(items: Sequence[pytest.Item]) -> None:
    """Keep the deselected items that may be brought back (pytest_deselected)."""
    for item in items:
        if getattr(item, "originalname", None) in BROUGHT_BACK and not checks_nothing(item):
            item.config.stash.setdefault(DESELECTED, []).append(item)


def named_load_failures(config: pytest.Config) -> list[pytest.Item]:
    """The load failures of the families a -k expression names. `-k "attention and sm_90"` deselects the item that
    says why `attention` failed to load (its id has no target); without it the run would only say that nothing
    matched."""
    tokens = KEYWORD_NAME.findall((config.getoption("keyword") or "").lower())
    # Words the expression asks for (not those after `not`); a case id's first part is its family's name.
    words = {word.split("/")[0] for i, word in enumerate(tokens) if i == 0 or tokens[i - 1] != "not"}
    words -= {"", "and", "or", "not"}
    return [
        item
        for item in items_of(config.stash.get(DESELECTED, []), "test_family_loads")
        if any(word in item.callspec.params["broken"].name.lower() for word in words)
    ]


def named_orphans(
    config: pytest.Config, items: Sequence[pytest.Item], registry: Registry, golden: SnapshotStore
) -> tuple[list[pytest.Item], set[str] | None]:
    """The orphan check a filter deselected, brought back for the families of the cases it selects where those have
    orphans (finding them lowers nothing), with that scope; none and no scope (every family) otherwise."""
    deselected = items_of(config.stash.get(DESELECTED, []), "test_no_orphans")
    if not deselected or config.getoption("--shard"):
        return [], None
    scope = {item.callspec.params["case"].family.name for item in items_of(items, "test_case")}
    return (deselected if orphans(registry, golden, scope) else []), scope


def items_of(items: Sequence[pytest.Item], test: str) -> list[pytest.Item]:
    """The items of one check function."""
    return [item for item in items if getattr(item, "originalname", None) == test]
