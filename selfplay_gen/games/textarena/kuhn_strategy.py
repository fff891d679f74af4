"""Kuhn Poker's strategy as a player's games show it, and what that strategy is worth exactly.

Chips won over a few hundred sampled hands spread by about 0.4 a hand either way (the deal, the
opponent's mixed moves), far more than the 0.05 that tells near-equilibrium play from a plain
mistake. A player's strategy in a hand has only twelve information sets: its card, whether it acts
first, and whether it faces a bet. Its games give the share of the aggressive move (bet, or call when
facing a bet) at each, and the chips a hand of that behaviour strategy against the equilibrium
(`scripted.kuhn_aggression`) and against the best response to it follow exactly, summed over the six
deals with no noise from deals or opponents. The shares pool every hand of a game, so these values
hold for a player whose play does not depend on the hands before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import permutations, product
from typing import Any

import numpy as np
import pandas as pd

from ...stats.metrics import LEVEL, bootstrap_counts
from ..base import Limits
from ..move_formats import NO_BOXED_MOVE
from .fixes import KUHN_MOVE
from .scripted import kuhn_aggression

CARDS = "JQK"
# (first to act, facing a bet) -> where in the hand, the aggressive move there
SITUATIONS = {
    (True, False): ("opening", "bet"),
    (True, True): ("after check and bet", "call"),
    (False, False): ("after a check", "bet"),
    (False, True): ("facing a bet", "call"),
}
NODES = [(first, card, facing) for (first, facing) in SITUATIONS for card in range(3)]  # the 12 information sets
INDEX = {node: i for i, node in enumerate(NODES)}
EQUILIBRIUM = np.array([kuhn_aggression(card, first, facing) for first, card, facing in NODES])


def _pure(first: bool) -> np.ndarray:
    """Every pure strategy of the first (or second) to act, for the best response: 64, the other role's sets
    left at 0, which `first_to_act_chips` never reads for that role."""
    role = [i for i, node in enumerate(NODES) if node[0] == first]
    pure = np.zeros((2 ** len(role), len(NODES)))
    pure[:, role] = list(product((0.0, 1.0), repeat=len(role)))
    return pure


PURE_FIRST, PURE_SECOND = _pure(True), _pure(False)
VALUE_FIRST = -1 / 18  # the game's value to the first to act
ROLES = ("first", "second")
# what `summarize` reads of a strategy, by key, as reports head its columns
VALUES = {
    "equilibrium_first": f"vs equilibrium, first to act ({VALUE_FIRST:+.3f})",
    "equilibrium_second": f"vs equilibrium, second ({-VALUE_FIRST:+.3f})",
    "best_response_first": "vs best response, first",
    "best_response_second": "vs best response, second",
}


def node_name(node: tuple[bool, int, bool]) -> str:
    first, card, facing = node
    where, move = SITUATIONS[(first, facing)]
    return f"{ROLES[not first]}, {CARDS[card]}, {where}: {move}"


def measure_names(node: tuple[bool, int, bool]) -> tuple[str, str]:
    """The game measures (`move_counts`) of one information set: its moves, and its aggressive moves."""
    first, card, facing = node
    where = SITUATIONS[(first, facing)][0].replace(" ", "_")
    stem = f"kuhn_{ROLES[not first]}_{CARDS[card]}_{where}"
    return f"{stem}_moves", f"{stem}_aggressive"


MEASURE_NAMES = [measure_names(node) for node in NODES]


def move_counts(moves: Iterable[tuple[int, int, bool]]) -> dict[str, float]:
    """One game's moves and aggressive moves at each information set, both seats together (`decisions`), as
    scalar measures: a trainer that averages a step's self-play games' measures (both seats the one policy)
    logs the policy's counts a game, whose ratios (`strategy_of_means`) are its strategy at that step."""
    counts = dict.fromkeys((name for pair in MEASURE_NAMES for name in pair), 0.0)
    for _, node, aggressive in moves:
        moved, aggressed = MEASURE_NAMES[node]
        counts[moved] += 1
        counts[aggressed] += aggressive
    return counts


def strategy_of_means(means: Mapping[str, float]) -> np.ndarray | None:
    """The strategy ([12] shares, NaN at a set never reached) that the means over games of `move_counts`
    show, by measure name; None where they hold none of them."""
    if not any(moved in means for moved, _ in MEASURE_NAMES):
        return None
    counts = np.array([[means.get(aggressed, 0.0), means.get(moved, 0.0)] for moved, aggressed in MEASURE_NAMES])
    return shares(counts)


