"""The chart's Deployment and the manager program agree: what the chart sets is what
``manager.config`` reads, both ways, and the rendered values configure a manager.

A variable the chart sets that nothing reads is a setting an operator changes to no
effect; a variable the manager requires that the chart does not set is a Pod that
never starts. Both are caught here, on the real helm's render.
"""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from lab.localmanager import CHART_DEFAULTS
from manager.config import INTERPRETER_VARIABLES, VARIABLES, load
from tests.support.chartrender import ROOT, Object, only

# Every test here renders the chart with helm, some through a render looked up by name
# (request.getfixturevalue), which the fixture-derived mark (tests/conftest.py)
# cannot see.
pytestmark = pytest.mark.helm

READ = {v.name for v in VARIABLES}
REQUIRED = {v.name for v in VARIABLES if v.required}
# What the Downward API fills in; the render shows only where from.
FIELD_VALUES = {"POD_NAME": "ptah-operator-5f7d8-x2x9q", "POD_NAMESPACE": "ptah-system"}


def manager_container(objects: list[Object]) -> dict[str, Any]:
    (manager,) = only(objects, "Deployment", "ptah-operator")["spec"]["template"]["spec"][
        "containers"
    ]
    result: dict[str, Any] = manager
    return result


def rendered_env(objects: list[Object]) -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in manager_container(objects)["env"]:
        if "value" in entry:
            found[entry["name"]] = entry["value"]
        else:
            assert entry["valueFrom"]["fieldRef"], entry
            found[entry["name"]] = FIELD_VALUES[entry["name"]]
    return found


RENDERS = ["default_render", "custom_render"]


@pytest.mark.parametrize("render", RENDERS)
def test_every_variable_the_chart_sets_is_read_by_the_manager(
    render: str, request: pytest.FixtureRequest
) -> None:
    names = set(rendered_env(request.getfixturevalue(render)))
    assert names - READ - INTERPRETER_VARIABLES == set()


@pytest.mark.parametrize("render", RENDERS)
def test_every_variable_the_manager_needs_is_set_by_the_chart(
    render: str, request: pytest.FixtureRequest
) -> None:
    names = set(rendered_env(request.getfixturevalue(render)))
    assert REQUIRED - names == set()
    # The rest are optional, each with the default a missing value means.
    assert all(v.default is not None for v in VARIABLES if v.name not in names)


@pytest.mark.parametrize("render", RENDERS)
def test_the_rendered_environment_configures_a_manager(
    render: str, request: pytest.FixtureRequest
) -> None:
    objects: list[Object] = request.getfixturevalue(render)
    config = load(rendered_env(objects))
    container = manager_container(objects)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (config.webhook_port, config.metrics_port) == (ports["webhook"], ports["metrics"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(config.cert_dir) == mounts["webhook-certs"]
    assert config.kubeconfig is None and not config.wedge_passes
    pod = only(objects, "Deployment", "ptah-operator")["spec"]["template"]["spec"]
    # The manager's own shutdown ends inside the kubelet's grace, drain included.
    assert config.shutdown_seconds < pod["terminationGracePeriodSeconds"]
    election = config.leader_election
    assert election is not None
    assert election.renew_deadline_seconds < election.duration_seconds


def test_the_scratch_images_reach_the_binding_and_the_webhooks_pins(
    default_render: list[Object], custom_render: list[Object]
) -> None:
    # The chart's execution.scratchImages bind the Jobs (a change rotates the binding)
    # and pin the webhook's rebuild alike; the default names none, and binds none.
    custom = load(rendered_env(custom_render))
    images = custom.controller.binding.scratch_images
    assert images is not None
    assert images.postgresql == (
        "registry.internal:5000/platform/scratch-postgresql@sha256:" + "7" * 64
    )
    assert images.mysql == "registry.internal:5000/platform/scratch-mariadb@sha256:" + "8" * 64
    pins = custom.webhook_settings().pins
    assert pins is not None and pins.scratch_images == images
    default = load(rendered_env(default_render))
    assert default.controller.binding.scratch_images is None


def test_the_container_runs_the_manager_program(default_render: list[Object]) -> None:
    assert manager_container(default_render)["command"] == ["ptah-manager"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["ptah-manager"] == "manager.__main__:main"


def test_the_metrics_service_reaches_the_port_the_manager_serves(
    default_render: list[Object],
) -> None:
    service = only(default_render, "Service", "ptah-operator-metrics")
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    assert load(rendered_env(default_render)).metrics_port == port["port"]


def test_make_runs_table_is_the_charts_default_environment(default_render: list[Object]) -> None:
    # make run starts the same program without helm, from this written-out table.
    rendered = rendered_env(default_render)
    for name in FIELD_VALUES:
        rendered.pop(name)
    images = {"PTAH_MANAGER_IMAGE", "PTAH_EXECUTOR_IMAGE", "PTAH_RUNNER_IMAGE", "PTAH_VERSION"}
    # The images and the ptah version have no chart default; every other value does.
    assert set(rendered) == set(CHART_DEFAULTS)
    assert {k: v for k, v in rendered.items() if k not in images} == {
        k: v for k, v in CHART_DEFAULTS.items() if k not in images
    }
