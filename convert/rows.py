"""GRPO rows: one per seat of a game, in the columns verl 0.9.1's `RLHFDataset` reads (`prompt`,
`data_source`, `ability`, `reward_model`, `extra_info`, `agent_name`), carrying in `extra_info`
everything the replay agent loop needs to return the stored tokens of that perspective.

`extra_info` contract (the `selfplay_replay` agent loop reads exactly these keys):

    index              int     GRPO group index: the instance's (the record's `group`), or the
                               game's with --group-by game. verl passes it through as `index`.
    game_id            str     e.g. "seed-7/3"
    instance_id        str     e.g. "seed-7"
    player             int     seat of this perspective, 0 or 1
    raw_reward         float   accepted total of the unscaled table, 0 without agreement
    normalized_reward  float   raw / best in [0, 1]: the reward that groups are normalized on
    advantage          float   normalized_reward made relative to its group (--normalize);
                               the replay loop returns it as `reward_score`
    agreed             bool
    termination        str     how the game ended ("accepted", "max_moves", ...)
    messages           list[{role, content}]  the player's whole conversation, from its view
    token_ids          list[int]  the player's whole final context
    prompt_len         int     token_ids[:prompt_len] is the initial prompt (system + first user
                               message, = the first turn's prompt_len); the rest is the response
    response_mask      list[int]  len(token_ids) - prompt_len entries over token_ids[prompt_len:]:
                               1 = an id this player produced (trained), 0 = partner moves,
                               game feedback and template ids (context)
    logprobs           list[float] | null  same length as response_mask: the sampling logprob of
                               each own id, 0 elsewhere; null when the backend returned none
                               or the ids were re-encoded
    tokens_source      str     "sampled" (ids exactly as sampled) or "retokenized" (scripted
                               seat, or a server that returned text: off-policy)
    num_turns          int     the player's own turns

So the replay loop returns prompt_ids = token_ids[:prompt_len], response_ids =
token_ids[prompt_len:], response_mask, response_logprobs = logprobs, reward_score = advantage.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from selfplay_gen.records import OUTCOME_FIELDS

from .tokens import SeatTokens, prompt_messages

DATA_SOURCE = "selfplay_matching"
ABILITY = "cooperative_negotiation"
AGENT_NAME = "selfplay_replay"

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
EXTRA_INFO = pa.struct([
    ("index", pa.int64()), ("game_id", pa.string()), ("instance_id", pa.string()), ("player", pa.int64()),
    ("raw_reward", pa.float64()), ("normalized_reward", pa.float64()), ("advantage", pa.float64()),
    ("agreed", pa.bool_()), ("termination", pa.string()), ("messages", MESSAGES),
    ("token_ids", pa.list_(pa.int32())), ("prompt_len", pa.int64()), ("response_mask", pa.list_(pa.int8())),
    ("logprobs", pa.list_(pa.float32())), ("tokens_source", pa.string()), ("num_turns", pa.int64()),
])
GRPO_SCHEMA = pa.schema([
    ("prompt", MESSAGES), ("data_source", pa.string()), ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", EXTRA_INFO), ("agent_name", pa.string()),
])
GAME = "_game"      # spill-only column: the game's ordinal in the conversion's ledger
PROMPT_SIZE = "_prompt_messages"    # spill-only column standing for `prompt`: how many messages it takes
SPILL_SCHEMA = pa.schema([field for field in GRPO_SCHEMA if field.name != "prompt"]
                         + [pa.field(GAME, pa.int64()), pa.field(PROMPT_SIZE, pa.int32())])


def _offsets(lengths: list[int]) -> pa.Array:
    return pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())


def _lists(arrays: list[np.ndarray | None], value_type: pa.DataType) -> pa.Array:
    """A list column from per-row numpy arrays (None = a null row), without Python per-id work."""
    values = [a for a in arrays if a is not None]
    flat = np.concatenate(values) if values else np.zeros(0)
    nulls = np.array([a is None for a in arrays])
    return pa.ListArray.from_arrays(_offsets([0 if a is None else len(a) for a in arrays]), pa.array(flat, value_type),
                                    mask=pa.array(nulls) if nulls.any() else None)


def _messages(chats: list[list[dict]]) -> pa.Array:
    """A MESSAGES column, built from flat role and content columns (several times faster than
    converting the dicts)."""
    roles = pa.array([m["role"] for chat in chats for m in chat], pa.string())
    contents = pa.array([m["content"] for chat in chats for m in chat], pa.string())
    return pa.ListArray.from_arrays(_offsets([len(chat) for chat in chats]),
                                    pa.StructArray.from_arrays([roles, contents], fields=list(MESSAGES.value_type)))


class RowBatch:
    """Collects seat rows and hands them over as one Arrow record batch of SPILL_SCHEMA, with
    `index` and `advantage` still 0: they are known only once every game has been read. The
    spill leaves out what pass 2 can rebuild from the rest at memcpy speed: `logprobs` holds only
    those of the seat's own ids (the zeros in between would be a third of the spill's bytes) and
    `prompt` is the number of leading `messages` it takes. Keeps only what the rows need, so each
    record's bulk (its id lists) is freed while still in cache."""

    def __init__(self):
        self.rows: list[tuple] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, game: int, record: dict, seat: int, tokens: SeatTokens) -> None:
        self.rows.append((game, record["game_id"], record["instance_id"], seat, record["outcome"],
                          record["players"][seat]["messages"], tokens))

    def take(self) -> pa.RecordBatch:
        games, game_ids, instance_ids, seats, outcome, messages, tokens = zip(*self.rows)
        self.rows = []
        n = len(games)
        extra = {
            "index": pa.array(np.zeros(n, dtype=np.int64)),
            "game_id": pa.array(game_ids, pa.string()),
            "instance_id": pa.array(instance_ids, pa.string()),
            "player": pa.array(seats, pa.int64()),
            "raw_reward": pa.array([o["raw_reward"] for o in outcome], pa.float64()),
            "normalized_reward": pa.array([o["normalized_reward"] for o in outcome], pa.float64()),
            "advantage": pa.array(np.zeros(n)),
            "agreed": pa.array([o["agreed"] for o in outcome], pa.bool_()),
            "termination": pa.array([o["termination"] for o in outcome], pa.string()),
            "messages": _messages(messages),
            "token_ids": _lists([t.token_ids for t in tokens], pa.int32()),
            "prompt_len": pa.array([t.prompt_len for t in tokens], pa.int64()),
            "response_mask": _lists([t.own for t in tokens], pa.int8()),
            "logprobs": _lists([t.own_logprobs for t in tokens], pa.float32()),
            "tokens_source": pa.array([t.source for t in tokens], pa.string()),
            "num_turns": pa.array([t.num_turns for t in tokens], pa.int64()),
        }
        truth = [json.dumps({k: o[k] for k in OUTCOME_FIELDS}) for o in outcome]
        columns = {
            PROMPT_SIZE: pa.array([len(prompt_messages(m)) for m in messages], pa.int32()),
            "data_source": pa.array([DATA_SOURCE] * n, pa.string()),
            "ability": pa.array([ABILITY] * n, pa.string()),
            "reward_model": pa.StructArray.from_arrays([pa.array(["rule"] * n), pa.array(truth)],
                                                       fields=list(GRPO_SCHEMA.field("reward_model").type)),
            "extra_info": pa.StructArray.from_arrays([extra[f.name] for f in EXTRA_INFO], fields=list(EXTRA_INFO)),
            "agent_name": pa.array([AGENT_NAME] * n, pa.string()),
            GAME: pa.array(games, pa.int64()),
        }
        return pa.RecordBatch.from_arrays([columns[name] for name in SPILL_SCHEMA.names], schema=SPILL_SCHEMA)


