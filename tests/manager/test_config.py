"""The manager's configuration: a control row that loads, then one change per row that
must be refused with a sentence naming the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.pieces.watchscope import CLUSTER
from manager.__main__ import _prog, main
from manager.config import ConfigError, load
from tests.support.managerenv import CHART_ENV


def test_the_charts_environment_configures_a_manager() -> None:
    config = load(CHART_ENV)
    assert config.identity == "ptah-operator-7d9c-abcde"
    assert config.manager_username == CHART_ENV["PTAH_MANAGER_USERNAME"]
    assert config.controller.lease_namespace == "ptah-system"
    assert config.controller.binding.executor_image == CHART_ENV["PTAH_EXECUTOR_IMAGE"]
    assert config.controller.binding.ptah_version == CHART_ENV["PTAH_VERSION"]
    assert config.controller.manager.runner_image == CHART_ENV["PTAH_RUNNER_IMAGE"]
    assert config.leader_election is not None
    assert config.leader_election.duration_seconds == 15
    assert config.leader_election.renew_deadline_seconds == 10.0
    assert config.leader_election.retry_period_seconds == 2.0
    assert (config.webhook_port, config.metrics_port) == (9443, 8080)
    assert config.cert_dir == Path("/etc/ptah/webhook-certs")
    # The chart names no configuration: the manager has no verb on them.
    assert config.webhook_configurations == ()
    # The webhook pins what the chart's values name, and nothing the manager writes.
    settings = config.webhook_settings()
    assert settings.pins is not None
    assert settings.pins.executor_image == CHART_ENV["PTAH_EXECUTOR_IMAGE"]
    assert settings.pins.runner_image == CHART_ENV["PTAH_RUNNER_IMAGE"]
    assert settings.pins.manager_image == CHART_ENV["PTAH_MANAGER_IMAGE"]
    assert settings.pins.ptah_version == CHART_ENV["PTAH_VERSION"]
    assert settings.coordination_namespace == "ptah-system"
    # Four-eyes is the chart's default (off) until the chart's value turns it on.
    assert not settings.require_distinct_approver
    assert config.kubeconfig is None  # in-cluster
    assert (config.stall_seconds, config.bind_address, config.watch_scope) == (
        120.0,
        "0.0.0.0",
        CLUSTER,
    )
    assert not config.wedge_passes


def test_four_eyes_reaches_the_webhook_from_the_environment_only() -> None:
    config = load({**CHART_ENV, "PTAH_REQUIRE_DISTINCT_APPROVER": "true"})
    assert config.webhook_settings().require_distinct_approver


def test_leader_election_off_means_no_election() -> None:
    assert load({**CHART_ENV, "PTAH_LEADER_ELECTION": "false"}).leader_election is None


REFUSED = [
    ("missing", {"PTAH_VERSION": None}, "PTAH_VERSION is not set"),
    ("a tag", {"PTAH_EXECUTOR_IMAGE": "registry/executor:1.0"}, "PTAH_EXECUTOR_IMAGE: "),
    ("not a user", {"PTAH_MANAGER_USERNAME": "ptah-operator"}, "PTAH_MANAGER_USERNAME: "),
    ("yes", {"PTAH_LEADER_ELECTION": "yes"}, "PTAH_LEADER_ELECTION: 'yes' is neither"),
    (
        "four-eyes missing",
        {"PTAH_REQUIRE_DISTINCT_APPROVER": None},
        "PTAH_REQUIRE_DISTINCT_APPROVER is not set",
    ),
    (
        "four-eyes not a bool",
        {"PTAH_REQUIRE_DISTINCT_APPROVER": "yes"},
        "PTAH_REQUIRE_DISTINCT_APPROVER: 'yes' is neither true nor false",
    ),
    ("port", {"PTAH_WEBHOOK_PORT": "70000"}, "PTAH_WEBHOOK_PORT: '70000' is not a port"),
    ("level", {"PTAH_LOG_LEVEL": "loud"}, "PTAH_LOG_LEVEL: 'loud' is not one of"),
    ("relative", {"PTAH_WEBHOOK_CERT_DIR": "certs"}, "PTAH_WEBHOOK_CERT_DIR: 'certs' is not"),
    ("dup", {"PTAH_WEBHOOK_CONFIGURATIONS": "a,a"}, "PTAH_WEBHOOK_CONFIGURATIONS: names"),
    ("zero", {"PTAH_SHUTDOWN_SECONDS": "0"}, "PTAH_SHUTDOWN_SECONDS: '0' is not a positive"),
    (
        "deadline past duration",
        {"PTAH_LEADER_ELECTION_RENEW_DEADLINE_SECONDS": "15"},
        "the renew deadline must be shorter than the lease duration",
    ),
    (
        "retry past deadline",
        {"PTAH_LEADER_ELECTION_RETRY_PERIOD_SECONDS": "10"},
        "the retry period must be positive and shorter than the renew deadline",
    ),
    ("same ports", {"PTAH_METRICS_PORT": "9443"}, "PTAH_METRICS_PORT must differ"),
    ("a namespace twice", {"PTAH_WATCH_NAMESPACES": "shop,shop"}, "PTAH_WATCH_NAMESPACES: names"),
    (
        "not a namespace",
        {"PTAH_WATCH_NAMESPACES": "shop,Shop"},
        "PTAH_WATCH_NAMESPACES: 'Shop' is not a namespace name",
    ),
    (
        "a selector that is not json",
        {"PTAH_WATCH_NAMESPACE_SELECTOR": "team=shop"},
        "PTAH_WATCH_NAMESPACE_SELECTOR: 'team=shop' is not a label selector in json",
    ),
    (
        "a selector with an unknown key",
        {"PTAH_WATCH_NAMESPACE_SELECTOR": '{"matchLabel": {"team": "shop"}}'},
        "is not a label selector in json",
    ),
    (
        "an empty selector",
        {"PTAH_WATCH_NAMESPACE_SELECTOR": "{}"},
        "PTAH_WATCH_NAMESPACE_SELECTOR: is an empty selector",
    ),
    (
        "wedge in cluster",
        {"PTAH_TEST_WEDGE_PASSES": "true"},
        "PTAH_TEST_WEDGE_PASSES is a test hook and is refused",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_a_bad_value_is_refused_naming_its_variable(
    change: dict[str, str | None], message: str
) -> None:
    env = {**CHART_ENV, **change}
    with pytest.raises(ConfigError) as refused:
        load({k: v for k, v in env.items() if v is not None})
    assert any(message in problem for problem in refused.value.problems), refused.value.problems
    for problem in refused.value.problems:
        # Lower-case sentences: only variable names and quoted values may have capitals.
        text = re.sub(r"'[^']*'|PTAH_[A-Z_*]+|POD_[A-Z]+", "", problem)
        assert text == text.lower(), problem


def test_the_watch_scope_is_the_list_and_the_selector() -> None:
    """The control row of the scope rows above: both given, both kept."""
    config = load(
        {
            **CHART_ENV,
            "PTAH_WATCH_NAMESPACES": "shop,billing",
            "PTAH_WATCH_NAMESPACE_SELECTOR": '{"matchLabels": {"team": "shop"}}',
        }
    )
    scope = config.watch_scope
    assert scope.namespaces == ("shop", "billing")
    assert scope.selector is not None and scope.selector.match_labels == {"team": "shop"}
    assert not scope.cluster_wide


def test_the_wedge_hook_is_accepted_with_a_kubeconfig() -> None:
    env = {**CHART_ENV, "PTAH_TEST_WEDGE_PASSES": "true", "PTAH_KUBECONFIG": "/tmp/k.yaml"}
    assert load(env).wedge_passes


def test_every_problem_is_reported_at_once() -> None:
    env = {k: v for k, v in CHART_ENV.items() if k not in ("POD_NAME", "PTAH_VERSION")}
    with pytest.raises(ConfigError) as refused:
        load({**env, "PTAH_LOG_LEVEL": "loud"})
    assert len(refused.value.problems) == 3


def test_the_command_exits_2_naming_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([], environ={**CHART_ENV, "PTAH_METRICS_PORT": "http"}) == 2
    assert (
        capsys.readouterr().err
        == "ptah-manager: PTAH_METRICS_PORT: 'http' is not a port (1-65535)\n"
    )


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        ("/usr/local/bin/ptah-manager", "ptah-manager"),
        ("/opt/ptah/lib/python3.11/site-packages/manager/__main__.py", "python -m manager"),
        ("/usr/local/bin/ptah-manager-old", "python -m manager"),
    ],
)
def test_help_names_the_command_a_person_typed(argv0: str, prog: str) -> None:
    assert _prog(argv0) == prog
