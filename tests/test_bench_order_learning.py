"""bench/analysis/order_learning.py teaches the sorted plan's own lines: its rows are the teacher's working and
order line, an order read back from a line keeps every reviewer once, and the true order's plan is the one the
teacher proposes."""

import bench_modules
import numpy as np
import pytest

from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance, score
from selfplay_gen.games.matching.scripted import TeacherPlayer, known_cells, ranked_order

bench_modules.load("analysis/pick_formats.py", "pick_formats")  # the trainer it shares, as its script imports it
order_learning = bench_modules.load("analysis/order_learning.py", "order_learning")


@pytest.mark.parametrize("seed", range(10**9, 10**9 + 6))
def test_a_row_is_the_sorted_teachers_working_and_order(seed):
    instance = Instance.from_seed(seed)
    known = known_cells(instance)
    teacher = TeacherPlayer(instance, 1, "sorted-records")
    teacher.told = [sorted(row.items()) for row in known_cells(instance)]  # as if seat 0 had stated its cells
    reasoning = teacher._proposal().split("[propose]")[0]
    row = order_learning.prefix(known) + order_learning.ending(known, "sorted")
    assert reasoning.startswith(row)
    names = order_learning.ending(known, "names")
    assert names.startswith("Order: ") and not any(ch.isdigit() for ch in names)
    truth = ranked_order(known, np.zeros(8))
    assert order_learning.read_order(names) == order_learning.read_order(row.splitlines()[-1]) == truth
    chains = order_learning.ending(known, "chains").splitlines()
    assert order_learning.read_order("\n".join(chains), "chains") == truth
    for place, line in enumerate(chains, 1):  # records over the reviewers not yet placed, in table order
        label, records = line.split(": ", 1)
        values = [int(cell.rsplit(" ", 1)[1]) for cell in records.split(" < ")]
        assert label == str(place) and values == sorted(set(values))
        assert values[-1] == max(max(known[r].values()) for r in truth[place - 1 :] if known[r])


def test_an_order_line_is_read_as_every_reviewer_once_the_missing_ones_in_table_order():
    line = f"Order: {REVIEWERS[7]} 900 > {REVIEWERS[2]} 800 > {REVIEWERS[7]} 700 > Nobody 5"
    assert order_learning.read_order(line) == [7, 2, 0, 1, 3, 4, 5, 6]
    assert order_learning.read_order("") == list(range(8))


def test_the_true_orders_plan_is_the_sorted_teachers_proposal():
    for seed in range(10**9, 10**9 + 10):
        instance = Instance.from_seed(seed)
        known = known_cells(instance)
        teacher = TeacherPlayer(instance, 1, "sorted-records")
        teacher.told = [sorted(row.items()) for row in known]
        proposal = teacher._proposal().split("[propose] Proposal:\n")[1].splitlines()
        pairs = [(REVIEWERS.index(r), PAPERS.index(p)) for p, r in (line.split(": ") for line in proposal)]
        expected = score(instance, pairs) / instance.best_reward
        truth = ranked_order(known, np.zeros(8))
        assert order_learning.plan_reward(instance, known, truth) == pytest.approx(expected)
