"""The GPU runners (deploy/arc/): the scale sets' Helm values against the chart's schemas, the pod and the
manifests against Kubernetes' own schemas, the properties the pod must keep (docs/ci.md, "GPU runners"), the
check's image and its hand-over script. All offline: the schemas are vendored or ship with kubernetes-validate."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import referencing
import yaml
from conftest import SUBPROCESS_LIMIT_S
from referencing.jsonschema import DRAFT7

from tilelang_golden.gpu.gate.baseline_file import TIMING_DIR, baseline_path

REPO = Path(__file__).resolve().parents[2]  # tests/workflows/ is two folders down
ARC = REPO / "deploy" / "arc"
SCHEMA = ARC / "schema"
CHART_VERSION = "0.14.2"
# The oldest Kubernetes the README asks for, and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ["1.33", kubernetes_validate.utils.latest_version()]
BASE = ARC / "values" / "base.yaml"
# Whom the scale sets serve, one file per case, installed between base.yaml and the model's file (README.md).
ORGANISATION = ARC / "values" / "organisation.yaml"
REPOSITORY = ARC / "values" / "repository.yaml"
CONNECTIONS = [ORGANISATION, REPOSITORY]
MODELS = sorted(ARC.glob("values/gpu-*.yaml"))
GPU_RESOURCES = {"nvidia.com/gpu", "amd.com/gpu"}
# What the runner and the check share, and which side may write each.
WRITES = {"runner": {"request"}, "gpu-check": {"report", "home", "tmp"}}


def merged(base: Any, override: Any) -> Any:
    """Helm's merge of values files: maps merge key by key, anything else (lists too) is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{key: merged(base.get(key), value) for key, value in override.items()}}
    return copy.deepcopy(override)


def values(model: Path, connection: Path = ORGANISATION) -> dict[str, Any]:
    """The values of one install: `-f base.yaml -f <connection> -f <model>`."""
    data = yaml.safe_load(BASE.read_text())
    for path in (connection, model):
        data = merged(data, yaml.safe_load(path.read_text()))
    return data


def rendered_pod(values: dict[str, Any]) -> dict[str, Any]:
    """The runner pod the chart makes in its default container mode (templates/autoscalingrunnerset.yaml): the
    template's spec as given, `restartPolicy: Never` if unset, and its service account without permissions."""
    spec = copy.deepcopy(values["template"]["spec"])
    spec.setdefault("restartPolicy", "Never")
    spec.setdefault("serviceAccountName", f"{values['runnerScaleSetName']}-gha-rs-no-permission")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": values["runnerScaleSetName"]}, "spec": spec}


def validate_values(data: dict[str, Any]) -> None:
    crd = json.loads((SCHEMA / f"autoscalingrunnerset-{CHART_VERSION}.json").read_text())
    registry = referencing.Registry().with_resource(
        f"autoscalingrunnerset-{CHART_VERSION}.json", DRAFT7.create_resource(crd)
    )
    schema = json.loads((SCHEMA / "values.schema.json").read_text())
    jsonschema.Draft7Validator(schema, registry=registry).validate(data)
    if problems := controller_problems(data):
        raise ValueError("; ".join(problems))


def config_scope(url: str) -> str:
    """What actions-runner-controller takes githubConfigUrl for (ParseGitHubConfigFromURL, github/actions/actions.go
    at gha-runner-scale-set-0.14.2): one path segment an organisation, two an enterprise (`enterprises/NAME`) or a
    repository, anything else a URL it refuses."""
    parts = urlsplit(url.strip("/")).path.strip("/").split("/")
    if len(parts) == 1 and parts[0]:
        return "organisation"
    if len(parts) == 2:
        return "enterprise" if parts[0].lower() == "enterprises" else "repository"
    return "invalid"


def controller_problems(data: dict[str, Any]) -> list[str]:
    """What the chart and the CRD take but the controller refuses, making no scale set."""
    url = data["githubConfigUrl"]
    scope = config_scope(url)
    if scope == "invalid":
        return [f"githubConfigUrl {url}: neither an organisation, an enterprise nor a repository"]
    if data.get("runnerGroup") and scope == "repository":
        return [
            f"runnerGroup {data['runnerGroup']!r} with the repository URL {url}: the controller looks a runner group "
            "up only for an organisation or an enterprise (values/organisation.yaml); a repository has none"
        ]
    return []


