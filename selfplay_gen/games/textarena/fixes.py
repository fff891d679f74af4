"""What the adapter adds to particular environments, each with why; every other environment is
played exactly as TextArena ships it.

- Kuhn Poker (TextArena 0.7.4, `KuhnPokerEnv`) tells the players that `[bet]` and `[call]` add a
  chip to the pot, but never adds it: every hand is won or lost for the one-chip ante whatever is
  bet, so betting means nothing and the game's equilibrium (worth -1/18 a hand to the first to
  act) is not its equilibrium. `before_step` puts the chip in, as the rules the players read say.
  The game's reward stays TextArena's (1 / -1 to the seat with more chips after all hands, 0 / 0
  for equal chips); `details` records each seat's chips, what Kuhn Poker's value is measured in.
"""

from __future__ import annotations

import re
from typing import Any

KUHN_MOVE = re.compile(r"\[(Check|Bet|Fold|Call)\]", re.IGNORECASE)  # KuhnPokerEnv.step's own


def _kuhn_bets_into_pot(env: Any, action: str) -> None:
    state = env.state.game_state
    match = KUHN_MOVE.search(action.strip())
    move = match.group(1).lower() if match else None
    if move in ("bet", "call") and move in state["current_legal_action_tree"]:
        state["pot"] += 1
        state["player_chips"][env.state.current_player_id] -= 1


def _kuhn_chips(env: Any) -> dict[str, Any]:
    """Each seat's chips after the hands played, and how many hands (KuhnPokerEnv antes for a hand
    after the last one before it sees the game is over: that ante is given back)."""
    state = env.state.game_state
    after_last = state["current_round"] > env.max_rounds
    chips = [state["player_chips"][seat] + (env.ante if after_last else 0) for seat in range(2)]
    return {"chips": chips, "hands": min(state["current_round"], env.max_rounds)}


_BEFORE_STEP = {"KuhnPokerEnv": _kuhn_bets_into_pot}
_DETAILS = {"KuhnPokerEnv": _kuhn_chips}


def before_step(env: Any, action: str) -> None:
    """Correct the environment for `action`, about to be stepped (see the module docstring)."""
    fix = _BEFORE_STEP.get(type(env).__name__)
    if fix is not None:
        fix(env, action)


def keeps_chips(env_class: str) -> bool:
    """Whether the environment class's `details` count each seat's chips and hands (Kuhn Poker's)."""
    return _DETAILS.get(env_class) is _kuhn_chips


def details(env: Any) -> dict[str, Any]:
    """The environment's own results a record keeps beside its rewards (none for most)."""
    read = _DETAILS.get(type(env).__name__)
    return read(env) if read is not None else {}
