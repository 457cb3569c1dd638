"""The manager program on the real API server, started as the chart starts it.

Each manager is ``python -m manager`` in a process of its own, with the environment the
chart's Deployment renders (the real helm) and only what a Pod gets from the cluster
filled in: its name, its certificate directory, the service account's credentials (the
harness's manager kubeconfig), loopback ports, one namespace to watch, and Lease
durations short enough for a test.

The webhook configurations point at the replica that stays up (in a cluster the
Service sends to every ready replica; here one URL must do), so the follower is seen
serving admission for the leader's writes. Every wait is a bounded poll of something
the processes do on their own time; no sleep stands in for an event.
"""

from __future__ import annotations

import time
from contextlib import ExitStack, closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobclaim.apiserver import (
    PTAHSCHEMAS,
)
from lab import run as localrun
from lab.localmanager import ManagerProcess
from tests.realapi.managerrig import (  # noqa: F401  (the fixture)
    DEADLINE,
    DURATION,
    LEASE_NAMESPACE,
    RENEW_DEADLINE,
    RETRY,
    SHUTDOWN,
    Rig,
    chart_env,
    create_and_bind,
    rig,
    until,
)
from tests.support.realapioperator import Operator, operator  # noqa: F401  (the fixture)
from webhook.serving import local_certificates

pytestmark = pytest.mark.controlplane


def gauge(process: ManagerProcess, name: str) -> float:
    return process.gauge(name) or 0.0


def total(process: ManagerProcess, name: str) -> float:
    """The sum of a labelled counter's samples (0 when it has none)."""
    return sum(
        float(line.split()[-1])
        for line in process.metrics().splitlines()
        if line.startswith(name + "{")
    )


def leads(process: ManagerProcess) -> bool:
    return gauge(process, "ptah_controller_leader") == 1.0


def start_pair(made: Rig, stack: ExitStack) -> tuple[ManagerProcess, ManagerProcess]:
    """Two replicas: ``first`` leads, ``second`` follows and serves the webhook."""
    first = stack.enter_context(closing(made.manager("manager-a").start()))
    first.wait_serving()
    until(lambda: leads(first), "the first manager to lead")
    second = stack.enter_context(closing(made.manager("manager-b").start()))
    second.wait_serving()
    made.register(second)
    return first, second


def seed_and_approve(made: Rig) -> None:
    """What a Plan Job would publish (no kubelet here), and a person's approval."""
    localrun.seed_plan(
        made.api,
        made.staged.operator.manager,
        made.namespace,
        "orders",
        plane=made.staged.operator.plane,
    )
    localrun.approve(made.api, made.namespace, "orders")


def recorded(made: Rig) -> bool:
    return localrun.recorded_job(made.schema()) is not None


def test_one_leads_and_a_killed_leader_is_replaced_within_the_lease(
    operator: Operator,  # noqa: F811
    tmp_path: Path,
    chart_env: dict[str, str],  # noqa: F811
) -> None:
    with rig(operator, tmp_path, chart_env) as made, ExitStack() as stack:
        leader, follower = start_pair(made, stack)
        create_and_bind(made)
        assert made.holder() == "manager-a"
        # The follower serves admission (the leader's status writes went through it)
        # but has run no pass and dispatched nothing.
        assert total(follower, "ptah_webhook_decisions_total") > 0
        assert total(follower, "ptah_controller_passes_total") == 0
        assert not leads(follower)
        # A pass sends its Events after its last step: the leader's may land just after
        # the Job is recorded, so they are polled for (the follower's never come).
        until(lambda: made.reporters() == {"manager-a"}, "the leader's Events")

        assert leader.kill() == -9
        killed = time.monotonic()
        seed_and_approve(made)
        # The follower counts a whole duration of an unchanged record by its own clock,
        # from a sighting at most one retry period late (and one renewal's round trip):
        # the takeover is polled for with that bound, counted from the kill (the seeding
        # above spends part of it), as the poll's deadline.
        takeover = DURATION + 2 * RETRY + 1.0
        until(
            lambda: made.holder() == "manager-b",
            f"the follower to take the Lease over within {takeover} s of the kill",
            deadline=max(0.0, killed + takeover - time.monotonic()),
        )
        until(lambda: recorded(made), "the new leader to record the Job")
        (job,) = made.jobs()
        assert job["metadata"]["name"] == made.schema()["status"]["activeOperation"]["jobName"]
        # The new leader did the dispatching. Not "== 1": when the takeover races the
        # test's seeding, it may also create a reading's Job that the seeded plan then
        # retires (CI counted 2 with one Job standing); the one Job is asserted above.
        assert total(follower, "ptah_controller_dispatches_total") >= 1
        assert follower.terminate() == 0
        assert made.holder() == ""  # given back on the way out