def containers(pod_or_values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = pod_or_values["spec"] if "spec" in pod_or_values else pod_or_values["template"]["spec"]
    return {container["name"]: container for container in spec["containers"]}


def gpu_resources(container: dict[str, Any]) -> set[str]:
    resources = container.get("resources", {})
    return {name for part in ("requests", "limits") for name in resources.get(part, {}) if name in GPU_RESOURCES}


def test_one_scale_set_per_model_with_its_own_name():
    names = [path.stem for path in MODELS]
    assert names == ["gpu-b200", "gpu-h100", "gpu-h200", "gpu-mi300x"]
    for model in MODELS:
        assert values(model)["runnerScaleSetName"] == model.stem, f"{model.name}: the release and runs-on use it"


@pytest.mark.parametrize("connection", CONNECTIONS, ids=lambda path: path.stem)
@pytest.mark.parametrize("model", MODELS, ids=lambda path: path.stem)
def test_values_validate_against_the_charts_schemas(model, connection):
    validate_values(values(model, connection))


def test_whom_the_runners_serve_is_set_by_one_file_of_each_install():
    """base.yaml and the models name no URL or group, so an install takes both from organisation.yaml or
    repository.yaml, and a model's scale set is the same pod in either case."""
    assert sorted(ARC.glob("values/*.yaml")) == sorted([BASE, *CONNECTIONS, *MODELS])
    for path in (BASE, *MODELS):
        assert not {"githubConfigUrl", "runnerGroup"} & set(yaml.safe_load(path.read_text())), path.name
    organisation, repository = (yaml.safe_load(path.read_text()) for path in CONNECTIONS)
    assert organisation == {"githubConfigUrl": organisation["githubConfigUrl"], "runnerGroup": "gpu"}
    assert config_scope(organisation["githubConfigUrl"]) == "organisation"
    assert repository == {"githubConfigUrl": repository["githubConfigUrl"]}
    assert config_scope(repository["githubConfigUrl"]) == "repository"


@pytest.mark.parametrize(
    ("url", "scope"),
    [
        ("https://github.com/ORG", "organisation"),
        ("https://github.com/ORG/", "organisation"),
        ("https://github.com/enterprises/NAME", "enterprise"),
        ("https://github.com/OWNER/REPO", "repository"),
        ("https://github.example.com/OWNER/REPO/", "repository"),
        ("https://github.com/OWNER/REPO/tree/main", "invalid"),
        ("https://github.com", "invalid"),
    ],
)
def test_the_config_url_is_read_as_the_controller_reads_it(url, scope):
    assert config_scope(url) == scope


def test_a_runner_group_with_a_repository_url_is_refused():
    """A repository has no runner groups: the controller fails the group's lookup and makes no scale set."""
    data = values(ARC / "values" / "gpu-h200.yaml", REPOSITORY)
    data["runnerGroup"] = "gpu"
    with pytest.raises(ValueError, match="runnerGroup 'gpu' with the repository URL"):
        validate_values(data)
    data["githubConfigUrl"] = "https://github.com/enterprises/NAME"
    validate_values(data)


def helm_installs(text: str) -> list[tuple[str, list[str]]]:
    """(release, values files) of each `helm install` or `helm upgrade` written in a Markdown text."""
    commands = re.findall(r"`(helm (?:install|upgrade) [^`]*)`", text)
    return [(command.split()[2], re.findall(r"(?:-f|--values) (\S+)", command)) for command in commands]


def check_helm_installs(text: str) -> list[Path]:
    """Each command installs base.yaml, then organisation.yaml or repository.yaml, then a model, as the model's
    release; the connection files it names."""
    installs = helm_installs(text)
    assert installs, "no helm command"
    for release, files in installs:
        assert len(files) == 3, f"{release}: {files}"
        base, connection, model = (REPO / path for path in files)
        assert base == BASE and connection in CONNECTIONS and model in MODELS, files
        assert release == model.stem, f"{release}: the release is the scale set's name"
    return [REPO / files[1] for _, files in installs]


def test_the_install_instructions_name_the_values_files_of_each_case():
    assert sorted(set(check_helm_installs((ARC / "README.md").read_text()))) == sorted(CONNECTIONS)
    check_helm_installs((REPO / "docs" / "ci.md").read_text())  # the upgrade after a runner bump


def test_the_readme_says_where_the_github_app_s_key_lives_and_how_to_keep_its_namespace_clean():
    """The App's key is a Secret in the runner pods' own namespace: the README names it as the values do, says to keep
    the namespace for the scale sets alone, and how to create the Secret without the key on a command line."""
    base = yaml.safe_load(BASE.read_text())
    namespace = yaml.safe_load((ARC / "manifests" / "namespace.yaml").read_text())["metadata"]["name"]
    text = " ".join((ARC / "README.md").read_text().split())
    secret = base["githubConfigSecret"]
    assert f"kubectl create secret generic {secret} -n {namespace} --from-file=github_app_private_key=" in text
    assert f"keep `{namespace}` for the scale sets alone" in text and "read Secrets or create pods there" in text
    # What the README promises of the pods: no service account token, so no read of that Secret through the API.
    assert base["template"]["spec"]["automountServiceAccountToken"] is False


def doc_section(path: Path, heading: str) -> str:
    """A Markdown section's text, up to the next heading, its lines joined by single spaces."""
    text = path.read_text().split(f"\n{heading}\n", 1)[1]
    return " ".join(re.split(r"^#", text, maxsplit=1, flags=re.M)[0].split())


def test_the_settings_open_the_group_to_a_public_repository_and_the_runner_is_kept_new():
    """docs/ci.md: an organisation's group serves a public repository only with "Allow public repositories" ticked
    (off by default), and GitHub gives no job to a runner 30 days behind a release, which ARC's runners (updates
    disabled) never catch up with by themselves."""
    ci = REPO / "docs" / "ci.md"
    settings = doc_section(ci, "### GitHub settings")
    assert '"Allow public repositories"' in settings.replace("**", "") and "off by default" in settings
    prerequisites = doc_section(ci, "### Prerequisites of the GPU nodes and the image")
    assert "updates disabled" in prerequisites and "30 days" in prerequisites
    assert "ghcr.io/actions/actions-runner" in prerequisites and "bumped" in prerequisites


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda v: v.update(runnerScaleSetNmae="x"), "Additional properties"),
        (lambda v: v.update(maxRunners=-1), "less than the minimum"),
        (lambda v: v.update(runnerScaleSetName="gpu-" + "x" * 45), "too long"),
        (lambda v: v["template"]["spec"].update(containers={"name": "runner"}), "is not of type 'array'"),
        (lambda v: v["template"]["spec"]["containers"][0].update(image=3), "is not of type 'string'"),
    ],
)
def test_the_values_schema_rejects_what_the_chart_or_the_crd_would(change, message):
    data = values(ARC / "values" / "gpu-h200.yaml")
    change(data)
    with pytest.raises(jsonschema.ValidationError, match=message):
        validate_values(data)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("model", MODELS, ids=lambda path: path.stem)
