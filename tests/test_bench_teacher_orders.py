"""bench/analysis/teacher_orders.py: its fixed order and by-score are the teacher's own plans (the same
reward as the teacher's games), and an order's plan is the records plan shuffled that way."""

import json

import bench_modules
import numpy as np
import pytest
from test_teacher import HELDOUT, teacher_game

from selfplay_gen.games.matching.scripted import completed

teacher_orders = bench_modules.load("analysis/teacher_orders.py", "teacher_orders")


async def test_the_fixed_order_and_by_score_are_the_teachers_plans():
    rng = np.random.default_rng(0)
    noise_rngs = {plan: np.random.default_rng(1) for plan in teacher_orders.NOISY_PLANS}
    for instance in HELDOUT[:12]:
        rewards = teacher_orders.rewards(instance, rng, noise_rngs)
        records = await teacher_game(instance, "by-reviewer-records")
        by_score = await teacher_game(instance, "by-score")
        assert rewards["fixed order (the records plan)"] == records["outcome"]["normalized_reward"]
        assert rewards["by-score"] == by_score["outcome"]["normalized_reward"]
        assert rewards["random orders, best of 8"] >= rewards["random orders, best of 4"]
        assert rewards["best of every 97th order"] >= rewards["fixed order (the records plan)"]


async def test_a_shuffled_game_scores_its_orders_plan():
    instance = HELDOUT[7]
    for seed in range(4):
        game = await teacher_game(instance, "shuffled-records", seed)
        order = [int(r) for r in np.random.default_rng(seed).permutation(8)]
        _, picks = teacher_orders.TeacherPlayer._by_reviewer(teacher_orders.known_cells(instance), order=order)
        raw = teacher_orders.score(instance, completed(picks))
        assert instance.normalized(raw) == game["outcome"]["normalized_reward"]


def test_the_first_places_of_the_ranking_then_table_order():
    known: list[dict[int, int]] = [{} for _ in range(8)]
    known[1], known[4], known[6], known[7] = {0: 50}, {2: 90}, {3: 70}, {1: 90}  # 4 and 7 tie: table order
    assert teacher_orders.top_first(known, 1) == [4, 0, 1, 2, 3, 5, 6, 7]
    assert teacher_orders.top_first(known, 3) == [4, 7, 6, 0, 1, 2, 3, 5]
    assert teacher_orders.top_first(known, 8) == [4, 7, 6, 1, 0, 2, 3, 5]  # the ones with no known cell last


def test_the_report_names_every_plan(tmp_path):
    teacher_orders.main([str(tmp_path), "dev", "6"])
    summary = json.loads((tmp_path / "teacher_orders_dev.json").read_text())
    assert summary["count"] == 6 and 0.5 < summary["random_matching"] < 0.7
    table = (tmp_path / "teacher_orders_dev.md").read_text()
    assert all(f"| {name} |" in table for name in summary["plans"])
    assert "| noise scale | 0 | 20 | 40 | 60 | 80 | 100 | 150 |" in table  # ranked-records' grid
    assert "| noise scale | 0 | 5 | 10 | 20 | 30 | 40 | 80 |" in table  # sampled-by-score's
    assert {plan: len(grid) for plan, grid in summary["noise_grids"].items()} == {
        "ranked-records": 7,
        "sampled-by-score": 7,
    }


async def test_the_noisy_plans_are_drawn_as_the_teacher_draws_them():
    instance = HELDOUT[7]
    known = teacher_orders.known_cells(instance)
    for plan, (draw, noise, _) in teacher_orders.NOISY_PLANS.items():
        for seed in range(3):
            game = await teacher_game(instance, plan, seed)
            drawn = draw(known, noise, np.random.default_rng(seed))
            assert sorted(map(tuple, game["outcome"]["proposal"])) == sorted((r, p) for r, p in drawn)


def test_a_noisy_plan_without_noise_is_its_rule_and_noise_opens_its_groups():
    played = HELDOUT[:10]
    rng = np.random.default_rng(0)
    noise_rngs = {plan: np.random.default_rng(1) for plan in teacher_orders.NOISY_PLANS}
    rows = [teacher_orders.rewards(inst, rng, noise_rngs) for inst in played]
    for plan, rule, noise in (
        ("ranked-records", "highest known value first", 80.0),
        ("sampled-by-score", "by-score", 20.0),
    ):
        grid = teacher_orders.noise_grid(played, plan, (0.0, noise))
        expected = np.mean([row[rule] for row in rows])
        assert grid[0.0] == {"mean": pytest.approx(expected), "best of 8": pytest.approx(expected), "distinct": 1.0}
        assert grid[noise]["distinct"] > 2 and grid[noise]["best of 8"] > grid[noise]["mean"] + 0.02
