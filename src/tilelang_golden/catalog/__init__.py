"""From a family to its cases: finding the families, the unit of work both halves share, building a variant's kernel."""