def test_the_runner_pod_validates_against_kubernetes(model, version):
    kubernetes_validate.validate(rendered_pod(values(model)), version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("manifest", sorted(ARC.glob("manifests/*.yaml")), ids=lambda path: path.name)
def test_the_manifests_validate_against_kubernetes(manifest, version):
    documents = [document for document in yaml.safe_load_all(manifest.read_text()) if document]
    assert documents
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)


def test_kubernetes_validation_rejects_an_unknown_field():
    """Strict mode: a misspelt field, which the API server would drop silently, fails."""
    pod = rendered_pod(values(ARC / "values" / "gpu-h200.yaml"))
    pod["spec"]["nodeSelecter"] = pod["spec"].pop("nodeSelector")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES_VERSIONS[0], strict=True)


@pytest.mark.parametrize("model", MODELS, ids=lambda path: path.stem)
def test_the_pod_keeps_the_pull_requests_code_away_from_the_runner(model):
    """docs/ci.md, "GPU runners": the check's container holds no token and no runner file, the runner no GPU."""
    spec = rendered_pod(values(model))["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert not any(spec.get(name) for name in ("shareProcessNamespace", "hostNetwork", "hostPID", "hostIPC"))
    assert spec["restartPolicy"] == "Never" and "initContainers" not in spec
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert all(set(volume) == {"name", "emptyDir"} for volume in spec["volumes"]), "no host path, no secret"
    found = containers(rendered_pod(values(model)))
    assert set(found) == {"runner", "gpu-check"}
    runner, check = found["runner"], found["gpu-check"]
    assert not gpu_resources(runner) and len(gpu_resources(check)) == 1
    assert runner["securityContext"]["runAsUser"] != check["securityContext"]["runAsUser"]
    for container in (runner, check):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
        assert not context.get("privileged") and context["runAsUser"] > 0
        assert re.search(r"@sha256:[0-9a-f]{64}$", container["image"]), f"{container['name']}: image by digest"
        writable = {mount["name"] for mount in container["volumeMounts"] if not mount.get("readOnly")}
        assert writable == WRITES[container["name"]], f"{container['name']} writes {writable}"
        assert "envFrom" not in container
    assert check["securityContext"]["readOnlyRootFilesystem"] is True
    # The whole environment of the pull request's code, besides the image's: no value from a secret or a field.
    assert {variable["name"]: variable["value"] for variable in check["env"]} == {
        "GITHUB_ACTIONS": "true",
        "CI": "true",
    }
    assert all(set(variable) == {"name", "value"} for variable in check["env"])
    assert "env" not in runner, "the runner's environment is ARC's (its registration), nothing added"


def quantity(text: str) -> int:
    """Bytes of a Kubernetes quantity in binary units (`2Gi`)."""
    number, unit = re.fullmatch(r"(\d+)([KMGT])i", text).groups()
    return int(number) * 1024 ** ("KMGT".index(unit) + 1)


@pytest.mark.parametrize("model", MODELS, ids=lambda path: path.stem)
def test_the_runner_containers_disk_is_bounded_and_holds_a_checkout_and_a_report(model):
    """The runner writes the checkout, a copy of the GPU report and its files (gpu.yml: 256 MiB each at most) into
    its writable layer: without a limit, a report that got past gpu.yml's checks could fill the node's disk."""
    spec = values(model)["template"]["spec"]
    limit = quantity(containers(values(model))["runner"]["resources"]["limits"]["ephemeral-storage"])
    (request,) = [volume["emptyDir"]["sizeLimit"] for volume in spec["volumes"] if volume["name"] == "request"]
    assert quantity(request) + 2 * 256 * 1024**2 + 1024**3 <= limit <= 8 * 1024**3, limit


def test_the_mi300x_scale_set_differs_from_base_only_in_its_gpu_and_image():
    base = containers(yaml.safe_load(BASE.read_text()))
    mi300x = containers(yaml.safe_load((ARC / "values" / "gpu-mi300x.yaml").read_text()))
    assert mi300x["runner"] == base["runner"]
    assert gpu_resources(mi300x["gpu-check"]) == {"amd.com/gpu"}
    same = {key: value for key, value in mi300x["gpu-check"].items() if key not in ("image", "resources")}
    assert same == {key: value for key, value in base["gpu-check"].items() if key not in ("image", "resources")}


def product(model: Path) -> str:
    (label,) = values(model)["template"]["spec"]["nodeSelector"].values()
    return label


@pytest.mark.parametrize("model", MODELS, ids=lambda path: path.stem)
def test_each_model_runs_on_its_own_nodes_and_gpu(model):
    spec = values(model)["template"]["spec"]
    (selector,) = spec["nodeSelector"]
    vendor = selector.split("/")[0]
    assert selector in ("nvidia.com/gpu.product", "amd.com/gpu.product-name")
    assert gpu_resources(containers(values(model))["gpu-check"]) == {f"{vendor}/gpu"}
    assert spec["tolerations"] == [{"key": f"{vendor}/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_each_model_has_its_own_timing_baseline():
    """The node label is the product name the report names the GPU by, so it picks the baseline file
    (tilelang_golden.gpu.gate.baseline_file.baseline_path): one file per model, the H200's the committed one."""
    baselines = {model.stem: baseline_path(product(model)) for model in MODELS}
    assert len(set(baselines.values())) == len(MODELS), baselines
    assert baselines["gpu-h200"] == TIMING_DIR / "nvidia-h200.yaml" and (REPO / baselines["gpu-h200"]).is_file()


def test_the_workflow_and_actionlint_name_the_scale_sets():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "gpu.yml").read_text())
    runners = workflow["jobs"]["gpu"]["strategy"]["matrix"]["runner"]
    assert runners and set(runners) <= {model.stem for model in MODELS}
    for runner in runners:
        assert (REPO / baseline_path(product(ARC / "values" / f"{runner}.yaml"))).is_file(), (
            f"{runner}: record its baseline before it joins the matrix"
        )
    labels = yaml.safe_load((REPO / ".github" / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"]
    assert sorted(labels) == sorted(model.stem for model in MODELS)


def manifest(name: str) -> dict[str, Any]:
    return yaml.safe_load((ARC / "manifests" / name).read_text())


def test_the_namespace_enforces_restricted_pod_security():
    labels = manifest("namespace.yaml")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_network_policy_takes_no_connection_and_keeps_the_cluster_and_metadata_out_of_reach():
    policy = manifest("networkpolicy.yaml")
    assert policy["metadata"]["namespace"] == manifest("namespace.yaml")["metadata"]["name"]
    assert policy["spec"]["podSelector"] == {} and policy["spec"]["ingress"] == []
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    (outside,) = [rule for rule in policy["spec"]["egress"] if "ipBlock" in rule["to"][0]]
    block = outside["to"][0]["ipBlock"]
    assert block["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} <= set(block["except"])
    assert outside["ports"] == [{"protocol": "TCP", "port": 443}]


# --- the check's image ------------------------------------------------------------------------------

DOCKERFILE = ARC / "image" / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined.splitlines() if line.strip()]


def dockerfile_problems(text: str) -> list[str]:
    """What the image must not do; hadolint (`nox -s lint`) checks the rest."""
    problems = []
    found = instructions(text)
    for instruction, arguments in found:
        if instruction == "FROM" and not re.search(r"@sha256:[0-9a-f]{64}\b", arguments):
            problems.append(f"FROM {arguments}: not pinned by digest")
        if instruction == "ADD":
            problems.append(f"ADD {arguments}: COPY local files; nothing is fetched at build time")
        if instruction == "RUN" and re.search(r"\b(curl|wget)\b", arguments):
            problems.append(f"RUN {arguments}: downloads outside a package manager")
    users = [arguments for instruction, arguments in found if instruction == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]):
        problems.append(f"the last USER must be a numeric non-root uid, not {users[-1:]}")
    return problems


def test_the_image_is_pinned_unprivileged_and_fetches_nothing_itself():
    assert dockerfile_problems(DOCKERFILE.read_text()) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda t: re.sub(r"@sha256:\w+", "", t), "not pinned by digest"),
        (lambda t: t.replace("USER 2000:2000", "USER root"), "numeric non-root uid"),
        (lambda t: t.replace("USER 2000:2000\n", ""), "numeric non-root uid"),
        (lambda t: t + "ADD https://example.com/x /x\n", "COPY local files"),
        (lambda t: t + "RUN curl -sSL https://example.com/x | sh\n", "downloads outside"),
    ],
)
def test_the_dockerfile_check_catches_each_problem(change, problem):
    problems = dockerfile_problems(change(DOCKERFILE.read_text()))
    assert len(problems) == 1 and problem in problems[0], problems


