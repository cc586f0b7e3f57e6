"""Mutants of the new kernel families, one per family, that the GPU numerics must fail.

Each module here is a family under the real family's name (so the GPU check finds the real snapshots), whose
first variant runs the real kernel with one change in its source, made by `mutate`: the mutant can never
drift from the kernel it mutates, and a change that no longer applies fails on import. Load them with
`tilelang_golden.catalog.loading.load_families("tests.mutant_families")` from the repository root.
"""

import dataclasses
import inspect
import itertools
import linecache
import types
from typing import Any

from tilelang_golden.family import Chain, Family

_serial = itertools.count()


def _function(kernel: Any) -> Any:
    """The Python function a TileLang kernel object wraps (an eager or lazy @tilelang.jit), or the function."""
    func = getattr(kernel, "func", kernel)
    return getattr(func, "orig_func", func)


def mutate(kernel: Any, old: str, new: str) -> Any:
    """The kernel re-made from its own source, decorators included, with the one occurrence of `old` replaced by
    `new`; ValueError when `old` does not occur exactly once."""
    function = _function(kernel)
    source = inspect.getsource(function)
    if source.count(old) != 1:
        raise ValueError(
            f"mutant of {function.__qualname__}: {old!r} occurs {source.count(old)} times in its source, not once"
        )
    mutated = source.replace(old, new)
    # TileLang parses a kernel from its source text: register the mutated text under a name of its own.
    filename = f"<mutant {next(_serial)} of {function.__qualname__}>"
    linecache.cache[filename] = (len(mutated), None, mutated.splitlines(keepends=True), filename)
    namespace = dict(function.__globals__)
    exec(compile(mutated, filename, "exec"), namespace)
    return namespace[function.__name__]


def with_kernel(family: Family, variant: str, kernel: Any) -> Family:
    """The family with only `variant`, running `kernel`: a run of the mutant checks that variant alone."""
    chosen = dataclasses.replace(family.variant(variant), kernel=kernel, compare_with=None)
    return dataclasses.replace(family, variants=[chosen], timing_twin=None, sweep=None)


def with_chain_kernels(chain: Chain, **kernels: Any) -> Chain:
    """The chain calling `kernels` (its global name -> a mutant) where it calls its module's: the same code, run
    with a copy of the module's globals, so the real module is left as it is. KeyError for a name the chain never
    loads (the mutant would change nothing)."""
    function = chain.function
    unused = sorted(set(kernels) - set(function.__code__.co_names))
    if unused:
        raise KeyError(f"mutant of {function.__qualname__}: it never loads {unused}")
    rebound = types.FunctionType(
        function.__code__, {**function.__globals__, **kernels}, function.__name__, function.__defaults__
    )
    rebound.__kwdefaults__ = function.__kwdefaults__
    return Chain(rebound)