def decisions(record: Mapping[str, Any]) -> list[tuple[int, int, bool]]:
    """(seat, information set's index in NODES, aggressive?) of every valid move of a Kuhn Poker record,
    read by replaying its turns in the environment, whose seed deals the cards."""
    from . import game as adapter

    # no limits of its own: the record's events end where the game's limits ended it
    game = adapter.game_for(str(record["game"]).split(":", 1)[1])(Limits(max_moves=10**6, max_invalid=10**6))
    game.reset(adapter.TextArenaInstance.from_dict(record["instance"]))
    found = []
    for event in record["events"]:
        if game.done or event["kind"] not in ("move", "invalid"):
            break
        if event.get("error") == NO_BOXED_MOVE:
            continue  # refused before the environment saw it; a valid event holds the move itself
        seat, text, state = event["player"], event["text"], game.env.state.game_state
        if event["kind"] == "move":
            move = KUHN_MOVE.search(text.strip())
            if move is None:
                raise ValueError(f"game {record['game_id']}: a valid Kuhn Poker move names no move: {text!r}")
            first, facing = state["starting_player"] == seat, "call" in state["current_legal_action_tree"]
            node = INDEX[(first, state["player_cards"][seat], facing)]
            found.append((seat, node, move.group(1).lower() in ("bet", "call")))
        game.step(seat, text)
    return found


def first_to_act_chips(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The first to act's expected chips a hand (ante 1, a bet 1), over the six deals, with each
    player's strategy its share of the aggressive move at each of NODES (arrays [..., 12])."""
    total = np.zeros(np.broadcast_shapes(first.shape, second.shape)[:-1])
    for own, other in permutations(range(3), 2):
        stake = 1.0 if own > other else -1.0
        bet, calls = first[..., INDEX[(True, own, False)]], first[..., INDEX[(True, own, True)]]
        bets_after_check, called = second[..., INDEX[(False, other, False)]], second[..., INDEX[(False, other, True)]]
        checked = (1 - bets_after_check) * stake + bets_after_check * (calls * 2 * stake - (1 - calls))
        total = total + bet * (called * 2 * stake + (1 - called)) + (1 - bet) * checked
    return total / 6


def values(strategy: np.ndarray) -> dict[str, np.ndarray]:
    """Chips a hand of `strategy` ([..., 12]) as the first and as the second to act, against the
    equilibrium and against the best response to it. NaN where it depends on an information set the
    games never reached."""
    # a call after its own check matters only where the player ever checks
    never_checks = np.stack([strategy[..., INDEX[(True, card, False)]] == 1 for card in range(3)], axis=-1)
    calls = [INDEX[(True, card, True)] for card in range(3)]
    strategy = strategy.copy()
    strategy[..., calls] = np.where(never_checks & np.isnan(strategy[..., calls]), 0.0, strategy[..., calls])
    mine = strategy[..., None, :]
    return {
        "equilibrium_first": first_to_act_chips(strategy, EQUILIBRIUM),
        "equilibrium_second": -first_to_act_chips(EQUILIBRIUM, strategy),
        "best_response_first": first_to_act_chips(mine, PURE_SECOND).min(axis=-1),
        "best_response_second": -first_to_act_chips(PURE_FIRST, mine).max(axis=-1),
    }


def shares(counts: np.ndarray) -> np.ndarray:
    """Aggressive moves / moves at each node ([..., 12, 2] counts -> [..., 12]); NaN where there were none."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts[..., 0] / counts[..., 1]


def summarize(moves: pd.DataFrame, resamples: int, rng: np.random.Generator) -> dict:
    """One player's strategy from its moves (columns instance_id, node, aggressive): the share at each
    information set with its count, and `values` with intervals over instances."""
    instances = sorted(moves["instance_id"].unique())
    counts = np.zeros((len(instances), len(NODES), 2))
    rows = moves.assign(i=moves["instance_id"].map({k: i for i, k in enumerate(instances)}))
    np.add.at(counts, (rows["i"].to_numpy(), rows["node"].to_numpy(), 0), rows["aggressive"].to_numpy(float))
    np.add.at(counts, (rows["i"].to_numpy(), rows["node"].to_numpy(), 1), 1.0)
    total = counts.sum(axis=0)
    boots = np.einsum("ri,ink->rnk", bootstrap_counts(len(instances), resamples, rng), counts)
    point, resampled = values(shares(total)), values(shares(boots))

    def interval(key: str) -> dict:
        mean = float(point[key])
        if np.isnan(mean):
            return {"mean": None, "ci": None}
        lo, hi = np.nanquantile(resampled[key], [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        return {"mean": mean, "ci": [float(lo), float(hi)]}

    return {
        "moves": int(total[:, 1].sum()),
        "instances": len(instances),
        "shares": {
            node_name(node): {"share": None if n == 0 else float(a / n), "moves": int(n)}
            for node, (a, n) in zip(NODES, total, strict=True)
        },
        **{key: interval(key) for key in point},
    }