def test_the_image_matches_the_pod_that_runs_it():
    found = dict(instructions(DOCKERFILE.read_text()))
    runs = " ".join(
        arguments for instruction, arguments in instructions(DOCKERFILE.read_text()) if instruction == "RUN"
    )
    check = containers(yaml.safe_load(BASE.read_text()))["gpu-check"]
    uid = check["securityContext"]["runAsUser"]
    assert found["USER"] == f"{uid}:{check['securityContext']['runAsGroup']}"
    assert json.loads(found["ENTRYPOINT"]) == check["command"] == ["/opt/gpu-check/serve"]
    assert "serve /opt/gpu-check/serve" in found["COPY"]
    mounts = {mount["mountPath"] for mount in check["volumeMounts"]}
    assert f"HOME={min(mounts - {'/request', '/report', '/tmp'})}" in found["ENV"], "HOME is a writable volume"
    # The venv module comes apart from Python on Debian and Ubuntu: the same minor version for both.
    python = re.search(r"\bpython3\.(\d+)\b", runs)
    assert python and f"python3.{python[1]}-venv" in runs and " git " in runs


# Debian's and Ubuntu's packages that install /usr/bin/python3; python3.X and python3.X-venv install only python3.X.
PYTHON3_PACKAGES = {"python3", "python3-minimal"}


