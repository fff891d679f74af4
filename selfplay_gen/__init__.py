"""selfplay-gen: LLM self-play on two-seat dialogue games, for verl GRPO training.

The public API that other parts and user scripts rely on: the game registry and the protocol
every game follows. Each game's own API lives in its package (`selfplay_gen.games.<name>`).
"""

from .games import GameConfig, get, names
from .games.base import Game, InvalidMove, Limits, Observation, Outcome, StepResult

__all__ = ["Game", "GameConfig", "InvalidMove", "Limits", "Observation", "Outcome", "StepResult", "get", "names"]
