"""Output formats as projections of the spilled seat rows, given the ledger (one row per game,
indexed by game ordinal, with `dest`, `index`, `advantage`, `reward`, ...).

- grpo: the rows themselves with their group values (see rows.py).
- sft: `messages` (the player's whole conversation) for verl's `MultiTurnSFTDataset`, which
  trains on the assistant turns: the best games of each group (expert iteration).
- dpo: per instance and seat, the best game as `chosen` and the worst as `rejected`, in the
  conversational preference layout (`prompt` = the shared start, `chosen` / `rejected` = the
  rest of each conversation); groups without a reward difference give no pair.

Each projection takes a spill batch and returns (destination, rows) pieces to write.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from .groups import extremes
from .rows import DATA_SOURCE, GAME, GRPO_SCHEMA, MESSAGES, with_group_values
from .tokens import prompt_messages

TRAIN, VAL, DROP = 0, 1, -1

SFT_INFO = pa.struct([("index", pa.int64()), ("game_id", pa.string()), ("instance_id", pa.string()),
                      ("player", pa.int64()), ("normalized_reward", pa.float64())])
SFT_SCHEMA = pa.schema([("messages", MESSAGES), ("data_source", pa.string()), ("extra_info", SFT_INFO)])
DPO_INFO = pa.struct([("index", pa.int64()), ("instance_id", pa.string()), ("player", pa.int64()),
                      ("chosen_game_id", pa.string()), ("rejected_game_id", pa.string()),
                      ("chosen_reward", pa.float64()), ("rejected_reward", pa.float64())])
DPO_SCHEMA = pa.schema([("prompt", MESSAGES), ("chosen", MESSAGES), ("rejected", MESSAGES),
                        ("data_source", pa.string()), ("extra_info", DPO_INFO)])

Pieces = list[tuple[int, pa.RecordBatch | pa.Table]]


def _by_destination(batch: pa.RecordBatch, dest: np.ndarray):
    """Per destination, the batch's runs of rows going there (zero-copy slices: the games of one
    instance are usually adjacent, so a batch holds a few runs) with their game ordinals."""
    games = batch.column(GAME).to_numpy()
    codes = dest[games]
    edges = np.flatnonzero(np.diff(codes)) + 1
    runs = list(zip(np.r_[0, edges], np.r_[edges, len(codes)]))
    for code in (TRAIN, VAL):
        found = [(batch.slice(start, stop - start), games[start:stop]) for start, stop in runs if codes[start] == code]
        if found:
            yield code, found


class GrpoRows:
    schema = GRPO_SCHEMA

    def __init__(self, ledger: pd.DataFrame):
        self.dest, self.index, self.advantage = (ledger[c].to_numpy() for c in ("dest", "index", "advantage"))

    def __call__(self, batch: pa.RecordBatch) -> Pieces:
        return [(code, pa.Table.from_batches([with_group_values(rows, self.index[games], self.advantage[games])
                                              for rows, games in runs]))
                for code, runs in _by_destination(batch, self.dest)]


class SftRows:
    schema = SFT_SCHEMA

    def __init__(self, ledger: pd.DataFrame):
        self.dest, self.index = ledger["dest"].to_numpy(), ledger["index"].to_numpy()

    def __call__(self, batch: pa.RecordBatch) -> Pieces:
        return [(code, pa.Table.from_batches([self._rows(rows, games) for rows, games in runs], schema=SFT_SCHEMA))
                for code, runs in _by_destination(batch, self.dest)]

    def _rows(self, rows: pa.RecordBatch, games: np.ndarray) -> pa.RecordBatch:
        extra = rows.column("extra_info")
        info = [pa.array(self.index[games], pa.int64())] + [extra.field(f.name) for f in list(SFT_INFO)[1:]]
        return pa.RecordBatch.from_arrays(
            [extra.field("messages"), rows.column("data_source"), pa.StructArray.from_arrays(info, fields=list(SFT_INFO))],
            schema=SFT_SCHEMA)


class DpoRows:
    schema = DPO_SCHEMA

    def __init__(self, ledger: pd.DataFrame):
        live = ledger[ledger["dest"] != DROP]
        self.pairs: list[dict] = []
        self.wanted: dict[tuple[int, int], tuple[int, str]] = {}   # (game, seat) -> (pair, role)
        self.unpaired = 0      # (group, seat)s whose games all scored the same
        for seat in (0, 1):
            games = live[live[f"seat{seat}"]]
            self.unpaired += games["group_no"].nunique()
            for chosen, rejected in extremes(games["reward"], games["group_no"]).itertuples(index=False):
                pair = len(self.pairs)
                self.pairs.append({"seat": seat, "chosen": chosen, "rejected": rejected})
                self.wanted[(chosen, seat)] = (pair, "chosen")
                self.wanted[(rejected, seat)] = (pair, "rejected")
                self.unpaired -= 1
        self.ledger = ledger
        self.pending: dict[int, dict[str, list]] = {}

    def __call__(self, batch: pa.RecordBatch) -> Pieces:
        extra = batch.column("extra_info")
        keys = zip(batch.column(GAME).to_pylist(), extra.field("player").to_pylist())
        rows: dict[int, list[dict]] = {TRAIN: [], VAL: []}
        for i, key in enumerate(keys):
            if key not in self.wanted:
                continue
            pair, role = self.wanted[key]
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
            "data_source": DATA_SOURCE,
            "extra_info": {"index": int(chosen["index"]), "instance_id": chosen["instance_id"], "player": pair["seat"],
                           "chosen_game_id": chosen["game_id"], "rejected_game_id": rejected["game_id"],
                           "chosen_reward": float(chosen["reward"]), "rejected_reward": float(rejected["reward"])},
        }


FORMATS = {"grpo": GrpoRows, "sft": SftRows, "dpo": DpoRows}