def apt_packages(text: str) -> list[str]:
    """The packages a Dockerfile's RUN instructions name to `apt-get install` (its options left out)."""
    packages = []
    for instruction, arguments in instructions(text):
        if instruction != "RUN":
            continue
        for command in re.split(r"&&|\|\||;", arguments):
            words = command.split()
            if words[:2] in (["apt-get", "install"], ["apt", "install"]):
                packages += [word for word in words[2:] if not word.startswith("-")]
    return packages


def test_the_image_installs_the_python3_that_serve_calls():
    """serve builds the venv with `python3`, which only the python3 or python3-minimal package installs (the test
    of serve brings its own python3, so it cannot tell)."""
    assert re.search(r"(^|\s)python3 ", (ARC / "image" / "serve").read_text(), re.M)
    packages = apt_packages(DOCKERFILE.read_text())
    assert PYTHON3_PACKAGES & set(packages), f"none of {packages} installs /usr/bin/python3"


def test_the_package_list_is_read_from_the_install_command_alone():
    text = "RUN apt-get update \\\n    && apt-get install -y --no-install-recommends python3.12 python3.12-venv git\n"
    assert apt_packages(text) == ["python3.12", "python3.12-venv", "git"]
    assert not PYTHON3_PACKAGES & set(apt_packages(text)), "python3.12 and its venv module bring no python3"


