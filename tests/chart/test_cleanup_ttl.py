"""The Jobs' cleanup TTL outlives every manager outage the chart allows (issue 15,
defect 4; docs/architecture.md, "The cleanup TTL and a late harvest").

The TTL is written before the outcome patch. A manager that stops between the two
leaves a Job carrying its TTL under a live claim, and the spec says the next pass
re-reads the same terminal Job and reaches the same verdict. That holds only while
the Job, its Pod and the Pod's log still exist, so the TTL must outlive the time
until some manager's next pass. The longest such outage the chart's own settings
allow, read from the rendered Deployment, is the larger of:

- one replica lost while another runs (the PodDisruptionBudget keeps one up through
  any voluntary disruption): the survivor takes the leader Lease after its duration
  and a retry period;
- every replica lost at once, which the chart allows on one node: its spread over
  nodes is a soft preference (ScheduleAnyway). Kubernetes marks the node unready
  after its monitor grace period, evicts the Pods after the not-ready/unreachable
  toleration (the DefaultTolerationSeconds plugin's 300 s unless the chart sets its
  own), the replacement starts within its startup probe's budget, then takes the
  leader Lease.

Image pulls and scheduling take time no setting bounds, so the TTL must leave at
least ``PULL_AND_SCHEDULE`` beyond that. A manager kept down longer still finds the
Job collected and records the run Unknown: safe (never a second executor), only not
the same verdict.

The last test plays the spec's row on the double: the manager stops right after the
TTL write, stays down for that whole outage while a stand-in TTL controller collects
what has expired (the double runs none), and the next pass reads the same Job to the
same verdict. Its control row stays down past the TTL and records Unknown.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import pytest

from jobclaim import CLEANUP_TTL_SECONDS, finished
from jobclaim.apiserver import JOBS, PODS
from kube.fake.inmemory import matching
from runner.config import parse_time
from tests.support.chartrender import Object, only
from tests.support.dispatchworld import NS, Rig, make_rig
from tests.support.outcomeworld import FAMILIES, FamilyCase, account
from tests.support.podworld import harvest_with

# kube-controller-manager's --node-monitor-grace-period default (Kubernetes >= 1.32).
NODE_MONITOR_GRACE: Final = 50
# The DefaultTolerationSeconds admission plugin's default for both taints.
DEFAULT_TOLERATION: Final = 300
# What the TTL leaves for scheduling and pulling the manager image after all that.
PULL_AND_SCHEDULE: Final = 600
EVICTING_TAINTS: Final = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _env(container: Object) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _toleration_seconds(pod: Object, taint: str) -> int:
    for toleration in pod.get("tolerations") or []:
        if toleration.get("key") == taint and toleration.get("effect") in (None, "NoExecute"):
            seconds = toleration.get("tolerationSeconds")
            # No seconds: the Pod tolerates the taint forever and is never evicted.
            return int(seconds) if seconds is not None else 10**9
    return DEFAULT_TOLERATION


def _all_replicas_may_share_a_node(pod: Object) -> bool:
    hard = [
        c
        for c in pod.get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable") == "DoNotSchedule"
        and c.get("topologyKey") == "kubernetes.io/hostname"
    ]
    return not hard


def longest_outage(render: list[Object]) -> int:
    """Seconds from a manager's stop to the next manager's first pass, at worst."""
    deployment = only(render, "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    (manager,) = pod["containers"]
    env = _env(manager)
    takeover = int(env["PTAH_LEADER_ELECTION_LEASE_DURATION_SECONDS"]) + int(
        env["PTAH_LEADER_ELECTION_RETRY_PERIOD_SECONDS"]
    )
    startup = manager["startupProbe"]
    start = int(startup["periodSeconds"]) * int(startup["failureThreshold"])
    survivor = takeover if int(deployment["spec"]["replicas"]) > 1 else start + takeover
    if not _all_replicas_may_share_a_node(pod):
        return survivor
    eviction = max(_toleration_seconds(pod, taint) for taint in EVICTING_TAINTS)
    return max(survivor, NODE_MONITOR_GRACE + eviction + start + takeover)


def test_the_cleanup_ttl_outlives_the_longest_outage_the_chart_allows(
    default_render: list[Object],
) -> None:
    outage = longest_outage(default_render)
    assert outage > DEFAULT_TOLERATION  # the control: the bound is not a trivial one
    assert outage + PULL_AND_SCHEDULE <= CLEANUP_TTL_SECONDS, (
        f"a manager down for {outage} s (+{PULL_AND_SCHEDULE} s to pull and schedule) "
        f"outlives the {CLEANUP_TTL_SECONDS} s cleanup TTL"
    )


def test_a_hard_spread_bounds_the_outage_by_a_leader_takeover(
    default_render: list[Object],
) -> None:
    """The bound follows the chart: with the replicas kept on different nodes, losing
    one node leaves a survivor, which only has to take the leader Lease."""
    render = copy.deepcopy(default_render)
    deployment = only(render, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    spread = [{**c, "whenUnsatisfiable": "DoNotSchedule"} for c in pod["topologySpreadConstraints"]]
    pod["topologySpreadConstraints"] = spread
    assert longest_outage(render) < DEFAULT_TOLERATION


def collect_expired(rig: Rig) -> None:
    """What the TTL-after-finished controller does by now: delete every finished Job
    whose TTL has run out, with its Pods."""
    now = rig.clocks.wall()
    for job in rig.jobs():
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None or finished(job) is None:
            continue
        ended = [parse_time(c["lastTransitionTime"]) for c in job["status"]["conditions"]]
        if max(t for t in ended if t is not None).timestamp() + ttl > now.timestamp():
            continue
        uid = job["metadata"]["uid"]
        for pod in rig.api.list(PODS, NS):
            if any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences", [])):
                rig.api.delete(PODS, NS, pod["metadata"]["name"])
        rig.api.delete(JOBS, NS, job["metadata"]["name"])


@pytest.mark.parametrize("family", FAMILIES, ids=str)
@pytest.mark.parametrize("past_the_ttl", [False, True], ids=["the outage", "control: past it"])
def test_a_manager_down_for_the_longest_outage_reaches_the_same_verdict(
    default_render: list[Object], family: FamilyCase, past_the_ttl: bool
) -> None:
    down = longest_outage(default_render) + PULL_AND_SCHEDULE
    if past_the_ttl:
        down = CLEANUP_TTL_SECONDS + 1
    rig = make_rig()
    key = family.add(rig)
    rig.settle(key)
    harvest_with(rig, key, family.apply_op, family.applied)
    rig.api.stop_after_write(matching("patch_spec", JOBS))
    rig.settle(key)
    assert rig.api.stopped, "the cleanup TTL was never written"
    rig.clocks.advance(down)
    rig.api.restart()
    collect_expired(rig)
    rig.settle(key)
    # Within the outage: the same terminal Job, the same verdict. Past the TTL the Job
    # is gone and the run is unknown, never run again.
    assert account(rig, key) == ("unknown" if past_the_ttl else "succeeded")
    applies = {c.name for c in rig.api.calls if c.verb == "create" and c.resource == JOBS}
    assert len({name for name in applies if name and "-apply-" in name}) == 1
