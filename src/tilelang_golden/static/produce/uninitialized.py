"""Shared memory read before anything writes it, found in each kernel's IR as its author wrote it.

The IR read is each kernel's launch scope right after `tl.VerifyBufferInit` (TileLang's own check, which leaves the
IR as it found it): statements are still in source order, every shared buffer is still its own, and tile ops
(`T.copy`, `T.gemm`, `T.fill`, `T.reduce`, ...) still declare the regions they read and write. Later IR answers the
question less reliably: software pipelining moves copies into a prologue, warp specialization places the producer
after its consumer, copies become cp.async and TMA intrinsics writing through pointers, reductions gain workspace
buffers and MergeSharedMemoryAllocations folds every buffer into one.

A read of a `shared` or `shared.dyn` buffer is reported when no write is sure to precede it:

- certainly (`CERTAIN`, which fails the case, produced.FAILING_WARNINGS): no write can precede it. Nothing writes the
  buffer before it in program order, counting each enclosing loop's first iteration (a loop body that reads the buffer
  and writes it later reads stale memory on its first iteration);
- possibly: a write may precede it, or may not. The writes before it are all under a condition; the read is under a
  condition inside a loop that writes the buffer later (an earlier iteration may have written it); a pipelined loop's
  explicit stage and order could not be mapped to its statements; or the kernel orders its threads with split
  barriers (mbarriers, named barriers' arrive), which can run a write of other threads before a read that precedes it.

Shared memory is one per block, and some threads write it for all, so a write under a condition on the thread index
alone (`if tx < 32`) counts as a write, and the branches of such a condition (a producer and a consumer) see each
other's writes. A buffer passed by pointer (`tvm_access_ptr`, `address_of`, its data) to a call that may write counts
as written by it; a pointer whose access mask says read only is a read. A region a tile op both reads and writes is
read only where TileLang says the op consumes it (`T.gemm` without `clear_accum`, `T.reduce` without `clear`).
Writes are per buffer, not per element: a write to part of a buffer counts for all of it. A loop is assumed to run at
least once; one with an explicit `T.Pipelined(stage=, order=)` is walked in the order its first iteration runs (by
stage, then order), while one with `num_stages` alone keeps source order (TileLang plans its stages so that each read
still sees the write it sees in source order).

TVM is imported inside the functions that read IR, as in `ir`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tilelang_golden.static.produce import ir

# What a certain finding says (lower case): produced.FAILING_WARNINGS fails a case whose warnings hold it.
CERTAIN = "certainly read before any write"
POSSIBLE = "possibly read before any write"
SHARED_SCOPES = ("shared", "shared.dyn")
# The pass after which the IR is read; tilelang_golden.static.produce.lowering captures it.
SOURCE_PASS = "tl.VerifyBufferInit"

TILE_OP_PREFIX = "tl.tileop."
REGION = "tl.region"  # (BufferLoad at the region's start, access mask, extents...)
ACCESS_MASK_READ, ACCESS_MASK_WRITE = 1, 2
# Tile op -> (argument, flag argument): the region the op consumes before writing it unless the flag is set, whatever
# its access mask says (TileLang's GetReadBeforeWriteRegions: a GEMM's accumulator, a reduction's destination).
READ_UNLESS_CLEARED = {
    **dict.fromkeys(ir.DENSE_GEMM_OPS, (2, 9)),  # C unless clear_accum
    "tl.tileop.reduce": (1, 4),  # dst unless clear
}
IF_THEN_ELSE = "tirx.if_then_else"  # its arms are evaluated only as the condition says
# Calls of at most this effect (TCallEffectKind: kExprAnnotation, kPure, kReadState) only read their arguments.
READ_ONLY_EFFECT = 2
# Op names of split barriers: one group of threads arrives, another waits (mbarriers, named barriers, clusters).
SPLIT_BARRIER_WORDS = ("barrier", "arrive")
BARRIER_SCOPES = ("shared.barrier", "shared.cluster_barrier")
OTHER_THREADS = "a write by the other side of a condition on threads"  # what such a write is said to be
# A software-pipelined loop's explicit schedule (T.Pipelined(stage=, order=)), one entry per statement of its body.
PIPELINE_STAGE, PIPELINE_ORDER = "tl_pipeline_stage", "tl_pipeline_order"


def uninitialized_shared_reads(scope: Any, kernel: str) -> list[str]:
    """One warning per shared buffer of a kernel's launch scope (as `SOURCE_PASS` leaves it) that may be read before
    anything writes it, saying how sure that is and which read; `kernel` names the kernel in the text."""
    walker = _Walker(scope)
    walker.stmt(scope, _State())
    return [finding.text(kernel) for finding in walker.findings.values()]


@dataclass(frozen=True)
class _Finding:
    buffer: str
    certain: bool
    why: str

    def text(self, kernel: str) -> str:
        return f"shared buffer {self.buffer} in {kernel}: {CERTAIN if self.certain else POSSIBLE} ({self.why})"


@dataclass(frozen=True)
class _State:
    """What is written where the walk stands, per buffer data variable, with the write that says so."""

    written: Mapping[Any, str] = field(default_factory=dict)  # on every path (by some thread of the block)
    maybe: Mapping[Any, str] = field(default_factory=dict)  # on some paths only: why, around `{read}`

    def write(self, writes: Mapping[Any, str]) -> _State:
        return _State({**writes, **self.written}, {v: w for v, w in self.maybe.items() if v not in writes})

    def merge(self, other: _State, why: str) -> _State:
        """Either of two paths ran: what both wrote is written, what one wrote is maybe written (`why`, its `{write}`
        filled in)."""
        written = {v: w for v, w in self.written.items() if v in other.written}
        either = {**other.written, **self.written}
        maybe = {
            **other.maybe,
            **self.maybe,
            **{v: why.replace("{write}", w) for v, w in either.items() if v not in written},
        }
        return _State(written, {v: w for v, w in maybe.items() if v not in written})

    def union(self, other: _State) -> _State:
        """Both of two paths ran, each by some threads of the block: what either wrote is written."""
        written = {**other.written, **self.written}
        return _State(written, {v: w for v, w in {**other.maybe, **self.maybe}.items() if v not in written})

    def touched(self) -> set[Any]:
        return {*self.written, *self.maybe}


@dataclass(frozen=True)
class _Access:
    var: Any  # the buffer's data variable: views of one buffer share it
    name: str
    guarded: bool = False  # under an if_then_else arm


@dataclass
class _Accesses:
    """What one statement reads, then writes."""

    reads: list[_Access] = field(default_factory=list)
    writes: list[_Access] = field(default_factory=list)


@dataclass(frozen=True)
class _Loop:
    name: str  # `loop k`, `a while loop`
    writes: frozenset[Any]  # the buffers its body writes


class _Walker:
    """Walks a launch scope in program order, recording for each shared buffer its strongest finding."""

    def __init__(self, scope: Any) -> None:
        from tvm import tirx

        self.findings: dict[Any, _Finding] = {}
        self.recording = True
        self.loops: list[_Loop] = []
        self.guard_depths: list[int] = []  # per enclosing condition (not on threads alone): loops around it
        self.thread_vars: set[Any] = set()
        self.split_barriers = False
        self.written_by: dict[Any, set[Any]] = {}  # statement -> what it writes, walked once
        for node in ir.nodes(scope):
            if isinstance(node, tirx.AttrStmt) and node.attr_key == ir.THREAD_EXTENT:
                if str(node.node.thread_tag).startswith("threadIdx"):
                    self.thread_vars.add(node.node.var)
            elif isinstance(node, tirx.Call) and any(word in ir.op_name(node) for word in SPLIT_BARRIER_WORDS):
                self.split_barriers = True
            elif isinstance(node, (tirx.BufferLoad, tirx.BufferStore)) and node.buffer.scope() in BARRIER_SCOPES:
                self.split_barriers = True
        self.written_anywhere = self.writes(scope)

    # -- statements ------------------------------------------------------------------------

    def stmt(self, node: Any, state: _State) -> _State:
        from tvm import tirx

        if isinstance(node, tirx.SeqStmt):
            for each in node.seq:
                state = self.stmt(each, state)
            return state
        if isinstance(node, tirx.For):
            state = self.apply(
                self.expressions(node.min, node.extent), state, f"the bounds of loop {node.loop_var.name}"
            )
            return self.loop(node, state)
        if isinstance(node, tirx.While):
            state = self.apply(self.expressions(node.condition), state, "the condition of a while loop")
            return self.loop(node, state)
        if isinstance(node, tirx.IfThenElse):
            state = self.apply(self.expressions(node.condition), state, "the condition of an if")
            return self.branch(node.condition, node.then_case, node.else_case, state)
        if isinstance(node, tirx.SBlockRealize):
            if not _always(node.predicate):
                return self.branch(node.predicate, node.block, None, state)
            return self.stmt(node.block, state)
        if isinstance(node, tirx.SBlock):
            if node.init is not None:  # runs on the reduction's first iteration only
                state = self.branch(None, node.init, None, state)
            return self.stmt(node.body, state)
        if isinstance(node, tirx.AttrStmt):
            return self.stmt(node.body, state)
        if isinstance(node, tirx.Bind):
            if self.on_threads_alone(node.value):  # `warp = tx // 32`: a condition on it is on threads alone
                self.thread_vars.add(node.var)
            return self.apply(self.expressions(node.value), state, f"the binding of {node.var.name}")
        if isinstance(node, tirx.BufferStore):
            accesses = self.expressions(node.value, *node.indices)
            accesses.writes.append(_Access(node.buffer.data, str(node.buffer.name)))
            return self.apply(accesses, state, f"a store to {node.buffer.name}")
        if isinstance(node, tirx.Evaluate):
            return self.apply(self.expressions(node.value), state, _describe(node.value))
        if isinstance(node, tirx.AssertStmt):
            return self.apply(self.expressions(node.condition), state, "an assertion")
        return state  # AllocBuffer, DeclBuffer: no access

    def loop(self, node: Any, state: _State) -> _State:
        """A loop's body from its first iteration, assumed to run at least once (a tile loop that never runs leaves
        the output unwritten anyway); the body's writes are the next iterations' earlier writes."""
        from tvm import tirx

        name = f"loop {node.loop_var.name}" if isinstance(node, tirx.For) else "a while loop"
        body = node.body
        writes = self.writes(body)
        statements = _pipeline_order(node) if isinstance(node, tirx.For) else None
        if statements is None and isinstance(node, tirx.For) and PIPELINE_STAGE in node.annotations:
            # An explicit schedule not mapped to the statements: any of the body's writes may run first.
            why = f"the pipeline stage and order of {name} may run a write before {{read}}"
            state = replace(state, maybe={**{v: why for v in writes if v not in state.written}, **state.maybe})
        self.loops.append(_Loop(name, frozenset(writes)))
        try:
            for each in statements or (body,):
                state = self.stmt(each, state)
        finally:
            self.loops.pop()
        return state

    def branch(self, condition: Any, then_case: Any, else_case: Any, state: _State) -> _State:
        if condition is not None and self.on_threads_alone(condition):
            # Threads of one block take either side (a producer and a consumer); what one side writes, the other
            # reads after a barrier, and it is written for the block.
            then_writes, else_writes = self.writes(then_case), self.writes(else_case)
            then_out = self.stmt(then_case, state.write(dict.fromkeys(else_writes, OTHER_THREADS)))
            else_in = state.write(dict.fromkeys(then_writes, OTHER_THREADS))
            else_out = self.stmt(else_case, else_in) if else_case is not None else else_in
            return then_out.union(else_out)
        self.guard_depths.append(len(self.loops))
        try:
            then_out = self.stmt(then_case, state)
            else_out = self.stmt(else_case, state) if else_case is not None else state
        finally:
            self.guard_depths.pop()
        return then_out.merge(else_out, "only a write under a condition, {write}, precedes {read}")

    # -- accesses --------------------------------------------------------------------------

    def apply(self, accesses: _Accesses, state: _State, what: str) -> _State:
        """One statement (`what`, in words): its reads against what is written before it, then its writes."""
        for read in accesses.reads:
            if _shared(read.var) and read.var not in state.written and self.recording:
                self.record(read, state, what)
        return state.write({w.var: what for w in accesses.writes if _shared(w.var)})

    def record(self, read: _Access, state: _State, what: str) -> None:
        writing = [loop for loop in self.loops if read.var in loop.writes]
        guarded_inside = read.guarded or (
            bool(self.guard_depths) and any(read.var in loop.writes for loop in self.loops[: max(self.guard_depths)])
        )
        by = f"the read by {what}"
        certain = False
        if read.var in state.maybe:
            why = state.maybe[read.var].replace("{read}", by)
        elif writing and guarded_inside:
            why = f"{by} is under a condition in {writing[0].name}, which writes it: an earlier iteration may have"
        elif self.split_barriers and read.var in self.written_anywhere:
            why = f"{by} precedes every write in program order, but split barriers may run other threads' write first"
        else:
            certain = True
            if read.var not in self.written_anywhere:
                why = f"{by} precedes every write: nothing in the kernel writes it"
            elif writing:
                why = f"on the first iteration of {writing[0].name}, {by} precedes every write"
            else:
                why = f"{by} precedes every write"
        known = self.findings.get(read.var)
        if known is None or (certain and not known.certain):
            self.findings[read.var] = _Finding(read.name, certain, why)

    def writes(self, node: Any) -> set[Any]:
        """The shared buffers a statement writes anywhere in it (walked without recording)."""
        if node is None:
            return set()
        if node not in self.written_by:
            recording, self.recording = self.recording, False
            try:
                self.written_by[node] = self.stmt(node, _State()).touched()
            finally:
                self.recording = recording
        return self.written_by[node]

    def expressions(self, *exprs: Any) -> _Accesses:
        accesses = _Accesses()
        for expr in exprs:
            self.expression(expr, False, accesses)
        return accesses

    def expression(self, expr: Any, guarded: bool, accesses: _Accesses) -> None:
        from tvm import tirx
        from tvm.tirx.stmt_functor import pre_order_visit

        def enter(node: Any) -> bool:
            if isinstance(node, tirx.BufferLoad):
                accesses.reads.append(_Access(node.buffer.data, str(node.buffer.name), guarded))
                return True  # its indices read too
            if not isinstance(node, tirx.Call):
                return True
            name = ir.op_name(node)
            if name.startswith(TILE_OP_PREFIX):
                self.tile_op(node, guarded, accesses)
            elif name == IF_THEN_ELSE:
                self.expression(node.args[0], guarded, accesses)
                for arm in node.args[1:]:
                    self.expression(arm, True, accesses)
            elif _pointer(node) is not None:
                self.pointer(node, guarded, accesses)
            elif _may_write(node):
                for arg in node.args:
                    self.argument(arg, guarded, accesses)
            else:
                return True
            return False

        pre_order_visit(expr, enter)

    def argument(self, arg: Any, guarded: bool, accesses: _Accesses) -> None:
        """An argument of a call that may write through it: a pointer as its mask says; an element or a buffer's data
        passed as such may be where the call stores (TileLang's thread all-reduce takes its result so)."""
        from tvm import tirx

        if isinstance(arg, tirx.BufferLoad):
            accesses.writes.append(_Access(arg.buffer.data, str(arg.buffer.name)))
            for index in arg.indices:
                self.expression(index, guarded, accesses)
        elif isinstance(arg, tirx.Var) and ir.storage_scope(arg):
            accesses.writes.append(_Access(arg, str(arg.name)))
        else:
            self.expression(arg, guarded, accesses)

    def pointer(self, call: Any, guarded: bool, accesses: _Accesses) -> None:
        """A pointer into a buffer: read where its access mask says read only, else written (address_of says
        nothing, so it may write)."""
        var, name, mask, rest = _pointer(call)
        if isinstance(mask, int) and mask == ACCESS_MASK_READ:
            accesses.reads.append(_Access(var, name, guarded))
        else:
            accesses.writes.append(_Access(var, name))
        for expr in rest:
            self.expression(expr, guarded, accesses)

    def tile_op(self, call: Any, guarded: bool, accesses: _Accesses) -> None:
        from tvm import tirx

        consumed = READ_UNLESS_CLEARED.get(ir.op_name(call))
        for position, arg in enumerate(call.args):
            if not (isinstance(arg, tirx.Call) and ir.op_name(arg) == REGION):
                if _pointer(arg) is not None:
                    self.pointer(arg, guarded, accesses)
                else:
                    self.argument(arg, guarded, accesses)  # a bare buffer element: the op may write it
                continue
            start, mask, *extents = arg.args
            mask = ir.plain(mask) if isinstance(mask, tirx.IntImm) else None
            access = _Access(start.buffer.data, str(start.buffer.name), guarded)
            if consumed is not None and consumed[0] == position:
                if consumed[1] < len(call.args) and _never(call.args[consumed[1]]):
                    accesses.reads.append(access)
            elif mask == ACCESS_MASK_READ:
                accesses.reads.append(access)
            if mask is None or mask & ACCESS_MASK_WRITE:
                accesses.writes.append(access)  # a region both read and written reads only as TileLang says
            for expr in (*start.indices, *extents):
                self.expression(expr, guarded, accesses)

    def on_threads_alone(self, expr: Any) -> bool:
        """Whether `expr` depends on the thread index and constants only."""
        from tvm import tirx

        found = ir.nodes(expr)
        variables = [n for n in found if isinstance(n, tirx.Var)]
        return (
            bool(variables)
            and all(v in self.thread_vars for v in variables)
            and not any(isinstance(n, tirx.BufferLoad) for n in found)
        )


def _shared(var: Any) -> bool:
    return ir.storage_scope(var) in SHARED_SCOPES


def _always(expr: Any) -> bool:
    return isinstance(ir.plain(expr), (bool, int)) and bool(ir.plain(expr))


def _never(expr: Any) -> bool:
    """Whether a flag is a constant false (a flag computed at run time, `clear_accum=(k == 0)`, may be set)."""
    value = ir.plain(expr)
    return isinstance(value, (bool, int)) and not value


def _pointer(call: Any) -> tuple[Any, str, int | None, tuple[Any, ...]] | None:
    """A call making a pointer into a buffer: (its data variable, a name, the access mask or None, the expressions it
    reads); None for any other expression."""
    from tvm import tirx

    if not isinstance(call, tirx.Call):
        return None
    name = ir.op_name(call)
    if name == "tirx.tvm_access_ptr" and isinstance(call.args[1], tirx.Var):  # (type, data, offset, extent, mask)
        var, mask = call.args[1], call.args[4]
        return var, str(var.name), _mask(mask), (call.args[2], call.args[3])
    if name == "tl.access_ptr" and isinstance(call.args[0], tirx.BufferLoad):  # (element at the start, extent, mask)
        start = call.args[0]
        return start.buffer.data, str(start.buffer.name), _mask(call.args[2]), (*start.indices, call.args[1])
    if name == "tirx.address_of" and isinstance(call.args[0], tirx.BufferLoad):
        start = call.args[0]
        return start.buffer.data, str(start.buffer.name), None, tuple(start.indices)
    return None


def _mask(expr: Any) -> int | None:
    value = ir.plain(expr)
    return value if isinstance(value, int) else None


def _may_write(call: Any) -> bool:
    """Whether a call may write through its arguments: any but those TVM registers as reading only."""
    op = call.op
    if not hasattr(op, "get_attr"):
        return True  # a call to a function, not an op
    effect = op.get_attr("TCallEffectKind")
    return effect is None or int(effect) > READ_ONLY_EFFECT


def _pipeline_order(loop: Any) -> list[Any] | None:
    """The statements of a loop with an explicit pipeline schedule in the order its first iteration runs them: by
    stage, then order (a stage-1 statement runs after the next iteration's stage-0 ones); None where the loop has no
    such schedule or it does not map one entry to each statement of the body."""
    from tvm import tirx

    if PIPELINE_STAGE not in loop.annotations or PIPELINE_ORDER not in loop.annotations:
        return None
    stage, order = (ir.plain(loop.annotations[key]) for key in (PIPELINE_STAGE, PIPELINE_ORDER))
    body = loop.body
    if not isinstance(body, tirx.SeqStmt):
        return None
    statements = list(body.seq)
    if not len(stage) == len(order) == len(statements):
        return None
    return [s for _, _, _, s in sorted(zip(stage, order, range(len(statements)), statements, strict=True))]


def _describe(expr: Any) -> str:
    """A statement's call in words, stable across runs: `T.copy(S, Y)` (a tile op and its buffers, in argument
    order), `tl.tma_load`, `call_extern f`."""
    from tvm import tirx

    if not isinstance(expr, tirx.Call):
        return "an expression"
    name = ir.op_name(expr)
    if name.startswith(TILE_OP_PREFIX):
        buffers = [
            str(arg.args[0].buffer.name)
            for arg in expr.args
            if isinstance(arg, tirx.Call) and ir.op_name(arg) == REGION
        ]
        return f"T.{name.removeprefix(TILE_OP_PREFIX)}({', '.join(buffers)})"
    if name in ("tirx.call_extern", "tirx.call_pure_extern") and expr.args:
        return f"call_extern {ir.plain(expr.args[0])}"
    return name or "a call"
