"""Every decision of a run that is not a command: whether to warm-start, which opponents the league
offers and how many games each gets, whether the time budget allows another iteration, what becomes of
a stage's games found on disk, which checkpoints cross-play, what a game does by default, the rows of the
run's summary. Pure functions of what the run has written, so each is tested on its own."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..options import Played
from .config import WARM_START_POLICIES, one_of
from .plays import DEV_SET, Part
from .stages import PlayedBy


def wants_warm_start(policy: str, agreement: float | None, below: float) -> bool:
    """teacher and format: always; none: never; auto: when the initial model agrees in fewer than
    `below` of its held-out games (a model that cannot finish a game gives GRPO groups of zeros). An
    auto run with no measured agreement (a dry run) warm-starts, the cautious choice."""
    if one_of("warm-start policy", policy, WARM_START_POLICIES) != "auto":
        return policy in ("teacher", "format")
    return agreement is None or agreement < below


def dev_agreement(metrics: Path, label: str) -> float:
    """`label`'s mean agreement in an evaluation's metrics.json."""
    try:
        return float(json.loads(metrics.read_text())["models"][label]["agreement_rate"]["mean"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{metrics}: no models.{label}.agreement_rate.mean ({error})") from error


def league_candidates(checkpoints: Sequence[str], scripted: Sequence[str], player: str, league_size: int) -> list[str]:
    """The opponents the player may meet: the last `league_size` promoted checkpoints other than the
    player (in the order they were promoted), then the scripted negotiators."""
    earlier = [name for name in checkpoints if name != player]
    return [*(earlier[-league_size:] if league_size > 0 else []), *scripted]


def league_batches(
    ratings: Mapping[str, float | None],
    player: str,
    candidates: Sequence[str],
    num_games: int,
    games_per_instance: int,
    seed: int,
    sharpness: float = 1.0,
    self_play: float = 0.0,
    past: Sequence[str] = (),
    past_share: float | None = None,
    population: bool = False,
) -> list[tuple[str, int]]:
    """(opponent, games) for the player's next `num_games` games: one opponent for each instance,
    whose `games_per_instance` games stay one group, so a group's games differ only in the trained
    seat's play. A `self_play` share of the instances (rounded to whole groups, the first ones) go to
    the player itself, a frozen copy of the model the iteration started from: AlphaStar's main agents
    play 35% of their games so, where a pool of exploitable opponents alone rewards demands no equal
    would accept. The rest are drawn by rating (`league.opponents.choose_opponents`, reproducible
    from `seed`), the `past` checkpoints together `past_share` of them where given (fictitious
    self-play). With `population`, no draw by rating: every candidate gets an equal share of those
    instances (the past checkpoints together `past_share` where given), split exactly
    (`league.opponents.stratified`), so each iteration meets the whole diverse pool. The player first,
    then opponents in `candidates` order, those drawn for no instance left out."""
    from ..league import choose_opponents, stratified, with_share

    if not 0 <= self_play <= 1:
        raise ValueError(f"the self-play share must be in [0, 1], got {self_play}")
    groups = math.ceil(num_games / games_per_instance)
    own = round(self_play * groups) if candidates else groups
    if population and own < groups:
        even = with_share({name: 1 / len(candidates) for name in candidates}, past, past_share)
        drawn = Counter(stratified(even, groups - own))
    else:
        rest = (
            choose_opponents(ratings, player, groups - own, seed, candidates, sharpness, past, past_share)
            if own < groups
            else []
        )
        drawn = Counter(rest)
    mine = [(player, own * games_per_instance)] if own else []
    return mine + [(name, drawn[name] * games_per_instance) for name in candidates if drawn[name]]


def informative_groups(summary: Path) -> int:
    """The GRPO groups a conversion kept (convert_summary.json's grpo.rows): those whose games did not all
    get one reward, with a sampled seat to train."""
    try:
        return int(json.loads(summary.read_text())["grpo"]["rows"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{summary}: no grpo.rows, the number of groups converted ({error!r})") from error


def needs_another_round(kept: int, wanted: int, rounds_played: int, max_rounds: int) -> bool:
    """Offline GRPO's dynamic sampling (DAPO's, as verl's online `algorithm.filter_groups` does it): another
    round of games on new instances while the groups kept (`informative_groups`) are fewer than the groups the
    iteration asked for, at most `max_rounds` rounds in all. A near-deterministic policy plays one game per
    instance, and its constant groups, dropped, would leave the update a handful of rows."""
    return rounds_played < max_rounds and kept < wanted


def finished_iterations(run_dir: Path) -> list[tuple[Path, float]]:
    """Each of the run's finished iterations, in order: its directory and its wall time in minutes (its summary
    row). The base evaluation and the warm start are left out: runs compared at equal time share them (one
    adopted warm stage), so the budget is what each run spends on its own training."""
    finished = []
    for row in sorted(run_dir.glob("iter_*/summary_row.json")):
        cells = json.loads(row.read_text())["row"]
        try:
            finished.append((row.parent, float(cells[SUMMARY_HEADER.index("wall time (s)")]) / 60))
        except (IndexError, ValueError) as error:
            raise ValueError(f"{row}: field row[4] (wall time) is not a number: {cells}") from error
    return finished


def iteration_minutes(run_dir: Path) -> list[float]:
    """The wall time of each finished iteration, in order, in minutes (`finished_iterations`)."""
    return [minutes for _, minutes in finished_iterations(run_dir)]


def within_budget(run_dir: Path, budget_min: float | None) -> bool:
    """Whether another iteration may start: no budget, or one as long as the last finished iteration would
    still end within it. Runs compared at equal time then each stop at or below the budget, never one
    iteration past it."""
    if budget_min is None:
        return True
    minutes = iteration_minutes(run_dir)
    return sum(minutes) + (minutes[-1] if minutes else 0.0) <= budget_min


# what `games_to_play` decides for a stage's training games
REUSE = "reuse"  # played ahead to the end and converted: trained on as they are
PLAY = "play"  # played (on) by the model asked for: none yet, or its own games (`play --resume` keeps them)
CONTINUE = "continue"  # played on by the model that started them (another, still on disk), one version behind
REPLAY = "replay"  # set aside and played anew by the model asked for: the model that started them is unknown or gone


def games_to_play(
    recorded: PlayedBy | None, have_games: bool, player: str, overlap: bool, producer_on_disk: bool
) -> str:
    """What becomes of a stage's games when `player` (a model) is to play them: `recorded` is the stage's
    record of who played them (gen/played_by.json), `have_games` whether its games file exists,
    `producer_on_disk` whether the recorded model's weights are still there. `play --resume` refuses to add
    one model's games to another's, so a file started by another model is played on by that model or set
    aside. Without overlap, a file without a record is the stage's own, as in runs made before records."""
    if recorded is not None and recorded.complete and recorded.during is not None:
        return REUSE
    if not have_games:
        return PLAY
    if recorded is None:
        return REPLAY if overlap else PLAY
    if recorded.model == player:
        return PLAY
    return CONTINUE if producer_on_disk else REPLAY


