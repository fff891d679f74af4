"""The matching game's metrics: a flat row per game record (and per human game), and the
summary of a set of games, with bootstrap intervals over instances (`stats.metrics`).

A learning claim needs a floor: the random-matching baseline of an instance is the expected
normalized reward of a uniformly random perfect matching. Each cell lies in exactly 1/8 of the
8! matchings, so that expectation is sum(T) / 8 / best, exact and per instance.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from ...records import UNNAMED_GAME, Record
from ...stats.metrics import (
    distinct_n,
    endings,
    mean_interval,
    paired_difference,
    ratio_interval,
    repeated_share,
    sampled_surprisal,
    valid_move_rate,
)
from ...stats.metrics import per_instance as _per_instance
from .grounding import count_grounded, grounding
from .instance import HUMAN_GAMES, Instance
from .record import MatchingEvent, MatchingOutcome

GAME = "matching"
REWARD = "normalized_reward"  # the column rewards are compared by
# Per-game means reported with an interval.
INTERVAL_COLUMNS = (
    "normalized_reward",
    "random_matching_reward",
    "agreed",
    "optimal",
    "moves",
    "messages",
    "words",
    "stated_cells",
    "proposals",
)


def instance_key(table, masks) -> str:
    """What identifies an instance across files whatever its id: its table and both masks."""
    return json.dumps([table, list(masks)], separators=(",", ":"))


def random_matching_reward(table, best: int) -> float:
    """Expected normalized reward of a uniformly random perfect matching of the 8x8 `table`."""
    return float(np.sum(table)) / 8 / best if best else 0.0


def assignment(pairs) -> tuple[tuple[int, int], ...]:
    """A proposal's pairs in one order, so that equal assignments compare equal."""
    return tuple(sorted(map(tuple, pairs)))


def game_row(record: Record, seats: tuple[str, str]) -> dict:
    """One game of the matching game as a flat row; `seats` are the labels of the models in seat
    0 and seat 1."""
    game = record.get("game", UNNAMED_GAME)
    if game != GAME:
        raise ValueError(f"game {record['game_id']!r} is a {game} game; evaluate it with --game {game}")
    agreed, stats, inst = record["outcome"]["agreed"], record["stats"], record["instance"]
    outcome = cast(MatchingOutcome, record["outcome"])
    events = cast(list[MatchingEvent], record["events"])
    proposed = [assignment(e["pairs"] or []) for e in events if e["kind"] == "propose"]
    messages = [e["text"] for e in record["events"] if e["kind"] == "message"]
    responses = [m["content"] for p in record["players"] for m in p["messages"] if m["role"] == "assistant"]
    response_tokens = [len(t["output_ids"]) for p in record["players"] for t in p.get("turns", [])]
    instance = Instance.from_dict(inst)
    stated, grounded = grounding(record, instance)
    surprisal, sampled = sampled_surprisal(record)
    shares = [instance.own_plan_share(e["player"], e["pairs"] or []) for e in events if e["kind"] == "propose"]
    return {
        "game_id": record["game_id"],
        "instance_id": record["instance_id"],
        "instance_key": instance_key(inst["table"], inst["masks"]),
        "seat0": seats[0],
        "seat1": seats[1],
        "normalized_reward": float(outcome["normalized_reward"]),
        "random_matching_reward": random_matching_reward(inst["table"], outcome["best_reward"]),
        "agreed": bool(agreed),
        "optimal": bool(agreed) and outcome["raw_reward"] == outcome["best_reward"],
        "moves": stats["valid_moves"],
        "invalid": stats["invalid_moves"],
        "messages": len(messages),
        "words": sum(len(m.split()) for m in messages),
        "stated_cells": stated,
        "grounded_cells": grounded,
        "proposals": len(proposed),
        "proposed": proposed,
        "own_plan_share": float(np.mean(shares)) if shares else np.nan,
        "surprisal": surprisal,
        "sampled_tokens": sampled,
        "termination": outcome["termination"],
        "failed": record.get("failure") is not None,
        "message_texts": messages,
        "response_words": [len(r.split()) for r in responses],
        "response_tokens": response_tokens,
    }


def seat_figures(record: Record, seat: int) -> dict[str, float]:
    """What one seat did that the game row counts over both (a game people played reports each seat
    apart): the table cells it stated in its messages, and how many of them its own view shows."""
    said = [(seat, e["text"]) for e in record["events"] if e["kind"] == "message" and e["player"] == seat]
    stated, grounded = count_grounded(Instance.from_dict(record["instance"]), said)
    return {"cells stated": stated, "cells grounded": grounded}


def per_instance(games: pd.DataFrame, column: str = REWARD) -> pd.Series:
    """The mean of `column` (the reward unless named) per instance."""
    return _per_instance(games, column)


