"""Groups: which games are compared with which. A group is K games of one instance (one table);
GRPO compares them from one seat at a time, since each seat has its own training reward and its
own tokens. verl normalizes the rewards within a group itself (`algorithm.adv_estimator=grpo`);
the converter only decides which games form a group and which groups are worth replaying.
"""

from __future__ import annotations

import math

import pandas as pd

from selfplay_gen.seat_tokens import RETOKENIZED, SAMPLED

# a seat row's status, besides SAMPLED and RETOKENIZED; OPPONENT: a seat `--seat` does not train;
# NO_VALID_MOVE: a seat that moved and never validly, which `--valid-moves` has nothing of to keep;
# UNSELECTED: a scripted seat outside its group's best, never tokenized since sft will not keep it
TOO_LONG, IDLE, OPPONENT, NO_VALID_MOVE = "too_long", "idle", "opponent", "no_valid_move"
UNSELECTED = "unselected"
SPILLED = (SAMPLED, RETOKENIZED)  # seat rows that have tokens within the limits


class GroupError(ValueError):
    """Games that cannot share a group; the message names the game."""


def constant(rewards: pd.Series, groups: pd.Series) -> pd.Series:
    """Per game: whether every game of its group has the same reward (no learning signal)."""
    by_group = rewards.groupby(groups)
    return by_group.transform("max") == by_group.transform("min")


def group_size(ledger: pd.DataFrame) -> int:
    """K when not given: the most common number of games per instance (the larger on a tie)."""
    counts = ledger.groupby("instance_id").size().value_counts()
    return int(counts[counts == counts.max()].index.max())


def grpo_groups(ledger: pd.DataFrame, k: int, keep_constant: bool) -> tuple[pd.DataFrame, dict]:
    """One row per GRPO group to write, and what was left out. An instance's games (in file
    order) form groups of exactly K; the fewer than K left over are dropped, since repeating
    games would weigh them twice in the group's mean and std. Each whole group is then looked at
    from each seat: dropped if its K rewards are equal (no signal, unless `keep_constant`) or if
    no game has a sampled row for that seat (scripted seats, too long). The rows list the
    sampled games first (`trained` of them), then the others, which still count in the mean."""
    chunk = ledger.groupby("instance_id", sort=False).cumcount() // k
    size = chunk.groupby([ledger["instance_id"], chunk]).transform("size")
    whole = ledger.assign(chunk=chunk)[size == k]
    counts = {
        "games_per_group": k,
        "incomplete_games": int((size < k).sum()),
        "constant": 0,
        "dropped_constant": 0,
        "without_sampled_seat": 0,
    }
    rows = []
    for (instance, part), games in whole.groupby(["instance_id", "chunk"], sort=False):
        _same_sampling(games)
        for seat in (0, 1):
            rewards = games[f"reward{seat}"]
            if rewards.max() == rewards.min():
                counts["constant"] += 1
                if not keep_constant:
                    counts["dropped_constant"] += 1
                    continue
            sampled = games[f"status{seat}"] == SAMPLED
            if not sampled.any():
                counts["without_sampled_seat"] += 1
                continue
            ordered = pd.concat([games[sampled], games[~sampled]])
            rows.append(
                {
                    "game": games["game"].iloc[0],
                    "index": int(games["index"].iloc[0]),
                    "group_id": f"{instance}/p{seat}" + (f"#{part}" if part else ""),
                    "instance_id": instance,
                    "player": seat,
                    "temperature": float(games["temperature"].iloc[0]),
                    "top_p": float(games["top_p"].iloc[0]),
                    "ground_truth": games["ground_truth"].iloc[0],
                    "dest": int(games["dest"].iloc[0]),
                    "trained": int(sampled.sum()),
                    "games": ordered.index.tolist(),
                    "game_ids": ordered["game_id"].tolist(),
                    "rewards": ordered[f"reward{seat}"].tolist(),
                    "normalized_rewards": ordered[f"score{seat}"].tolist(),
                    "terminations": ordered["termination"].tolist(),
                }
            )
    return pd.DataFrame(rows), counts


def _same_sampling(games: pd.DataFrame) -> None:
    """The games of a group must have been sampled alike: GRPO compares them as draws of one
    policy, and the trainer replays them with one temperature and top_p."""
    for name in ("temperature", "top_p"):
        values = games[name]
        if values.isna().any():
            raise GroupError(
                f"game {games['game_id'][values.isna()].iloc[0]!r}: its record has no settings.sampling.{name}"
            )
        if values.nunique() > 1:
            odd = values != values.iloc[0]
            raise GroupError(
                f"game {games['game_id'][odd].iloc[0]!r} was played with {name}={values[odd].iloc[0]}, "
                f"game {games['game_id'].iloc[0]!r} of its group with {name}={values.iloc[0]}"
            )


def top(rewards: pd.Series, groups: pd.Series, fraction: float) -> pd.Series:
    """Per game: among the best ceil(fraction * group size) of its group (ties broken by order in
    the file) and rewarded at all. A game with no agreement is never a demonstration."""
    rank = rewards.groupby(groups).rank(method="first", ascending=False)
    size = rewards.groupby(groups).transform("size")
    return (rank <= (size * fraction).map(math.ceil)) & (rewards > 0)


def ranked_pairs(keys: pd.Series, ranks: pd.Series, groups: pd.Series, per_group: int = 1) -> pd.DataFrame:
    """Up to `per_group` (chosen, rejected) index labels per group: two games whose `ranks` put the chosen
    above the rejected, the widest gap in `keys` first, then file order. One pair a group is its best game
    against its worst (the first in file order among equals); more pairs reuse games, so a group of eight
    with some wins and some losses gives a pair per (win, loss) instead of one in all."""
    chosen: list = []
    rejected: list = []
    for _, members in keys.groupby(groups):
        labels, key, rank = list(members.index), members.to_numpy(), ranks[members.index].to_numpy()
        apart = [(c, r) for c in range(len(labels)) for r in range(len(labels)) if rank[c] > rank[r]]
        apart.sort(key=lambda pair: (key[pair[1]] - key[pair[0]], pair))
        chosen += [labels[c] for c, _ in apart[:per_group]]
        rejected += [labels[r] for _, r in apart[:per_group]]
    return pd.DataFrame({"chosen": chosen, "rejected": rejected})
