"""Scripted seats of known strength for TextArena games, so that progress reads against fixed
references: `random` (any environment: a uniform choice among the moves the environment lists in
what the seat was told and accepts), `minimax` (TicTacToe-v0: perfect play, never loses) and
`equilibrium` (KuhnPoker-v0: a Nash equilibrium, worth -1/18 a hand to the player who acts first).

They read the game only as far as the seat may: its own messages, the board every player sees,
its own card.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol

import numpy as np

from ..base import ChatSeat, Seed


class TextArenaGame(Protocol):
    """What a scripted seat reads of the game it plays (`game.TextArenaGame`): the environment, its id,
    each seat's system prompt, and whether a move would be legal now."""

    env: Any
    env_id: str
    system: tuple[str, ...]

    def legal(self, text: str) -> bool: ...

    def answer(self, move: str) -> str: ...


# the environment class each exact policy plays (its rules as shipped, any id that makes one)
EXACT = {"minimax": "TicTacToeEnv", "equilibrium": "KuhnPokerEnv"}
POLICIES = ("random", *EXACT)
BRACKETED = re.compile(r"\[[^\[\]\n]{1,80}\]")


def scripted_player(game: TextArenaGame, seat: int, seed: Seed, policy: str) -> ChatSeat:
    if policy not in POLICIES:
        raise ValueError(f"a TextArena scripted player's policy is one of {', '.join(POLICIES)}, not {policy!r}")
    if policy != "random" and type(game.env).__name__ != EXACT[policy]:
        plays = EXACT[policy].removesuffix("Env")
        raise ValueError(f"the {policy} policy plays TextArena's {plays} environments, not {game.env_id}")
    kinds: dict[str, Callable[[TextArenaGame, int, np.random.Generator], ChatSeat]] = {
        "random": RandomPlayer,
        "minimax": MinimaxPlayer,
        "equilibrium": EquilibriumPlayer,
    }
    return kinds[policy](game, seat, np.random.default_rng(seed))


class _Seat(ChatSeat):
    def __init__(self, game: TextArenaGame, seat: int, rng: np.random.Generator):
        super().__init__(seat, game.system[seat])
        self.game, self.rng = game, rng

    async def respond(self) -> str:
        return self.game.answer(await self.choose())

    @abc.abstractmethod
    async def choose(self) -> str:
        """The move, as the environment takes it (`[bet]`)."""


class RandomPlayer(_Seat):
    """Uniform over the legal moves (tried on a copy of the environment) among, first, the
    bracketed moves in what the game (not a player) said in the seat's newest messages; else in
    everything the game told it, the rules included; else those with each number or one-letter
    placeholder of such a move (`[col x]`, `[1 3]`) replaced by 0 to 9 (two at most). An
    environment that names no move it takes gets `[pass]`, which it judges."""

    async def choose(self) -> str:
        players = {f"[{name}] " for pid, name in self.game.env.state.role_mapping.items() if pid >= 0}
        games_words = [_game_words(m["content"], players) for m in self.messages]
        newest = BRACKETED.findall(games_words[-1])
        told = BRACKETED.findall("\n".join(games_words))
        for candidates in (newest, told, [v for move in told for v in _variants(move)]):
            moves = [m for m in dict.fromkeys(candidates) if self.game.legal(m)]
            if moves:
                return str(moves[int(self.rng.integers(len(moves)))])
        return "[pass]"


def _game_words(content: str, players: set[str]) -> str:
    """The lines of a turn's messages that the game said (each message starts with its sender,
    `[GAME] ` or a player's name, as `TextArenaGame` renders them), without the senders."""
    kept, game = [], True
    for line in content.splitlines():
        if line.startswith("[GAME] "):
            game, line = True, line.removeprefix("[GAME] ")
        elif any(line.startswith(player) for player in players):
            game = False
        if game:
            kept.append(line)
    return "\n".join(kept)


SLOT = re.compile(r"\b(?:\d+|[a-zA-Z])\b")  # a number, or a one-letter placeholder such as x


