"""bench/analysis/paired.py: the paired difference of two evaluations is the mean of their per-instance
differences over the instances both played, and a run-level report (no per-instance rewards) is refused by
name."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "analysis" / "paired.py"


def scripted_eval(out: Path, *policy: str, games_per_instance: int = 1) -> Path:
    """Scripted players of `policy` on 6 development instances, evaluated into `out`: its metrics.json."""
    args = ["eval", "--backend", "scripted", *policy, "--instances", "dev", "--num-instances", "6"]
    args += ["-k", str(games_per_instance)]
    result = CliRunner().invoke(main, [*args, "--label", out.name, "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out / "metrics.json"


def paired(*paths: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, paths)], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paired")
    teacher = scripted_eval(tmp / "teacher", "--scripted-policy", "teacher", "--teacher-plan", "by-reviewer")
    records = scripted_eval(tmp / "records", "--scripted-policy", "teacher", "--teacher-plan", "by-reviewer-records")
    share = scripted_eval(tmp / "share", "--scripted-policy", "share")
    return teacher, records, share


def test_the_difference_is_paired_by_instance(evaluations):
    teacher, records, share = evaluations
    result = paired(teacher, records, share)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # the records plan writes by-reviewer's picks differently, so every instance scores the same
    assert lines[2] == "  minus the first, paired: +0.000 [+0.000, +0.000] (n=6)"
    a = json.loads(teacher.read_text())["per_instance"]["teacher"]
    b = json.loads(share.read_text())["per_instance"]["share"]
    expected = sum(b[i] - a[i] for i in a) / len(a)
    assert lines[4].startswith(f"  minus the first, paired: {expected:+.3f} [") and lines[4].endswith("(n=6)")
    assert "random matching" in lines[0] and "on 6 instances x 1" in lines[0]


def test_a_run_report_is_refused_by_its_schema(tmp_path, evaluations):
    report = tmp_path / "metrics.json"
    report.write_text(json.dumps({"schema": "selfplay-gen-run/1", "rows": []}))
    result = paired(report, evaluations[0])
    assert result.returncode == 1
    assert f"{report}: field schema is 'selfplay-gen-run/1'; give an evaluation's metrics.json" in result.stderr
