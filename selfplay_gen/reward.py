"""The training reward of one seat of one game: the one definition that `selfplay-convert` and
the online agent loop share, so offline and online GRPO optimize the same thing.

It is the seat's own reward in the game (`outcome.rewards`) with four opt-in terms:

- a penalty for the seat's own invalid moves: `penalty x invalid moves / turns`, so the shaping
  lies in [-penalty, 0]. A seat that plays only valid moves gets no shaping at all, so the penalty
  cannot be farmed; agreement is still the only way to a positive reward.
- a term for the joint outcome: `joint_weight x` the game's joint share of the best deal (both
  seats' points over the most the two could get together, in [0, 1]; 0 without a deal). In the
  semi-competitive mode a seat's reward is its own points, so a seat trained on it alone learns to
  demand what a partner of its own kind refuses; the term pays for the deals both sides keep,
  so at equal own points the deal with the higher joint share ranks higher.
- a term for the seat's own view: `own_plan_weight x` what the agreed outcome is worth on what the
  seat sees, as a share of the best it could plan alone (`outcome.own_plan_shares`, which a game whose
  seats share one reward over values each sees in part records: `Game.own_plan`; 0 without a deal).
  The shared reward also counts the values a seat cannot see, so it ranks a group's games by the
  seat's own view only in part; the term ranks them by that view alone, from nothing but what the
  seat sees.
- a penalty for each of the seat's misstatements: `penalty x` the valid moves that state something the
  game's state contradicts (`Game.misstatements`: an offer whose halves do not add up to the
  pool). Such a message costs a deal only when the partner takes it at its word, as a model does and a
  scripted negotiator, which reads the writer's half alone, does not; the penalty costs it in every game.

The game's score in the records is never changed, so evaluation reads the raw game reward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from . import games


def joint_share(record: Mapping[str, Any]) -> float:
    """Both seats' points over the best joint points of the instance (`outcome.points` and
    `outcome.best_joint`, as a game with a joint outcome records them; 0 without a deal)."""
    outcome = record["outcome"]
    try:
        points, best = outcome["points"], outcome["best_joint"]
        return float(sum(points)) / float(best) if best else 0.0
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"game {record.get('game_id')!r} ({record.get('game', 'the unnamed game')}): its outcome records no "
            f"points and best_joint ({error!r}), so it has no joint share for a joint-outcome reward term"
        ) from None


def joint_term(record: Mapping[str, Any], joint_weight: float) -> float:
    """The joint-outcome term `training_reward` adds: `joint_weight` x the joint share (0 when unweighted)."""
    return joint_weight * joint_share(record) if joint_weight else 0.0


def own_plan_share(record: Mapping[str, Any], seat: int) -> float:
    """What the agreed outcome is worth to `seat` on what it sees, as a share of its best solo plan
    (`outcome.own_plan_shares`, as a game with `Game.own_plan` records it; 0 without a deal)."""
    try:
        return float(record["outcome"]["own_plan_shares"][seat])
    except (KeyError, TypeError, IndexError) as error:
        raise ValueError(
            f"game {record.get('game_id')!r} ({record.get('game', 'the unnamed game')}): its outcome records no "
            f"own_plan_shares ({error!r}), so it has no own-plan term: only a game whose seats share one reward "
            "over values each sees in part records them (`Game.own_plan`)"
        ) from None


def own_plan_term(record: Mapping[str, Any], seat: int, own_plan_weight: float) -> float:
    """The own-view term `training_reward` adds: `own_plan_weight` x the seat's own-plan share (0 when unweighted)."""
    return own_plan_weight * own_plan_share(record, seat) if own_plan_weight else 0.0


def misstatement_term(record: Mapping[str, Any], seat: int, misstatement_penalty: float) -> float:
    """The misstatement term `training_reward` adds: -`misstatement_penalty` x `seat`'s misstatements (0 when
    unweighted)."""
    if not misstatement_penalty:
        return 0.0
    return -misstatement_penalty * games.get(record["game"]).misstatements(record, seat)


@dataclass(frozen=True)
class RewardTerms:
    """The opt-in terms of the training reward, each 0 when off: one set for every trainer, which
    selfplay-convert's options (`--joint-weight`) and the online loop's settings (`+selfplay.joint_weight`)
    both name by these fields."""

    invalid_move_penalty: float = 0.0
    joint_weight: float = 0.0
    own_plan_weight: float = 0.0
    misstatement_penalty: float = 0.0

    def __post_init__(self) -> None:
        for term in fields(self):
            value = getattr(self, term.name)
            if not value >= 0:
                raise ValueError(f"the training reward's {term.name} must be >= 0, got {value}")

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> RewardTerms:
        """The terms `settings` set (the online loop's `selfplay` section), the others 0."""
        return cls(**{term.name: float(settings.get(term.name, 0.0)) for term in fields(cls)})

    def named(self) -> dict[str, float]:
        """The terms that are on, by name (what a trainer is told: `--joint-weight`, `+selfplay.joint_weight`)."""
        return {term.name: getattr(self, term.name) for term in fields(self) if getattr(self, term.name)}


def training_reward(record: Mapping[str, Any], seat: int, terms: RewardTerms = RewardTerms()) -> float:
    """`seat`'s reward in `record`, less the penalty for its share of invalid turns and for each of its
    misstatements, plus the weighted joint share of the best deal and the weighted own-plan share of the
    agreed outcome. A seat without sampled turns (a scripted player) makes no invalid moves."""
    reward = float(record["outcome"]["rewards"][seat]) + joint_term(record, terms.joint_weight)
    reward += own_plan_term(record, seat, terms.own_plan_weight)
    reward += misstatement_term(record, seat, terms.misstatement_penalty)
    turns = len(record["players"][seat].get("turns") or ())
    if not terms.invalid_move_penalty or not turns:
        return reward
    invalid = sum(event["kind"] == "invalid" and event["player"] == seat for event in record["events"])
    return reward - terms.invalid_move_penalty * invalid / turns
