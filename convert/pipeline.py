"""A games file to training parquet, in two streaming passes so memory stays flat whatever the
input size.

Pass 1 parses each game once, decides whether it can be trained on (excluded games are counted
by reason), and spills its seat rows to a temporary Arrow file, keeping in memory only a small
ledger row per game. Groups, the split and the format's selection are then computed on the
ledger. Pass 2 streams the spill into the outputs. Outputs are renamed into place only once
complete.
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
from selfplay_gen.evaluation.splits import TRAINING_STOP, evaluation_range
from selfplay_gen.games.base import end_of
from selfplay_gen.locking import Lock
from selfplay_gen.models import load_tokenizer
from selfplay_gen.records import Record, read_games
from selfplay_gen.reward import RewardTerms, joint_term, misstatement_term, own_plan_term, training_reward
from selfplay_gen.seat_tokens import RETOKENIZED, seat_tokens
from selfplay_gen.token_context import TokenInvariantError

from . import groups
from .formats import DPO_PAIRS, FORMATS, TRAIN, VAL, DpoRows, GrpoRows, SftRows
from .groups import IDLE, NO_VALID_MOVE, OPPONENT, SPILLED, TOO_LONG, UNSELECTED, GroupError
from .reward import BASELINES, per_seat_baseline
from .rows import SPILL_SCHEMA, RowBatch, ground_truth, valid_moves_chat
from .split import validation_instances
from .writer import SPILL, ParquetOutput, Spill, remove_stale

OUTPUTS = {"train": "train.parquet", "val": "val.parquet", "summary": "convert_summary.json"}
EXAMPLES = 10  # excluded games and invalid lines quoted in the summary


class ConvertError(ValueError):
    """Input or options that cannot be converted; the message says where and why."""


class NoRowsLeft(ConvertError):
    """Every game or group was left out, so there is nothing to train on. The command exits with its own
    status (`EXIT_NO_ROWS`), so a caller that can play more games (offline GRPO's rounds of dynamic
    sampling) tells it from bad input."""


EXIT_NO_ROWS = 3


@dataclass(frozen=True)
class Options:
    format: str = "grpo"
    group_size: int | None = None  # grpo: K games per group; None = the most common per instance
    keep_constant_groups: bool = False  # grpo: write groups whose K rewards are all equal
    val_fraction: float = 0.1
    seed: int = 0
    top_fraction: float = 0.25  # sft: share of each group's games kept
    max_prompt_tokens: int | None = None
    max_response_tokens: int | None = None
    model: str | None = None  # tokenizer for seats without ids; None = the embedded model
    skip_invalid: bool = False
    invalid_move_penalty: float = 0.0  # grpo: training reward -= penalty x the seat's share of invalid turns
    baseline: str = "group"  # grpo: "per-seat" subtracts each seat's mean training reward over the file
    seats: tuple[int, ...] = (0, 1)  # the seats whose rows are written (an opponent's are not)
    # of those, only the seats this model played (the record's settings.seatN.model): a league's games against
    # a frozen copy of the trained model train both seats, its games against other opponents seat 0 alone
    seats_of: str | None = None
    batch_rows: int = 256
    dpo_pairs: str = "reward"  # dpo: "outcome" pairs a game the seat won with one it lost (`DPO_PAIRS`)
    dpo_pairs_per_group: int = 1  # dpo: the most pairs of one (group, seat), widest gap first
    # grpo: write at most this many groups, the first in the file's order (DAPO's batch: games played in rounds
    # until enough groups differ keep the earliest rounds' groups); None: every group
    max_groups: int | None = None
    joint_weight: float = 0.0  # training reward += weight x the game's joint share of the best deal (`reward`)
    own_plan_weight: float = 0.0  # training reward += weight x the seat's own-plan share of the agreed outcome
    misstatement_penalty: float = 0.0  # training reward -= penalty x the seat's misstatements (`reward`)
    # sft: every seat's valid moves alone, whatever its game's reward (a format start from the model's own
    # responses, whatever they reason): `valid_moves_chat`
    valid_moves: bool = False

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ConvertError(f"format must be one of {sorted(FORMATS)}, got {self.format!r}")
        if self.group_size is not None and self.group_size < 2:
            raise ConvertError(f"a GRPO group needs at least 2 games, got group size {self.group_size}")
        if not 0 <= self.val_fraction < 1:
            raise ConvertError(f"the validation fraction must be in [0, 1), got {self.val_fraction}")
        if not 0 < self.top_fraction <= 1:
            raise ConvertError(f"the top fraction must be in (0, 1], got {self.top_fraction}")
        try:
            self.reward_terms()
        except ValueError as error:
            raise ConvertError(str(error)) from None
        if self.baseline not in BASELINES:
            raise ConvertError(f"the baseline must be one of {', '.join(BASELINES)}, got {self.baseline!r}")
        if self.baseline != "group" and self.format != "grpo":
            raise ConvertError(f"the {self.baseline} baseline shapes GRPO rewards; {self.format} does not use it")
        if self.dpo_pairs not in DPO_PAIRS:
            raise ConvertError(f"dpo pairs must be one of {', '.join(DPO_PAIRS)}, got {self.dpo_pairs!r}")
        if self.dpo_pairs_per_group < 1:
            raise ConvertError(f"dpo pairs per group must be at least 1, got {self.dpo_pairs_per_group}")
        if not self.seats or not set(self.seats) <= {0, 1}:
            raise ConvertError(f"the seats to train are some of 0 and 1, got {self.seats}")
        if self.valid_moves and self.format != "sft":
            raise ConvertError(f"valid moves select the chats of sft rows; {self.format} rows are whole games")
        if self.max_groups is not None and (self.max_groups < 1 or self.format != "grpo"):
            raise ConvertError(f"max groups is a positive number of GRPO groups, got {self.max_groups} ({self.format})")

    def reward_terms(self) -> RewardTerms:
        """The training reward's terms these options set (`selfplay_gen.reward`)."""
        return RewardTerms(
            self.invalid_move_penalty, self.joint_weight, self.own_plan_weight, self.misstatement_penalty
        )


