"""The GPU job's hand-over step (gpu.yml, "Check the commit in the gpu-check container") run by bash on reports the
untrusted gpu-check container could leave: it writes report.tar itself while it runs, in any format it likes. The
step must unpack nothing bigger than the archive it copied, with the default branch's .github/gpu-report-unpack, and
print nothing of the check's (its log, its members' names) where the runner would run a workflow command in it
(docs/ci.md, "GPU runners"). GNU tar makes the sparse archives, as an attacker would."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]  # tests/workflows/ is two folders down
STEP = "Check the commit in the gpu-check container"
MiB = 1024 * 1024
REFUSED = "the GPU report was refused before anything of it was used (why: above)"


def step_script() -> str:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "gpu.yml").read_text())
    (step,) = [step for step in workflow["jobs"]["gpu"]["steps"] if step.get("name") == STEP]
    return step["run"]


def report_tar(files: dict[str, bytes]) -> bytes:
    """An uncompressed tar of regular files, as serve writes it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


ORDINARY = {"log": b"nox -s gpu\n", "status": b"3\n", "step-summary.md": b"## GPU check (job summary)\n",
            "out/report.json": b'{"format": 6}\n', "out/summary.md": b"## GPU check\n"}  # fmt: skip


@dataclass
class Step:
    returncode: int
    output: str
    temp: Path
    summary: str

    def errors(self) -> list[str]:
        return re.findall(r"^::error title=gpu::(.*)$", self.output, re.M)

    def largest_file(self) -> int:
        """The largest size of a file the step left in $RUNNER_TEMP (the checks aside), holes included."""
        left = [path for path in self.temp.rglob("*") if path.is_file() and "trusted" not in path.parts]
        return max((path.stat().st_size for path in left), default=0)

    def outside_stop_commands(self) -> list[str]:
        """The lines the runner would read workflow commands from: all but those of `::stop-commands::` blocks."""
        lines, outside, token = self.output.splitlines(), [], None
        for line in lines:
            if token is None and line.startswith("::stop-commands::"):
                token = line.removeprefix("::stop-commands::")
            elif token is not None and line == f"::{token}::":
                token = None
            elif token is None:
                outside.append(line)
        return outside

    def refused(self, *details: str) -> None:
        """Refused with the one fixed annotation, each of `details` printed inside a stop-commands block."""
        assert self.returncode == 1, self.output
        assert self.errors() == [REFUSED], self.output
        outside = "\n".join(self.outside_stop_commands())
        for detail in details:
            assert detail in self.output and detail not in outside, (detail, self.output)
        assert not (self.temp / "gpu-check").exists(), "nothing unpacked is left"


def run_step(tmp_path: Path, archive: bytes, **env: str) -> Step:
    """The step's own script under bash, the report folder holding `archive` as report.tar."""
    folders = {name: tmp_path / name for name in ("request", "report", "temp", "workspace")}
    for folder in folders.values():
        folder.mkdir()
    (folders["workspace"] / "noxfile.py").write_text("")
    # The default branch's checks, where the job's earlier steps set them aside.
    (folders["temp"] / "trusted" / ".github").mkdir(parents=True)
    shutil.copy2(REPO / ".github" / "gpu-report-unpack", folders["temp"] / "trusted" / ".github")
    (folders["report"] / "report.tar").write_bytes(archive)
    summary = tmp_path / "step-summary"
    summary.touch()
    environ = {"PATH": os.environ["PATH"], "BASE": "", "GITHUB_WORKSPACE": str(folders["workspace"]),
               "GPU_CHECK_REQUEST": str(folders["request"]), "GPU_CHECK_REPORT": str(folders["report"]),
               "RUNNER_TEMP": str(folders["temp"]), "GITHUB_STEP_SUMMARY": str(summary), **env}  # fmt: skip
    done = subprocess.run(["bash", "-c", step_script()], env=environ, capture_output=True, timeout=120)
    output = (done.stdout + done.stderr).decode(errors="replace")
    return Step(done.returncode, output, folders["temp"], summary.read_text())


def gnu_tar(tmp_path: Path, *options: str, files: dict[str, int], data: bool = False) -> bytes:
    """GNU tar's archive of files of the given sizes, all holes (`truncate`) or all data, with `options` (`--sparse`),
    the status 0."""
    source = tmp_path / "source"
    for name, size in files.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        with (source / name).open("wb") as file:
            file.write(b"x" * size) if data else file.truncate(size)
    (source / "status").write_text("0\n")
    (source / "log").write_text("log\n")
    target = tmp_path / "sparse.tar"
    subprocess.run(["tar", *options, "-cf", str(target), "-C", str(source), "log", "status", *files],
                   check=True, timeout=60)  # fmt: skip
    return target.read_bytes()


