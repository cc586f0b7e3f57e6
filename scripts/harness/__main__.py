"""`python -m harness COMMAND`: the `tilelang-golden` command (harness.cli) without its console script."""

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
