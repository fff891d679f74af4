"""How far does imitating one's own wins take TicTacToe from random play? A tabular ceiling for filtered BC.

Expert iteration with a perfect imitator: each iteration plays `games_per_instance` self-play games of the
current policy per instance, keeps each seat's first win among them (what `selfplay-convert --format sft
--top-fraction 1/N` keeps: a draw or a loss scores 0 or less and is never a demonstration), and the next policy
plays each position as the kept games did there, in proportion, and at random where they never went. Iteration 1,
from random play, is what a format warm start on selected random games (`warm.games_per_instance=16
warm.top_fraction=0.0625`) would reach if the model imitated its data exactly. Each policy is scored against random
play and against minimax (the project's own search, `selfplay_gen.games.textarena.scripted`), in each seat.

    python bench/analysis/tictactoe_filtered_imitation.py --iterations 3 --instances 4096
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable

import click

from selfplay_gen.games.textarena.scripted import free_cells, minimax_moves, other_mark, place, won
from selfplay_gen.stats.report import markdown_table

Policy = Callable[[str, str, random.Random], int]  # (cells, mark to move, rng) -> cell
EMPTY, FIRST = "." * 9, "X"  # X moves first (seat 0)


def play(first: Policy, second: Policy, rng: random.Random) -> tuple[str | None, list[tuple[str, str, int]]]:
    """The winner's mark (None for a draw) and the game's (cells, mark, cell) moves."""
    cells, mark, moves = EMPTY, FIRST, []
    while free_cells(cells):
        cell = (first if mark == FIRST else second)(cells, mark, rng)
        moves.append((cells, mark, cell))
        cells = place(cells, cell, mark)
        if won(cells):
            return mark, moves
        mark = other_mark(mark)
    return None, moves


def random_policy(cells: str, mark: str, rng: random.Random) -> int:
    return rng.choice(free_cells(cells))


def minimax(cells: str, mark: str, rng: random.Random) -> int:
    return rng.choice(minimax_moves(cells, mark))


# (measure, opponent, the results it counts)
OPPONENTS = (("win vs random", random_policy, {"win"}), ("non-losing vs minimax", minimax, {"win", "draw"}))


def imitation(kept: dict[tuple[str, str], Counter]) -> Policy:
    """Plays each position as the kept games did, in proportion; at random where they never went."""

    def policy(cells: str, mark: str, rng: random.Random) -> int:
        seen = kept.get((cells, mark))
        if not seen:
            return random_policy(cells, mark, rng)
        cells_, counts = zip(*sorted(seen.items()), strict=True)
        return rng.choices(cells_, weights=counts)[0]

    return policy


def filtered_iteration(policy: Policy, instances: int, games_per_instance: int, rng: random.Random) -> Policy:
    """The policy that imitates each seat's first win of each instance's self-play games."""
    kept: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for _ in range(instances):
        games = [play(policy, policy, rng) for _ in range(games_per_instance)]
        for mark in (FIRST, other_mark(FIRST)):
            win = next((moves for winner, moves in games if winner == mark), None)
            for cells, mover, cell in win or []:
                if mover == mark:
                    kept[cells, mark][cell] += 1
    return imitation(kept)


def scores(policy: Policy, games: int, rng: random.Random) -> dict[str, float]:
    """Wins against random play and non-losing games against minimax, moving first and second."""
    row = {}
    for name, opponent, counted in OPPONENTS:
        for seat, mark in ((0, FIRST), (1, other_mark(FIRST))):
            pair = (policy, opponent) if seat == 0 else (opponent, policy)
            results: Counter[str] = Counter()
            for _ in range(games):
                winner, _ = play(*pair, rng)
                results["draw" if winner is None else "win" if winner == mark else "loss"] += 1
            row[f"{name}, seat {seat}"] = sum(results[k] for k in counted) / games
    return row


@click.command(help=__doc__)
@click.option("--iterations", default=3, show_default=True)
@click.option("--instances", default=4096, show_default=True, help="Groups of self-play games an iteration.")
@click.option("--games-per-instance", default=16, show_default=True, help="N: each seat keeps its first win of N.")
@click.option("--eval-games", default=4000, show_default=True, help="Games per seat and opponent for each score.")
@click.option("--seed", default=0, show_default=True)
def main(iterations: int, instances: int, games_per_instance: int, eval_games: int, seed: int) -> None:
    rng = random.Random(seed)
    policy: Policy = random_policy
    rows = [("random play", scores(policy, eval_games, rng))]
    for i in range(1, iterations + 1):
        policy = filtered_iteration(policy, instances, games_per_instance, rng)
        rows.append((f"iteration {i}", scores(policy, eval_games, rng)))
    header = ["policy", *rows[0][1]]
    click.echo(markdown_table(header, [[name, *(f"{v:.3f}" for v in row.values())] for name, row in rows]))


if __name__ == "__main__":
    main()
