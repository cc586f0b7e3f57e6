"""`python -m tilelang_golden COMMAND`: the `tilelang-golden` command (tilelang_golden.cli) without its console
script."""

import sys

from tilelang_golden.cli import main

if __name__ == "__main__":
    sys.exit(main())