def output_paths(games: Path, out_dir: Path | None) -> dict[str, Path]:
    out_dir = Path(out_dir) if out_dir is not None else Path(games).parent
    return {key: out_dir / name for key, name in OUTPUTS.items()}


def convert(
    games: str | Path, out_dir: str | Path | None = None, options: Options = Options(), overwrite: bool = False
) -> dict:
    """Convert `games` and return the summary (also written next to the outputs)."""
    games = Path(games)
    paths = output_paths(games, Path(out_dir) if out_dir is not None else None)
    paths["train"].parent.mkdir(parents=True, exist_ok=True)
    with Lock(paths["train"].parent, f"{paths['train'].parent} (the output directory)"):
        names = [p.name for p in paths.values()] + [paths["train"].name + SPILL]
        stale = remove_stale(paths["train"].parent, names)
        return _convert(games, paths, options, overwrite, stale)


def _convert(games: Path, paths: dict[str, Path], options: Options, overwrite: bool, stale: list[Path]) -> dict:
    """`convert` while holding the output directory's lock: two converts into one directory would
    replace each other's outputs, so the second fails at once. `stale` lists the temporaries of
    killed converts just removed, which the summary names."""
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise ConvertError(f"{', '.join(existing)} already exists; pass --overwrite to replace it")
    for selection in (_selection(games, options), None):
        try:
            return _write(games, paths, options, stale, selection)
        except _SelectionMoved:
            continue  # tokenize every seat
    raise AssertionError("a conversion without a selection found before pass 1 cannot miss it")


class _SelectionMoved(Exception):
    """A game left out in pass 1 (its tokens broke an invariant) changed which seat rows its group keeps."""


