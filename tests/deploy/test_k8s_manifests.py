"""The Kubernetes manifests in deploy/k8s validate against Kubernetes' schemas and say what the services need."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from almanac.services.settings import load_settings, parse_shard_selection

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
# The oldest Kubernetes the manifests promise: the StatefulSet pod-index label the gateways read is 1.28+.
KUBERNETES_VERSIONS = ("1.28", "1.32")
WORKLOADS = ("StatefulSet", "Deployment")


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def resources() -> list[dict]:
    return [doc for path in manifest_files() for doc in documents(path)]


def named(kind: str, name: str) -> dict:
    matches = [r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(matches) == 1, f"one {kind} {name}"
    return matches[0]


def containers() -> list[tuple[str, dict]]:
    return [(r["metadata"]["name"], c) for r in resources() if r["kind"] in WORKLOADS
            for c in r["spec"]["template"]["spec"]["containers"]]


def env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: p.name)
def test_every_manifest_validates_strictly_against_the_kubernetes_schema(path: Path, version: str) -> None:
    for resource in documents(path):
        # strict: an unknown or misspelt field is an error, not silently dropped by the API server
        kubernetes_validate.validate(resource, version, strict=True)


def test_the_validator_rejects_a_misspelt_field() -> None:
    gateway = named("StatefulSet", "almanac-gateway")
    gateway["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(gateway, KUBERNETES_VERSIONS[0], strict=True)


def test_the_kustomization_lists_every_manifest_but_the_secret_template() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in manifest_files()} - {"secret.example.yaml"}
    kubectl = shutil.which("kubectl")
    if kubectl is not None:  # kustomize is built into kubectl and renders offline
        rendered = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
        assert rendered.returncode == 0, rendered.stderr
        assert {d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d} >= {
            "StatefulSet", "Deployment", "PodDisruptionBudget", "ConfigMap"}


def test_each_gateway_statefulset_has_one_pod_per_shard_group_and_picks_its_group_from_the_ordinal() -> None:
    # (refused if it still set a retired setting such as ALMANAC_GATEWAY_ENGINE)
    settings = load_settings(named("ConfigMap", "almanac-settings")["data"])
    for name in ("almanac-gateway", "almanac-gateway-standby"):
        statefulset = named("StatefulSet", name)
        replicas = statefulset["spec"]["replicas"]
        variables = env(statefulset["spec"]["template"]["spec"]["containers"][0])
        assert variables["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.labels['apps.kubernetes.io/pod-index']"
        assert variables["ALMANAC_ENGINE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        match = re.fullmatch(r"\$\(POD_INDEX\)/(\d+)", variables["ALMANAC_ENGINE_SHARDS"]["value"])
        assert match, variables["ALMANAC_ENGINE_SHARDS"]
        assert int(match.group(1)) == replicas, f"{name}: {replicas} pods but {match.group(1)} shard groups"
        # Every ordinal's group is valid for the configured shard count, and together they hold every shard.
        groups = [parse_shard_selection(f"{i}/{replicas}", settings.shard_count) for i in range(replicas)]
        assert all(groups), "a pod with no shard"
        assert sorted(s for g in groups for s in g) == list(range(settings.shard_count))


def test_gateways_are_ready_on_health_scraped_signed_with_the_secret_and_behind_one_service() -> None:
    service = named("Service", "almanac-gateway")
    for name in ("almanac-gateway", "almanac-gateway-standby"):
        pod = named("StatefulSet", name)["spec"]["template"]
        container = pod["spec"]["containers"][0]
        assert container["readinessProbe"]["httpGet"]["path"] == "/health"
        # /health is 503 during a Redis outage: restarting gateways would not help.
        assert container["livenessProbe"].get("httpGet", {}).get("path") != "/health"
        annotations = pod["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/path"] == "/metrics"
        assert annotations["prometheus.io/port"] == str(container["ports"][0]["containerPort"])
        assert {"secretRef": {"name": "almanac-secret"}} in container["envFrom"]
        # primaries and standbys alike take traffic: a standby serves HTTP while it waits for a group's leases
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


# Measured (docs/capacity.md, live feeds): a gateway's RSS at start, and what each open live feed adds to it.
GATEWAY_START_MB = 81
LIVE_FEED_KB = 80
MEMORY_UNITS = {"Mi": 1, "Gi": 1024}


def mebibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()
    return int(number) * MEMORY_UNITS[unit]


def test_a_gateway_pod_full_of_live_feeds_fits_its_memory_limit_with_headroom() -> None:
    settings = load_settings(named("ConfigMap", "almanac-settings")["data"])
    container = named("StatefulSet", "almanac-gateway")["spec"]["template"]["spec"]["containers"][0]
    limit = mebibytes(container["resources"]["limits"]["memory"])
    full = GATEWAY_START_MB + settings.live_max_feeds * LIVE_FEED_KB / 1024
    assert full <= 0.75 * limit, f"{settings.live_max_feeds} feeds need about {full:.0f} MB of a {limit:.0f} Mi limit"
    assert mebibytes(container["resources"]["requests"]["memory"]) >= GATEWAY_START_MB
    assert settings.live_max_feeds_per_seat < settings.live_max_feeds


def test_the_secret_template_holds_a_placeholder_that_settings_refuse() -> None:
    secret = named("Secret", "almanac-secret")["stringData"]["ALMANAC_SECRET"]
    with pytest.raises(Exception, match="ALMANAC_SECRET is not valid"):
        load_settings({"ALMANAC_SECRET": secret})


def test_the_settings_configmap_passes_the_services_own_validation() -> None:
    settings = load_settings(named("ConfigMap", "almanac-settings")["data"])
    assert settings.redis_cluster is True


def test_every_container_runs_the_almanac_entrypoint_with_requests_and_no_privileges() -> None:
    dockerfile = (K8S.parent / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["almanac"]' in dockerfile
    commands = {"projector", "notifier", "gateway", "archiver", "bots"}
    for workload, container in containers():
        assert "command" not in container, f"{workload} must keep the image's entrypoint (almanac)"
        assert container["args"][0] in commands, workload
        requests = container["resources"]["requests"]
        assert requests.get("cpu") and requests.get("memory"), f"{workload} has no resource requests"
        assert container["resources"]["limits"].get("memory"), f"{workload} has no memory limit"
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
    for resource in resources():
        if resource["kind"] in WORKLOADS:
            pod_security = resource["spec"]["template"]["spec"]["securityContext"]
            assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] > 0
            assert pod_security["runAsUser"] == int(re.search(r"^USER (\d+)$", dockerfile, re.M).group(1))


def test_the_almanac_command_offers_every_role_the_manifests_start() -> None:
    almanac = shutil.which("almanac") or str(Path(sys.executable).parent / "almanac")
    assert {container["args"][0] for _, container in containers()} == {"projector", "notifier", "gateway", "archiver",
                                                                         "bots"}
    # The five processes start at once (each is mostly the CLI's import): one after another they were seconds each.
    shown = {role: subprocess.Popen([almanac, role, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True) for role in ("projector", "notifier", "gateway", "archiver", "bots")}
    answers = {role: process.communicate(timeout=60) for role, process in shown.items()}
    for role, process in shown.items():
        assert process.returncode == 0, (role, answers[role][1])
    assert "--shards" in answers["projector"][0]  # the scale-out path projector.yaml names


def test_the_gateways_have_a_disruption_budget() -> None:
    budgets = {r["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
               for r in resources() if r["kind"] == "PodDisruptionBudget"}
    assert budgets == {"almanac-gateway"}


def test_the_redis_cluster_values_give_each_primary_a_replica() -> None:
    values = yaml.safe_load((K8S / "redis" / "values.yaml").read_text())
    assert values["cluster"]["nodes"] == 6 and values["cluster"]["replicas"] == 1
    assert "appendonly yes" in values["redis"]["configmap"]
    assert values["redis"]["resources"]["requests"]["cpu"]
