"""DialOp's reviewer-paper matching game (Lin et al. 2024): two area chairs each see part of an
8x8 table of reviewer-paper scores, talk, and must agree on an assignment of one reviewer per
paper; both seats get the agreed assignment's score over the best one's. Everything of the game
lives here: instances (`instance`, with DialOp's 134 human games in `data/`), the assignment
solver (`assignment`), moves, rules, prompts, scripted and teacher players, the record's own
parts, the grounding of stated values, its evaluation (`metrics`, `report`) and what the viewer
shows of a game (`view`)."""

from .game import Event, MatchingGame
from .instance import HUMAN_GAMES, PAPERS, REVIEWERS, Instance, score
from .moves import Move, parse_move, render_proposal
from .record import ACCEPTED, TERMINATIONS, MatchingRecord
from .scripted import ScriptedPlayer, TeacherPlayer

__all__ = [
    "ACCEPTED",
    "HUMAN_GAMES",
    "PAPERS",
    "REVIEWERS",
    "TERMINATIONS",
    "Instance",
    "Event",
    "MatchingGame",
    "MatchingRecord",
    "Move",
    "ScriptedPlayer",
    "TeacherPlayer",
    "parse_move",
    "render_proposal",
    "score",
]