def _write(
    games: Path, paths: dict[str, Path], options: Options, stale: list[Path], selection: set[tuple[str, int]] | None
) -> dict:
    """Both passes and the summary; `selection`: the only scripted seat rows pass 1 tokenizes (`_selection`)."""
    with _collector_paused(), Spill(paths["train"], SPILL_SCHEMA) as spill:
        ledger, facts = _read(games, spill, options, selection)
        facts["index_from"] = _plan(ledger, options)
        if selection is not None and any(
            (ledger[f"keep{seat}"] & (ledger[f"status{seat}"] == UNSELECTED)).any() for seat in (0, 1)
        ):
            raise _SelectionMoved
        if options.baseline == "per-seat":
            facts["seat_baselines"] = per_seat_baseline(ledger)
        if options.format == "grpo":
            try:
                grpo, facts["grpo"] = groups.grpo_groups(
                    ledger, options.group_size or groups.group_size(ledger), options.keep_constant_groups
                )
                if options.max_groups is not None:
                    facts["grpo"]["beyond_max_groups"] = max(0, len(grpo) - options.max_groups)
                    grpo = grpo.iloc[: options.max_groups]
            except GroupError as err:
                raise ConvertError(f"{games}: {err}") from None
            project: GrpoRows | DpoRows | SftRows = GrpoRows(ledger, grpo)
        elif options.format == "dpo":
            project = DpoRows(ledger, options.dpo_pairs, options.dpo_pairs_per_group)
        else:
            project = FORMATS[options.format](ledger)
        with ParquetOutput(paths["train"], project.schema) as train, ParquetOutput(paths["val"], project.schema) as val:
            outputs = {TRAIN: train, VAL: val}
            for batch in spill.batches():
                for code, rows in project(batch):
                    outputs[code].write(rows)
            if not train.rows:
                raise NoRowsLeft(
                    f"{games}: no training rows are left (games excluded: {dict(facts['excluded'])}"
                    + (f", GRPO groups: {facts['grpo']})" if "grpo" in facts else ")")
                )
            train.commit()
            val.commit()
    summary = _summary(games, paths, options, ledger, facts, project, {"train": train.rows, "val": val.rows})
    summary["stale_files_removed"] = [str(path) for path in stale]
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


def _selection(games: Path, options: Options) -> set[tuple[str, int]] | None:
    """The (game id, seat) rows an sft selection keeps, from the rewards alone, so that pass 1 tokenizes no
    scripted seat it would drop: re-encoding a scripted seat's chat is most of a conversion's time, and
    keeping the best of 64 random games drops 63 of every 64. None where every row is tokenized (no
    selection; games with an LLM seat, whose recorded ids are cheap to read). Excluded games are left out
    as pass 1 leaves them out, except for broken token invariants, which only tokenizing finds
    (`_SelectionMoved`)."""
    if options.format != "sft" or options.valid_moves or options.top_fraction >= 1:
        return None
    seen: set[str] = set()
    rows, terms = [], options.reward_terms()
    for record in read_games(games, skip_invalid=True, errors=[]):
        if any(seat.get("kind") == "llm" for seat in record["players"]):
            return None
        if _unusable(record, seen) is None:
            rewards = (training_reward(record, s, terms) for s in (0, 1))
            rows.append((record["game_id"], record["instance_id"], *rewards))
    frame = pd.DataFrame(rows, columns=["game_id", "instance_id", "reward0", "reward1"])
    return {
        (game_id, seat)
        for seat in (0, 1)
        for game_id in frame.loc[
            groups.top(frame[f"reward{seat}"], frame["instance_id"], options.top_fraction), "game_id"
        ]
    }


