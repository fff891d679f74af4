"""A games file to training parquet, in two streaming passes so memory stays flat whatever the
input size.

Pass 1 parses each game once, decides whether it can be trained on (excluded games are counted
by reason), and spills its seat rows to a temporary Arrow file, keeping in memory only a small
ledger row per game. Groups, advantages, the split and the format's selection are then
computed on the ledger. Pass 2 streams the spill into the outputs, filling in group values
column-wise. Outputs are renamed into place only once complete.
"""
from __future__ import annotations

import gc
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from selfplay_gen.atomic import write_json_atomic
from selfplay_gen.game import BACKEND_ERROR, CONTEXT_LENGTH, MAX_NEW_TOKENS, TOKEN_INVARIANT
from selfplay_gen.models import load_tokenizer
from selfplay_gen.records import read_games

from . import groups
from .formats import DROP, FORMATS, TRAIN, VAL
from .rows import SPILL_SCHEMA, RowBatch
from .split import validation_instances
from .tokens import RETOKENIZED, TokenInvariantError, seat_tokens
from .writer import ParquetOutput, Spill

OUTPUTS = {"train": "train.parquet", "val": "val.parquet", "summary": "convert_summary.json"}
LIMIT_STOPS = (MAX_NEW_TOKENS, CONTEXT_LENGTH)   # turns that ended the game by running too long
EXAMPLES = 10       # excluded games and invalid lines quoted in the summary


class ConvertError(ValueError):
    """Input or options that cannot be converted; the message says where and why."""


@dataclass(frozen=True)
class Options:
    format: str = "grpo"
    group_by: str = "instance"          # "instance" (K games of one table) or "game" (its two seats)
    normalize: str = "mean-std"
    drop_constant_groups: bool = False
    val_fraction: float = 0.1
    seed: int = 0
    top_fraction: float = 0.25          # sft: share of each group's games kept
    max_prompt_tokens: int | None = None
    max_response_tokens: int | None = None
    model: str | None = None            # tokenizer for seats without ids; None = the embedded model
    skip_invalid: bool = False
    valid_move_bonus: float = 0.0       # training reward += bonus x the game's share of valid moves
    batch_rows: int = 256

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ConvertError(f"format must be one of {sorted(FORMATS)}, got {self.format!r}")
        if self.group_by not in ("instance", "game"):
            raise ConvertError(f"group_by must be 'instance' or 'game', got {self.group_by!r}")
        if self.format == "dpo" and self.group_by == "game":
            raise ConvertError("dpo pairs the games of one instance; --group-by game leaves no pairs")
        if self.normalize not in groups.NORMALIZE:
            raise ConvertError(f"normalize must be one of {groups.NORMALIZE}, got {self.normalize!r}")
        if not 0 <= self.val_fraction < 1:
            raise ConvertError(f"the validation fraction must be in [0, 1), got {self.val_fraction}")
        if not 0 < self.top_fraction <= 1:
            raise ConvertError(f"the top fraction must be in (0, 1], got {self.top_fraction}")
        if self.valid_move_bonus < 0:
            raise ConvertError(f"the valid-move bonus must be >= 0, got {self.valid_move_bonus}")


def training_reward(record: dict, valid_move_bonus: float) -> float:
    """The reward GRPO groups are normalized on: the game's normalized reward, plus (opt-in) a
    bonus for the share of turns that were valid moves. A model too weak to ever agree scores 0
    in every game, so its groups are constant and carry no signal; the bonus rewards playing by
    the rules first. The game's own score (`normalized_reward`) is never changed."""
    reward = float(record["outcome"]["normalized_reward"])
    if valid_move_bonus:
        stats = record["stats"]
        attempts = stats["valid_moves"] + stats["invalid_moves"] + (record["outcome"]["termination"] in LIMIT_STOPS)
        reward += valid_move_bonus * stats["valid_moves"] / max(attempts, 1)
    return reward


def output_paths(games: Path, out_dir: Path | None) -> dict[str, Path]:
    out_dir = Path(out_dir) if out_dir is not None else Path(games).parent
    return {key: out_dir / name for key, name in OUTPUTS.items()}


