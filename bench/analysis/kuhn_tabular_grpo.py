"""GRPO self-play on Kuhn Poker with a table for a policy: a CPU pre-screen of what the GPU runs vary.

The 135M model's online GRPO self-play on `textarena:KuhnPoker-v0` settles on always bet, always call
(`bench/results/default_loop_h200_2026-11-29/`). This plays the same training loop with the policy a
table of twelve probabilities, one per information set (`kuhn_strategy.NODES`), so that what the loop
itself does can be told from what the language model adds: KuhnPoker-v0's three-hand matches (seat 1
acts first in hands one and three), groups of 8 games of one instance sharing its deals, each seat's
rewards normalized within its group (GRPO), both seats trained, one on-policy update a batch of 16
instances, Adam on the table's logits, and optionally a KL penalty to the start (random legal play:
one half at every set), as verl's `use_kl_loss` adds it. The reward is the match's win or loss
(`outcome`, TextArena's) or each seat's chips won a hand (`chips`).

    python bench/analysis/kuhn_tabular_grpo.py [--steps 200] [--seeds 5] [--out DIR] [--card-weight W]
        [--arm chips:0.2 ...] [--at 24,48]

With `--card-weight W` the policy is no longer a free table: each information set's logit is a term shared by
the sets of its kind of decision (opening, after a check, facing a bet; four kinds, the card left out) plus W
times a term of its own. A language model's move tokens are such a shared term (one update raises `[bet]` after
any card), and W < 1 stands for a card the model reads only weakly; W = 1 keeps the shared term at full strength.

prints, for each arm (a reward and a KL coefficient; by default both rewards at KL 0, 0.1 and 0.5), each step's
exact values of the strategy (`kuhn_strategy.values`) at a few steps (0, 8, 16, 32, half the steps, the last,
and those of --at), averaged over seeds, and writes kuhn_tabular_grpo.md (and .json) to DIR. Runs that differ
only in --lr stand for one model trained at different learning rates: the step a run reaches the game's value
at, against the speed a GPU run's shares moved at, says how many steps that run would need.

    python bench/analysis/kuhn_tabular_grpo.py --filtered-imitation 4

plays filtered BC's loop instead, with a perfect imitator (`filtered_imitation`): each iteration keeps each
seat's first won match of 16 self-play matches of 4,096 instances, as `selfplay-convert --format sft
--top-fraction 0.0625` keeps, and the next table is the kept decisions' share of aggressive moves at each
information set. Iteration 1, from random play, is the ceiling of a format warm start on selected random games
(`warm.games_per_instance=16 warm.top_fraction=0.0625`).
"""

from __future__ import annotations

import argparse
import json
from itertools import permutations
from pathlib import Path

import numpy as np

from selfplay_gen.games.textarena import kuhn_strategy as kuhn
from selfplay_gen.games.textarena.game import OUTCOME, REWARD_MODES
from selfplay_gen.stats.report import markdown_table

HANDS, GROUP, BATCH = 3, 8, 16
FIRST = (1, 0, 1)  # the seat that acts first in each hand of KuhnPoker-v0
DEALS = list(permutations(range(3), 2))


def play_hand(p: np.ndarray, cards: tuple[int, int], first: int, rng: np.random.Generator):
    """(chips won by seat 0, [(seat, node, aggressive)]) of one hand with both seats playing `p`."""
    second = 1 - first
    moves = []

    def act(seat: int, is_first: bool, facing: bool) -> bool:
        node = kuhn.INDEX[(is_first, cards[seat], facing)]
        aggressive = bool(rng.random() < p[node])
        moves.append((seat, node, aggressive))
        return aggressive

    showdown = 1 if cards[0] > cards[1] else -1  # seat 0's sign at a showdown
    if act(first, True, False):  # bet
        won_by_first = 2 * (showdown if first == 0 else -showdown) if act(second, False, True) else 1
    elif act(second, False, False):  # check, bet
        if act(first, True, True):
            won_by_first = 2 * (showdown if first == 0 else -showdown)
        else:
            won_by_first = -1
    else:  # check, check
        won_by_first = showdown if first == 0 else -showdown
    return (won_by_first if first == 0 else -won_by_first), moves


def deal(rng: np.random.Generator) -> list[tuple[int, int]]:
    """An instance's cards, one deal a hand, which every match of its group plays."""
    return [DEALS[i] for i in rng.integers(0, len(DEALS), HANDS)]


