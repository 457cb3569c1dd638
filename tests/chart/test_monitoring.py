"""The chart's monitoring: ServiceMonitor, PrometheusRule, the plain rules file, the
runbooks and the dashboard, checked with the real helm and the real promtool.

- Both objects are opt-in; enabled, the ServiceMonitor selects the metrics Service's
  port and nothing else.
- ``promtool check rules`` accepts the rendered PrometheusRule's groups, and
  ``promtool test rules`` passes tests/chart/promtool/ptah-alerts.test.yaml over the
  plain file, which is the chart's render with the default thresholds; each mutation
  of a rule (a threshold, a hold time, a selector) makes those tests fail.
- Every alert links its section of docs/runbooks.md (the heading is the alert's name,
  the link its anchor), and every section is an alert's: each says what the alert
  means, how to confirm it with kubectl ptah status and Events, and what to do, with
  commands the plugin takes and thresholds the chart has.
- Every metric a rule or the dashboard names is one the manager exports, and every
  dashboard query is PromQL promtool parses.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_ptah import cli
from manager.metrics import GAUGE_HELP, ManagerMetrics
from tests.support.alertfile import ALERT_FILE, PLAIN_SELECTOR, rules_file
from tests.support.chartrender import (
    CHART,
    ROOT,
    VALUES,
    Helm,
    Object,
    load_documents,
    of_kind,
    only,
)

pytestmark = pytest.mark.helm

RUNBOOKS = ROOT / "docs" / "runbooks.md"
PROMTOOL_TESTS = Path(__file__).resolve().parent / "promtool"
DASHBOARDS = CHART / "dashboards"
ENABLED = {
    "monitoring.serviceMonitor.enabled": "true",
    "monitoring.prometheusRule.enabled": "true",
}
RUNBOOK_PARTS = ("### What it means", "### Confirm it", "### What to do")


def rendered_rule(helm: Helm, **settings: str) -> Object:
    objects = helm.render([VALUES / "required.yaml"], {**ENABLED, **settings})
    return only(objects, "PrometheusRule")


def alerts(rule: Object) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_names() -> set[str]:
    """Every sample name the manager's registry can export, by family type (a labelled
    family has no sample until its first label set), the domain gauges included."""
    names: set[str] = set()
    for family in ManagerMetrics().registry.collect():
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    # A domain gauge exists only while a resource has such a state; HELP names them all.
    return names | {f"ptah_{name}" for name in GAUGE_HELP}


def metric_names(expression: str) -> set[str]:
    """The metrics a query names: ours, and the process and GC collectors' (the
    dashboard's CPU and memory panel), which a query could misspell as well."""
    return set(re.findall(r"\b((?:ptah|process|python)_[a-z_]+)", expression))


def test_the_monitoring_objects_are_opt_in(default_render: list[Object]) -> None:
    assert of_kind(default_render, "ServiceMonitor") == []
    assert of_kind(default_render, "PrometheusRule") == []


def test_the_service_monitor_selects_only_the_metrics_port(helm: Helm) -> None:
    objects = helm.render([VALUES / "required.yaml"], ENABLED)
    monitor = only(objects, "ServiceMonitor")
    wanted = monitor["spec"]["selector"]["matchLabels"]
    selected = [
        s
        for s in of_kind(objects, "Service")
        if wanted.items() <= (s["metadata"].get("labels") or {}).items()
    ]
    assert [s["metadata"]["name"] for s in selected] == ["ptah-operator-metrics"]
    ports = [p["name"] for p in selected[0]["spec"]["ports"]]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http-metrics"]
    assert "http-metrics" in ports


def test_the_plain_rules_file_is_the_charts_render(helm: Helm) -> None:
    rule = rendered_rule(helm, **{"monitoring.prometheusRule.metricSelector": PLAIN_SELECTOR})
    committed = yaml.safe_load(ALERT_FILE.read_text())
    assert committed == yaml.safe_load(rules_file(rule)), (
        "regenerate docs/prometheus/ptah-alerts.yaml: see its header"
    )


