"""Deal or No Deal (Lewis et al. 2017), as Liao, Tomlin & Klein (2024) play it with LLMs: two
seats divide a pool of books, hats and balls they value privately, talk, then each privately
proposes the share it takes; shares that add up to the pool pay each seat its points, anything
else pays 0. Rewards per run: cooperative, semi-competitive or competitive. Its evaluation
(`evaluation`: points, deals, cross-play wins), whether skill-conditioned play follows its level
(`skill`) and what the viewer shows of a game (`view`) live here too."""

from .game import AGREED, INCONSISTENT, Event, NegotiationGame
from .instance import ITEMS, REWARD_MODES, TOTAL_VALUE, Instance, consistent, points, render_share, rewards
from .moves import Move, parse_move, parse_share, stated_offer
from .scripted import ScriptedNegotiator

__all__ = [
    "AGREED",
    "INCONSISTENT",
    "ITEMS",
    "REWARD_MODES",
    "TOTAL_VALUE",
    "Event",
    "Instance",
    "Move",
    "NegotiationGame",
    "ScriptedNegotiator",
    "consistent",
    "parse_move",
    "parse_share",
    "points",
    "render_share",
    "rewards",
    "stated_offer",
]