# --- the runner's image: named in a Dockerfile for Dependabot, copied into the values --------------

RUNNER_DOCKERFILE = ARC / "runner" / "Dockerfile"
RUNNER_IMAGE = re.compile(r"ghcr\.io/actions/actions-runner:\d+\.\d+\.\d+@sha256:[0-9a-f]{64}")


def runner_images(values_dir: Path) -> dict[str, str]:
    """The `runner` container's image in each values file that lists the containers."""
    found = {}
    for path in sorted(values_dir.glob("*.yaml")):
        for container in yaml.safe_load(path.read_text()).get("template", {}).get("spec", {}).get("containers", []):
            if container["name"] == "runner":
                found[path.name] = container["image"]
    return found


def follow_up_command() -> str:
    """The command deploy/arc/runner/Dockerfile gives for copying its image into the values."""
    command = re.search(r"^#\s+(sed -i .*)$", RUNNER_DOCKERFILE.read_text(), re.M)
    assert command, "deploy/arc/runner/Dockerfile: the follow-up command"
    return command[1]


def test_the_values_run_the_runner_image_dependabot_updates():
    """Dependabot bumps deploy/arc/runner/Dockerfile's tag and digest; the values follow in the same pull request."""
    found = instructions(RUNNER_DOCKERFILE.read_text())
    assert len(found) == 1 and found[0][0] == "FROM" and RUNNER_IMAGE.fullmatch(found[0][1]), found
    image = found[0][1]
    assert follow_up_command() in (REPO / "docs" / "ci.md").read_text(), "docs/ci.md gives the same command"
    assert runner_images(ARC / "values") == {"base.yaml": image, "gpu-mi300x.yaml": image}, (
        f"the runner's image is {image} in deploy/arc/runner/Dockerfile; from the repository's root, run "
        f"{follow_up_command()}"
    )


