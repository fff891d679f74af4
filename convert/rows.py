"""The row contracts: the seat rows that pass 1 spills (one per seat of a game) and the GRPO
rows built from them (one per group), in the columns verl 0.9.1's `RLHFDataset` reads
(`prompt`, `data_source`, `ability`, `reward_model`, `extra_info`, `agent_name`).

A GRPO row is one group: the K games of one instance seen from one seat. verl replays it with
`actor_rollout_ref.rollout.n=K`, the `selfplay_replay` loop hands game j to copy j, and verl's
own GRPO normalizes the K rewards within the row's uid. Its `extra_info` (what the loop reads):

    index               int     the instance's group index (the records' `group`)
    group_id            str     "<instance_id>/p<seat>", "#<chunk>" appended for the second and
                                later K games of an instance played more than K times
    instance_id         str
    player              int     the seat, 0 or 1
    temperature, top_p  float   the sampling settings every game of the group was played with
    game_ids            list[str]    the K games: the T trained ones first, then the others
    rewards             list[float]  K training rewards (convert.reward), what verl normalizes
    normalized_rewards  list[float]  K rewards of the seat in its games (`outcome.rewards`;
                                e.g. raw / best in [0, 1], or points)
    terminations        list[str]    K ways the games ended
    token_ids           list[list[int]]  T whole final contexts of the seat
    prompt_len          list[int]    T: token_ids[j][:prompt_len[j]] is game j's initial prompt
    response_mask       list[list[int]]  T, over token_ids[j][prompt_len[j]:]: 1 = an id the
                                seat sampled (trained), 0 = partner moves, feedback, template
    logprobs            list[list[float] | null]  T, same length as response_mask: sampling
                                logprob of each own id, 0 elsewhere; null if the backend sent none
    num_turns           list[int]    T: the seat's own turns
    messages            list[list[{role, content}]]  T conversations from the seat's view

Games j >= T count in the group's statistics but carry no tokens (their seat is too long for
training, re-tokenized, or never moved): the loop returns a fully masked trajectory with their
reward. `prompt` is game 0's initial chat (seat 1's differs from game to game, as it holds the
partner's opening move); `reward_model.ground_truth` holds the outcome's optima (`best_*`: e.g.
the best reward, or the best joint points). `data_source` names the game
(`selfplay_<game>`) and `ability` is the game's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from selfplay_gen import games
from selfplay_gen.records import Message, Record
from selfplay_gen.seat_tokens import SeatTokens, prompt_messages
from selfplay_gen.verl import data_source

AGENT_NAME = "selfplay_replay"

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
SEAT_INFO = pa.struct(
    [
        ("game_id", pa.string()),
        ("instance_id", pa.string()),
        ("player", pa.int64()),
        ("normalized_reward", pa.float64()),  # the seat's reward in the game
        ("messages", MESSAGES),
        ("token_ids", pa.list_(pa.int32())),
        ("prompt_len", pa.int64()),
        ("response_mask", pa.list_(pa.int8())),
        ("logprobs", pa.list_(pa.float32())),
        ("num_turns", pa.int64()),
    ]
)
GAME = "_game"  # the game's ordinal in the conversion's ledger
PROMPT_SIZE = "_prompt_messages"  # how many leading `messages` the seat's prompt takes
SPILL_SCHEMA = pa.schema([("extra_info", SEAT_INFO), (GAME, pa.int64()), (PROMPT_SIZE, pa.int32())])

PER_GAME = [
    ("game_ids", pa.string()),
    ("rewards", pa.float64()),
    ("normalized_rewards", pa.float64()),
    ("terminations", pa.string()),
]
PER_TRAINED = ["token_ids", "prompt_len", "response_mask", "logprobs", "num_turns", "messages"]
GROUP_INFO = pa.struct(
    [
        ("index", pa.int64()),
        ("group_id", pa.string()),
        ("instance_id", pa.string()),
        ("player", pa.int64()),
        ("temperature", pa.float64()),
        ("top_p", pa.float64()),
    ]
    + [(name, pa.list_(kind)) for name, kind in PER_GAME]
    + [(name, pa.list_(SEAT_INFO.field(name).type)) for name in PER_TRAINED]
)
GRPO_SCHEMA = pa.schema(
    [
        ("prompt", MESSAGES),
        ("data_source", pa.string()),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", GROUP_INFO),
        ("agent_name", pa.string()),
    ]
)


def valid_moves_chat(record: Record, seat: int) -> list[Message]:
    """`seat`'s chat with its valid moves alone: each invalid move left out with what the seat was told of
    it before it moved again (the error; nothing else happens between a seat's invalid move and its
    next), and the chat cut after its last valid move ([] if it made none). A seat's responses are its
    events other than stops, one for one and in order; a response that a stop cut short has no event,
    and the chat ends before it. The model's own valid responses, reasoning and all: a format start
    that teaches the grammar of moves without a teacher's play or a chosen outcome."""
    kinds = [event["kind"] for event in record["events"] if event["player"] == seat and event["kind"] != "stop"]
    chat: list[Message] = []
    kept = turn = 0
    told_of_invalid = False  # the messages since an invalid move: what the seat was told of it
    for message in record["players"][seat]["messages"]:
        if message["role"] == "assistant":
            told_of_invalid = turn >= len(kinds) or kinds[turn] == "invalid"
            turn += 1
            if not told_of_invalid:
                chat.append(message)
                kept = len(chat)
        elif not told_of_invalid:
            chat.append(message)
    return chat[:kept]