def _read(
    games: Path, spill: Spill, options: Options, selection: set[tuple[str, int]] | None = None
) -> tuple[pd.DataFrame, dict]:
    """Pass 1: check every game, spill the seat rows that fit, return the ledger. With a `selection`, a
    scripted seat outside it is not tokenized (UNSELECTED)."""
    errors: list[str] = []
    excluded: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    examples: list[str] = []
    seen: set[str] = set()
    ledger: list[tuple] = []
    records, terms = 0, options.reward_terms()
    batch = RowBatch()
    for record in read_games(games, skip_invalid=True, errors=errors):
        records += 1
        _refuse_evaluation_instance(games, record)
        trained = [_trained(record, s, options) for s in (0, 1)]
        unselected = [selection is not None and (record["game_id"], s) not in selection for s in (0, 1)]
        tokenized = [wanted and not skipped for wanted, skipped in zip(trained, unselected)]
        reason, detail, seats = _examine(record, seen, tokenized, options)
        if reason is not None:
            excluded[reason] += 1
            if len(examples) < EXAMPLES:
                examples.append(f"{record['game_id']}: {reason}" + (f" ({detail})" if detail else ""))
            continue
        game = len(ledger)
        status = [
            OPPONENT if not trained[s] else UNSELECTED if not tokenized[s] else _status(tokens, options)
            for s, tokens in enumerate(seats)
        ]
        chats = [valid_moves_chat(record, s) if options.valid_moves and status[s] in SPILLED else None for s in (0, 1)]
        status = [NO_VALID_MOVE if chat == [] else seat_status for seat_status, chat in zip(status, chats)]
        statuses.update(status)
        sampling, outcome = record["settings"].get("sampling") or {}, record["outcome"]
        ledger.append(
            (
                record["game"],
                record["game_id"],
                record["instance_id"],
                record["group"],
                *map(float, outcome["rewards"]),
                *(training_reward(record, s, terms) for s in (0, 1)),
                joint_term(record, terms.joint_weight),
                *(own_plan_term(record, s, terms.own_plan_weight) for s in (0, 1)),
                *(misstatement_term(record, s, terms.misstatement_penalty) for s in (0, 1)),
                *status,
                sampling.get("temperature", np.nan),
                sampling.get("top_p", np.nan),
                outcome["termination"],
                ground_truth(record),
            )
        )
        for seat, tokens in enumerate(seats):
            if status[seat] in SPILLED:
                batch.add(game, record, seat, tokens, chats[seat])
        if len(batch) >= options.batch_rows:
            spill.write(batch.take())
    if len(batch):
        spill.write(batch.take())
    if errors and not options.skip_invalid:
        raise ConvertError(
            f"{len(errors)} invalid line(s) in {games}; the first: {errors[0]} (--skip-invalid converts the rest)"
        )
    if not records:
        raise ConvertError(f"{games}: no games" + (f" ({len(errors)} invalid lines)" if errors else " (empty input)"))
    columns = [
        "game",
        "game_id",
        "instance_id",
        "record_group",
        "score0",  # each seat's reward in the game
        "score1",
        "reward0",  # each seat's training reward (convert.reward)
        "reward1",
        "joint",  # the joint-outcome term in both seats' training rewards
        "own0",  # each seat's own-plan term in its training reward
        "own1",
        "miss0",  # each seat's misstatement term in its training reward
        "miss1",
        "status0",
        "status1",
        "temperature",
        "top_p",
        "termination",
        "ground_truth",
    ]
    facts = {
        "records": records,
        "invalid_lines": len(errors),
        "invalid_examples": errors[:EXAMPLES],
        "excluded": excluded,
        "excluded_examples": examples,
        "seats": statuses,
    }
    if not ledger:  # nothing to group, split or select: say so before any format's arithmetic meets no games
        failed = any(reason.startswith("failed:") for reason in excluded)
        raise NoRowsLeft(
            f"{games}: no training rows are left: all {records} games were excluded ({dict(excluded)})"
            + ("; failed games are never trained (`selfplay-gen --resume` plays them again)" if failed else "")
        )
    frame = pd.DataFrame(ledger, columns=columns)
    shared = frame.groupby("instance_id")["game"].nunique()
    if (shared > 1).any():
        instance = shared[shared > 1].index[0]
        both = ", ".join(sorted(frame.loc[frame["instance_id"] == instance, "game"].unique()))
        raise ConvertError(
            f"{games}: instance {instance} holds games of {both}; a mix of games plays each game on seeds of its own "
            "(`selfplay-gen --game A,B`), so that a group is the games of one instance of one game"
        )
    return frame, facts


