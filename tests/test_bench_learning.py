"""The efficacy benchmark's collector (bench/analysis/learning.py) on two small runs evaluated like
run_selfplay_iteration.sh evaluates its stages (scripted players stand in for checkpoints)."""

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from selfplay_gen.cli import main

REPO = Path(__file__).resolve().parents[1]


def collect(root: Path) -> Path:
    """bench/analysis/learning.py on ROOT's runs, as the GPU runbook calls it; its output directory."""
    out = root / "out"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "analysis" / "learning.py"), str(root), str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_stages_sit_beside_random_matching_with_paired_differences(tmp_path):
    for run in ("grpo", "fbc"):
        for label, share in (("base", "0"), ("warm", "0.3"), ("iter_1", "1" if run == "grpo" else "0.3")):
            result = CliRunner().invoke(
                main,
                [
                    "eval",
                    "--backend",
                    "scripted",
                    "--scripted-share",
                    share,
                    "--instances",
                    "heldout",
                    "--num-instances",
                    "10",
                    "-k",
                    "2",
                    "--label",
                    label,
                    "--out",
                    str(tmp_path / run / label),
                    "--append-to",
                    str(tmp_path / run / "report" / "heldout"),
                    "--quiet",
                ],
            )
            assert result.exit_code == 0, result.output
    out = collect(tmp_path)
    stages = json.loads((out / "learning.json").read_text())
    rows = {(r["trainer"], r["stage"]): r for r in stages["stages"]}
    assert len(rows) == 6 and (out / "learning.png").stat().st_size > 0
    for (_trainer, stage), row in rows.items():
        assert row["random"]["mean"] < 0.65 < row["reward"]["mean"]  # scripted play beats random matching
        assert (row["vs_warm"] is None) == (stage in ("base", "warm"))
        assert (row["vs_previous"] is None) == (stage == "base")
    assert rows["GRPO", "iter_1"]["vs_warm"]["ci"][0] > 0  # sharing everything beats 30%
    (versus,) = stages["head_to_head"]  # runs in name order: fbc, grpo
    assert versus["runs"] == ["filtered BC", "GRPO"] and versus["stages"] == ["iter_1", "iter_1"]
    assert versus["difference"]["ci"][1] < 0
    assert "− warm start (paired)" in (out / "learning.md").read_text()


def test_a_negotiation_run_brings_its_crossplay_report_not_matching_rows(tmp_path):
    run = tmp_path / "neg"
    common = ["eval", "--game", "negotiation", "--backend", "scripted", "--num-instances", "8", "-k", "2", "-q"]
    selfplay = [*common, "--label", "warm", "--out", str(run / "warm"), "--append-to", str(run / "report" / "heldout")]
    cross = [*common, "--scripted-strength", "1", "--partner-scripted-strength", "0.3", "--label", "iter_1"]
    for args in (selfplay, [*cross, "--partner-label", "warm", "--out", str(run / "report" / "crossplay")]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
    out = collect(tmp_path)
    assert json.loads((out / "learning.json").read_text())["stages"] == []  # points are not rewards beside random
    text = (out / "learning.md").read_text()
    assert "## neg: cross-play of its checkpoints" in text and "| iter_1 vs warm |" in text
    assert (out / "neg_crossplay" / "report.md").exists() and (out / "neg_crossplay" / "rating.png").exists()
