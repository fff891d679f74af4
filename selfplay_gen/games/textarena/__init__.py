"""TextArena's two-player environments as games of this project: `--game textarena:ENV_ID`
(e.g. `textarena:KuhnPoker-v0`), with TextArena installed (`pip install "selfplay-gen[textarena]"`).

- `game.py`: the adapter (`game_for(env_id)` makes the game class of one environment; the seed is
  the instance; the environment checks moves, rewards and ends the game).
- `scripted.py`: scripted seats of known strength (`random`, TicTacToe's `minimax`, Kuhn Poker's
  `equilibrium`).
- `evaluation.py`: the generic evaluation with wins, draws and losses per seat order and ratings.
"""

from .game import TextArenaGame, TextArenaInstance, game_for

__all__ = ["TextArenaGame", "TextArenaInstance", "game_for"]