def _refuse_evaluation_instance(games: Path, record: Record) -> None:
    """Games on development, test or human instances never become training data: a model trained
    on them would be scored on what it learned by heart. Training instances are drawn from seeds
    below the evaluation ranges, so an instance without a seed (one people played, read from their
    games) is refused as well."""
    seed = record["instance"].get("seed")
    if not isinstance(seed, int):
        source = record["instance"].get("source", "not drawn from a seed")
        raise ConvertError(
            f"{games}: game {record['game_id']}: instance.seed is {seed!r} (instance {source}): only instances "
            f"drawn from training seeds (below {TRAINING_STOP:_}) are trained on, and human instances are a report "
            "of their own"
        )
    found = evaluation_range(seed)
    if found is not None:
        raise ConvertError(
            f"{games}: game {record['game_id']}: instance.seed {seed} is one of the {found}, which are "
            f"never trained on; play training games on seeds below {TRAINING_STOP:_}"
        )


def _status(tokens, options: Options) -> str:
    """What a seat row can be used for: SAMPLED (anything), RETOKENIZED (not GRPO: its ids were
    not sampled), TOO_LONG (beyond --max-prompt-tokens / --max-response-tokens: not written,
    though its game still counts in its group) or IDLE (the seat never moved)."""
    if tokens is None:
        return IDLE
    if (
        options.max_prompt_tokens is not None
        and tokens.prompt_len > options.max_prompt_tokens
        or options.max_response_tokens is not None
        and tokens.response_len > options.max_response_tokens
    ):
        return TOO_LONG
    return tokens.source


def _trained(record: Record, seat: int, options: Options) -> bool:
    """Whether `seat`'s rows are written: one of `options.seats`, and played by `options.seats_of` if named."""
    if seat not in options.seats:
        return False
    if options.seats_of is None:
        return True
    played_by = (record["settings"].get("seat0"), record["settings"].get("seat1"))[seat] or {}
    return played_by.get("model") == options.seats_of


def _unusable(record: Record, seen: set[str]) -> tuple[str, str] | None:
    """Why a game is left out before any tokenizing (a repeated id, a failure), with details; None if it is not.
    Adds its id to `seen`."""
    if record["game_id"] in seen:
        return "duplicate_game_id", ""
    seen.add(record["game_id"])
    failure, termination = record.get("failure"), record["outcome"]["termination"]
    if failure:
        return f"failed:{failure['reason']}", failure.get("detail", "")
    if end_of(termination) == "failed":
        return f"failed:{termination}", ""
    return None


def _examine(record: Record, seen: set[str], trained: list[bool], options: Options) -> tuple[str | None, str, list]:
    """Why a game cannot be used at all (None if it can) with details, and each seat's tokens (`trained`: per
    seat, whether its rows are written).
    Failed games (backend errors, broken token invariants, internal errors) are never trained, nor counted in a
    group: their rewards say nothing about the policy. Truncated games (a limit) are trained with their score."""
    unusable = _unusable(record, seen)
    if unusable is not None:
        return (*unusable, [])
    try:
        # a seat not trained is never written: an LLM opponent's recorded ids are still checked (a broken
        # context fails the game), a scripted one is not retokenized, so it needs no tokenizer
        seats = [
            seat_tokens(seat, lambda: load_tokenizer(options.model))
            if trained[s] or seat.get("kind") == "llm"
            else None
            for s, seat in enumerate(record["players"])
        ]
        return None, "", seats
    except TokenInvariantError as err:
        return "token_invariant", str(err), []


def _plan(ledger: pd.DataFrame, options: Options) -> str:
    """Group index, split (`dest`: TRAIN or VAL) and the sft selection (`keep0`, `keep1`: the
    seat rows among the best of their group and seat, or with `valid_moves` every seat row that has
    one), as ledger columns.
    Returns where the group index came from: the records' `group` where it names instances one to
    one, else the rank of the sorted instance id (e.g. files of several runs concatenated)."""
    ledger["group_no"] = pd.factorize(ledger["instance_id"], sort=True)[0]
    one_to_one = (
        ledger.groupby("instance_id")["record_group"].nunique().max() == 1
        and ledger.groupby("record_group")["instance_id"].nunique().max() == 1
    )
    index_from = "record group" if one_to_one else "sorted key"
    ledger["index"] = ledger["record_group"] if one_to_one else ledger["group_no"]
    val = validation_instances(ledger["instance_id"], options.val_fraction, options.seed)
    ledger["dest"] = np.where(ledger["instance_id"].isin(val), VAL, TRAIN)
    if options.format == "sft":
        for seat in (0, 1):
            ledger[f"keep{seat}"] = (
                ledger[f"status{seat}"].isin(SPILLED)
                if options.valid_moves
                else groups.top(ledger[f"reward{seat}"], ledger["group_no"], options.top_fraction)
            )
    return index_from