@pytest.mark.skipif(shutil.which("sed") is None, reason="the follow-up command is sed's")
def test_the_follow_up_command_copies_a_bumped_runner_image_into_the_values(tmp_path):
    for path in [RUNNER_DOCKERFILE, *sorted(ARC.glob("values/*.yaml"))]:
        (tmp_path / path.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, tmp_path / path.relative_to(REPO))
    bumped = "ghcr.io/actions/actions-runner:2.999.1@sha256:" + "ab" * 32
    dockerfile = tmp_path / RUNNER_DOCKERFILE.relative_to(REPO)
    dockerfile.write_text(re.sub(r"^FROM .*$", f"FROM {bumped}", dockerfile.read_text(), flags=re.M))
    subprocess.run(["sh", "-c", follow_up_command()], cwd=tmp_path, check=True, timeout=30)
    values_dir = tmp_path / "deploy" / "arc" / "values"
    assert runner_images(values_dir) == {"base.yaml": bumped, "gpu-mi300x.yaml": bumped}
    for path in values_dir.glob("*.yaml"):
        before, after = (ARC / "values" / path.name).read_text().splitlines(), path.read_text().splitlines()
        changed = [line.strip() for line, old in zip(after, before, strict=True) if line != old]
        assert changed == ([f"image: {bumped}"] if path.name in ("base.yaml", "gpu-mi300x.yaml") else []), path.name


def test_dependabot_reads_every_dockerfile_under_deploy():
    config = yaml.safe_load((REPO / ".github" / "dependabot.yml").read_text())
    watched = {
        directory.strip("/")
        for update in config["updates"]
        if update["package-ecosystem"] == "docker"
        for directory in update.get("directories", [update.get("directory")])
    }
    assert watched == {str(path.parent.relative_to(REPO)) for path in REPO.glob("deploy/**/Dockerfile")}


# --- the hand-over: deploy/arc/image/serve ---------------------------------------------------------

SERVE = ARC / "image" / "serve"
# A python3 whose venv holds a pip that installs nothing and a nox that records its arguments, writes a report,
# leaves a process behind that would write to the report later, and exits with status 3.
FAKE_PYTHON = """#!/bin/sh
[ "$1 $2 $3" = "-I -m venv" ] || exit 90
mkdir -p "$4/bin"
printf '#!/bin/sh\\n[ "$1" = -I ] || exit 91\\n' > "$4/bin/python"
cat > "$4/bin/nox" <<'EOF'
#!/bin/sh
printf '%s\\n' "$@" > "$HOME/nox-args"
out=$(sed -n '/^--output$/{n;p}' "$HOME/nox-args")
mkdir -p "$out" && echo report > "$out/report.json"
(sleep 1; echo late > "$out/late") &
exit 3
EOF
chmod +x "$4/bin/python" "$4/bin/nox"
"""


@pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root's unshare for a PID namespace"
)
def test_serve_runs_the_request_and_stops_what_it_started_before_reporting(tmp_path):
    """In its own PID namespace (kill -1 there reaches only the check's processes), as in its container."""
    request, report, home, bin_dir = (tmp_path / name for name in ("request", "report", "home", "bin"))
    for folder in (request / "src", report, home, bin_dir):
        folder.mkdir(parents=True)
    (request / "src" / "requirements-nox.txt").write_text("nox==1\n")
    (request / "options").write_text("--against\n" + "a" * 40 + "\n")
    (request / "ready").touch()
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home),
           "GPU_CHECK_REQUEST": str(request), "GPU_CHECK_REPORT": str(report)}  # fmt: skip
    # PID 1 stays two seconds after serve: a process serve left running would write `late` meanwhile.
    subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", f"'{SERVE}'; sleep 2"],
                   env=env, check=True, timeout=SUBPROCESS_LIMIT_S)  # fmt: skip
    # One archive of regular files, written after every process of the check was stopped; nothing else there.
    assert sorted(path.name for path in report.iterdir()) == ["alive", "report.tar"]
    with tarfile.open(report / "report.tar") as archive:
        assert all(member.isreg() for member in archive.getmembers())
        files = {member.name: archive.extractfile(member).read().decode() for member in archive.getmembers()}
    assert files["status"] == "3\n"
    assert (home / "nox-args").read_text().split("\n")[:-1] == [
        "--envdir", f"{home}/nox", "-s", "gpu", "--", "--output", f"{home}/check/out", "--against", "a" * 40
    ]  # fmt: skip
    assert "out/report.json" in files and "out/late" not in files
    assert (home / "src" / "requirements-nox.txt").is_file(), "the check works on its own copy"
