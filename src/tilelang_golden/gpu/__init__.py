"""The GPU path: device -> compile -> numerics -> timing -> baseline -> results -> report."""