def test_promtool_checks_the_rendered_rules(helm: Helm, promtool: Path, tmp_path: Path) -> None:
    groups = tmp_path / "rules.yaml"
    groups.write_text(rules_file(rendered_rule(helm)))
    done = subprocess.run(
        [str(promtool), "check", "rules", str(groups)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout


def run_rule_tests(promtool: Path, rules: str, where: Path) -> subprocess.CompletedProcess[str]:
    """promtool test rules over ``rules`` laid out where the test file expects them."""
    (where / "docs" / "prometheus").mkdir(parents=True)
    (where / "docs" / "prometheus" / "ptah-alerts.yaml").write_text(rules)
    tests = where / "tests" / "chart" / "promtool"
    tests.mkdir(parents=True)
    shutil.copy(PROMTOOL_TESTS / "ptah-alerts.test.yaml", tests)
    return subprocess.run(
        [str(promtool), "test", "rules", "ptah-alerts.test.yaml"],
        cwd=tests,
        check=False,
        capture_output=True,
        text=True,
    )


# (row, text in the rules, its replacement): the control changes nothing; every other
# row weakens one rule, and the promtool tests must notice.
MUTATIONS = [
    ("control: the rules as committed", "", ""),
    ("the unknown outcome needs two", 'outcome="Unknown"}) > 0', 'outcome="Unknown"}) > 1'),
    ("the unknown outcome holds 10m", "for: 5m\n", "for: 10m\n"),
    ("the unresolved run's age doubled", "> 1800", "> 3600"),
    (
        "admission ignores a target no longer scraped",
        ' or absent(ptah_webhook_ready{job="ptah-operator"})',
        "",
    ),
    (
        "the certificate's 0 read as expired",
        '_seconds{job="ptah-operator"} > 0)',
        '_seconds{job="ptah-operator"})',
    ),
    (
        "the stuck claim selects another job",
        'ptah_claims_overdue{job="ptah-operator"',
        'ptah_claims_overdue{job="other"',
    ),
]


@pytest.mark.parametrize(("row", "find", "replace"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_promtool_tests_pass_and_bite(
    row: str, find: str, replace: str, promtool: Path, tmp_path: Path
) -> None:
    rules = ALERT_FILE.read_text()
    if find:
        assert find in rules, row
        rules = rules.replace(find, replace, 1)
        assert rules != ALERT_FILE.read_text()
    done = run_rule_tests(promtool, rules, tmp_path)
    output = done.stdout + done.stderr
    if not find:
        assert done.returncode == 0 and "SUCCESS" in output, output
    else:
        assert done.returncode != 0, f"{row}: the promtool tests did not notice\n{output}"


def anchor(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading: lower case,
    punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """docs/runbooks.md's second-level sections, by heading."""
    parts = re.split(r"^## (.+)$", RUNBOOKS.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_alert_links_its_runbook_section_and_every_section_is_an_alerts(
    helm: Helm,
) -> None:
    page = "https://runbooks.example.com/ptah/runbooks.md"
    rule = rendered_rule(helm, **{"monitoring.prometheusRule.runbookBaseURL": page})
    names = [a["alert"] for a in alerts(rule)]
    assert len(names) == len(set(names)) == 9
    sections = runbook_sections()
    for alert in alerts(rule):
        name = alert["alert"]
        assert alert["annotations"]["runbook_url"] == f"{page}#{anchor(name)}"
        assert name in sections, f"docs/runbooks.md has no section headed {name}"
        text = sections[name]
        for part in RUNBOOK_PARTS:
            assert part in text, f"the {name} runbook lacks {part!r}"
        assert "kubectl ptah status" in text and "kubectl get events" in text, name
    assert sorted(sections) == sorted(names), "a runbook section names no alert"


def test_every_link_within_the_runbooks_lands_on_a_heading() -> None:
    text = RUNBOOKS.read_text()
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    # Only the first of equal headings gets the bare anchor; the alerts' are unique.
    targets = {anchor(h) for h in headings}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert len(links) >= 9, "the page's table links every section"
    assert [link for link in links if link not in targets] == []


# The command lines the runbooks give: `kubectl ptah <command> <kind> ...`, up to a
# comment, a closing backtick or the line's end.
PLUGIN_LINE = re.compile(r"kubectl ptah ([a-z]+ (?:schema|migration)\b[^`#\n]*)")


def test_every_kubectl_ptah_line_the_runbooks_give_is_one_the_plugin_takes() -> None:
    lines = PLUGIN_LINE.findall(RUNBOOKS.read_text())
    commands = {line.split()[0] for line in lines}
    # The control: the page gives status, acknowledge and settle lines to check.
    assert {"status", "acknowledge", "settle"} <= commands
    parser = cli._parser()
    for line in lines:
        try:
            parser.parse_args(shlex.split(line))
        except SystemExit as refused:
            raise AssertionError(f"kubectl ptah refuses {line!r}") from refused


def test_every_threshold_the_runbooks_name_is_one_the_chart_has() -> None:
    named = set(re.findall(r"`thresholds\.(\w+)`", RUNBOOKS.read_text()))
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    thresholds = values["monitoring"]["prometheusRule"]["thresholds"]
    assert len(named) >= 5
    assert named - set(thresholds) == set()


def test_every_metric_the_rules_name_is_exported(helm: Helm) -> None:
    exported = exported_names()
    for alert in alerts(rendered_rule(helm)):
        missing = metric_names(alert["expr"]) - exported
        assert not missing, f"{alert['alert']} names {missing}, which the manager never exports"


def dashboard_queries(panel_tree: Any) -> list[str]:
    found: list[str] = []
    if isinstance(panel_tree, dict):
        for key, value in panel_tree.items():
            if key in ("expr", "query") and isinstance(value, str):
                found.append(value)
            else:
                found += dashboard_queries(value)
    elif isinstance(panel_tree, list):
        for value in panel_tree:
            found += dashboard_queries(value)
    return found


def test_every_dashboard_query_names_only_exported_metrics() -> None:
    exported = exported_names()
    dashboards = sorted(DASHBOARDS.glob("*.json"))
    assert dashboards, "no dashboard under charts/ptah-operator/dashboards"
    for path in dashboards:
        queries = dashboard_queries(json.loads(path.read_text()))
        assert queries, f"{path.name} has no query"
        named = set().union(*(metric_names(q) for q in queries))
        # A histogram is queried by its series' names.
        assert named - exported == set(), f"{path.name} names metrics the manager never exports"


# Grafana's variables, as a query gets them: a rate window and the job selected.
GRAFANA_VARIABLES = (("$__rate_interval", "5m"), ("$job", ".+"))


def dashboard_rules(dashboard: Any) -> dict[str, Any]:
    """Every panel query of ``dashboard`` as a recording rule, so promtool parses it."""
    rules = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES:
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"{panel['title']}: a variable the test does not know"
            rules.append({"record": f"dashboard:query_{len(rules)}", "expr": expr})
    return {"groups": [{"name": "dashboard", "rules": rules}]}


def test_every_dashboard_query_is_promql_promtool_parses(promtool: Path, tmp_path: Path) -> None:
    for path in sorted(DASHBOARDS.glob("*.json")):
        rules = dashboard_rules(json.loads(path.read_text()))
        count = len(rules["groups"][0]["rules"])
        checked = tmp_path / f"{path.stem}.rules.yaml"
        checked.write_text(yaml.safe_dump(rules, sort_keys=False, width=1000))
        done = subprocess.run(
            [str(promtool), "check", "rules", str(checked)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{path.name}: " + done.stdout + done.stderr
        assert f"SUCCESS: {count} rules found" in done.stdout


# (row, setting, value, what the refusal names): the control renders; each other row
# is refused by values.schema.json, naming the value.
VALUE_ROWS = [
    ("control: a hold time in Prometheus's spelling", "thresholds.unknownOutcomeFor", "90s", ""),
    (
        "a hold time that is no duration",
        "thresholds.unknownOutcomeFor",
        "soon",
        "unknownOutcomeFor",
    ),
    ("no runbook base", "runbookBaseURL", "", "runbookBaseURL"),
    # Each alert appends its section's anchor: a page with one of its own would link
    # every alert to neither.
    (
        "a runbook page with an anchor of its own",
        "runbookBaseURL",
        "https://wiki.example.com/ptah#runbooks",
        "runbookBaseURL",
    ),
    ("a threshold the rules do not know", "thresholds.pagerFor", "1m", "pagerFor"),
]


@pytest.mark.parametrize(
    ("row", "setting", "value", "named"), VALUE_ROWS, ids=[r[0] for r in VALUE_ROWS]
)
def test_the_monitoring_values_are_checked(
    helm: Helm, row: str, setting: str, value: str, named: str
) -> None:
    result = helm.template(
        [VALUES / "required.yaml"],
        {**ENABLED, f"monitoring.prometheusRule.{setting}": value},
    )
    if not named:
        assert result.returncode == 0, result.stderr
        rule = only(load_documents(result.stdout), "PrometheusRule")
        assert alerts(rule)[0]["for"] == value
    else:
        assert result.returncode != 0, row
        assert named in result.stderr, result.stderr
