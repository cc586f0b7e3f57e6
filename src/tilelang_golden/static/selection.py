"""Whether a static run runs every check it collected that its command line does not leave out.

A run leaves a collected check out where its own `-k` or `-m` says so (a person's filter) or where `--shard` deals it
to another shard. Anything else that deselects a check (`--deselect`, `--lf`, a plugin) hides it: the run then holds
one more check, `golden/::hidden_checks`, which fails naming what was hidden and leads the verdict. Every shard of
such a run fails, whichever shard the check would have run on: what is hidden changes what the groups cost, hence
their dealing. The session's
pytest configuration is the harness's own (tilelang_golden.static.command), so no ini file or PYTEST_ADDOPTS of a
checkout reaches it; this is the check behind that.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _pytest.mark import KeywordMatcher, MarkMatcher
from _pytest.mark.expression import Expression

from tilelang_golden.static.item_names import GROUP_SUFFIX, checks_nothing
from tilelang_golden.static.snapshots.results import HIDING

CHECK = HIDING  # its item, held back from the run unless something was hidden
COLLECTED = pytest.StashKey[list[pytest.Item]]()
HELD_BACK = pytest.StashKey[pytest.Item]()
HIDDEN = pytest.StashKey[list[str]]()
LISTED = 10


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before anything deselects: what the run collected, and its own check held back."""
    for item in items:
        if getattr(item, "originalname", None) == CHECK:
            config.stash[HELD_BACK] = item
    items[:] = [item for item in items if getattr(item, "originalname", None) != CHECK]
    config.stash[COLLECTED] = list(items)


def _filter(expression: str | None) -> Expression | None:
    text = (expression or "").strip()
    return Expression.compile(text) if text else None


def _left_out_by_command_line(config: pytest.Config, item: pytest.Item) -> bool:
    """Whether the run's `-k` or `-m` leaves the item out, as pytest decides it."""
    keyword, marks = _filter(config.option.keyword), _filter(config.option.markexpr)
    if keyword is not None and not keyword.evaluate(KeywordMatcher.from_item(item)):
        return True
    return marks is not None and not marks.evaluate(MarkMatcher.from_markers(item.iter_markers()))


def hidden_check(
    config: pytest.Config, kept: Sequence[pytest.Item], other_shards: Sequence[pytest.Item]
) -> list[pytest.Item]:
    """The check to add to the run's items `kept` (`other_shards`: those --shard dealt elsewhere): none where every
    collected check is kept or left out by the command line; else the failing check, with what was hidden."""
    accounted = {id(item) for item in (*kept, *other_shards)}
    hidden = [
        GROUP_SUFFIX.sub("", item.nodeid)
        for item in config.stash.get(COLLECTED, [])
        if id(item) not in accounted and not checks_nothing(item) and not _left_out_by_command_line(config, item)
    ]
    config.stash[HIDDEN] = hidden
    return [config.stash[HELD_BACK]] if hidden and HELD_BACK in config.stash else []


def hidden_text(config: pytest.Config) -> str:
    """What the failing check says: how many were hidden, the first of them, and what to do."""
    hidden = config.stash.get(HIDDEN, [])
    listed = [f"  {name}" for name in hidden[:LISTED]]
    if len(hidden) > LISTED:
        listed.append(f"  ... and {len(hidden) - LISTED} more")
    return "\n".join(
        [
            f"{len(hidden)} check(s) were deselected by neither this run's -k or -m nor its --shard, so none of "
            "them ran:",
            *listed,
            "Something else deselected them (pytest's --deselect or --lf, or a plugin). The static session takes no "
            "pytest configuration from the repository (ini files, addopts, PYTEST_ADDOPTS); remove the option that "
            "hides them, and select cases with -k.",
        ]
    )


def empty_selection(config: pytest.Config) -> str:
    return (
        "no golden case matches this selection "
        f"(-k {config.getoption('keyword')!r}, --shard {config.getoption('--shard')!r}); "
        "list the cases with `nox -s static -- --collect-only -q`"
    )