def _variants(move: str) -> list[str]:
    """`move` with its first two slots (`SLOT`) each filled with 0 to 9."""
    slots = list(SLOT.finditer(move))[:2]
    filled = [move]
    for slot in reversed(slots):  # from the right, so earlier positions stay valid
        filled = [f[: slot.start()] + str(d) + f[slot.end() :] for f in filled for d in range(10)]
    return filled if slots else []


class MinimaxPlayer(_Seat):
    """TicTacToe by full search: a win soonest, else a draw, a loss as late as possible; equal
    moves chosen at random."""

    async def choose(self) -> str:
        board = self.game.env.state.game_state["board"]
        mine = "X" if self.seat == 1 else "O"  # TextArena's TicTacToe: player 1 is X
        cells = "".join(board[r][c] or "." for r in range(3) for c in range(3))
        moves = minimax_moves(cells, mine)
        return f"[{moves[int(self.rng.integers(len(moves)))]}]"


LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


# A TicTacToe position is its nine cells in reading order, "X", "O" or "." for a free one.


def other_mark(mark: str) -> str:
    return "O" if mark == "X" else "X"


def free_cells(cells: str) -> list[int]:
    return [i for i, c in enumerate(cells) if c == "."]


def place(cells: str, cell: int, mark: str) -> str:
    return cells[:cell] + mark + cells[cell + 1 :]


def won(cells: str) -> bool:
    """Whether a line is full of one mark: the player who just moved has won."""
    return any(cells[a] == cells[b] == cells[c] != "." for a, b, c in LINES)


def minimax_moves(cells: str, mark: str) -> list[int]:
    """The free cells of best play for `mark` to move, in order: a win soonest, else a draw, a loss as late as
    possible."""
    scores = {cell: -_value(place(cells, cell, mark), other_mark(mark)) for cell in free_cells(cells)}
    best = max(scores.values())
    return sorted(cell for cell, score in scores.items() if score == best)


@cache
def _value(cells: str, to_move: str) -> int:
    """The position's worth to `to_move`: 10 - moves made for a win, 0 a draw, below 0 a loss."""
    made = 9 - cells.count(".")
    if won(cells):
        return -(10 - made)  # the player who just moved has won
    if not free_cells(cells):
        return 0
    return max(-_value(place(cells, cell, to_move), other_mark(to_move)) for cell in free_cells(cells))


# Kuhn Poker's equilibrium family (Kuhn 1950): the first to act bluffs a jack with probability
# ALPHA in [0, 1/3], bets a king with 3 ALPHA and calls a bet with a queen with ALPHA + 1/3; the
# second bets a king, bluffs a jack after a check with 1/3 and calls with a queen with 1/3. Every
# member is worth -1/18 a hand to the first to act.
ALPHA = 1 / 3
JACK, QUEEN, KING = 0, 1, 2


def kuhn_aggression(card: int, first: bool, facing_bet: bool) -> float:
    """The probability of the aggressive move (bet, or call when facing a bet) for a player holding
    `card` (0 jack, 1 queen, 2 king) who acts `first` in the hand or not."""
    if facing_bet:  # call or fold
        return {JACK: 0.0, QUEEN: ALPHA + 1 / 3 if first else 1 / 3, KING: 1.0}[card]
    if first:  # the hand's first decision: bet or check
        return {JACK: ALPHA, QUEEN: 0.0, KING: 3 * ALPHA}[card]
    return {JACK: 1 / 3, QUEEN: 0.0, KING: 1.0}[card]  # after a check


class EquilibriumPlayer(_Seat):
    """Kuhn Poker's equilibrium strategy (`kuhn_aggression`), from its own card and the hand so far."""

    async def choose(self) -> str:
        state = self.game.env.state.game_state
        legal = state["current_legal_action_tree"]
        facing_bet = "call" in legal
        first = state["starting_player"] == self.seat
        aggressive = self.rng.random() < kuhn_aggression(state["player_cards"][self.seat], first, facing_bet)
        if facing_bet:
            return "[call]" if aggressive else "[fold]"
        return "[bet]" if aggressive else "[check]"