def ground_truth(record: Record) -> str:
    """What the game's reward is judged against: the outcome's optima (its `best_*` values)."""
    return json.dumps({k: v for k, v in record["outcome"].items() if k.startswith("best_")})


def _offsets(lengths: Sequence[int] | np.ndarray) -> pa.Array:
    return pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())


def _lists(arrays: list[np.ndarray | None], value_type: pa.DataType) -> pa.Array:
    """A list column from per-row numpy arrays (None = a null row), without Python per-id work."""
    values = [a for a in arrays if a is not None]
    flat = np.concatenate(values) if values else np.zeros(0)
    nulls = np.array([a is None for a in arrays])
    return pa.ListArray.from_arrays(
        _offsets([0 if a is None else len(a) for a in arrays]),
        pa.array(flat, value_type),
        mask=pa.array(nulls) if nulls.any() else None,
    )


def _messages(chats: Sequence[list[dict]]) -> pa.Array:
    """A MESSAGES column, built from flat role and content columns (several times faster than
    converting the dicts)."""
    roles = pa.array([m["role"] for chat in chats for m in chat], pa.string())
    contents = pa.array([m["content"] for chat in chats for m in chat], pa.string())
    return pa.ListArray.from_arrays(
        _offsets([len(chat) for chat in chats]),
        pa.StructArray.from_arrays([roles, contents], fields=list(MESSAGES.value_type)),
    )


class RowBatch:
    """Collects seat rows and hands them over as one Arrow record batch of SPILL_SCHEMA. The
    spill leaves out what pass 2 can rebuild from the rest at memcpy speed: `logprobs` holds only
    those of the seat's own ids (the zeros in between would be a third of the spill's bytes) and
    the prompt is the number of leading `messages` it takes. Keeps only what the rows need, so
    each record's bulk (its id lists) is freed while still in cache."""

    def __init__(self):
        self.rows: list[tuple] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, game: int, record: Record, seat: int, tokens: SeatTokens, chat: list[Message] | None = None) -> None:
        """`chat`: the seat's messages as its row holds them, where not all of its record's."""
        self.rows.append(
            (
                game,
                record["game_id"],
                record["instance_id"],
                seat,
                record["outcome"]["rewards"][seat],
                record["players"][seat]["messages"] if chat is None else chat,
                tokens,
            )
        )

    def take(self) -> pa.RecordBatch:
        games, game_ids, instance_ids, seats, rewards, messages, tokens = zip(*self.rows)
        self.rows = []
        extra = {
            "game_id": pa.array(game_ids, pa.string()),
            "instance_id": pa.array(instance_ids, pa.string()),
            "player": pa.array(seats, pa.int64()),
            "normalized_reward": pa.array(rewards, pa.float64()),
            "messages": _messages(messages),
            "token_ids": _lists([t.token_ids for t in tokens], pa.int32()),
            "prompt_len": pa.array([t.prompt_len for t in tokens], pa.int64()),
            "response_mask": _lists([t.own for t in tokens], pa.int8()),
            "logprobs": _lists([t.own_logprobs for t in tokens], pa.float32()),
            "num_turns": pa.array([t.num_turns for t in tokens], pa.int64()),
        }
        return pa.RecordBatch.from_arrays(
            [
                pa.StructArray.from_arrays([extra[f.name] for f in SEAT_INFO], fields=list(SEAT_INFO)),
                pa.array(games, pa.int64()),
                pa.array([len(prompt_messages(m)) for m in messages], pa.int32()),
            ],
            schema=SPILL_SCHEMA,
        )


