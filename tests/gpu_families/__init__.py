"""Test-only families for proving the GPU check on a GPU: `tilelang-golden gpu --families tests.gpu_families`.

Each is broken on purpose: a kernel that does not finish, one that writes to an illegal address,
inputs that raise, a missing barrier (`planted_race`) and reads of memory nothing wrote (`planted_uninit`), each of
the last two beside its right kernel (tests/gpu/test_planted.py). None is snapshotted: the static check reads only
`kernels/` (tests/gpu/test_isolation.py holds that), and the GPU check compares none of these with
a snapshot.
"""
