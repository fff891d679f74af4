"""bench/analysis/exploration.py: a deterministic teacher's groups are constant (no GRPO signal), and the
per-instance measures of a varied player's groups are what its games say."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_bench_paired import scripted_eval

from selfplay_gen.records import read_games

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "analysis" / "exploration.py"


def test_groups_by_temperature(tmp_path):
    teacher = scripted_eval(tmp_path / "teacher", "--scripted-policy", "teacher", games_per_instance=4).parent
    share = scripted_eval(tmp_path / "share", "--scripted-policy", "share", games_per_instance=4).parent
    env = {"PYTHONPATH": str(REPO)}
    command = [sys.executable, str(SCRIPT), str(tmp_path / "out"), f"teacher={teacher}", f"share={share}"]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "out" / "exploration.json").read_text())
    assert "| teacher | 6 x 4 |" in (tmp_path / "out" / "exploration.md").read_text()
    plain = results["teacher"]
    assert plain["games"] == 24 and plain["constant_groups"]["mean"] == 1.0
    assert plain["distinct_agreed_proposals"]["mean"] == 1.0 and plain["best_minus_median"]["mean"] == 0.0

    groups: dict[str, list[dict]] = {}
    for path in (share / "games").glob("*.jsonl"):
        for game in read_games(path):
            groups.setdefault(game["instance_id"], []).append(game["outcome"])
    constant = [len({o["normalized_reward"] for o in g}) == 1 for g in groups.values()]
    proposals = [len({json.dumps(o["proposal"]) for o in g if o["agreed"]}) for g in groups.values()]
    varied = results["share"]
    assert varied["constant_groups"]["mean"] == sum(constant) / len(constant)
    assert varied["distinct_agreed_proposals"]["mean"] == sum(proposals) / len(proposals)
    means = [sum(o["normalized_reward"] for o in g) / len(g) for g in groups.values()]
    assert varied["reward"]["mean"] == pytest.approx(sum(means) / len(means))
    assert 0 < varied["constant_groups"]["mean"] < 1 or varied["distinct_agreed_proposals"]["mean"] > 1


def test_a_directory_without_games_is_named(tmp_path):
    (tmp_path / "empty" / "games").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "out"), f"t={tmp_path / 'empty'}"],
        capture_output=True, text=True, env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 1 and f"{tmp_path / 'empty'}/games: no games" in done.stderr
