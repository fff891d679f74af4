"""How every game is sampled and limited, with ONE default per knob for every command that plays:
`selfplay-gen play`, `eval`, `generate` and `iterate` hold it as their configuration's `sampling` section
(a run's stages hand theirs to `play` and `eval` in a configuration file), and verl's online rollout
(`selfplay_loop`) falls back on it, so a game played for training, for an evaluation or inside verl is
sampled alike.

- temperature 0.7: the warm start plays 0.679 at 0.7 and 0.658 at 1.0 on held-out instances
  (bench/results/learning/), and offline GRPO replays games at the temperature they were played at;
- max_new_tokens 512 per turn (a by-score teacher plan needs 768, see `Iteration.sampling_for_run`).
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from .config_tree import FiniteRange, knob
from .games.base import Limits

POSITIVE = click.IntRange(min=1)
GROUP_SIZE = 8  # games per instance: one GRPO group (`selfplay-gen play -k`, a run's games_per_instance)


@dataclass(frozen=True)
class Sampling:
    """How every game of a run is sampled and limited."""

    temperature: float = knob(
        0.7, "Sampling temperature of every game, evaluation and rollout (0: greedy).", type=FiniteRange(min=0),
        alias="TEMPERATURE",
    )  # fmt: skip
    top_p: float = knob(
        1.0, "Nucleus sampling (top_p) of every game and rollout: keep the smallest set of tokens with this much "
        "probability.", type=FiniteRange(0, 1, min_open=True), alias="TOP_P",
    )  # fmt: skip
    max_moves: int = knob(
        Limits.max_moves, "Valid moves per game, both players together.", type=POSITIVE, alias="MAX_MOVES"
    )
    max_invalid: int = knob(
        Limits.max_invalid, "Consecutive invalid moves by one player that end the game.", type=POSITIVE
    )
    max_new_tokens: int = knob(
        512, "New tokens per turn (generation, evaluation, online rollout); a turn that does not end within them "
        "ends the game (max_new_tokens).", type=POSITIVE, alias="MAX_NEW_TOKENS",
    )  # fmt: skip
    max_response_tokens: int | None = knob(
        None, "A seat's budget past its first prompt (what training sees as its response); the turn that would "
        "pass it ends the game (context_length, reward 0), so long games score 0 instead of being left out of "
        "training data and baselines. null: in a run, the training verl.max_response_length; in generate, play "
        "and eval, no limit.", type=POSITIVE, alias="MAX_RESPONSE_TOKENS",
    )  # fmt: skip


def number(value: float) -> str:
    """A number as a user writes it: 1.0 -> 1.0, 0.7 -> 0.7, 1e-05 -> 1e-05."""
    return repr(float(value)) if not float(value).is_integer() else f"{float(value):.1f}"
