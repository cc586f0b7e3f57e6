"""The performance history: every GPU run of main kept as a record, each variant's series over them with its changes
of level, and a static site that plots them (docs/history.md)."""