def crossplay_pairings(labels: Sequence[str], warm_label: str = "warm") -> list[tuple[int, int]]:
    """(checkpoint, opponent) index pairs: each checkpoint after the initial one (the warm start when
    there is one, else base) against the initial one and against the one just before it."""
    first = 1 if len(labels) > 1 and labels[1] == warm_label else 0
    pairs = []
    for i in range(first + 1, len(labels)):
        pairs.append((i, first))
        if i - 1 != first:
            pairs.append((i, i - 1))
    return pairs


def crossplay_inputs(labels: Sequence[str], pairs: Sequence[tuple[int, int]], played: Sequence[Path]) -> list[str]:
    """The `--from-games` arguments of the cross-play report: each checkpoint's self-play first (from
    the first pairing it played in, the initial checkpoint first, so it rates 0), then both seat orders
    of every pairing (files named as `selfplay-gen eval` names them)."""
    from ..evaluation.cli import file_name

    own: dict[int, str] = {}
    cross: list[str] = []
    for (i, j), games in zip(pairs, played):
        a, b = labels[i], labels[j]
        cross += ["--from-games", f"{a},{b}={games}/{file_name((a, b))}"]
        cross += ["--from-games", f"{b},{a}={games}/{file_name((b, a))}"]
        own.setdefault(i, f"{a}={games}/{file_name((a, a))}")
        own.setdefault(j, f"{b}={games}/{file_name((b, b))}")
    return [arg for k in sorted(own) for arg in ("--from-games", own[k])] + cross