def _spread(own_logprobs: pa.ListArray, response_mask: pa.ListArray) -> pa.ListArray:
    """Logprobs over the whole response (0 where the mask is 0) from those of the own ids only."""
    offsets = response_mask.offsets.to_numpy()
    has_logprobs = own_logprobs.is_valid().to_numpy(zero_copy_only=False)
    own = response_mask.flatten().to_numpy().view(np.bool_) & np.repeat(has_logprobs, np.diff(offsets))
    values = np.zeros(len(own), dtype=np.float32)
    values[own] = own_logprobs.flatten().to_numpy()
    return pa.ListArray.from_arrays(
        pa.array(offsets - offsets[0], pa.int32()),
        pa.array(values),
        mask=None if has_logprobs.all() else pa.array(~has_logprobs),
    )


def _leading(messages: pa.ListArray, counts: np.ndarray) -> pa.ListArray:
    """The first `counts[i]` messages of each row."""
    starts = messages.offsets.to_numpy()[:-1] - messages.offsets[0].as_py()
    ends = np.cumsum(counts)
    taken = np.repeat(starts - ends + counts, counts) + np.arange(ends[-1] if len(ends) else 0)
    return pa.ListArray.from_arrays(_offsets(counts), messages.flatten().take(taken))


def seat_prompts(seats: pa.Table) -> pa.ListArray:
    """Each spilled seat row's initial chat (its `prompt`)."""
    return _leading(seats.column("extra_info").combine_chunks().field("messages"), seats.column(PROMPT_SIZE).to_numpy())


def group_rows(seats: pa.Table, groups: pd.DataFrame) -> pa.Table:
    """GRPO rows from whole groups: `seats` holds their trained seat rows (spill rows), group
    after group in entry order, `trained` of them per group; `groups` has one row per group with
    the columns game, index, group_id, instance_id, player, temperature, top_p, ground_truth,
    trained and the K-lists of PER_GAME."""
    seats = seats.combine_chunks()
    extra = seats.column("extra_info").combine_chunks()
    sizes = groups["trained"].to_numpy()
    offsets = _offsets(sizes)
    trained = {name: extra.field(name) for name in PER_TRAINED}
    trained["logprobs"] = _spread(extra.field("logprobs"), extra.field("response_mask"))
    children = {
        name: pa.array(groups[name].tolist(), GROUP_INFO.field(name).type)
        for name in ("index", "group_id", "instance_id", "player", "temperature", "top_p")
    }
    children.update({name: pa.array(groups[name].tolist(), pa.list_(kind)) for name, kind in PER_GAME})
    children.update({name: pa.ListArray.from_arrays(offsets, column) for name, column in trained.items()})
    firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    n = len(groups)
    truth = groups["ground_truth"].tolist()
    return pa.Table.from_arrays(
        [
            seat_prompts(seats.take(firsts)),
            pa.array([data_source(game) for game in groups["game"]], pa.string()),
            pa.array([games.get(game).ability for game in groups["game"]], pa.string()),
            pa.StructArray.from_arrays(
                [pa.array(["rule"] * n), pa.array(truth)], fields=list(GRPO_SCHEMA.field("reward_model").type)
            ),
            pa.StructArray.from_arrays([children[f.name] for f in GROUP_INFO], fields=list(GROUP_INFO)),
            pa.array([AGENT_NAME] * n, pa.string()),
        ],
        schema=GRPO_SCHEMA,
    )
