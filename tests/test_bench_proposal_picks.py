"""bench/analysis/proposal_picks.py: every boxed proposal a response ends with counts, valid or not, and each of
its lines is classed against the seat's own table (highest seen, first seen in table order, the identity's)."""

import json

import bench_modules
import pytest

from selfplay_gen.games import move_formats
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance
from selfplay_gen.games.move_formats import BOXED

proposal_picks = bench_modules.load("analysis/proposal_picks.py", "proposal_picks")
SEED = 1_000_000_003


def proposal(reviewers: list[int]) -> str:
    lines = "\n".join(f"{paper}: {REVIEWERS[r]}" for paper, r in zip(PAPERS, reviewers, strict=True))
    return "I read my table.\n" + move_formats.answer(f"[propose] Proposal:\n{lines}", BOXED)


def test_each_line_is_classed_against_the_seats_own_view(tmp_path):
    view = Instance.from_seed(SEED).view(1)
    seen = [[(view[r][p], r) for r in range(8) if view[r][p] is not None] for p in range(8)]
    highest = [max(column)[1] if column else 0 for column in seen]  # a reviewer twice is still an attempt
    identity = list(range(8))
    responses = [
        proposal(highest),
        proposal(identity) + " and more text after the box",
        move_formats.answer("[accept]", BOXED),
        "no box: [propose] Proposal:\nBLEU: Ava Li",
    ]
    game = {
        "instance": {**Instance.from_seed(SEED).to_dict(), "seed": None},  # read as played, as a human instance is
        "players": [
            {"messages": [{"role": "system", "content": "rules"}]},
            {"messages": [{"role": "assistant", "content": text} for text in responses]},
        ],
    }
    games = tmp_path / "games.jsonl"
    games.write_text(json.dumps(game) + "\n")
    counts = proposal_picks.count(games)
    papers_seen = sum(bool(column) for column in seen)
    identity_highest = sum(bool(column) and max(column)[1] == p for p, column in enumerate(seen))
    assert counts["proposals"] == 2 and counts["lines"] == 16
    assert counts["highest"] == papers_seen + identity_highest
    assert counts["identity"] == 8 + sum(r == p for p, r in enumerate(highest))
    first = [column[0][1] if column else None for column in seen]
    assert counts["first in table order"] == sum(first[p] == highest[p] for p in range(8)) + sum(
        first[p] == p for p in range(8)
    )


def test_a_whole_matching_is_valued_as_a_share_of_the_seats_own_plan(tmp_path):
    """The seat's no-talk plan (its table, hidden cells guessed at HIDDEN_VALUE) is worth 1 of itself; the identity
    its own share; a proposal with a reviewer twice is no whole matching; the random expectation sits beside."""
    import numpy as np

    from selfplay_gen.games.matching.assignment import max_matching
    from selfplay_gen.games.matching.instance import HIDDEN_VALUE

    instance = Instance.from_seed(SEED)
    guess = np.where(np.asarray(instance.masks[1], bool), np.asarray(instance.table), HIDDEN_VALUE)
    best, plan = max_matching(guess)
    by_paper = {p: r for r, p in plan}
    responses = [proposal([by_paper[p] for p in range(8)]), proposal(list(range(8))), proposal([0] * 8)]
    game = {
        "instance": instance.to_dict(),
        "players": [{"messages": []}, {"messages": [{"role": "assistant", "content": t} for t in responses]}],
    }
    games = tmp_path / "games.jsonl"
    games.write_text(json.dumps(game) + "\n")
    counts = proposal_picks.count(games)
    identity = sum(int(guess[i, i]) for i in range(8)) / best
    assert counts["proposals"] == 3 and counts["whole"] == 2
    assert counts["own plan"] == pytest.approx(1 + identity)
    assert counts["random"] == pytest.approx(2 * guess.sum() / 8 / best) and identity < 1