def test_a_terminated_leader_hands_over_cleanly_mid_work(
    operator: Operator,  # noqa: F811
    tmp_path: Path,
    chart_env: dict[str, str],  # noqa: F811
) -> None:
    with rig(operator, tmp_path, chart_env) as made, ExitStack() as stack:
        leader, follower = start_pair(made, stack)
        create_and_bind(made)
        seed_and_approve(made)
        # The approval's watch event has just queued passes: stop the leader now.
        asked = time.monotonic()
        assert leader.terminate(timeout=SHUTDOWN + 5) == 0
        assert time.monotonic() - asked < SHUTDOWN
        log = leader.log.read_text()
        assert "the controller stopped; the Lease is given back" in log
        assert "the webhook drained; exiting" in log
        # Given back, the Lease is taken at the follower's next attempt, not after a
        # whole duration of silence: polled for with a duration as the deadline.
        until(
            lambda: made.holder() == "manager-b",
            f"the follower to take over within one Lease duration ({DURATION} s)",
            deadline=DURATION,
        )
        until(lambda: recorded(made), "the work to finish under the new leader")
        assert len(made.jobs()) == 1
        claim = made.schema()["status"]["activeOperation"]
        assert claim["dispatchStarted"] is True
        assert follower.terminate() == 0


def test_a_wedged_pass_turns_liveness_red_within_the_stall_period(
    operator: Operator,  # noqa: F811
    tmp_path: Path,
    chart_env: dict[str, str],  # noqa: F811
) -> None:
    stall = 2.0
    with rig(operator, tmp_path, chart_env) as made, ExitStack() as stack:
        process = stack.enter_context(
            closing(
                made.manager(
                    "manager-w", PTAH_TEST_WEDGE_PASSES="true", PTAH_STALL_SECONDS=str(stall)
                ).start()
            )
        )
        process.wait_serving()
        assert process.probe("/healthz").status_code == 200
        made.api.create(PTAHSCHEMAS, made.namespace, localrun.example_schema(made.namespace))
        # The pass began once the watch saw the schema; red follows within the period
        # plus the watch's own delay, the poll's deadline.
        until(
            lambda: process.probe("/healthz").status_code == 503,
            f"liveness to turn red within the stall period and 5 s ({stall + 5.0} s)",
            deadline=stall + 5.0,
        )
        answer = process.probe("/healthz").text
        assert f"a pass over PtahSchema {made.namespace}/orders has run for" in answer
        assert process.terminate() == 0  # shutdown releases the wedged pass


def test_an_expired_certificate_turns_readiness_red(
    operator: Operator,  # noqa: F811
    tmp_path: Path,
    chart_env: dict[str, str],  # noqa: F811
) -> None:
    with rig(operator, tmp_path, chart_env) as made, ExitStack() as stack:
        # A certificate that expires a little after the manager has started. 30 s,
        # not less: the manager refuses to start on an already expired certificate, and
        # at the full suite's load (two workers beside the lab cluster) its start has
        # taken over 12 s.
        validity = timedelta(minutes=10)
        local_certificates(
            made.cert_dir,
            now=datetime.now(UTC) - validity + timedelta(seconds=30),
            validity=validity,
        )
        process = stack.enter_context(closing(made.manager("manager-e").start()))
        process.wait_serving()
        until(
            lambda: process.probe("/readyz", verify=False).status_code == 503,
            "readiness to turn red",
            deadline=60.0,
        )
        answer = process.probe("/readyz", verify=False)
        assert "the serving certificate has expired" in answer.text
        assert process.probe("/healthz", verify=False).status_code == 200
        assert process.terminate() == 0