def _spread(own_logprobs: pa.ListArray, response_mask: pa.ListArray) -> pa.ListArray:
    """Logprobs over the whole response (0 where the mask is 0) from those of the own ids only."""
    offsets = response_mask.offsets.to_numpy()
    has_logprobs = own_logprobs.is_valid().to_numpy(zero_copy_only=False)
    own = response_mask.flatten().to_numpy().view(np.bool_) & np.repeat(has_logprobs, np.diff(offsets))
    values = np.zeros(len(own), dtype=np.float32)
    values[own] = own_logprobs.flatten().to_numpy()
    return pa.ListArray.from_arrays(pa.array(offsets - offsets[0], pa.int32()), pa.array(values),
                                    mask=None if has_logprobs.all() else pa.array(~has_logprobs))


def _leading(messages: pa.ListArray, counts: np.ndarray) -> pa.ListArray:
    """The first `counts[i]` messages of each row."""
    starts = messages.offsets.to_numpy()[:-1] - messages.offsets[0].as_py()
    ends = np.cumsum(counts)
    taken = np.repeat(starts - ends + counts, counts) + np.arange(ends[-1] if len(ends) else 0)
    return pa.ListArray.from_arrays(_offsets(counts), messages.flatten().take(taken))


def with_group_values(batch: pa.RecordBatch, index: np.ndarray, advantage: np.ndarray) -> pa.RecordBatch:
    """A spill batch as GRPO rows: `extra_info.index` and `.advantage` filled in, `.logprobs` spread
    over the response, `prompt` rebuilt, the spill-only columns dropped."""
    extra = batch.column("extra_info")
    children = [extra.field(f.name) for f in EXTRA_INFO]
    children[EXTRA_INFO.get_field_index("index")] = pa.array(index, pa.int64())
    children[EXTRA_INFO.get_field_index("advantage")] = pa.array(advantage, pa.float64())
    children[EXTRA_INFO.get_field_index("logprobs")] = _spread(extra.field("logprobs"), extra.field("response_mask"))
    columns = {name: batch.column(name) for name in SPILL_SCHEMA.names}
    columns["prompt"] = _leading(extra.field("messages"), batch.column(PROMPT_SIZE).to_numpy())
    columns["extra_info"] = pa.StructArray.from_arrays(children, fields=list(EXTRA_INFO))
    return pa.RecordBatch.from_arrays([columns[name] for name in GRPO_SCHEMA.names], schema=GRPO_SCHEMA)
