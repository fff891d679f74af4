"""bench/analysis/league_arms.py: a league arm's promotion match and training become one row each, read
from a real cross-play evaluation (scripted negotiators of two strengths in the two models' places)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.league import promote

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "analysis" / "league_arms.py"


def arm(root: Path, name: str, strong: float) -> dict:
    """An arm whose candidate is the scripted negotiator at `strong` and whose warm start plays at 0.5."""
    match = root / name / "crossplay_iter_1__warm"
    args = ["eval", "--game", "negotiation", "--backend", "scripted", "--scripted-strength", f"{strong:g}"]
    args += ["--partner-backend", "scripted", "--partner-scripted-strength", "0.5", "--instances", "heldout"]
    args += ["--num-instances", "16", "-k", "2", "--label", "iter_1", "--partner-label", "warm", "--out", str(match)]
    result = CliRunner().invoke(main, [*args, "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    metrics = json.loads((match / "metrics.json").read_text())
    stage = root / name / "iter_001"
    stage.mkdir(parents=True)
    (stage / "promotion.json").write_text(json.dumps(promote(metrics, "iter_1", "warm").to_dict()))
    grpo = {"rows": 12, "beyond_max_groups": 3, "constant": 40}
    split = {"train": {"rows": 10}, "val": {"rows": 2}}
    (stage / "convert_summary.json").write_text(json.dumps({"records": 512, "grpo": grpo, "split": split}))
    steps = [{"step": 1, "actor/entropy": 0.02}, {"step": 2, "actor/entropy": 0.01, "actor/kl_loss": 0.003}]
    (stage / "train_metrics.json").write_text(json.dumps(steps))
    timings = [
        {"step": "generate vs warm", "startup_s": 70, "work_s": 30},
        {"step": "train (offline)", "startup_s": 250, "work_s": 150},
    ]
    (stage / "timings.json").write_text(json.dumps({"steps": timings}))
    return metrics


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO)


def test_each_arm_gets_its_match_and_its_training_in_one_row(tmp_path):
    strong = arm(tmp_path, "strong", 1.0)
    arm(tmp_path, "weak", 0.0)
    result = run(str(tmp_path), "strong", "weak")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `strong`", "| `weak`"] * 2
    (both,) = [c["both"]["decided_win_share"] for c in strong["cross_play"]]
    shown = f"**{100 * both['mean']:.1f} [{100 * both['ci'][0]:.1f}, {100 * both['ci'][1]:.1f}]**"
    assert shown in rows[0]
    assert rows[1].endswith("| kept out: win share |")  # the weaker negotiator loses its match
    assert "| 512 | 15 / 40 | 10 + 2 | 2 | 0.0200 → 0.0100 | 0.0030 | 250 + 150 | 500 |" in rows[2]


def test_a_match_whose_games_did_not_come_back_shows_its_decisions_win_share_and_names_the_file(tmp_path):
    strong = arm(tmp_path, "strong", 1.0)
    (tmp_path / "strong" / "crossplay_iter_1__warm" / "metrics.json").unlink()
    result = run(str(tmp_path), "strong")
    assert result.returncode == 0 and "crossplay_iter_1__warm/metrics.json" in result.stderr
    (both,) = [c["both"]["decided_win_share"] for c in strong["cross_play"]]
    decision = json.loads((tmp_path / "strong" / "iter_001" / "promotion.json").read_text())
    row = next(line for line in result.stdout.splitlines() if line.startswith("| `strong` | – |"))
    low, high = decision["ci"]
    assert f"**{100 * decision['win_share']:.1f} [{100 * low:.1f}, {100 * high:.1f}]**" in row
    assert abs(decision["win_share"] - both["mean"]) < 1e-9 and row.endswith("| promoted |")
