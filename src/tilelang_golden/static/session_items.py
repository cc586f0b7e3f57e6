"""The golden check as pytest items: one per case, plus family checks, summaries, ledgers, manifest, orphans.

Run through nox: `nox -s static` compares, `nox -s regen-golden` writes. Each item lowers its
case(s) in this process; items of one group share lowerings and stay on one xdist worker.
Every item list is derived from the families the run loads (`--families`, default kernels; `PARAMETERS`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tilelang_golden.catalog.build import BuildError
from tilelang_golden.catalog.cases import Case, all_cases, check_groups, family_cases, not_lowering_cases
from tilelang_golden.catalog.declaration import family_problems
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.family import Family, target_record
from tilelang_golden.static.claims import NoClaims, judge_claims
from tilelang_golden.static.engine import check_case, check_files, first_lines
from tilelang_golden.static.orphans import SELECTOR, orphans
from tilelang_golden.static.plugin import UNSHARDED, golden_run, record, report
from tilelang_golden.static.produce.lowering import LoweringError
from tilelang_golden.static.selection import hidden_text
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots.acknowledged import ledger_path, stale_records, stale_text
from tilelang_golden.static.snapshots.changes import FileChange, Mismatch
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.static.snapshots.results import CheckResult, Status
from tilelang_golden.static.snapshots.snapshot import (
    FORMAT_VERSION,
    MANIFEST,
    CorruptSnapshot,
    installed_tilelang_version,
    render_manifest,
)
from tilelang_golden.static.variant_effects import has_pairs, no_effect, render_effects, summary_path, variant_effects


def _not_run(request: pytest.FixtureRequest, reason: str) -> None:
    """Skip a check over several cases that one of them stops: the reason, in the skip itself (the case's own
    item, which may not be selected, fails with it). The skip names no item and is raised where every skip of
    the session is (`report`), so pytest's summary folds the items one cause stops into one line."""
    report(request, status=Status.SKIPPED, text=reason)


def _require_built(request: pytest.FixtureRequest, lowerings: LoweringSession, cases) -> None:
    """Skip a check over cases whose variant does not build, with the reason (test_family_declaration fails with
    it, once per family, when selected)."""
    for case in cases:
        try:
            lowerings.build(case.family, case.variant)
        except BuildError as error:
            _not_run(request, f"not run, because variant {case.variant.name!r} does not build: {first_lines(error)}")


def _grouped(values, group_of, id_of=lambda v: getattr(v, "id", None)) -> list:
    return [pytest.param(v, id=id_of(v), marks=pytest.mark.xdist_group(group_of(v))) for v in values]


def _summary_group(family: Family) -> str:
    groups = {case.group for case in family_cases(family)}
    return groups.pop() if len(groups) == 1 else family.name


def _by_name(family: Family) -> str:
    return family.name


# item -> (its parameter, its values from the run's families): every item list derives from the families the run
# loads (`--families`), none from module state.
PARAMETERS: dict[str, Callable[[Registry], tuple[str, list]]] = {
    "test_case": lambda r: ("case", _grouped(all_cases(r), lambda c: c.group)),
    "test_family_loads": lambda r: ("broken", [pytest.param(b, id=b.name) for b in r.broken]),
    "test_family_declaration": lambda r: ("family", _grouped(r.families, _summary_group, _by_name)),
    "test_family_checks": lambda r: ("group", _grouped(check_groups(r), lambda group: group, str)),
    "test_variant_effects": lambda r: (
        "family",
        _grouped([f for f in r.families if has_pairs(f)], _summary_group, _by_name),
    ),
}


def _ledgers(config: pytest.Config) -> list:
    """The families that have a REGRESSIONS.yaml, one check each; none in a regen, which prunes them once every case
    is written (tilelang_golden.static.ledger_pruning)."""
    if config.getoption("--regen"):
        return []
    run = golden_run(config)
    held = [f for f in run.registry.families if (run.golden / ledger_path(f.name)).is_file()]
    return [pytest.param(family, id=ledger_path(family.name)) for family in held]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parameters = PARAMETERS.get(metafunc.function.__name__)
    if parameters is not None:
        metafunc.parametrize(*parameters(golden_run(metafunc.config).registry))
    if metafunc.function.__name__ == "test_regressions_ledger":
        metafunc.parametrize("family", _ledgers(metafunc.config))


def test_case(
    request, case: Case, lowerings: LoweringSession, golden_store, pending_store, regen, accepted_regressions_option
) -> None:
    checked = case.family.name in golden_run(request.config).declared
    report(
        request, check_case(case, lowerings, golden_store, pending_store, regen, accepted_regressions_option, checked)
    )


def test_family_loads(broken, golden_store) -> None:
    """A family file that does not load fails here, once; every other family still runs."""
    written = f"nothing under {golden_store.prefix} was written for it"
    pytest.fail(f"{broken.error}\nits cases were not run and {written}", pytrace=False)


