"""harness.yml, the harness's own checks (lint, the wheel), on a push to main, run by act on the reduced copy."""

from __future__ import annotations

import zipfile

from act import REPOSITORY, World


def test_a_push_to_main_lints_and_builds_the_harness_wheel_without_this_repositorys_families(world: World):
    world.on_main()
    event = {"ref": "refs/heads/main", "after": world.sha("main"), "repository": {"full_name": REPOSITORY}}
    run_id, run = world.run("harness.yml", "push", event)
    assert run.jobs() == {"lint (ruff, workflow schema, zizmor, hadolint)": "success", "harness wheel": "success"}, (
        run.jobs()
    )
    (wheel,) = world.artifact(run_id, "tilelang-golden-wheel").glob("tilelang_golden-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "harness/cli.py" in names and "harness/init_files/github/workflows/static.yml" in names
    assert not [name for name in names if name.startswith("kernels/")]
