"""The regressions between the committed snapshots and an upgrade preview's, both ways, as a table per class and target.

    python -m benchmarks.preview_regressions build/upgrade-preview/0.1.13 [build/upgrade-preview/0.1.12 ...]

The preview itself (`nox -s upgrade-preview -- VERSION`) reports the regressions of moving from the pinned TileLang to
VERSION. Read the other way, from VERSION's snapshots to the pinned ones, the same files say what the upgrade to the
pinned TileLang brought: this prints both, from the snapshot files alone (no lowering), by the static check's own
comparison (tilelang_golden.static.kinds.compare_case).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tilelang_golden.regressions import REGRESSION_CLASSES
from tilelang_golden.static.kinds import compare_case
from tilelang_golden.static.snapshots.snapshot import SnapshotStore
from tilelang_golden.targets import TARGETS

FACT_SUFFIXES = (".yaml",)  # `.machine.yaml` ends so too


def regressions(old: SnapshotStore, new: SnapshotStore) -> tuple[Counter[tuple[str, str]], list[str]]:
    """(class, target) -> cases whose change from `old` to `new` is a regression of that class; and a line per
    case and regression."""
    counts: Counter[tuple[str, str]] = Counter()
    lines: list[str] = []
    cases: dict[str, dict[str, str]] = {}
    for path in sorted(new.files() & old.files()):
        if path.endswith(FACT_SUFFIXES) and path.count("/") == 2:
            cases.setdefault(path.split(".", 1)[0], {})[path] = new.read(path) or ""
    for case, files in cases.items():
        found = compare_case(files, old).regressions
        for name in dict.fromkeys(regression.name for regression in found):
            counts[(name, case.rsplit("/", 1)[1])] += 1
        lines += [f"- {case}: {regression.line()}" for regression in found]
    return counts, lines


def table(title: str, found: tuple[Counter[tuple[str, str]], list[str]]) -> list[str]:
    counts, cases = found
    lines = [f"{title}: {sum(counts.values())} case-class pairs", ""]
    lines += ["| class | " + " | ".join(TARGETS) + " | all |", "|---" * (len(TARGETS) + 2) + "|"]
    for regression_class in REGRESSION_CLASSES:
        row = [counts[(regression_class.name, target)] for target in TARGETS]
        if any(row):
            lines.append(f"| {regression_class.name} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    return [*lines, "", *cases, ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("previews", nargs="+", type=Path, help="upgrade preview output folders")
    parser.add_argument("--golden", type=Path, default=Path("golden"), help="the committed snapshots")
    args = parser.parse_args(argv)
    pinned = SnapshotStore(args.golden)
    for folder in args.previews:
        preview = SnapshotStore(folder / "golden")
        if not preview.files():
            print(f"{folder}/golden holds no snapshot: run `nox -s upgrade-preview -- VERSION` first", file=sys.stderr)
            return 1
        version = folder.name
        print("\n".join(table(f"pinned -> {version} (what the preview reports)", regressions(pinned, preview))))
        print(
            "\n".join(table(f"{version} -> pinned (what the upgrade to the pin brought)", regressions(preview, pinned)))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
