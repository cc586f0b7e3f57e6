"""The static path: variant -> produce (lowering, facts, normalized source) -> compare with the snapshots
(snapshots) or write them -> report (the verdict). The pytest plugin (plugin, session_items) runs it."""
