"""Job summary and error annotations for a static run on GitHub Actions.

    python scripts/ci_summary.py build/static-junit.xml --artifact golden-pending-shard-1

The logic (and its tests) is in harness/ci_summary.py; this file only makes it runnable.
"""

from __future__ import annotations

import sys

from harness.ci_summary import main

if __name__ == "__main__":
    sys.exit(main())
