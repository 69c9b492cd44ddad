"""Every Redis the deploy files start keeps a room's streams in the same small nodes as the embedded one."""

from __future__ import annotations

from pathlib import Path

import yaml

from almanac.services.embedded_redis import STREAM_NODE_MAX_BYTES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_the_compose_redis_starts_with_small_stream_nodes() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    command = compose["services"]["redis"]["command"]
    assert command[command.index("--stream-node-max-bytes") + 1] == str(STREAM_NODE_MAX_BYTES)


def test_the_kubernetes_redis_cluster_is_configured_with_small_stream_nodes() -> None:
    values = yaml.safe_load((DEPLOY / "k8s" / "redis" / "values.yaml").read_text())
    assert f"stream-node-max-bytes {STREAM_NODE_MAX_BYTES}" in values["redis"]["configmap"].splitlines()