def convert(games: str | Path, out_dir: str | Path | None = None, options: Options = Options(),
            overwrite: bool = False) -> dict:
    """Convert `games` and return the summary (also written next to the outputs)."""
    games = Path(games)
    paths = output_paths(games, out_dir)
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise ConvertError(f"{', '.join(existing)} already exists; pass --overwrite to replace it")
    paths["train"].parent.mkdir(parents=True, exist_ok=True)
    with _collector_paused(), Spill(paths["train"], SPILL_SCHEMA) as spill:
        ledger, facts = _read(games, spill, options)
        facts["index_from"] = _plan(ledger, options)
        project = FORMATS[options.format](ledger)
        with ParquetOutput(paths["train"], project.schema) as train, ParquetOutput(paths["val"], project.schema) as val:
            outputs = {TRAIN: train, VAL: val}
            for batch in spill.batches():
                for code, rows in project(batch):
                    outputs[code].write(rows)
            if not train.rows:
                raise ConvertError(f"{games}: no training rows are left (games excluded: {dict(facts['excluded'])}, "
                                   f"groups dropped: {int((ledger['dest'] == DROP).sum())} games)")
            train.commit()
            val.commit()
    summary = _summary(games, paths, options, ledger, facts, project, {"train": train.rows, "val": val.rows})
    write_json_atomic(paths["summary"], summary)
    return summary


@contextmanager
def _collector_paused():
    """Parsed records hold no reference cycles, yet allocating their containers triggers the
    cyclic collector over and over (a third of pass 1's time): pause it while converting."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(games: Path, spill: Spill, options: Options) -> tuple[pd.DataFrame, dict]:
    """Pass 1: check every game, spill the rows of the usable ones, return the ledger."""
    errors: list[str] = []
    excluded, examples, seen = Counter(), [], set()
    ledger: list[tuple] = []
    records = idle_seats = retokenized_rows = 0
    batch = RowBatch()
    for record in read_games(games, skip_invalid=True, errors=errors):
        records += 1
        reason, detail, seats = _examine(record, seen, options)
        if reason is not None:
            excluded[reason] += 1
            if len(examples) < EXAMPLES:
                examples.append(f"{record['game_id']}: {reason}" + (f" ({detail})" if detail else ""))
            continue
        game = len(ledger)
        ledger.append((record["game_id"], record["instance_id"], record["group"],
                       training_reward(record, options.valid_move_bonus),
                       float(record["outcome"]["normalized_reward"]), seats[0] is not None, seats[1] is not None))
        for seat, tokens in enumerate(seats):
            if tokens is None:
                idle_seats += 1
                continue
            retokenized_rows += tokens.source == RETOKENIZED
            batch.add(game, record, seat, tokens)
        if len(batch) >= options.batch_rows:
            spill.write(batch.take())
    if len(batch):
        spill.write(batch.take())
    if errors and not options.skip_invalid:
        raise ConvertError(f"{len(errors)} invalid line(s) in {games}; the first: {errors[0]} "
                           "(--skip-invalid converts the rest)")
    if not records:
        raise ConvertError(f"{games}: no games" + (f" ({len(errors)} invalid lines)" if errors else " (empty input)"))
    columns = ["game_id", "instance_id", "record_group", "reward", "normalized_reward", "seat0", "seat1"]
    facts = {"records": records, "invalid_lines": len(errors), "invalid_examples": errors[:EXAMPLES],
             "excluded": excluded, "excluded_examples": examples, "seats_without_turns": idle_seats,
             "retokenized_rows": retokenized_rows}
    return pd.DataFrame(ledger, columns=columns), facts


def _examine(record: dict, seen: set[str], options: Options) -> tuple[str | None, str, list]:
    """Why a game cannot be trained on (None if it can) with details, and each seat's tokens."""
    if record["game_id"] in seen:
        return "duplicate_game_id", "", []
    seen.add(record["game_id"])
    failure, termination = record.get("failure"), record["outcome"]["termination"]
    if failure:
        failure = failure if isinstance(failure, dict) else {"reason": failure}
        return f"failed:{failure.get('reason')}", failure.get("detail", ""), []
    if termination in (BACKEND_ERROR, TOKEN_INVARIANT):
        return f"failed:{termination}", "", []
    try:
        seats = [seat_tokens(seat, lambda: load_tokenizer(options.model)) for seat in record["players"]]
    except TokenInvariantError as err:
        return "token_invariant", str(err), []
    used = [t for t in seats if t is not None]
    longest_prompt, longest_response = (max((getattr(t, k) for t in used), default=0)
                                        for k in ("prompt_len", "response_len"))
    if options.max_prompt_tokens is not None and longest_prompt > options.max_prompt_tokens:
        return "prompt_too_long", f"{longest_prompt} > {options.max_prompt_tokens} tokens", []
    if options.max_response_tokens is not None and longest_response > options.max_response_tokens:
        return "response_too_long", f"{longest_response} > {options.max_response_tokens} tokens", []
    return None, "", seats