def match(p: np.ndarray, deals: list[tuple[int, int]], rng: np.random.Generator) -> tuple[int, list]:
    """(chips won by seat 0, [(seat, node, aggressive)]) of one KuhnPoker-v0 match on `deals` with both seats
    playing `p`."""
    chips, moves = 0, []
    for hand, cards in enumerate(deals):
        won, made = play_hand(p, cards, FIRST[hand], rng)
        chips, moves = chips + won, moves + made
    return chips, moves


KINDS = sorted({(first, facing) for first, _, facing in kuhn.NODES})
KIND = np.array([KINDS.index((first, facing)) for first, _, facing in kuhn.NODES])  # each set's kind of decision


def adam_step(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, step: int, lr: float) -> None:
    """One ascent step of Adam (betas 0.9 and 0.999, eps 1e-8) on `param` along `grad`, its moments `m` and `v`
    updated in place: the optimizer of both table labs (`tictactoe_tabular_grpo.py` too)."""
    m *= 0.9
    m += 0.1 * grad
    v *= 0.999
    v += 0.001 * grad**2
    param += lr * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)


def train(
    reward: str, kl: float, steps: int, lr: float, seed: int, record_at: list[int], card_weight: float | None = None
) -> dict[int, np.ndarray]:
    """The policy's probabilities at each step of `record_at`: a table's, or with `card_weight` the sets' logits
    `shared[kind] + card_weight * own[set]` (module docstring), both parts starting at random play."""
    rng = np.random.default_rng(seed)
    shared = card_weight is not None
    params = np.zeros(len(KINDS) * shared + len(kuhn.NODES))
    m, v = np.zeros_like(params), np.zeros_like(params)

    def logits(params: np.ndarray) -> np.ndarray:
        return params[KIND] + card_weight * params[len(KINDS) :] if shared else params

    ref = np.zeros(len(kuhn.NODES))
    kept = {0: 1 / (1 + np.exp(-logits(params)))} if 0 in record_at else {}
    for step in range(1, steps + 1):
        theta = logits(params)
        p = 1 / (1 + np.exp(-theta))
        grad, decisions = np.zeros_like(theta), 0
        for _ in range(BATCH):
            deals = deal(rng)
            games = []
            for _ in range(GROUP):
                chips, moves = match(p, deals, rng)
                rewards = (np.sign(chips), -np.sign(chips)) if reward == OUTCOME else (chips / HANDS, -chips / HANDS)
                games.append((rewards, moves))
            for seat in range(2):
                r = np.array([g[0][seat] for g in games], dtype=float)
                if r.std() == 0:
                    continue  # a group with one reward teaches nothing (and verl drops none: its advantage is 0)
                advantage = (r - r.mean()) / (r.std() + 1e-6)
                for a, (_, moves) in zip(advantage, games, strict=True):
                    for s, node, aggressive in moves:
                        if s == seat:
                            grad[node] += a * (aggressive - p[node])
                            grad[node] -= kl * p[node] * (1 - p[node]) * (theta[node] - ref[node])
                            decisions += 1
        grad /= max(decisions, 1)
        if shared:  # the chain rule through logits()
            grad = np.concatenate([np.bincount(KIND, weights=grad, minlength=len(KINDS)), card_weight * grad])
        adam_step(params, grad, m, v, step, lr)
        if step in record_at:
            kept[step] = 1 / (1 + np.exp(-logits(params)))
    return kept


def filtered_imitation(
    iterations: int, instances: int = 4096, games_per_instance: int = 16, seed: int = 0
) -> list[np.ndarray]:
    """The table after each iteration of filtered BC with a perfect imitator, from random play: each seat keeps
    its first won match of each instance's `games_per_instance` (a lost or drawn match is never a
    demonstration), and each information set the kept matches never reached stays at one half."""
    rng = np.random.default_rng(seed)
    p, tables = np.full(len(kuhn.NODES), 0.5), []
    for _ in range(iterations):
        aggressive, decisions = np.zeros(len(kuhn.NODES)), np.zeros(len(kuhn.NODES))
        for _ in range(instances):
            deals = deal(rng)
            matches = [match(p, deals, rng) for _ in range(games_per_instance)]
            for seat, sign in ((0, 1), (1, -1)):
                won = next((moves for chips, moves in matches if sign * chips > 0), [])
                for s, node, bet in won:
                    if s == seat:
                        aggressive[node] += bet
                        decisions[node] += 1
        p = np.where(decisions > 0, aggressive / np.maximum(decisions, 1), 0.5)
        tables.append(p)
    return tables


