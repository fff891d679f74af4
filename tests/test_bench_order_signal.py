"""bench/analysis/order_signal.py: the ranked teacher's orders follow the known values and the fixed order's
tau is the identity order's; a plan whose proposal does not list the reviewers is left out by name."""

import json
import subprocess
import sys
from pathlib import Path

import bench_modules
import pytest
from test_bench_paired import scripted_eval

from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.records import read_games

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "analysis" / "order_signal.py"
bench_modules.load("analysis/exploration.py", "exploration")  # its command line, as the script imports it
order_signal = bench_modules.load("analysis/order_signal.py", "order_signal")


def teacher(tmp_path: Path, plan: str) -> Path:
    policy = ("--scripted-policy", "teacher", "--teacher-plan", plan)
    return scripted_eval(tmp_path / plan, *policy, games_per_instance=4).parent


def run(out: Path, *players: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), str(out), *players]
    return subprocess.run(command, capture_output=True, text=True, env={"PYTHONPATH": str(REPO)})


def test_orders_by_plan(tmp_path):
    plans = {plan: teacher(tmp_path, plan) for plan in ("by-reviewer-records", "shuffled-records", "ranked-records")}
    done = run(tmp_path / "out", *(f"{plan}={path}" for plan, path in plans.items()))
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "out" / "order_signal.json").read_text())
    assert "| ranked-records | 24 (0) |" in (tmp_path / "out" / "order_signal.md").read_text()

    fixed = results["by-reviewer-records"]
    games = [g for path in (plans["by-reviewer-records"] / "games").glob("*.jsonl") for g in read_games(path)]
    identity = [order_signal.value_tau(Instance.from_dict(g["instance"]), list(range(8))) for g in games]
    assert fixed["tau"]["mean"] == pytest.approx(sum(identity) / len(identity))
    assert fixed["groups_varied"] == 0 and fixed["within_group_spearman"] is None  # one order a group
    assert fixed["best_minus_group_tau"]["mean"] == 0

    assert results["ranked-records"]["tau"]["mean"] > 0.4 > abs(results["shuffled-records"]["tau"]["mean"])
    assert results["shuffled-records"]["groups_varied"] > 0


def test_a_plan_that_does_not_list_the_reviewers_is_named(tmp_path):
    by_score = teacher(tmp_path, "by-score")
    done = run(tmp_path / "out", f"s={by_score}")
    assert done.returncode == 1
    assert f"{by_score}/games: no game whose proposal lists every reviewer" in done.stderr
