"""One run's lowerings: the kernels it built, traced and lowered, and the lowering cache it reads and fills.

A run makes one `LoweringSession` and passes it to everything that builds or lowers a case: the static session's
pytest plugin keeps it in pytest's config stash (one per process, so one per xdist worker), a script makes its own.
Nothing of a run is kept in module state, so two runs in one process (the tests start the static session
in-process) share nothing, and a run sees only the disk cache it was given.

The path of one case: `files` -> its key (`lowering_cache.case_key`, over the kernel as `build` traced it, read
once per variant) -> the disk cache's entry under that key, or `lower` (`static.produce.lowering`) rendered by
`kinds.render_case`; `produce` and `facts` read those files back, so a cached case reads as a lowered one.

nvcc spends most of a compile on the headers, so the first case of a group (which one xdist worker runs) that needs
its machine code compiles it with the other cases of its group and target that the run will produce (`planned`)
and the cache does not hold: one nvcc per header set (`machine_code.compile_together`). Machine code is compiled once
per distinct module (`machine_code.Module.key`: arch, options, CUDA text), and kept across runs by the machine code
cache beside the lowering cache (`machine_code_cache`), which a regen reads too: its second lowering exists to prove
the lowering deterministic, so where it emits CUDA compiled before it takes that machine code, and compiles (alone,
as TileLang's JIT does) only CUDA of its own, which then differs from the first's anyway.

A case that does not lower (or compile) and is not declared to fail is advised over every target its variant fails on
(`outcomes`): only then are its family's other targets lowered, each once per run (a refusal is kept like a lowering),
whatever the run selected.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.catalog.build import BuildError, BuiltKernel, build_kernel
from tilelang_golden.catalog.cases import Case, family_cases
from tilelang_golden.family import CaseFacts, Family, Variant
from tilelang_golden.static.kinds import CaseInputs, render_case
from tilelang_golden.static.produce.lowering import Lowering, LoweringError, LoweringRefused, lower
from tilelang_golden.static.produce.lowering_cache import LoweringCache, case_key, installed_code, traced_kernel
from tilelang_golden.static.produce.machine_code import (
    CompileError,
    MachineCode,
    PackedCode,
    compile_lowering,
    compile_together,
    modules,
)
from tilelang_golden.static.produce.machine_code_cache import MachineCodeCache
from tilelang_golden.static.snapshots.case_files import case_files, facts_file, source_file
from tilelang_golden.static.snapshots.snapshot import load_yaml, strip_cuda_header
from tilelang_golden.targets import TARGETS

# A variant by the ids of its Family and Variant objects (their fields hold dicts: they do not hash); each memo
# keeps those objects beside what it holds, so their ids stay theirs while the session lives.
VariantSlot = tuple[int, int]
CaseSlot = tuple[int, int, str]


def _case_slot(case: Case) -> CaseSlot:
    return (id(case.family), id(case.variant), case.target)


@dataclass(frozen=True)
class Produced:
    cuda: str  # normalized kernel source, without the snapshot header
    facts: dict[str, Any]


def read_produced(case: Case, files: dict[str, str]) -> Produced:
    """The normalized source and facts of a case that lowers, read back from its snapshot files, so a case taken
    from the lowering cache reads as a lowered one."""
    return Produced(strip_cuda_header(files[source_file(case)]), load_yaml(files[facts_file(case)]))


def case_facts(case: Case, produced: Produced) -> CaseFacts:
    """What a family check sees of a case."""
    return CaseFacts(case.variant, case.target, case.params, produced.facts, produced.cuda)


@dataclass(eq=False)
class LoweringSession:
    """What one run built, traced and lowered, each once, and the disk cache it uses (None: lower every case)."""

    cache: LoweringCache | None = None
    # The ids of the cases this run will produce (the static session's selected items): their machine code may be
    # compiled together. Empty: each case is compiled alone.
    planned: set[str] = field(default_factory=set)
    # case id -> `cache` or `lowered`: where this run took each case's snapshot files from.
    sources: dict[str, str] = field(default_factory=dict)
    _built: dict[VariantSlot, tuple[Family, Variant, BuiltKernel]] = field(default_factory=dict, repr=False)
    _traced: dict[VariantSlot, tuple[Variant, dict[str, Any]]] = field(default_factory=dict, repr=False)
    _lowered: dict[CaseSlot, tuple[Case, Lowering]] = field(default_factory=dict, repr=False)
    _refused: dict[CaseSlot, tuple[Case, LoweringRefused]] = field(default_factory=dict, repr=False)
    _files: dict[CaseSlot, tuple[Case, dict[str, str]]] = field(default_factory=dict, repr=False)
    _compiled: dict[CaseSlot, tuple[Case, list[MachineCode]]] = field(default_factory=dict, repr=False)
    _code: dict[str, str] | None = field(default=None, repr=False)
    # Module.key -> its machine code, for the run: a module alike (the regen's second lowering, another case with the
    # same CUDA) is not compiled again. Its listings kept compressed (PackedCode): the run holds every module's.
    _machine: dict[str, PackedCode] = field(default_factory=dict, repr=False)

    def build(self, family: Family, variant: Variant) -> BuiltKernel:
        """The variant's kernel, traced once per run (the key, every target's lowering, the declaration check and
        the variant comparison read it); BuildError naming the family file and the variant."""
        slot = (id(family), id(variant))
        if slot not in self._built:
            self._built[slot] = (family, variant, build_kernel(family, variant))
        return self._built[slot][2]

    def key(self, case: Case) -> str:
        """The case's lowering-cache key. Its kernel's text is read once per variant, before any of its lowerings
        (`traced_kernel` says why), and the installed code once per run."""
        return case_key(case, self._trace(case), self._installed())

    def _installed(self) -> dict[str, str]:
        if self._code is None:
            self._code = installed_code()
        return self._code

    def _trace(self, case: Case) -> dict[str, Any]:
        slot = (id(case.family), id(case.variant))
        if slot not in self._traced:
            self._traced[slot] = (case.variant, traced_kernel(self.build(case.family, case.variant)))
        return self._traced[slot][1]

    def lower(self, case: Case, *, fresh: bool = False) -> Lowering:
        """The case lowered, once per run unless `fresh` (a refusal too: the advice of another case may have asked
        for it); LoweringError when its kernel does not build or lower."""
        slot = _case_slot(case)
        if not fresh and slot in self._lowered:
            return self._lowered[slot][1]
        if not fresh and slot in self._refused:
            raise self._refused[slot][1]
        try:
            built = self.build(case.family, case.variant)
            if self.cache is not None:  # a regen lowers compile mates before their keys: trace the kernel first
                self._trace(case)
        except BuildError as error:
            raise LoweringError(case.id, str(error)) from error
        try:
            lowering = lower(case, built)
        except LoweringRefused as error:
            if not fresh:
                self._refused[slot] = (case, error)
            raise
        if not fresh:
            self._lowered[slot] = (case, lowering)
        return lowering

    def files(self, case: Case, *, fresh: bool = False) -> dict[str, str]:
        """The case's snapshot files (`kinds.render_case`), once per run: from the disk cache when it holds
        them, else lowered (and stored there); `fresh` lowers again, past the cache and the run's lowerings (what
        proves the lowering deterministic), its machine code compiled only where its CUDA is new to the run."""
        if fresh:  # lowered afresh once, for every kind of file (each asks for the lowering); compiled where it is new
            lowered = functools.cache(lambda: self.lower(case, fresh=True))
            return render_case(case, CaseInputs(lowered, lambda: self._compile_alone(lowered())))
        slot = _case_slot(case)
        if slot not in self._files:

            def produce() -> dict[str, str]:
                return render_case(case, CaseInputs(lambda: self.lower(case), lambda: self.machine_code(case)))

            try:
                if self.cache is None:
                    files, source = produce(), "lowered"
                else:
                    files, source = self.cache.files(case, self.key(case), produce, case_files(case))
            except LoweringRefused as error:  # advised over every target the variant fails on, not the case's alone
                if error.case.id == case.id and case.does_not_lower is None:
                    error.cover(self.outcomes(case, compiled=isinstance(error, CompileError)))
                raise
            self._files[slot] = (case, files)
            self.sources[case.id] = source
            # Its files hold what the run reads of it from now on: its IR and machine code are let go (but for the
            # packed machine code of its modules, `_machine`, which a module alike takes).
            self._lowered.pop(slot, None)
            self._compiled.pop(slot, None)
        return self._files[slot][1]

    def outcomes(self, case: Case, *, compiled: bool = False) -> dict[str, str | None]:
        """The case's variant on the other targets of its family, those it does not declare not to lower: the error it
        fails with there (TileLang's; with `compiled`, on a CUDA target the compiler's too), None where it lowers (and
        compiles). What a failing case is advised with; each target is lowered as its own case is, once per run, and
        not at all where this run or the disk cache already holds its files."""
        found: dict[str, str | None] = {}
        for target in case.family.target_names:
            other = Case(case.family, case.variant, target)
            if target == case.target or other.does_not_lower is not None:
                continue
            try:
                self._make(other, compiled)
                found[target] = None
            except LoweringRefused as error:
                found[target] = error.error
            except LoweringError as error:  # the harness's own refusal (passes that did not run): no tool's text
                found[target] = str(error)
        return found

    def _make(self, case: Case, compiled: bool) -> None:
        """Lower the case (`compiled`: and compile it, on a CUDA target) unless its files are at hand."""
        slot = _case_slot(case)
        if slot in self._files:
            return
        if self.cache is not None and self.cache.read and self.cache.holds(case, self.key(case), case_files(case)):
            return
        lowering = self.lower(case)
        if compiled and TARGETS[case.target].backend == "cuda" and slot not in self._compiled:
            self._compiled[slot] = (case, self._compile_alone(lowering))

    def machine_code(self, case: Case) -> list[MachineCode]:
        """The machine code of the case's CUDA modules, compiled once per run, together with its compile mates';
        LoweringError where it does not lower, CompileError (from its own compile) where it does not compile."""
        slot = _case_slot(case)
        if slot in self._compiled:
            return self._compiled[slot][1]
        known = self._known(self.lower(case))
        if known is not None:
            self._compiled[slot] = (case, known)
            return known
        cases, lowerings = [case], [self.lower(case)]
        for mate in self._compile_mates(case):
            try:
                lowering = self.lower(mate)
            except LoweringError:
                continue  # its own item says why
            if self._known(lowering) is None:  # a mate whose every module is compiled takes that code in its turn
                cases.append(mate)
                lowerings.append(lowering)
        for each, lowering, code in zip(cases, lowerings, compile_together(lowerings), strict=True):
            if code is not None:
                self._compiled[_case_slot(each)] = (each, self._keep(lowering, code))
        if slot not in self._compiled:
            self._compiled[slot] = (case, self._compile_alone(self.lower(case)))
        return self._compiled[slot][1]

    def _known(self, lowering: Lowering) -> list[MachineCode] | None:
        """The machine code of a lowering's modules where this run compiled, or the machine code cache holds, every
        one of them, else None."""
        keys = [module.key for module in modules(lowering)]
        stored = self._stored_machine_code()
        for key in keys:
            if key not in self._machine and stored is not None:
                packed = stored.load(key, self._installed())
                if packed is not None:
                    self._machine[key] = packed
        return [self._machine[key].unpacked() for key in keys] if all(k in self._machine for k in keys) else None

    def _keep(self, lowering: Lowering, codes: list[MachineCode]) -> list[MachineCode]:
        stored = self._stored_machine_code()
        for module, code in zip(modules(lowering), codes, strict=True):
            if module.key not in self._machine:
                self._machine[module.key] = PackedCode.of(code)
                if stored is not None:
                    stored.store(module.key, self._installed(), self._machine[module.key])
        return codes

    def _stored_machine_code(self) -> MachineCodeCache | None:
        return None if self.cache is None else MachineCodeCache(self.cache.machine_code)

    def _compile_alone(self, lowering: Lowering) -> list[MachineCode]:
        """A lowering's machine code as this run compiled its modules, else compiled alone, as TileLang's JIT does
        (CompileError where it does not compile)."""
        known = self._known(lowering)
        return known if known is not None else self._keep(lowering, compile_lowering(lowering))

    def _compile_mates(self, case: Case) -> list[Case]:
        """The cases compiled with `case`: of its group and target, planned by this run, not yet produced or
        compiled, not held by the lowering cache, and not declared to fail."""
        mates = []
        for other in family_cases(case.family, [case.target]):
            slot = _case_slot(other)
            if (
                other.id == case.id
                or other.id not in self.planned
                or other.group != case.group
                or other.does_not_lower is not None
                or slot in self._compiled
                or slot in self._files
            ):
                continue
            if self.cache is not None and self.cache.read:
                try:
                    if self.cache.holds(other, self.key(other), case_files(other)):
                        continue
                except BuildError:
                    continue  # its own item says why
            mates.append(other)
        return mates

    def produce(self, case: Case, *, fresh: bool = False) -> Produced:
        """The normalized source and facts of a case that lowers, read back from its files."""
        return read_produced(case, self.files(case, fresh=fresh))

    def facts(self, case: Case) -> CaseFacts:
        """What a family check sees of a case."""
        return case_facts(case, self.produce(case))
