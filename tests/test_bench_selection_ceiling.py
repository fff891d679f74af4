"""bench/analysis/selection_ceiling.py on random legal play: each seat's best of N keeps the games convert's
selection keeps, and reports what they score."""

from pathlib import Path

import bench_modules
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.records import read_games
from selfplay_gen.reward import RewardTerms, own_plan_share, training_reward

selection_ceiling = bench_modules.load("analysis/selection_ceiling.py", "selection_ceiling")


@pytest.fixture(scope="module")
def random_games(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ceiling") / "games.jsonl"
    args = ["play", "--backend", "scripted", "--scripted-policy", "random", "-n", "64", "-k", "8", "-q"]
    result = CliRunner().invoke(main, [*args, "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def test_each_seat_keeps_its_first_best_game_of_each_instances_first_n(random_games):
    by_instance: dict[str, list[dict]] = {}
    for record in read_games(random_games):
        by_instance.setdefault(record["instance_id"], []).append(record)
    frame = selection_ceiling.ledger(str(random_games), own_plan_weight=1.0)
    for n in (1, 4, 8):
        row = selection_ceiling.kept(frame, n)
        assert row["instances"] == 8
        for seat in (0, 1):
            chosen = []
            for games in by_instance.values():
                scores = [training_reward(g, seat, RewardTerms(own_plan_weight=1.0)) for g in games[:n]]
                best = games[scores.index(max(scores))]  # the first of equals, as convert keeps
                if max(scores) > 0:  # a game without a deal is never a demonstration
                    chosen.append(best)
            rewards = [g["outcome"]["rewards"][seat] for g in chosen]
            shares = [own_plan_share(g, seat) for g in chosen]
            plans = [set(Instance.from_dict(g["instance"]).own_plan(seat)) for g in chosen]
            lines = [len(plan & {tuple(pair) for pair in g["outcome"]["proposal"]}) for plan, g in zip(plans, chosen)]
            assert row[f"seat {seat}: reward"] == pytest.approx(sum(rewards) / len(rewards))
            assert row[f"seat {seat}: own-plan share"] == pytest.approx(sum(shares) / len(shares))
            assert row[f"seat {seat}: own-plan lines"] == pytest.approx(sum(lines) / len(lines))
    assert (
        selection_ceiling.kept(frame, 8)["seat 0: own-plan share"]
        > selection_ceiling.kept(frame, 1)["seat 0: own-plan share"]
    )


def test_the_command_prints_a_row_per_group_size_the_file_holds(random_games):
    result = CliRunner().invoke(selection_ceiling.main, [str(random_games), "--best-of", "1,8,64"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("| best of | instances | seat 0: reward") and len(lines) == 4  # no 64 here
    assert lines[2].startswith("| 1 | 8 |") and lines[3].startswith("| 8 | 8 |")
    result = CliRunner().invoke(selection_ceiling.main, [str(random_games), "--best-of", "16"])
    assert result.exit_code == 1 and "no instance has 16 games" in result.output
