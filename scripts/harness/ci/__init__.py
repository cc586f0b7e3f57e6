"""CI output: a static session's JUnit XML -> GitHub job summary and annotations."""
