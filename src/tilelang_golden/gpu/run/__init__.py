"""Running kernels on the GPU at hand: the device, the JIT compile, the worker process, the calls and poison."""