def game_table(records: Iterable[Record], seats: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame([game_row(r, seats) for r in records])


def human_table(path: Path = HUMAN_GAMES) -> pd.DataFrame:
    """The human games as rows of the same shape (ids `human-NNN` by line, as the CLI names them).
    People could make no invalid moves and no token counts exist, so those are missing. Their
    grounding uses the same parser, though people rarely state cells in its form."""
    rows = []
    with path.open() as fh:
        for i, line in enumerate(fh):
            game = json.loads(line)
            log = game["action_log"]
            said = [(a["player"], a["message"]["data"]) for a in log if a["type"] == "message"]
            messages = [text for _, text in said]
            instance = Instance.from_human_record(game)
            stated, grounded = count_grounded(instance, said)
            proposals = [a for a in log if a["type"] == "proposal"]
            proposed = [assignment(a["proposal_ids"]) for a in proposals]
            shares = [instance.own_plan_share(int(a["player"]), a["proposal_ids"]) for a in proposals]
            agreed = any(a["type"] == "proposal_response" and a["response"]["accept"] for a in log)
            raw, best = game["proposal_reward"], game["best_assignment_reward"]
            rows.append(
                {
                    "game_id": f"human-{i:03d}/0",
                    "instance_id": f"human-{i:03d}",
                    "instance_key": instance_key(game["table"], [game["mask1"], game["mask2"]]),
                    "seat0": "humans",
                    "seat1": "humans",
                    "normalized_reward": raw / best if agreed else 0.0,
                    "random_matching_reward": random_matching_reward(game["table"], best),
                    "agreed": agreed,
                    "optimal": agreed and raw == best,
                    "moves": len(log),
                    "invalid": np.nan,
                    "messages": len(messages),
                    "words": sum(len(m.split()) for m in messages),
                    "stated_cells": stated,
                    "grounded_cells": grounded,
                    "proposals": len(proposed),
                    "proposed": proposed,
                    "own_plan_share": float(np.mean(shares)) if shares else np.nan,
                    "surprisal": 0.0,
                    "sampled_tokens": 0,
                    "termination": "accepted" if agreed else "none",
                    "failed": False,
                    "message_texts": messages,
                    "response_words": [len(m.split()) for m in messages],
                    "response_tokens": [],
                }
            )
    return pd.DataFrame(rows)


def human_games_on(games: pd.DataFrame, path: Path = HUMAN_GAMES) -> pd.DataFrame:
    """The human games played on the same instances as `games` (matched by table and masks),
    relabeled with the games' instance ids so that they pair up."""
    humans = human_table(path)
    ids = games.drop_duplicates("instance_key").set_index("instance_key")["instance_id"]
    humans = humans[humans["instance_key"].isin(ids.index)].copy()
    humans["instance_id"] = humans["instance_key"].map(ids)
    return humans


def diversity(games: pd.DataFrame) -> dict:
    """Signs of mode collapse: few distinct n-grams, the same messages in many games, one
    assignment proposed whatever the table (the most proposed one's share of all proposals, near 1
    when the tables no longer matter), and responses shrinking or growing to the limit."""
    messages = [m for msgs in games["message_texts"] for m in msgs]
    proposed = Counter(a for assignments in games["proposed"] for a in assignments)
    words = [w for ws in games["response_words"] for w in ws]
    tokens = [t for ts in games["response_tokens"] for t in ts]
    return {
        "distinct_1": distinct_n(messages, 1),
        "distinct_2": distinct_n(messages, 2),
        "repeated_message_share": repeated_share(list(games["message_texts"])),
        "top_proposal_share": max(proposed.values()) / proposed.total() if proposed else None,
        "response_words": float(np.mean(words)) if words else None,
        "response_tokens": float(np.mean(tokens)) if tokens else None,
    }


def summarize(games: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """Aggregate metrics of one set of games (one model's self-play, or the humans)."""
    intervals = {c: mean_interval(per_instance(games, c).to_numpy(float), resamples, rng) for c in INTERVAL_COLUMNS}
    attempts = games["moves"].sum() + games["invalid"].sum()
    invalid_rate = None if games["invalid"].isna().all() else float(games["invalid"].sum() / max(attempts, 1))
    sums = games.groupby("instance_id")[
        ["normalized_reward", "agreed", "stated_cells", "grounded_cells", "surprisal", "sampled_tokens"]
    ].sum()
    valid_rate = valid_move_rate(games, resamples, rng)
    return {
        "games": len(games),
        "instances": int(games["instance_id"].nunique()),
        "mean_normalized_reward": intervals["normalized_reward"],
        "random_matching_reward": intervals["random_matching_reward"],
        "minus_random": paired_difference(
            per_instance(games), per_instance(games, "random_matching_reward"), resamples, rng
        ),
        "agreement_rate": intervals["agreed"],
        # how good the assignments agreed on are, apart from how often one is (a game without agreement scores 0)
        "agreed_reward": ratio_interval(sums["normalized_reward"], sums["agreed"], resamples, rng),
        "optimal_share": intervals["optimal"],
        "moves_per_game": intervals["moves"],
        "messages_per_game": intervals["messages"],
        "words_per_game": intervals["words"],
        "invalid_move_rate": invalid_rate,
        "valid_move_rate": valid_rate,
        "cells_stated_per_game": intervals["stated_cells"],
        "grounding_rate": ratio_interval(sums["grounded_cells"], sums["stated_cells"], resamples, rng),
        "proposals_per_game": intervals["proposals"],
        # what a seat's valid proposals are worth on the table it sees, as a share of its own no-talk plan
        "own_plan_share": mean_interval(per_instance(games, "own_plan_share").dropna().to_numpy(float), resamples, rng),
        # nats a sampled token, the sampling policy's entropy as played (mean None: no model seat sent logprobs)
        "token_surprisal": ratio_interval(sums["surprisal"], sums["sampled_tokens"], resamples, rng),
        "failed_games": int(games["failed"].sum()),
        "terminations": endings(games),
        "diversity": diversity(games),
    }