def evaluation_sets(game_cls: type) -> tuple[str, ...]:
    """The instance sets every model of this game is evaluated on: development instances (`plays.DEV_SET`),
    and the instances people played when the game has them (`human_games` on the game class)."""
    return (DEV_SET, "human") if getattr(game_cls, "human_games", 0) else (DEV_SET,)


def references(game_cls: Any, chosen: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The fixed opponents every model of the run also plays (`evaluation.references`): `auto`, the
    game's own (`Game.references`); `none` (or nothing), none; else the game's references named, in
    that order. A name the game has not is an error naming the game's."""
    own = game_cls.references()
    if list(chosen) == ["auto"]:
        return dict(own)
    if list(chosen) in ([], ["none"]):
        return {}
    unknown = [name for name in chosen if name not in own]
    if unknown:
        has = ", ".join(own) or "none"
        raise ValueError(
            f"evaluation.references: the {game_cls.name} game has no reference {unknown[0]!r} (its references: {has}; "
            "or auto, none)"
        )
    return {name: own[name] for name in chosen}


def parts(played: Played, chosen_references: Sequence[str]) -> tuple[Part, ...]:
    """What a run's evaluations play (`plays.Part`): its game, or each game of its mix apart (in a directory
    named after it, configured as the run's games with that game alone), with that game's instance sets and
    its fixed references (`references`)."""
    from .. import games
    from ..options import partner_scripted_args

    names = games.mixture(played.game or games.UNNAMED)
    found = []
    for name in names:
        game_cls = games.get(name)
        chosen = references(game_cls, chosen_references)
        found.append(
            Part(
                "" if len(names) == 1 else name.replace(":", "_"),
                played if len(names) == 1 else dataclasses.replace(played, game=name),
                evaluation_sets(game_cls),
                {reference: partner_scripted_args(knobs) for reference, knobs in chosen.items()},
            )
        )
    return tuple(found)


def crossplays_by_default(game_cls: type) -> bool:
    """Whether checkpoints of this game play each other after the iterations by default: a competitive
    game's progress shows in wins against earlier checkpoints (`crossplay_by_default` on the class)."""
    return bool(getattr(game_cls, "crossplay_by_default", False))


SUMMARY_HEADER = ("stage", "training games", "agreement", "mean reward", "wall time (s)", "games alike")


def games_alike(convert_summary: Path) -> float | None:
    """The share of a stage's training instances whose games all earned one reward in both seats
    (convert_summary.json's groups): there the best of a group is what the model already plays and a
    group-relative advantage is 0, so the stage learns nothing from them. None without a conversion, or where
    an instance has one game (a teacher's warm-start games)."""
    if not convert_summary.exists():
        return None
    groups = json.loads(convert_summary.read_text()).get("groups") or {}
    if not groups.get("instances") or (groups.get("games_per_instance") or {}).get("max", 1) <= 1:
        return None
    return groups["constant_instances"] / groups["instances"]


def summary_row(
    stage: str, games: Mapping[str, Any] | None, seconds: float, alike: float | None = None
) -> tuple[str, ...]:
    """A stage's row in summary.md: its training games (`Summary.to_dict` of its gen/games.jsonl,
    every game of the file, those of a run that resumed there too), their agreement and mean reward,
    its wall time and the share of its instances whose games were all alike (`games_alike`)."""
    games = games or {}

    def rate(key: str) -> str:
        value = games.get(key)
        return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"

    share = "" if alike is None else f"{alike:.0%}"
    return (stage, str(games.get("games", "")), rate("agreement_rate"), rate("mean_reward"), str(round(seconds)), share)