def test_an_ordinary_report_is_unpacked_and_its_status_is_the_steps(tmp_path):
    step = run_step(tmp_path, report_tar(ORDINARY))
    assert step.returncode == 3, step.output
    assert step.errors() == ["the GPU check failed with status 3: its log above and the job summary say why"]
    out = step.temp / "gpu-check" / "out"
    assert sorted(path.name for path in out.iterdir()) == ["report.json", "summary.md"]
    assert step.summary == "## GPU check (job summary)\n"
    assert "nox -s gpu" in step.output


def test_a_passing_check_passes_the_step(tmp_path):
    step = run_step(tmp_path, report_tar({**ORDINARY, "status": b"0\n"}))
    assert (step.returncode, step.errors()) == (0, []), step.output


@pytest.mark.parametrize("options", [[], ["--format=pax"]], ids=["gnu", "pax"])
def test_what_serve_writes_is_accepted_with_long_names_and_sizes_at_block_edges(tmp_path, options):
    """serve's `tar -cf` (GNU's format), or a PAX one: a long name takes header blocks of its own, a member of
    512 bytes one data block, of 513 two. None of them is taken for a sparse member."""
    sizes = {"out/empty": 0, "out/one": 1, "out/block": 512, "out/more": 513, f"out/{'n' * 150}.png": 5000}
    step = run_step(tmp_path, gnu_tar(tmp_path, *options, files=sizes, data=True))
    assert (step.returncode, step.errors()) == (0, []), step.output
    for name, size in sizes.items():
        assert (step.temp / "gpu-check" / name).stat().st_size == size


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress], ids=["gzip", "bzip2", "xz"])
def test_a_compressed_report_is_refused_before_anything_is_unpacked(tmp_path, compress):
    """A bomb: 16 MiB of log from an archive of a few hundred bytes, which `tar -xf FILE` would decompress."""
    bomb = compress(report_tar({**ORDINARY, "log": bytes(16 * MiB)}))
    assert len(bomb) < 64 * 1024
    step = run_step(tmp_path, bomb)
    step.refused("refused: not an uncompressed tar archive")
    assert step.largest_file() == len(bomb), "nothing but the copy of the archive"


@pytest.mark.parametrize(
    "options",
    [["--sparse"], ["--format=pax", "--sparse"], ["--format=pax", "--sparse", "--sparse-version=0.0"]],
    ids=["gnu", "pax-1.0", "pax-0.0"],
)
def test_a_sparse_member_is_refused(tmp_path, options):
    """tar --sparse stores a file of holes in a few blocks; its listing shows a regular file of the whole size."""
    archive = gnu_tar(tmp_path, *options, files={"out/big.json": 20 * 1024 * MiB})
    assert len(archive) < 64 * 1024
    step = run_step(tmp_path, archive, GPU_CHECK_UNPACKED_LIMIT=str(64 * 1024 * MiB))
    step.refused('"out/big.json"', "refused: a sparse member")
    assert step.largest_file() == len(archive)


def test_a_small_sparse_member_is_refused_too(tmp_path):
    """Within the limit on the total, a sparse member is still refused: it unpacks bigger than it is stored."""
    archive = gnu_tar(tmp_path, "--sparse", files={"out/report.json": 4 * MiB})
    run_step(tmp_path, archive).refused('"out/report.json"', "refused: a sparse member")


