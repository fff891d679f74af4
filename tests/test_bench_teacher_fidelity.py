"""bench/analysis/teacher_fidelity.py: the teacher's own games follow it exactly; games of the other plan do not,
and score above the teacher they are compared with when that plan is the better one."""

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from selfplay_gen.cli import main

REPO = Path(__file__).resolve().parents[1]


def fidelity(games: Path, plan: str, out: Path) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "analysis" / "teacher_fidelity.py"),
            str(games),
            "--plan",
            plan,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())["files"][str(games)]


def test_the_teachers_own_games_follow_it_and_the_other_plans_do_not(tmp_path):
    games = tmp_path / "games.jsonl"
    args = ["--backend", "scripted", "--scripted-policy", "teacher", "--teacher-plan", "by-score"]
    result = CliRunner().invoke(main, [*args, "--seed", "1000000000", "-n", "12", "-k", "1", "--out", str(games), "-q"])
    assert result.exit_code == 0, result.output
    own = fidelity(games, "by-score", tmp_path / "own.json")
    assert own == {"games": 12, "agreed": 12, "teachers_matching": 1.0, "agreed_reward_minus_teacher": 0.0}
    other = fidelity(games, "by-reviewer", tmp_path / "other.json")
    assert other["teachers_matching"] < 1.0 and other["agreed_reward_minus_teacher"] > 0