def test_family_declaration(family: Family, lowerings: LoweringSession) -> None:
    """Every variant builds, and the family's inputs(), reference and precision twin fit its kernel's signature in
    number, shape and dtype (on the meta device: no data, no GPU); one message per family, naming the variants."""
    problems = family_problems(family, lowerings.build)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_family_checks(request, group: str, lowerings: LoweringSession, families: Registry) -> None:
    """The family's own checks on fresh facts (the seeds' claims); only recorded deviations may fail."""
    family, cases = check_groups(families)[group]
    skipped = tuple(
        f"{group}: family checks skip {c.id}: {c.not_lowering_note}"
        for c in not_lowering_cases(family)
        if c.group == group
    )
    record(request, findings=skipped)
    _require_built(request, lowerings, cases)
    empty = None
    try:
        verdict = judge_claims(family, group, [lowerings.facts(c) for c in cases])
    except LoweringError as error:
        _not_run(request, f"not run, because case {first_lines(error)}")
    except NoClaims as error:
        empty = str(error)
    if empty:  # outside the handler: one message, no chained error
        pytest.fail(empty, pytrace=False)
    deviations = tuple(f"{group}: {c.name}: false ({c.why})" for c in verdict.deviations)
    record(request, findings=skipped + deviations)
    unexpected = [f"{c.name} ({'holds' if c.holds else 'fails'}: {c.observed})" for c in verdict.unexpected]
    if unexpected:  # its own words, no traceback: the preview and the job summary read this text
        pytest.fail(
            f"{group}: the family's checks differ from what {family.file} records:\n" + "\n".join(unexpected),
            pytrace=False,
        )


def test_variant_effects(
    request, family: Family, lowerings: LoweringSession, golden_store, pending_store, regen
) -> None:
    """Which annotations change the CUDA on each target; committed as golden/<family>/SUMMARY.md."""
    _require_built(request, lowerings, family_cases(family))
    try:
        effects = variant_effects(family, lowerings.produce, lowerings.build)
    except LoweringError as error:
        _not_run(request, f"not run, because case {first_lines(error)}")
    findings = tuple(
        f"{family.name} on {target}: {target_record(target).language} identical to the variant it is compared with "
        f"(annotation without effect): {', '.join(variants)}"
        for target, variants in no_effect(effects).items()
        if variants  # a target where every annotation has its effect is no finding
    )
    summary = {summary_path(family): render_effects(family, effects)}
    selector = f"variant_effects and {family.name}"  # what -k matches: the item's name
    result = CheckResult(family.name, accept=selector, findings=findings)
    report(request, check_files(result, lambda fresh: summary, golden_store, pending_store, regen))


def test_manifest(request, golden_store, regen) -> None:
    """golden/MANIFEST.yaml names the TileLang and format that produced every snapshot."""
    text = render_manifest(installed_tilelang_version())
    if regen:
        record(request, written={MANIFEST: golden_store.write(MANIFEST, text)})
        return
    try:
        manifest, corrupt = golden_store.read_manifest(), None
    except CorruptSnapshot as error:
        manifest, corrupt = None, f"{error}; run `{regen_command()}` to rewrite it"
    if corrupt:  # outside the handler: one message, no chained error
        pytest.fail(corrupt, pytrace=False)
    if manifest is None:
        pytest.fail(f"{golden_store.root / MANIFEST} is missing; run `{regen_command()}`", pytrace=False)
    if manifest["format"] != FORMAT_VERSION:
        pytest.fail(
            f"{golden_store.prefix} holds snapshot format {manifest['format']!r}, "
            f"this harness writes format {FORMAT_VERSION}: run `{regen_command()}` to rewrite every snapshot",
            pytrace=False,
        )
    if golden_store.read(MANIFEST) != text:
        pytest.fail(
            f"{golden_store.prefix} was produced with TileLang {manifest['tilelang']}, this run uses TileLang "
            f"{installed_tilelang_version()}; every case was still compared, so the failures above show "
            f"what the upgrade changes. When they are intended: {regen_command()}",
            pytrace=False,
        )


def test_regressions_ledger(family: Family, golden_store) -> None:
    """Every record of the family's REGRESSIONS.yaml still explains its committed snapshots (acknowledged.stale): one
    whose regression was undone, or that names a case, class or kernel that does not exist, fails here with the regen
    that drops it. It reads committed files alone, so every run that selects it runs it, filtered or sharded."""
    try:
        found, corrupt = stale_records(family, golden_store), ""
    except CorruptSnapshot as error:
        found, corrupt = [], str(error)
    text = stale_text(family, golden_store, found) if found else corrupt
    if text:  # outside the handler: one message, no chained error
        pytest.fail(text, pytrace=False)


@getattr(pytest.mark, UNSHARDED)  # registered by the plugin, which leaves it out of sharded runs
def test_no_orphans(request, golden_store, regen, families: Registry) -> None:
    """Every file under golden/ is produced by a variant of the run's families (or is a summary or a ledger): of
    every family when the run selects this check itself (`-k no_orphans`, or no filter), of the families whose cases a
    filtered run selects when it brings the check back (the plugin, where they have orphans). A regen deletes them."""
    found = orphans(families, golden_store, golden_run(request.config).orphan_scope)
    if regen:
        for path in found:
            golden_store.delete(path)
        record(request, written={path: "deleted" for path in found})
        return
    if found:
        mismatches = tuple(Mismatch(f"{golden_store.prefix}{path}", FileChange.ORPHAN) for path in found)
        remedy = (
            f"to delete them (a variant or target removed or renamed?), lowering nothing: `{regen_command(SELECTOR)}`"
        )
        text = "\n".join([*(f"{m.path}: {m.headline}" for m in mismatches), remedy])
        result = CheckResult("test_no_orphans", Status.FAILED, mismatches=mismatches, accept=SELECTOR, text=text)
        report(request, result)


def test_no_hidden_checks(request) -> None:
    """In the run only where something other than its -k, -m or --shard deselected checks: it fails, naming them
    (tilelang_golden.static.selection)."""
    pytest.fail(hidden_text(request.config), pytrace=False)