def _summary(
    games: Path, paths: dict, options: Options, ledger: pd.DataFrame, facts: dict, project, rows: dict
) -> dict:
    sizes = ledger.groupby("group_no").size()
    used = ledger[["keep0", "keep1"]].any(axis=1) if options.format == "sft" else True
    split = {
        name: {
            "rows": rows[name],
            "games": int(((ledger["dest"] == code) & used).sum()),
            "instances": int(ledger.loc[(ledger["dest"] == code) & used, "instance_id"].nunique()),
        }
        for name, code in (("train", TRAIN), ("val", VAL))
    }
    seats = facts["seats"]
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
        "seats_without_turns": seats[IDLE],
        "seats_without_valid_moves": seats[NO_VALID_MOVE],
        "seats_too_long": seats[TOO_LONG],
        "seats_not_trained": seats[OPPONENT],
        "seats_retokenized": seats[RETOKENIZED],
        "seats_not_tokenized": seats[UNSELECTED],  # scripted seats outside an sft selection
        "groups": {
            "instances": len(sizes),
            "constant_instances": int(
                (
                    groups.constant(ledger["score0"], ledger["group_no"])
                    & groups.constant(ledger["score1"], ledger["group_no"])
                )
                .groupby(ledger["group_no"])
                .first()
                .sum()
            ),
            "games_per_instance": {"min": int(sizes.min()), "mean": float(sizes.mean()), "max": int(sizes.max())},
            "index_from": facts["index_from"],
        },
        "game": ",".join(ledger["game"].unique()),  # a mix's games joined by commas, in file order
        "games_of_each": {str(g): int(n) for g, n in ledger["game"].value_counts(sort=False).items()},
        "mean_rewards": [float(ledger[f"score{seat}"].mean()) for seat in (0, 1)],
        "mean_training_reward": float(ledger[["reward0", "reward1"]].to_numpy().mean()),
        # the joint-outcome term apart, so the raw game reward (mean_rewards) stays what evaluation reads
        "joint_outcome": {"weight": options.joint_weight, "mean_term": float(ledger["joint"].mean())},
        "own_plan": {"weight": options.own_plan_weight, "mean_term": float(ledger[["own0", "own1"]].to_numpy().mean())},
        "misstatements": {
            "penalty": options.misstatement_penalty,
            "mean_term": float(ledger[["miss0", "miss1"]].to_numpy().mean()),
        },
        "split": split,
    }
    if options.format == "grpo":
        # rollout_n: what actor_rollout_ref.rollout.n must be when replaying these rows
        summary["rollout_n"] = facts["grpo"]["games_per_group"]
        summary["grpo"] = {**facts["grpo"], "rows": rows["train"] + rows["val"]}
        if "seat_baselines" in facts:
            summary["grpo"]["seat_baselines"] = facts["seat_baselines"]
    if options.format == "dpo":
        summary["dpo"] = {"pairs": len(project.pairs), "unpaired_groups": project.unpaired}
    if options.format == "sft":
        summary["sft"] = _kept(ledger)
    return summary


def _kept(ledger: pd.DataFrame) -> dict:
    """Per seat, the seat rows sft writes and their games' mean reward and training reward (None for a seat with
    none): what imitating them perfectly would play, beside `mean_rewards` of every game."""
    written = [ledger[f"keep{seat}"] & ledger[f"status{seat}"].isin(SPILLED) for seat in (0, 1)]

    def mean(column: str, seat: int) -> float | None:
        return float(ledger.loc[written[seat], f"{column}{seat}"].mean()) if written[seat].any() else None

    return {
        "rows": [int(rows.sum()) for rows in written],
        "mean_rewards": [mean("score", seat) for seat in (0, 1)],
        "mean_training_rewards": [mean("reward", seat) for seat in (0, 1)],
    }
