"""selfplay-gen: LLM self-play on DialOp's reviewer-paper matching game, for verl GRPO training.

The public API that other parts and user scripts rely on.
"""

from .game import Limits, MatchingGame, Outcome, StepResult
from .instance import PAPERS, REVIEWERS, Instance, score
from .moves import InvalidMove, Move, parse_move, render_proposal

__all__ = [
    "Instance",
    "InvalidMove",
    "Limits",
    "MatchingGame",
    "Move",
    "Outcome",
    "PAPERS",
    "REVIEWERS",
    "StepResult",
    "parse_move",
    "render_proposal",
    "score",
]
