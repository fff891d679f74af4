"""A third game, to show what adding one takes: this folder, and one registry line,
`games.register("sum", "games_toy.SumGame")` (a game shipped with the package would add it to
`selfplay_gen.games._TARGETS` instead). Nothing else in `selfplay_gen` or `convert` changes.

Each seat sees one private digit. A turn is `[say] <text>` (passes the turn) or `[answer] <N>`,
which ends the game: both seats score 1 when N is the sum of the two digits, else 0."""

from .game import SumGame, SumInstance

__all__ = ["SumGame", "SumInstance"]
