"""`python -m certs`: clear output, clear lower-case errors, the right exit codes."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from certs import RotationRecord, bundle_fingerprints, fingerprint, load_certificate
from certs.__main__ import main


def run(*argv: str) -> tuple[int, str]:
    lines: list[str] = []
    code = main(list(argv), out=lines.append)
    return code, "\n".join(lines)


def generate(directory: Path) -> None:
    code, _ = run(
        "generate",
        "--dir",
        str(directory),
        "--service",
        "ptah-webhook",
        "--namespace",
        "ptah",
        "--ip",
        "127.0.0.1",
    )
    assert code == 0


def test_generate_writes_the_four_files_and_describes_them(tmp_path: Path) -> None:
    directory = tmp_path / "certs"
    code, output = run(
        "generate", "--dir", str(directory), "--service", "ptah-webhook", "--namespace", "ptah"
    )
    assert code == 0
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}
    leaf = load_certificate((directory / "tls.crt").read_bytes())
    for fact in (
        "subject:",
        "CN=ptah-webhook-ca@",
        "DNS:ptah-webhook.ptah.svc.cluster.local",
        f"serial:     {leaf.serial_number:#x}",
        "not before:",
        "not after:",
        "expires in 89d 23h",
        f"sha256:     {fingerprint(leaf)}",
        "ca:         yes (path length 0)",
    ):
        assert fact in output, fact


def test_inspect_reports_health_and_rotation(tmp_path: Path) -> None:
    generate(tmp_path)
    code, output = run("inspect", "--dir", str(tmp_path))
    assert code == 0
    assert "IP:127.0.0.1" in output
    assert "tls.key:  matches tls.crt" in output
    assert "chain:    tls.crt verifies against ca.crt" in output
    assert "rotation: none in progress" in output


def test_inspect_a_bundle_file_lists_every_certificate(tmp_path: Path) -> None:
    generate(tmp_path)
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes((tmp_path / "ca.crt").read_bytes() + (tmp_path / "tls.crt").read_bytes())
    code, output = run("inspect", str(bundle))
    assert code == 0
    assert "certificate 1 of 2" in output
    assert "certificate 2 of 2" in output


def test_rotate_runs_a_ca_rotation_to_completion(tmp_path: Path) -> None:
    generate(tmp_path)
    bundles = tmp_path / "bundles.json"
    bundles.write_text(json.dumps({"ptah-validate": "", "someone-else": "untouched"}))
    old_ca = load_certificate((tmp_path / "ca.crt").read_bytes())
    code, output = run(
        "rotate",
        "--dir",
        str(tmp_path),
        "--bundles-file",
        str(bundles),
        "--webhook",
        "ptah-validate",
        "--force",
        "ca",
        "--settle",
        "0s",
        "--probe",
        "127.0.0.1:1",  # nothing listens there: the probe fails, settle time is used
    )
    assert code == 0, output
    new_ca = load_certificate((tmp_path / "ca.crt").read_bytes())
    assert fingerprint(new_ca) != fingerprint(old_ca)
    stored = json.loads(bundles.read_text())
    assert stored["someone-else"] == "untouched"
    assert bundle_fingerprints(stored["ptah-validate"].encode()) == {fingerprint(new_ca)}
    assert "starting a CA rotation: a CA rotation was requested" in output
    assert "probe failed, relying on the settle time" in output
    assert output.splitlines()[-1].startswith("finished: the CA rotation is complete")
    code, output = run(
        "rotate",
        "--dir",
        str(tmp_path),
        "--bundles-file",
        str(bundles),
        "--webhook",
        "ptah-validate",
    )
    assert code == 0
    assert output.startswith("nothing to do: nothing is due")


def test_rotate_stops_at_its_timeout_and_resumes_later(tmp_path: Path) -> None:
    generate(tmp_path)
    args = ("rotate", "--dir", str(tmp_path), "--settle", "1h", "--timeout", "0s")
    code, output = run(*args, "--force", "ca")
    assert code == 3
    assert "stopped: letting the API server pick up the overlap bundles" in output
    record = RotationRecord.from_json((tmp_path / "rotation.json").read_bytes())
    assert record.phase == "swap"
    code, output = run("inspect", "--dir", str(tmp_path))
    assert "CA rotation in phase swap" in output
    code, output = run(*args)  # still waiting: resuming does not start over
    assert code == 3
    assert RotationRecord.from_json((tmp_path / "rotation.json").read_bytes()) == record


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (
            ["generate", "--service", "Bad_Name", "--namespace", "ptah"],
            "the service name 'Bad_Name' is not a valid DNS label",
        ),
        (["inspect"], "does not exist"),
        (["rotate"], "has no ca.crt or no tls.crt; run `python -m certs generate` first"),
    ],
)
def test_expected_errors_are_one_lower_case_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], sentence: str
) -> None:
    command, *rest = argv
    code, _ = run(command, "--dir", str(tmp_path / "empty"), *rest)
    assert code == 1
    error = capsys.readouterr().err
    assert error.startswith("python -m certs: error: ")
    assert sentence in error
    assert error.count("\n") == 1


def test_generate_refuses_to_overwrite_published_trust(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path)
    before = (tmp_path / "ca.crt").read_bytes()
    code, _ = run("generate", "--dir", str(tmp_path), "--service", "s", "--namespace", "n")
    assert code == 1
    assert "already holds ca.crt, ca.key, tls.crt, tls.key; use" in capsys.readouterr().err
    assert (tmp_path / "ca.crt").read_bytes() == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["generate", "--service", "s", "--namespace", "n", "--ip", "1.2.3"], "is not an IP"),
        (["rotate", "--settle", "5x"], "is not a duration"),
        (["rotate", "--probe", "nohost"], "is not HOST:PORT"),
        (["rotate", "--force", "everything"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    command, *rest = argv
    with pytest.raises(SystemExit) as exit_info:
        run(command, "--dir", str(tmp_path), *rest)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# A fresh interpreter runs the module: integration, left to `make test`.
@pytest.mark.integration
def test_the_module_runs_and_never_prints_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "certs", "inspect", "--dir", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().endswith("missing/ca.crt does not exist")