def pax_sparse(realsize: int, mtime: int | None = None) -> bytes:
    """ORDINARY and a PAX sparse 1.0 member made by hand, listed at `realsize`, whose map puts a byte at 20 GiB."""
    chunk = 20 * 1024**3
    data = f"1\n{chunk}\n1\n".encode().ljust(512, b"\0") + b"x"
    info = tarfile.TarInfo("GNUSparseFile.0/out/plot.png")
    info.size = len(data)
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "out/plot.png",
                        "GNU.sparse.realsize": str(realsize)}  # fmt: skip
    if mtime is not None:
        info.pax_headers["mtime"] = str(mtime)
    buffer = io.BytesIO(report_tar(ORDINARY))
    with tarfile.open(fileobj=buffer, mode="a", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("mtime", [None, 2**62], ids=["plain", "mtime-2^62"])
def test_a_sparse_map_past_the_listed_size_is_refused_before_anything_is_unpacked(tmp_path, mtime):
    """Listed at 4 KiB, it unpacks to 20 GiB under GNU tar. A PAX mtime of 2^62 made `tar -tv` print the date as
    one field, which shifted the columns a listing's reader took the name and size from: the headers are read by
    tarfile now, which no date moves."""
    step = run_step(tmp_path, pax_sparse(4096, mtime))
    step.refused('"out/plot.png"', "refused: a sparse member")
    assert step.largest_file() < MiB


def test_a_regular_member_with_a_far_mtime_is_unpacked_at_its_size(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in {**ORDINARY, "status": b"0\n"}.items():
            info = tarfile.TarInfo(name)
            info.size, info.pax_headers = len(data), {"mtime": str(2**62)}
            archive.addfile(info, io.BytesIO(data))
    step = run_step(tmp_path, buffer.getvalue())
    assert (step.returncode, step.errors()) == (0, []), step.output
    assert (step.temp / "gpu-check" / "out" / "report.json").read_bytes() == ORDINARY["out/report.json"]


def test_members_adding_up_past_the_limit_are_refused(tmp_path):
    files = {**ORDINARY, "out/a.png": bytes(700 * 1024), "out/b.png": bytes(700 * 1024)}
    step = run_step(tmp_path, report_tar(files), GPU_CHECK_UNPACKED_LIMIT=str(MiB))
    step.refused(f"refused: the files add up to more than {MiB} bytes")


def test_more_than_a_thousand_files_are_refused(tmp_path):
    """Empty files cost no bytes but an inode each, which the ephemeral storage limit does not count."""
    files = {**ORDINARY, **{f"out/{index}": b"" for index in range(1000)}}
    run_step(tmp_path, report_tar(files)).refused("refused: more than 1000 members")


def test_a_name_given_twice_is_refused(tmp_path):
    """The second would replace the first after it was checked."""
    buffer = io.BytesIO(report_tar(ORDINARY))
    with tarfile.open(fileobj=buffer, mode="a") as archive:
        info = tarfile.TarInfo("status")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"0\n"))
    run_step(tmp_path, buffer.getvalue()).refused('"status"', "refused: a name twice")


@pytest.mark.parametrize(
    "name, linkname",
    [
        ("out/passwd", "/etc/passwd"),
        ("../outside", None),
        # Names the runner would take for workflow commands, were they printed outside a stop-commands block.
        ("::error title=gpu::GPU check passed", None),
        ("##[error title=gpu]GPU check passed", None),
        ("out/link", "::error title=gpu::GPU check passed"),
    ],
)
def test_a_link_or_an_unknown_name_is_refused_and_printed_as_text(tmp_path, name, linkname):
    buffer = io.BytesIO(report_tar(ORDINARY))
    with tarfile.open(fileobj=buffer, mode="a") as archive:
        info = tarfile.TarInfo(name)
        if linkname:
            info.type, info.linkname = tarfile.SYMTYPE, linkname
        archive.addfile(info, io.BytesIO())
    step = run_step(tmp_path, buffer.getvalue())
    step.refused(f'"{name}"')
    assert not any("GPU check passed" in line for line in step.outside_stop_commands()), step.output


def test_the_checks_workflow_commands_are_printed_as_text(tmp_path):
    """Between `::stop-commands::TOKEN` and `::TOKEN::` the runner runs no command; the check cannot know TOKEN."""
    log = b"::add-mask::x\n::error::pwned\n##[error]pwned\n::add-matcher::matcher.json\nno newline at the end"
    tokens = []
    for attempt in ("first", "second"):
        (tmp_path / attempt).mkdir()
        step = run_step(tmp_path / attempt, report_tar({**ORDINARY, "log": log}))
        lines = step.output.splitlines()
        stop = next(index for index, line in enumerate(lines) if line.startswith("::stop-commands::"))
        token = lines[stop].removeprefix("::stop-commands::")
        assert re.fullmatch(r"[0-9a-f]{32}", token), lines[stop]
        resume = lines.index(f"::{token}::")
        assert lines[stop + 1 : resume] == log.decode().splitlines(), "the whole log, and only it, inside"
        outside = lines[:stop] + lines[resume + 1 :]
        assert not any(line.startswith("::") and "title=gpu::" not in line for line in outside), outside
        tokens.append(token)
    assert tokens[0] != tokens[1], "a new token per run"


def test_a_log_of_more_than_4_mib_is_printed_by_its_end(tmp_path):
    """Its end holds the verdict; the rest would hold the job while the runner streams it."""
    log = b"early line\n" * 500_000 + b"the verdict\n"
    step = run_step(tmp_path, report_tar({**ORDINARY, "log": log}))
    assert f"the check's log has {len(log)} bytes; its last 4 MiB:" in step.output
    assert "the verdict" in step.output and len(step.output) < 4_300_000
