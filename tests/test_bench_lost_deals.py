"""bench/analysis/lost_deals.py: games without a deal split by cause, an offer whose halves do not add up to the
pool found as a slip, and slips counted per seat kind with whether their games still ended in a deal."""

import json

import bench_modules

lost_deals = bench_modules.load("analysis/lost_deals.py", "lost_deals")

COUNTS = [1, 2, 2]


def game(kinds, moves, termination):
    events = [{"player": seat, "kind": kind, "text": text} for seat, kind, text in moves]
    outcome = {"termination": termination, "agreed": termination == "agreed"}
    return {
        "instance": {"counts": COUNTS},
        "players": [{"kind": k} for k in kinds],
        "events": events,
        "outcome": outcome,
    }


def test_a_slipped_last_offer_is_told_apart_from_one_that_adds_up(tmp_path):
    slip = "I propose: I take 1 book, 1 hat, 2 balls; you take 0 books, 1 hat, 1 ball."  # 3 balls of 2
    fair = "I propose: I take 1 book, 0 hats, 1 ball; you take 0 books, 2 hats, 1 ball."
    games = [
        game(
            ["llm", "llm"],
            [
                (0, "message", fair),
                (1, "message", slip),
                (0, "propose", "0 books, 1 hat, 1 ball"),
                (1, "propose", "1 book, 1 hat, 2 balls"),
            ],
            "inconsistent",
        ),
        game(["llm", "scripted"], [(0, "message", slip), (1, "message", fair), (0, "propose", "x")], "agreed"),
        game(["llm", "llm"], [(0, "message", slip), (1, "message", fair)], "inconsistent"),
        game(["llm", "llm"], [(0, "message", "hello")], "max_moves"),
    ]
    path = tmp_path / "games.jsonl"
    path.write_text("".join(json.dumps(g) + "\n" for g in games))
    endings, seats = lost_deals.tally(path)
    assert endings == {
        "games": 4,
        "deal": 1,
        "unmatched, last offer slipped": 1,
        "unmatched, last offer adds up": 1,
        "max_moves": 1,
    }
    assert seats["llm"] == {"offers": 5, "slips": 3, "games with a slip": 3, "of which deals": 1}
    assert seats["scripted"] == {"offers": 1}