def filtered_report(iterations: int) -> str:
    """Each iteration's exact values and shares of the aggressive move, as a markdown table."""
    tables = [np.full(len(kuhn.NODES), 0.5), *filtered_imitation(iterations)]
    head = ["policy", *kuhn.VALUES.values(), *(kuhn.node_name(node) for node in kuhn.NODES)]
    rows = []
    for i, table in enumerate(tables):
        values = kuhn.values(table)
        cells = [f"iteration {i}" if i else "random play", *(f"{float(values[k]):+.3f}" for k in kuhn.VALUES)]
        rows.append([*cells, *(f"{share:.2f}" for share in table)])
    rows.append(["equilibrium", *("" for _ in kuhn.VALUES), *(f"{share:.2f}" for share in kuhn.EQUILIBRIUM)])
    return markdown_table(head, rows)


def arm(text: str) -> tuple[str, float]:
    """`REWARD:KL` as (reward, KL coefficient), for --arm."""
    reward, _, kl = text.partition(":")
    if reward not in REWARD_MODES:
        raise argparse.ArgumentTypeError(f"reward {reward!r} is not {' or '.join(REWARD_MODES)}")
    try:
        return reward, float(kl or 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"KL {kl!r} is not a number") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05, help="Adam's step on the table's logits")
    parser.add_argument("--out", type=Path, default=Path("bench/results/kuhn_tabular_grpo"))
    parser.add_argument(
        "--card-weight", type=float, help="a shared term per kind of decision plus W times each set's own"
    )
    parser.add_argument(
        "--filtered-imitation", type=int, metavar="ITERATIONS", help="print filtered BC's loop instead (stdout)"
    )
    parser.add_argument(
        "--arm", action="append", type=arm, metavar="REWARD:KL",
        help="an arm to train (repeatable): outcome or chips, and the KL coefficient to random play",
    )  # fmt: skip
    parser.add_argument(
        "--at", type=lambda text: [int(step) for step in text.split(",")], default=[], metavar="STEPS",
        help="more steps to record, comma-separated",
    )  # fmt: skip
    args = parser.parse_args()
    if args.filtered_imitation:
        print(filtered_report(args.filtered_imitation))
        return
    record_at = sorted({s for s in (0, 8, 16, 32, args.steps // 2, args.steps, *args.at) if s <= args.steps})
    arms = args.arm or [(reward, kl) for kl in (0.0, 0.1, 0.5) for reward in REWARD_MODES]
    results = []
    for reward, kl in arms:
        runs = [train(reward, kl, args.steps, args.lr, seed, record_at, args.card_weight) for seed in range(args.seeds)]
        for step in record_at:
            tables = np.stack([run[step] for run in runs])
            values = {key: float(np.mean(v)) for key, v in kuhn.values(tables).items()}
            results.append({"reward": reward, "kl": kl, "step": step, **values, "shares": tables.mean(0).tolist()})
            print(reward, kl, step, {k: round(v, 3) for k, v in values.items()}, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kuhn_tabular_grpo.json").write_text(json.dumps(results, indent=1) + "\n")
    head = ["reward", "KL to the start", "step", *kuhn.VALUES.values()]
    rows = [[r["reward"], f"{r['kl']:g}", str(r["step"]), *(f"{r[k]:+.3f}" for k in kuhn.VALUES)] for r in results]
    last = [r for r in results if r["step"] == args.steps]
    shares_head = ["information set: move", "equilibrium", *(f"{r['reward']}, KL {r['kl']:g}" for r in last)]
    shares = [
        [kuhn.node_name(node), f"{kuhn.EQUILIBRIUM[i]:.2f}", *(f"{r['shares'][i]:.2f}" for r in last)]
        for i, node in enumerate(kuhn.NODES)
    ]
    note = f"Shares of the aggressive move at step {args.steps} (mean over seeds):"
    lines = [markdown_table(head, rows), "", note, "", markdown_table(shares_head, shares)]
    (args.out / "kuhn_tabular_grpo.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
