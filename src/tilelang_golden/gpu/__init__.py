"""The GPU path: run (device, compile, worker) -> measure (numerics, timing) -> gate -> report; `check` runs the
stages for every variant, `command` is `tilelang-golden gpu`."""
