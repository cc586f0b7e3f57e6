"""What a TileLang upgrade would change, case by case, before the pin moves (`nox -s upgrade-preview`).

    python scripts/upgrade_preview.py --output build/upgrade-preview/0.1.14

Run in an environment where only TileLang differs from the pins; writes report.md, report.json
and the produced snapshots under --output, never under golden/. Exit 0 when the preview ran (it
is a report), 2 when it could not run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="folder for the report and the produced files")
    parser.add_argument("--golden-dir", type=Path, default=REPO / "golden")
    options = parser.parse_args(argv)

    from harness.static.lowering import tilelang_unavailable

    problem = tilelang_unavailable()
    if problem:
        print(f"upgrade preview: {problem}", file=sys.stderr)
        return 2
    from harness.family import registry
    from harness.static.cases import all_cases
    from harness.static.snapshot import SnapshotStore, installed_tilelang_version
    from harness.static.upgrade_preview import run_preview

    manifest = SnapshotStore(options.golden_dir).read_manifest() or {}
    for broken in registry().broken:
        print(f"upgrade preview: family not previewed: {broken.error}", file=sys.stderr)
    preview = run_preview(
        all_cases(), installed_tilelang_version(), str(manifest.get("tilelang", "?")), options.golden_dir,
        options.output,
    )  # fmt: skip
    print((options.output / "report.md").read_text())
    print(f"wrote {options.output}/report.md, report.json and golden/ ({len(preview.rows)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
