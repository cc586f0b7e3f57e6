"""What the harness reads of the environment it runs in; both halves ask here."""

import os
from collections.abc import Mapping

TRUE_WORDS = {"1", "true", "yes", "on"}


def running_under_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `CI` is set to a true value, as GitHub Actions and most CI services set it."""
    return environ.get("CI", "").strip().lower() in TRUE_WORDS
