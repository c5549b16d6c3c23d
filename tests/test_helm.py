"""The Helm chart, rendered and linted by the real Helm engine (helm-python-sdk ships Helm as a
library), every manifest validated against the Kubernetes OpenAPI schemas (kubernetes-validate,
strict: unknown fields are errors), and the ConfigMap/Secret env fed through our CLI parser.

Not validated here: applying to a cluster (no API server, so `lookup` returns nothing and admission,
RBAC, image pulls and probes are not exercised).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from helm_python import Chart, lint

from render_service.serving.cli import build_parser, settings_from_args

CHART = Path(__file__).resolve().parents[1] / "helm" / "render-service"
KUBE_VERSIONS = ("1.25.0", "1.30.0", "1.33.0")

FULL = {
    "apiKey": {"value": "api-key-0123456789abcdef"},
    "streamState": {"keys": ["new-key-0123456789abcdef", "old-key-0123456789abcdef"]},
    "autoscaling": {"saturation": {"enabled": True}},
    "model": "/models/qwen",
    "workers": 4,
    "config": {"RENDER_SERVICE_MAX_N": "64", "RENDER_SERVICE_REASONING_PARSER": "qwen3"},
    "extraVolumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "models"}}],
    "extraVolumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}],
}
EXISTING = {
    "apiKey": {"existingSecret": "my-api-key"},
    "streamState": {"existingSecret": "my-stream-keys"},
    "autoscaling": {"enabled": False},
    "podDisruptionBudget": {"enabled": False},
}
VALUE_SETS = {"defaults": {}, "full": FULL, "existing-secrets": EXISTING}


def render(values: dict) -> dict[str, dict]:
    """Rendered manifests by kind (one object per kind in this chart)."""
    out = Chart.load(CHART).render(values, name="rs", namespace="serving", is_install=True)
    docs = {}
    for path, text in out.items():
        if path.endswith(".yaml"):
            for doc in yaml.safe_load_all(text):
                if doc:
                    assert doc["kind"] not in docs
                    docs[doc["kind"]] = doc
    return docs


def container(docs):
    return docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def test_helm_lint_is_clean():
    """`helm lint --strict` reports no errors and nothing above INFO, for each value set."""
    for values in VALUE_SETS.values():
        report = lint(str(CHART), values, strict=True)
        assert report["errors"] == []
        assert [m for m in report["messages"] if m["severity"] > 1] == []


@pytest.mark.parametrize("name", VALUE_SETS)
@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_manifests_validate_against_kubernetes_schemas(name, kube):
    """Every rendered object validates (strict) against the Kubernetes schema of that version."""
    docs = render(VALUE_SETS[name])
    for doc in docs.values():
        kubernetes_validate.validate(doc, kube, strict=True)


def test_default_chart_objects_and_probes():
    """Defaults: Deployment, Service, HPA on CPU, PDB, ConfigMap, Secret; liveness on /health,
    readiness on /ready; non-root, read-only root fs, no privilege escalation, all caps dropped."""
    docs = render({})
    assert set(docs) == {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
                         "ConfigMap", "Secret"}
    c = container(docs)
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["requests"]["cpu"]
    hpa = docs["HorizontalPodAutoscaler"]["spec"]
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu"]
    assert docs["PodDisruptionBudget"]["spec"]["minAvailable"] == 1
    assert "replicas" not in docs["Deployment"]["spec"]  # the HPA owns it
    key = base64.b64decode(docs["Secret"]["data"]["stream-state-keys"]).decode()
    assert len(key) >= 32  # generated once, never empty: states are always signed


def test_saturation_metric_autoscaling_is_optional():
    """autoscaling.saturation.enabled adds a Pods metric on render_service_worker_saturation."""
    metrics = render(FULL)["HorizontalPodAutoscaler"]["spec"]["metrics"]
    pods = [m for m in metrics if m["type"] == "Pods"]
    assert pods[0]["pods"]["metric"]["name"] == "render_service_worker_saturation"


def test_existing_secrets_are_referenced_not_created():
    """With existingSecret for both, no Secret is rendered and the pod reads the named ones."""
    docs = render(EXISTING)
    assert "Secret" not in docs and "HorizontalPodAutoscaler" not in docs
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in container(docs)["env"]}
    assert env["RENDER_SERVICE_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "my-api-key"
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["stream-state-keys"]["secret"]["secretName"] == "my-stream-keys"


def test_chart_environment_becomes_the_intended_settings(monkeypatch, tmp_path):
    """The ConfigMap data, the API-key env and the mounted key file, given to our CLI as the pod
    would, yield Settings with the chart's values (no drift between chart and flags)."""
    docs = render(FULL)
    for name in [n for n in os.environ if n.startswith("RENDER_SERVICE_") or n == "VLLM_API_KEY"]:
        monkeypatch.delenv(name)
    for name, value in docs["ConfigMap"]["data"].items():
        monkeypatch.setenv(name, value)
    key_file = tmp_path / "keys"
    key_file.write_text(base64.b64decode(docs["Secret"]["data"]["stream-state-keys"]).decode())
    monkeypatch.setenv("RENDER_SERVICE_STREAM_STATE_KEY_FILE", str(key_file))
    api_key = base64.b64decode(docs["Secret"]["data"]["api-key"]).decode()
    monkeypatch.setenv("RENDER_SERVICE_API_KEY", api_key)
    args = build_parser().parse_args(container(docs)["args"])
    s = settings_from_args(args)
    assert (s.host, s.port, s.renderer_num_workers, s.model) == ("0.0.0.0", 8000, 4, "/models/qwen")
    assert s.max_n == 64 and s.reasoning_parser == "qwen3" and s.shutdown_delay == 5
    assert s.api_keys == ("api-key-0123456789abcdef",)
    assert s.stream_state_keys == ("new-key-0123456789abcdef", "old-key-0123456789abcdef")
    assert s.allow_unsigned_stream_state is False
