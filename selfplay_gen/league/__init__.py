"""Competitive self-play's decisions, as pure functions the iteration calls: who is in the
opponent pool and how strong each is (`pool`), which opponent each game gets (`opponents`),
whether a new checkpoint replaces the previous one (`promotion`), what shows progress per
checkpoint (`progress`). Whether a game's skill-conditioned play follows its level is the game's own
measurement, in its package."""

from .opponents import choose_opponents, opponent_weights, stratified, win_probability, with_share
from .pool import SCRIPTED_PREFIX, League, Member, scripted_member
from .promotion import Promotion, promote

__all__ = [
    "SCRIPTED_PREFIX",
    "League",
    "Member",
    "Promotion",
    "choose_opponents",
    "opponent_weights",
    "promote",
    "scripted_member",
    "stratified",
    "win_probability",
    "with_share",
]