def _plan(ledger: pd.DataFrame, options: Options) -> str:
    """Groups, advantages, split and selection, as ledger columns (`dest`: TRAIN, VAL or DROP).
    Returns where the group index came from: the records' `group` where it names instances one to
    one, else the rank of the sorted group key (e.g. files of several runs concatenated)."""
    keys = ledger["instance_id"] if options.group_by == "instance" else ledger["game_id"]
    ledger["group_no"] = pd.factorize(keys, sort=True)[0]
    one_to_one = (ledger.groupby("instance_id")["record_group"].nunique().max() == 1
                  and ledger.groupby("record_group")["instance_id"].nunique().max() == 1)
    index_from = "record group" if options.group_by == "instance" and one_to_one else "sorted key"
    ledger["index"] = ledger["record_group"] if index_from == "record group" else ledger["group_no"]
    ledger["constant"] = groups.constant(ledger["reward"], ledger["group_no"])
    ledger["advantage"] = groups.advantages(ledger["reward"], ledger["group_no"], options.normalize)
    val = validation_instances(ledger["instance_id"], options.val_fraction, options.seed)
    dest = np.where(ledger["instance_id"].isin(val), VAL, TRAIN)
    if options.drop_constant_groups:
        dest[ledger["constant"].to_numpy()] = DROP
    if options.format == "sft":
        dest[~groups.top(ledger["reward"], ledger["group_no"], options.top_fraction).to_numpy()] = DROP
    ledger["dest"] = dest
    return index_from


def _summary(games: Path, paths: dict, options: Options, ledger: pd.DataFrame, facts: dict, project,
             rows: dict) -> dict:
    by_group = ledger.groupby("group_no")
    constant_groups = int(by_group["constant"].first().sum())
    sizes = by_group.size()
    split = {name: {"rows": rows[name],
                    "games": int((ledger["dest"] == code).sum()),
                    "instances": int(ledger.loc[ledger["dest"] == code, "instance_id"].nunique())}
             for name, code in (("train", TRAIN), ("val", VAL))}
    summary = {
        "input": str(games),
        "outputs": {key: str(path) for key, path in paths.items()},
        "options": asdict(options),
        "records": facts["records"],
        "invalid_lines": facts["invalid_lines"],
        "invalid_examples": facts["invalid_examples"],
        "excluded": dict(facts["excluded"]),
        "excluded_examples": facts["excluded_examples"],
        "games_used": len(ledger),
        "seats_without_turns": facts["seats_without_turns"],
        "retokenized_rows": facts["retokenized_rows"],
        "groups": {"count": len(sizes), "constant": constant_groups,
                   "dropped_constant": constant_groups if options.drop_constant_groups else 0,
                   "games_per_group": {"min": int(sizes.min()), "mean": float(sizes.mean()), "max": int(sizes.max())},
                   "index_from": facts["index_from"]},
        "mean_normalized_reward": float(ledger["normalized_reward"].mean()),
        "mean_training_reward": float(ledger["reward"].mean()),
        "split": split,
    }
    if options.format == "dpo":
        summary["dpo"] = {"pairs": len(project.pairs), "unpaired_groups": project.unpaired}
    return summary
