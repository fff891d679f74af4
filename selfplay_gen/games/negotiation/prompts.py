"""What negotiation seats read: the rules, the goal of the run's reward mode, their own values
(never the partner's), and the game's feedback."""

from __future__ import annotations

from .instance import ITEMS, TOTAL_VALUE, Instance, item_name
from .moves import EXAMPLE

GOALS = {
    "cooperative": "You and your partner share one score: your points plus your partner's points. "
    "Find the split that is worth the most to the two of you together.",
    "semi-competitive": "Your score is your own points. Get a good deal for yourself, "
    "but remember that without a deal you score 0.",
    "competitive": "Your score is your points minus your partner's points.",
}

# Skill levels a seat can be asked to play at (skill-conditioned play: one model standing in for a
# league of graded opponents). A level names how well the seat plays, never how: no prompt tells a
# seat to give way, so a level's play is what its training games taught it (`skill`: games whose
# outcomes fall in the level's quantile against fixed references, or the scripted negotiator at the
# strength in `SKILL_STRENGTHS`).
SKILLS = {
    "novice": "Play as a novice negotiator.",
    "intermediate": "Play as an intermediate negotiator.",
    "expert": "Play as an expert negotiator.",
}
SKILL_STRENGTHS = {"novice": 0.3, "intermediate": 0.6, "expert": 1.0}


def skill_of(strength: float) -> str:
    """The skill level whose scripted strength is nearest `strength` (ties to the lower level)."""
    return min(
        SKILL_STRENGTHS, key=lambda level: (round(abs(SKILL_STRENGTHS[level] - strength), 9), SKILL_STRENGTHS[level])
    )


RULES = """You and your partner are dividing {pool}. Each of you values the items privately: \
your values are below, and your partner's are different and hidden from you. The whole pool is \
worth {total} points to each of you.

{goal}{skill}

Each of your turns is exactly one move, starting with its tag:
[message] <text to your partner>
[propose] <the items you take>, for example: [propose] {example}
A proposal names every item with the number you take (0 for none). It is final and private: your \
partner is told that you proposed, not what, and must then make its own proposal, which ends the \
game. If the two proposals together take exactly the whole pool, each of you gets the points of \
the items you took; otherwise you both get 0. So agree on the split by messages before you propose. \
After {max_moves} moves without both proposals the game ends and you both get 0. Anything you write \
before the tag is private and never shown to your partner.

Your values: {values} (the whole pool: {sum} = {total} points)."""


def render_pool(counts) -> str:
    parts = [f"{n} {item_name(i, n)}" for i, n in enumerate(counts)]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def system_prompt(instance: Instance, seat: int, mode: str, max_moves: int, skill: str | None = None) -> str:
    """The seat's rules, goal and values; `skill` (a key of SKILLS) adds how well it is asked to play."""
    values = instance.values[seat]
    return RULES.format(
        pool=render_pool(instance.counts),
        total=TOTAL_VALUE,
        goal=GOALS[mode],
        skill=f" {SKILLS[skill]}" if skill else "",
        example=EXAMPLE,
        max_moves=max_moves,
        values=", ".join(f"{ITEMS[i]} {v} {'point' if v == 1 else 'points'} each" for i, v in enumerate(values)),
        sum=" + ".join(f"{n} x {v}" for n, v in zip(instance.counts, values)),
    )


FIRST_MOVE = "You move first. Make your move."
PARTNER_MOVED = "Partner: {move}"
PROPOSE_NOW = "Your partner's proposal is final and hidden from you. Make yours now: [propose] and the items you take."
INVALID = "Invalid move: {error}. Your partner did not see it. Try again."
