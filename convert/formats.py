"""Output formats as projections of the spilled seat rows, given the ledger (one row per game,
indexed by game ordinal, with `dest`, `index`, each seat's reward `score0`/`score1`, ...).
A seat is always judged by its own training reward (`reward0`/`reward1`: its game reward with the
shaping `selfplay_gen.reward` adds): in a cooperative game both seats share it, in a competitive
game one seat's win is the other's loss.

- grpo: one row per group of K games of one instance and seat (see rows.py and groups.py).
- sft: `messages` (the player's whole conversation) for verl's `MultiTurnSFTDataset`, which
  trains on the assistant turns: each seat's best games of each group (expert iteration).
- dpo: per instance and seat, the game that seat did best in as `chosen` and the one it did
  worst in as `rejected`, in the conversational preference layout (`prompt` = the shared start,
  `chosen` / `rejected` = the rest of each conversation); no pair where the seat's reward never
  differs.

Each projection takes a spill batch and returns (destination, rows) pieces to write.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from selfplay_gen.seat_tokens import prompt_messages

from .groups import SPILLED, ranked_pairs
from .rows import GAME, GRPO_SCHEMA, MESSAGES, data_source, group_rows

TRAIN, VAL, DROP = 0, 1, -1

SFT_INFO = pa.struct(
    [
        ("index", pa.int64()),
        ("game_id", pa.string()),
        ("instance_id", pa.string()),
        ("player", pa.int64()),
        ("normalized_reward", pa.float64()),
    ]
)
SFT_SCHEMA = pa.schema([("messages", MESSAGES), ("data_source", pa.string()), ("extra_info", SFT_INFO)])
DPO_INFO = pa.struct(
    [
        ("index", pa.int64()),
        ("instance_id", pa.string()),
        ("player", pa.int64()),
        ("chosen_game_id", pa.string()),
        ("rejected_game_id", pa.string()),
        ("chosen_reward", pa.float64()),
        ("rejected_reward", pa.float64()),
    ]
)
DPO_SCHEMA = pa.schema(
    [
        ("prompt", MESSAGES),
        ("chosen", MESSAGES),
        ("rejected", MESSAGES),
        ("data_source", pa.string()),
        ("extra_info", DPO_INFO),
    ]
)

Pieces = list[tuple[int, pa.RecordBatch | pa.Table]]


def _by_destination(batch: pa.RecordBatch, dest: np.ndarray):
    """Per destination, the batch's runs of rows going there (zero-copy slices: the games of one
    instance are usually adjacent, so a batch holds a few runs) with their game ordinals.
    `dest[seat]` holds each game's destination for that seat's row."""
    games = batch.column(GAME).to_numpy()
    codes = dest[batch.column("extra_info").field("player").to_numpy(), games]
    edges = np.flatnonzero(np.diff(codes)) + 1
    runs = list(zip(np.r_[0, edges], np.r_[edges, len(codes)]))
    for code in (TRAIN, VAL):
        found = [(batch.slice(start, stop - start), games[start:stop]) for start, stop in runs if codes[start] == code]
        if found:
            yield code, found


class GrpoRows:
    """Holds each group's seat rows back until the last of them has streamed past, then writes
    the group's row. The games of one instance are usually adjacent in the file, so few groups
    wait at a time."""

    schema = GRPO_SCHEMA

    def __init__(self, ledger: pd.DataFrame, groups: pd.DataFrame):
        self.groups = groups
        self.wanted = {
            (game, int(group.player)): (g, j)
            for g, group in enumerate(groups.itertuples())
            for j, game in enumerate(group.games[: group.trained])
        }
        self.pending: dict[int, list] = {}

    def __call__(self, batch: pa.RecordBatch) -> Pieces:
        players = batch.column("extra_info").field("player").to_numpy()
        done = []
        for i, key in enumerate(zip(batch.column(GAME).to_numpy().tolist(), players.tolist())):
            if key not in self.wanted:
                continue
            g, j = self.wanted[key]
            slots = self.pending.setdefault(g, [None] * int(self.groups["trained"].iat[g]))
            slots[j] = batch.slice(i, 1)
            if all(s is not None for s in slots):
                done.append(g)
        pieces = []
        for code in (TRAIN, VAL):
            ready = [g for g in done if self.groups["dest"].iat[g] == code]
            if ready:
                seats = pa.Table.from_batches([s for g in ready for s in self.pending.pop(g)])
                pieces.append((code, group_rows(seats, self.groups.iloc[ready])))
        return pieces


class SftRows:
    schema = SFT_SCHEMA

    def __init__(self, ledger: pd.DataFrame):
        self.index = ledger["index"].to_numpy()
        self.sources = ledger["game"].map(data_source).to_numpy()  # each game's own (a file may hold a mix)
        self.dest = np.stack([np.where(ledger[f"keep{seat}"], ledger["dest"], DROP) for seat in (0, 1)])

    def __call__(self, batch: pa.RecordBatch) -> Pieces:
        return [
            (code, pa.Table.from_batches([self._rows(rows, games) for rows, games in runs], schema=SFT_SCHEMA))
            for code, runs in _by_destination(batch, self.dest)
        ]

    def _rows(self, rows: pa.RecordBatch, games: np.ndarray) -> pa.RecordBatch:
        extra = rows.column("extra_info")
        info = [pa.array(self.index[games], pa.int64())] + [extra.field(f.name) for f in list(SFT_INFO)[1:]]
        return pa.RecordBatch.from_arrays(
            [
                extra.field("messages"),
                pa.array(self.sources[games], pa.string()),
                pa.StructArray.from_arrays(info, fields=list(SFT_INFO)),
            ],
            schema=SFT_SCHEMA,
        )


# How DPO pairs a seat's games of one group: "reward", its best game against its worst; "outcome", as
# the rules judge a competitive game (a win above a tie above a loss, by the seat's margin over its
# partner): the game of the widest margin against the game of the narrowest, when the rules rank them
# apart (won against tied or lost, tied against lost). Against a fixed opponent a seat often wins, or
# loses, every game of a group; a group whose games the rules rank alike gives no pair. More pairs a
# group (`per_group`) take the next widest gaps: every (win, loss) of a group, not only its extremes.
DPO_PAIRS = ("reward", "outcome")


def _pairs(games: pd.DataFrame, seat: int, by: str, per_group: int = 1) -> pd.DataFrame:
    """(chosen, rejected) game labels, up to `per_group` a group of `games`, for `seat` (see `DPO_PAIRS`)."""
    if by == "reward":
        return ranked_pairs(games[f"reward{seat}"], games[f"reward{seat}"], games["group_no"], per_group)
    margin = games[f"score{seat}"] - games[f"score{1 - seat}"]
    return ranked_pairs(margin, np.sign(margin), games["group_no"], per_group)


class DpoRows:
    schema = DPO_SCHEMA

    def __init__(self, ledger: pd.DataFrame, by: str = "reward", per_group: int = 1):
        self.pairs: list[dict] = []
        self.wanted: dict[tuple[int, int], list[tuple[int, str]]] = {}  # (game, seat) -> its (pair, role)s
        self.unpaired = (
            0  # (group, seat)s with no pair: all scored the same (or, by outcome, all ranked alike by the rules)
        )
        for seat in (0, 1):
            games = ledger[ledger[f"status{seat}"].isin(SPILLED)]
            pairs = _pairs(games, seat, by, per_group)
            self.unpaired += games["group_no"].nunique() - games.loc[pairs["chosen"], "group_no"].nunique()
            for chosen, rejected in pairs.itertuples(index=False):
                pair = len(self.pairs)
                self.pairs.append({"seat": seat, "chosen": chosen, "rejected": rejected})
                self.wanted.setdefault((chosen, seat), []).append((pair, "chosen"))
                self.wanted.setdefault((rejected, seat), []).append((pair, "rejected"))
        self.ledger = ledger
        self.pending: dict[int, dict[str, list]] = {}

    def __call__(self, batch: pa.RecordBatch) -> Pieces:
        extra = batch.column("extra_info")
        keys = zip(batch.column(GAME).to_pylist(), extra.field("player").to_pylist())
        rows: dict[int, list[dict]] = {TRAIN: [], VAL: []}
        for i, key in enumerate(keys):
            for pair, role in self.wanted.get(key, ()):
                halves = self.pending.setdefault(pair, {})
                halves[role] = extra.field("messages")[i].as_py()
                if len(halves) == 2:
                    del self.pending[pair]
                    code, row = self._row(self.pairs[pair], halves)
                    rows[code].append(row)
        return [(code, pa.Table.from_pylist(found, schema=DPO_SCHEMA)) for code, found in rows.items() if found]

    def _row(self, pair: dict, halves: dict[str, list]) -> tuple[int, dict]:
        chosen, rejected = self.ledger.loc[pair["chosen"]], self.ledger.loc[pair["rejected"]]
        starts = [prompt_messages(halves[role]) for role in ("chosen", "rejected")]
        shared = 0
        while shared < min(map(len, starts)) and starts[0][shared] == starts[1][shared]:
            shared += 1
        return int(chosen["dest"]), {
            "prompt": halves["chosen"][:shared],
            "chosen": halves["chosen"][shared:],
            "rejected": halves["rejected"][shared:],
            "data_source": data_source(chosen["game"]),
            "extra_info": {
                "index": int(chosen["index"]),
                "instance_id": chosen["instance_id"],
                "player": pair["seat"],
                "chosen_game_id": chosen["game_id"],
                "rejected_game_id": rejected["game_id"],
                "chosen_reward": float(chosen[f"score{pair['seat']}"]),
                "rejected_reward": float(rejected[f"score{pair['seat']}"]),
            },
        }


FORMATS = {"grpo": GrpoRows, "sft": SftRows, "dpo": DpoRows}
