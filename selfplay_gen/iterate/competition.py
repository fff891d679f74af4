"""The league inside a run (LEAGUE_SIZE > 0): who the trained seat meets in each game, whether a new
checkpoint is kept, and the skill levels, on top of the pure decisions of `selfplay_gen.league`.

Opponents: the pool is the last LEAGUE_SIZE promoted checkpoints (the warm start among them) and the
scripted negotiator at each LEAGUE_SCRIPTED strength. Every instance of an iteration gets one
opponent drawn by rating closeness (`league.opponents`, Bradley–Terry ratings of every game the pool
has played, `league.pool`); its GAMES_PER_INSTANCE games stay one group against that opponent, so a
group's games differ only in the trained seat's play (what GRPO's group baseline, filtered BC's
top fraction and DPO's pairs compare). Only seat 0 is trained (`selfplay-convert --seat 0`; see
LEAGUE_SELF_PLAY_SEATS below).

Serving: SGLang serves one model per server, and promoted checkpoints are merged models, not LoRA
adapters of one base, so two checkpoints cannot share a server. Games are therefore grouped by
opponent: the trained model stays on slot 0, each checkpoint opponent gets the partner slot in turn
(one partner server at a time, next to the player's), and a scripted opponent needs no server at all.
The opponents that need no partner server (scripted negotiators, the frozen copy) play at once with
the first checkpoint's games, each further checkpoint's after them (`waves`): one at a time, short
batches would leave the player's server waiting on each batch's start-up and last long games.
A checkpoint drawn for no instance is never started.

With LEAGUE_SELF_PLAY, a share of the instances instead put a frozen copy of the player in seat 1
(its own server plays both seats; only seat 0 is converted unless LEAGUE_SELF_PLAY_SEATS=both), so the
trained seat also meets a partner that asks as much as it does. Those games rate no one (`League.record`
skips a member against itself).

Promotion: after training, the candidate plays the previous promoted checkpoint in both seat orders
on held-out instances (the cross-play the end of the run reports too) and is kept only when its
decided-game win share's 95% interval lies above 0.5 (`league.promotion`); otherwise the run says so
and the next iteration starts again from the previous checkpoint, or (PROMOTION_LEARNER=latest) trains
on from the one kept out, which then plays as the player, rated as the checkpoint it has to beat, with
that checkpoint among its opponents.

Resuming: each finished iteration leaves its league (members and wins) in iter_NNN/league.json and
its decision in iter_NNN/promotion.json before its DONE marker, so a resumed run reads both and
records no game twice. The league names the run's own checkpoints relative to RUN_DIR, so a copy of a
run (moved, or forked to go on with other settings) plays its own checkpoints, not the original's.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from .. import games as game_registry
from ..atomic import temporary, write_atomic
from ..evaluation.splits import SKILL, TEST
from ..games.base import Game
from ..league import League, Member, Promotion, opponent_weights, promote, scripted_member, with_share
from ..league.progress import progress, progress_table
from . import decisions, plays
from .config import Iteration
from .plays import Plays
from .report import (
    PROGRESS_FILE,
    PROMOTION_FILE,
    SKILL_FILE,
    SKILL_LEVELS_FILE,
    SKILL_LEVELS_TABLE,
    SKILL_TEST_DIR,
)
from .server import Started
from .shell import Shell
from .stages import Checkpoint, Stage

LEAGUE_FILE = "league.json"
OPPONENTS_FILE = "opponents.json"
SKILL_SEED = SKILL.start  # the skill match's instances: a range of their own, apart from training and the splits
UNCONDITIONED = "unconditioned"  # the model asked for no level, as the skill evaluation labels it


def safe_name(name: str) -> str:
    """A member's name as a directory name (scripted@0.3 -> scripted_0.3)."""
    return re.sub(r"[^\w.+-]+", "_", name)


def round_dir(gen: Path, round_: int) -> Path:
    """Where a stage's round of league games goes: gen/ for the first, gen/round_R/ for round R."""
    return gen if round_ == 1 else gen / f"round_{round_}"


def games_file(out: Path, opponent: str) -> Path:
    """A round's games against `opponent`: out/vs/<opponent>/games.jsonl."""
    return out / "vs" / safe_name(opponent) / "games.jsonl"


def layer_file(out: Path, opponent: str, layer: int) -> Path:
    """A round's games against `opponent` in layer `layer` (0: the first; `Competition.draw_layers`)."""
    path = games_file(out, opponent)
    return path if layer == 0 else path.parent / f"layer_{layer + 1}" / path.name


def concatenate(parts: Sequence[Path], out: Path) -> None:
    """One JSONL file of games from several (each opponent's games), written whole or not at all."""
    tmp = temporary(out)
    try:
        with tmp.open("wb") as sink:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, sink)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)  # left only by a copy that failed


def scripted_pool(game_cls: type, strengths: Sequence[float]) -> list[Member]:
    """The scripted members for a game whose scripted player has a strength knob; none otherwise."""
    return [scripted_member(s) for s in strengths] if "strength" in getattr(game_cls, "scripted_knobs", {}) else []


def skill_of(game: str) -> ModuleType | None:
    """The module of the game's skill levels (`Game.skill`), or None when its prompts take none."""
    target = game_registry.get(game).skill
    return importlib.import_module(target) if target else None


def read_promotion(stage_dir: Path) -> dict | None:
    """A finished iteration's promotion decision (`Promotion.to_dict`); None where none was made."""
    path = stage_dir / PROMOTION_FILE
    if not path.exists():
        return None
    try:
        decision = json.loads(path.read_text())
        bool(decision["promoted"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a promotion decision, field promoted missing ({error})") from error
    return decision


class LeagueRun(Protocol):
    """What the league needs of the run it is part of (`loop.Run`): its settings and checkpoints, and
    the steps it shares with every stage (serving, playing, converting, evaluating, timing)."""

    @property
    def cfg(self) -> Iteration: ...
    @property
    def shell(self) -> Shell: ...
    @property
    def plays(self) -> Plays: ...
    @property
    def game_cls(self) -> type[Game[Any, Any]]: ...
    @property
    def run_dir(self) -> Path: ...
    @property
    def kept(self) -> Checkpoint: ...
    @property
    def model(self) -> str: ...
    @property
    def label(self) -> str: ...

    def serve(self, slot: int, model: str, shared: bool = False) -> Started: ...
    def timed(self, step: str, startup_s: float = 0.0) -> AbstractContextManager[None]: ...
    def play(
        self, stage: Stage, num_games: int, convert_args: list[str], league: bool = True, rounds: int = 1
    ) -> None: ...
    def convert(self, iteration: int, gen: Path, args: list[str], wanted: int, played: int, rounds: int) -> bool: ...
    def evaluate(self, model: str, label: str, eval_for: Path, final: bool = False, shared: bool = False) -> None: ...
    def evaluate_current(self, final: bool = False, shared: bool = False) -> None: ...
    def crossplay_pair(self, a: str, model: str, b: str, partner: str | None) -> Path: ...


class Competition:
    """The run's league: its state after the last finished iteration, and the steps that use it."""

    def __init__(self, run: LeagueRun):
        self.run = run
        self.scripted = scripted_pool(run.game_cls, run.cfg.league.scripted)
        self.league: League = League()

    # -- state -----------------------------------------------------------------------------------

    def start(self, iteration: int) -> None:
        """The league as the last finished iteration before `iteration` left it, else the current model
        (the warm start, or the initial model) and the scripted negotiators; with past learners, every
        earlier iteration's checkpoint joins it (a dry run's, which finish nothing, too)."""
        self.league = self.saved(iteration)
        if not self.run.cfg.league.past_learners:
            return
        for earlier in range(1, iteration):
            stage = Stage.iteration(self.run.run_dir, earlier)
            if stage.label not in self.league.names and (stage.done or self.run.cfg.dry_run):
                self.league = self.league.add(Member(stage.label, "checkpoint", path=str(stage.model_dir)))

    def saved(self, iteration: int) -> League:
        """The league the last finished iteration before `iteration` saved, else this process's, else a new
        one of the checkpoint kept and the scripted negotiators."""
        for earlier in range(iteration - 1, 0, -1):
            path = Stage.iteration(self.run.run_dir, earlier).dir / LEAGUE_FILE
            if path.exists():
                return League.load(path, self.run.run_dir)
        if self.league.members:  # the league of this process's last iteration (a dry run saves none)
            return self.league
        kept = self.run.kept
        return League.of([Member(kept.label, "checkpoint", path=kept.model), *self.scripted])

    def save(self, stage: Stage) -> None:
        if self.run.cfg.dry_run:
            return
        self.league.save(stage.dir / LEAGUE_FILE, self.run.run_dir)
        self.league.save(self.run.run_dir / LEAGUE_FILE, self.run.run_dir)

    def candidates(self, player: str) -> list[str]:
        checkpoints = [m.name for m in self.league.members if m.kind == "checkpoint"]
        scripted = [m.name for m in self.league.members if m.kind == "scripted"]
        return decisions.league_candidates(checkpoints, scripted, player, self.run.cfg.league_size)

    # -- training games --------------------------------------------------------------------------

    def play(self, stage: Stage, num_games: int, convert_args: list[str], rounds: int = 1) -> None:
        """The current model (seat 0) against opponents drawn by rating, each opponent's games into
        gen/vs/<opponent>/ (those needing no partner server at once: `waves`), joined into
        gen/games.jsonl, recorded in the league and converted with `convert_args` plus --seat 0.
        Self-play where the pool holds no opponent. With `rounds` > 1, up to that many rounds, round
        R's games in gen/round_R/vs/<opponent>/ on the instances after the last round's, while seat
        0's converted groups are fewer than its groups (`Run.convert`)."""
        run, cfg = self.run, self.run.cfg
        player = run.label
        candidates = self.candidates(player)
        i = stage.number
        if not candidates:
            run.shell.echo(f"iteration {i}: the league holds no opponent for {player} yet: self-play")
            run.play(stage, num_games, convert_args, league=False, rounds=rounds)
            return
        run.evaluate_current(shared=True)
        gen = stage.dir / "gen"
        server = run.serve(0, run.model, shared=True)
        played: list[Path] = []
        first = stage.seed
        wanted = num_games // cfg.games_per_instance  # seat 0's groups
        for round_ in range(1, rounds + 1):
            out = round_dir(gen, round_)
            first = self.play_round(i, out, player, candidates, num_games, first, server, played)
            if cfg.dry_run:
                run.shell.echo(f"+ cat {' '.join(str(path) for path in played)} > {gen / 'games.jsonl'}")
            else:
                concatenate(played, gen / "games.jsonl")
            if not run.convert(i, gen, [*convert_args, *self.trained_seats()], wanted, round_, rounds):
                break

    def replay(self, stage: Stage) -> None:
        """The league as the stage's training games left it, for a run that resumes the stage after its
        training: each round's games recorded again (`record`, as `play_round` did), in the order its
        opponents.json names the opponents (layer by layer where several partners shared each group)."""
        round_ = 1
        while (chosen_file := round_dir(stage.dir / "gen", round_) / OPPONENTS_FILE).exists():
            try:
                chosen = json.loads(chosen_file.read_text())
                player, layers = chosen["player"], chosen.get("layers") or [chosen["games"]]
                played = [(name, layer) for layer, drawn in enumerate(layers) for name in drawn]
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                raise ValueError(f"{chosen_file}: no player or games, the opponents drawn ({error})") from None
            out = chosen_file.parent
            for name, layer in played:
                if not (path := layer_file(out, name, layer)).exists():
                    raise FileNotFoundError(
                        f"{path}: missing, and {chosen_file} says {player} played {name} there: the league "
                        "cannot be rebuilt without the stage's training games"
                    )
            self.record(player, [(name, layer_file(out, name, layer)) for name, layer in played])
            round_ += 1

    def record(self, player: str, played: Sequence[tuple[str, Path]]) -> None:
        """The league with a round's games recorded: each (opponent, games file), in that order."""
        for name, path in played:
            self.league = self.league.record_file(path, (player, name))

    def trained_seats(self) -> list[str]:
        """The convert options for the seats a league's games train: seat 0, or with LEAGUE_SELF_PLAY_SEATS=both
        every seat the player's weights played (both seats of the games against its frozen copy)."""
        if self.run.cfg.league.self_play_seats == "both":
            return ["--seats-of", self.run.model]
        return ["--seat", "0"]

    def draw_layers(
        self, ratings: dict, player: str, candidates: list[str], num_games: int, first: int
    ) -> list[list[tuple[str, int]]]:
        """The opponents of a round, per layer: with league.partners_per_group = P, P layers of games_per_instance
        / P games an instance on the same instances, each drawn apart (`decisions.league_batches`, seeded
        `first` + layer, its candidates' order turned by the layer), so an instance's group holds the trained
        seat's games against up to P partners: its advantage compares one play against several partners, the
        one that refuses among them. One layer (P = 1): one opponent an instance."""
        cfg = self.run.cfg
        league = cfg.league
        layers = league.partners_per_group
        past = [name for name in candidates if self.league.member(name).kind == "checkpoint"]
        drawn = []
        for layer in range(layers):
            turn = layer % len(candidates)
            order = candidates[turn:] + candidates[:turn]
            drawn.append(
                decisions.league_batches(
                    ratings, player, order, num_games // layers, cfg.games_per_instance // layers, first + layer,
                    league.sharpness, league.self_play, past, league.past_share, league.population,
                )
            )  # fmt: skip
        return drawn

    def play_round(
        self, i: int, out: Path, player: str, candidates: list[str], num_games: int, first: int, server: Started,
        played: list[Path],
    ) -> int:  # fmt: skip
        """One round of the player's games, an opponent for each instance from `first` on (its frozen copy for
        the LEAGUE_SELF_PLAY share, the rest drawn by rating: `decisions.league_batches`; several a group with
        league.partners_per_group: `draw_layers`), each opponent's games in out/vs/<opponent>/games.jsonl (a
        later layer's in out/vs/<opponent>/layer_L/), appended to `played` and recorded in the league; returns
        the first instance after them."""
        run, cfg = self.run, self.run.cfg
        ratings = self.league.ratings()
        if ratings.get(player) is None:  # a learner not promoted (or not rated yet): as strong as the one kept
            ratings[player] = ratings.get(run.kept.label)
        share, past_share = cfg.league.self_play, cfg.league.past_share
        past = [name for name in candidates if self.league.member(name).kind == "checkpoint"]
        layers = self.draw_layers(ratings, player, candidates, num_games, first)
        games_each = cfg.games_per_instance // len(layers)
        totals: dict[str, int] = {}
        for drawn in layers:
            for name, games in drawn:
                totals[name] = totals.get(name, 0) + games
        if not cfg.dry_run:
            out.mkdir(parents=True, exist_ok=True)
            weights = with_share(opponent_weights(ratings, player, candidates, cfg.league.sharpness), past, past_share)
            chosen = {
                "player": player, "ratings": ratings, "self_play": share, "past_share": past_share, "weights": weights,
                "games": totals, "layers": [dict(drawn) for drawn in layers],
            }  # fmt: skip
            write_atomic(out / OPPONENTS_FILE, json.dumps(chosen, indent=1) + "\n")
        drawn_text = ", ".join(f"{'itself (frozen)' if name == player else name} {n}" for name, n in totals.items())
        way = "an equal share each (population)" if cfg.league.population else "by rating"
        if past_share is not None and past:
            way += f", past checkpoints ({', '.join(past)}) {past_share:.0%} of the draws"
        if share:
            way = f"{share:.0%} against itself, the rest {way}"
        if len(layers) > 1:
            way += f", {len(layers)} partners a group ({games_each} games each)"
        run.shell.echo(f"iteration {i}: seat 0 ({player}, trained) plays, {way}: {drawn_text} games")
        plan = []  # (opponent, games, first instance, games file), layer by layer in the order drawn
        layer_of: dict[Path, int] = {}  # games file: its layer, whose games are numbered on from the layers' before it
        for layer, drawn in enumerate(layers):
            start = first
            for name, games in drawn:
                plan.append((name, games, start, layer_file(out, name, layer)))
                layer_of[plan[-1][3]] = layer
                start += games // games_each
        first = start
        for wave in self.waves(list(totals), player):
            startup = server.startup_s if not played else 0.0
            steps = []
            for name, games, start, path in (entry for entry in plan if entry[0] in wave):
                member = None if name == player else self.league.member(name)
                if member is None:  # its own server plays the partner seat: the weights the iteration began with
                    partner_args = plays.partner_args(server)
                elif member.kind == "checkpoint":
                    partner = run.serve(1, str(member.path), shared=True)
                    startup += partner.startup_s
                    partner_args = plays.partner_args(partner)
                else:
                    partner_args = member.partner_args()
                index = layer_of[path] * games_each
                extra = [*self.skill_args(), *(["--first-game-index", str(index)] if index else [])]
                command = run.plays.generate(
                    server, run.model, start, games, games_each, path.parent, partner_args, extra
                )
                steps.append((f"iteration {i}: generate vs {name}", command))
            with run.timed(f"generate vs {', '.join(wave)}", startup):
                run.shell.run_together(steps)
            played.extend(path for name, _, _, path in plan if name in wave)
        if not cfg.dry_run:
            self.record(player, [(name, path) for name, _, _, path in plan])
        return first

    def waves(self, opponents: list[str], player: str) -> list[list[str]]:
        """The opponents whose games play at once: those needing no partner server (the frozen copy,
        scripted negotiators) with the first checkpoint, then each further checkpoint alone, as each
        takes the one partner slot in turn."""
        checkpoints = [o for o in opponents if o != player and self.league.member(o).kind == "checkpoint"]
        first = [o for o in opponents if o not in checkpoints[1:]]
        return [first, *([o] for o in checkpoints[1:])]

    def skill_args(self, seat0_only: bool = True) -> list[str]:
        """The trained seat (in self-play: both) asked to play at the highest skill level, in a
        skill-conditioned run: the lower levels are the warm start's, iterations improve the top one."""
        levels = self.run.cfg.league.skill_levels
        return ["--skill", f"{levels[-1]}," if seat0_only else levels[-1]] if levels else []

    # -- promotion -------------------------------------------------------------------------------

    def decide(self, stage: Stage, candidate: str) -> bool:
        """Evaluate the iteration's checkpoint, cross-play it against the previous promoted one, and
        keep it only by the promotion rule; the decision goes to iter_NNN/promotion.json and the log.
        A dry run cannot judge and goes on as if it was promoted."""
        run, rules = self.run, self.run.cfg.league
        previous, label = run.kept.label, stage.label
        run.evaluate(candidate, label, stage.dir, shared=True)
        played = run.crossplay_pair(label, candidate, previous, run.kept.model)
        if run.cfg.dry_run:
            bounds = [" and keeps its cooperation"] if rules.cooperation else []
            if rules.joint_margin is not None:
                bounds.append(f", its self-play joint share at most {100 * rules.joint_margin:.1f} points below")
            if rules.min_agreement is not None:
                bounds.append(f", deals in {rules.min_agreement:.0%} of its self-play games")
            run.shell.echo(
                f"promotion: {label} replaces {previous} only if it wins with a 95% interval above 50%"
                f"{''.join(bounds)} ({played.parent / 'metrics.json'}); a dry run goes on as if it did"
            )
            self.league = self.league.add(Member(label, "checkpoint", path=candidate))
            return True
        from ..evaluation.cli import file_name

        metrics = json.loads((played.parent / "metrics.json").read_text())
        decision: Promotion = promote(
            metrics, label, previous, cooperation=rules.cooperation, joint_margin=rules.joint_margin,
            min_agreement=rules.min_agreement,
        )  # fmt: skip
        write_atomic(stage.dir / PROMOTION_FILE, json.dumps(decision.to_dict(), indent=1) + "\n")
        run.shell.echo(f"promotion: {decision.reason}")
        if decision.promoted:
            league = self.league.add(Member(label, "checkpoint", path=candidate))
            for seats in ((label, previous), (previous, label)):
                league = league.record_file(played / file_name(seats), seats)
            self.league = league
        return decision.promoted

    # -- skill levels ----------------------------------------------------------------------------

    def warm_games(self, stage: Stage, teacher: list[str]) -> list[list[str]]:
        """The warm start's games of a skill-conditioned run, into gen/levels/<part>/ (joined by
        `join_warm_games`). league.skill_data=quantile: the scripted negotiator at each of the game's
        `PLAYER_STRENGTHS` against each of its `REFERENCES`, in both seats, the graded seat told its level
        only once the games are played (`skill.levels_command`). scripted-strength: per level, the scripted
        negotiator at the level's strength in both seats, each seat told the level."""
        run, cfg = self.run, self.run.cfg
        levels, skill = cfg.league.skill_levels, self.skill()
        if cfg.league.skill_data == "quantile":
            cells = [(seat, own, ref) for own in skill.PLAYER_STRENGTHS for ref in skill.REFERENCES for seat in (0, 1)]
            per_cell = max(1, cfg.warm.games // len(cells))
            commands = []
            for k, (seat, own, ref) in enumerate(cells):
                first, second = (own, ref) if seat == 0 else (ref, own)
                commands.append(
                    [*cfg.tools.gen, *run.plays.config(self.warm_part(stage, seat, own, ref).parent), "--backend",
                     "scripted", "--scripted-strength", f"{first:g}",
                     "--partner-scripted-strength", f"{second:g}", "--seed", str(stage.seed + k * per_cell),
                     "--num-games", str(per_cell), "--games-per-instance", "1", "--out",
                     str(self.warm_part(stage, seat, own, ref)), "--resume", "--quiet"]
                )  # fmt: skip
            return commands
        per_level = max(1, cfg.warm.games // len(levels))
        commands = []
        for k, level in enumerate(levels):
            out = stage.dir / "gen" / "levels" / level / "games.jsonl"
            commands.append(
                [*cfg.tools.gen, *run.plays.config(out.parent), "--backend", "scripted", "--scripted-strength",
                 f"{skill.strength_of(level):g}", "--skill", level, *teacher, "--seed", str(stage.seed + k * per_level),
                 "--num-games", str(per_level), "--games-per-instance", "1", "--out", str(out), "--resume",
                 "--quiet"]
            )  # fmt: skip
        return commands

    @staticmethod
    def warm_part(stage: Stage, seat: int, own: float, reference: float) -> Path:
        return stage.dir / "gen" / "levels" / f"seat{seat}_{own:g}_vs_{reference:g}" / "games.jsonl"

    def join_warm_games(self, stage: Stage) -> None:
        """gen/games.jsonl of the warm start's level games: by quantile, each graded seat told its level
        (`skill.levels_command`, which also writes gen/games.levels.json: each level judged against the
        references); else the levels' games joined as they are."""
        run, cfg = self.run, self.run.cfg
        gen = stage.dir / "gen"
        levels = cfg.league.skill_levels
        if cfg.league.skill_data == "quantile":
            skill = self.skill()
            parts = [
                f"{seat}={self.warm_part(stage, seat, own, ref)}"
                for own in skill.PLAYER_STRENGTHS
                for ref in skill.REFERENCES
                for seat in (0, 1)
            ]
            run.shell.run(
                "warm start: levels by quantile against the references",
                [cfg.tools.python or sys.executable, "-m", skill.__name__, *parts, "--out", str(gen / "games.jsonl"),
                 "--levels", ",".join(levels)],
            )  # fmt: skip
            return
        parts_files = [gen / "levels" / level / "games.jsonl" for level in levels]
        if cfg.dry_run:
            run.shell.echo(f"+ cat {' '.join(map(str, parts_files))} > {gen / 'games.jsonl'}")
        else:
            concatenate(parts_files, gen / "games.jsonl")

    def skill_match(self, server, model: str, eval_dir: Path) -> None:
        """The model at its highest skill level against itself at its lowest, both seat orders, on
        instances apart from every other set; the game's `follows_levels` of the games into
        eval_dir/skill.json (the issue's target: the highest level wins 65% of decided games). Then
        each level judged on references outside the model (`judge_scale`, eval_dir/skill_levels.json):
        in seat 0 against each scripted negotiator of the game's `REFERENCES` in seat 1, and against the
        model unconditioned in both seat orders."""
        run, cfg = self.run, self.run.cfg
        levels = cfg.league.skill_levels
        low, high = levels[0], levels[-1]
        e = cfg.evaluation
        games = e.instances * e.games_per_instance
        played = []
        for seats in ((high, low), (low, high)):
            out = eval_dir / "skill" / f"{seats[0]}__{seats[1]}"
            command = run.plays.generate(
                server, model, SKILL_SEED, games, e.games_per_instance, out, [], ["--skill", ",".join(seats)]
            )
            run.shell.run(f"skill match: {seats[0]} vs {seats[1]}", command)
            played.append((out / "games.jsonl", seats))
        references = [scripted_member(r).name for r in getattr(self.skill(), "REFERENCES", ())]
        pairings = [(level, ref) for level in levels for ref in references]
        pairings += [seats for level in levels for seats in ((level, UNCONDITIONED), (UNCONDITIONED, level))]
        if not cfg.dry_run:
            import pandas as pd

            from ..evaluation.protocol import records_table
            from ..records import read_games

            tables = [records_table(list(read_games(path)), seats) for path, seats in played]
            result = self.skill().follows_levels(pd.concat(tables, ignore_index=True), (low, high))
            write_atomic(eval_dir / SKILL_FILE, json.dumps(result, indent=1, default=float) + "\n")
            share = result["expert_vs_novice"]
            run.shell.echo(f"skill match: {high} against {low}: decided-game win share {share}")
        self.judge_scale(server, model, eval_dir, SKILL_SEED, e.instances, e.games_per_instance, pairings)

    def skill_test(self, server, model: str, eval_dir: Path) -> None:
        """The final model's levels on the test split (evaluation.test_instances, test_games_per_instance each),
        into eval_dir/skill_test: each level against the strongest of the game's `REFERENCES` and the highest level
        against the model unconditioned, both seat orders (what the scale's reading of the final model needs:
        whether each level beats the full-strength negotiator more often than the one below it, and whether the
        highest is at least the model's own play)."""
        levels = self.run.cfg.league.skill_levels
        strongest = scripted_member(max(self.skill().REFERENCES)).name
        pairings = [seats for level in levels for seats in ((level, strongest), (strongest, level))]
        pairings += [(levels[-1], UNCONDITIONED), (UNCONDITIONED, levels[-1])]
        e = self.run.cfg.evaluation
        self.judge_scale(
            server, model, eval_dir / SKILL_TEST_DIR, TEST.start, e.test_instances, e.test_games_per_instance, pairings
        )

    def judge_scale(
        self, server, model: str, out_dir: Path, seed: int, instances: int, per_instance: int,
        pairings: Sequence[tuple[str, str]],
    ) -> None:  # fmt: skip
        """Play each (seat 0, seat 1) of `pairings` (a level, a scripted negotiator `scripted@STRENGTH` or the
        model `UNCONDITIONED`) on `instances` instances from `seed`, `per_instance` games each, the level told to
        its seat, into out_dir/skill/SEAT0__SEAT1, all at once on the model's server; then judge each level against
        each partner (`judge_levels`) and each level against the one below it (`level_steps`) into
        out_dir/skill_levels.json and its tables."""
        run, skill = self.run, self.skill()
        scripted = {m.name: m for m in map(scripted_member, skill.REFERENCES)}
        judged, steps = [], []
        for seats in pairings:
            out = out_dir / "skill" / f"{safe_name(seats[0])}__{safe_name(seats[1])}"
            level_seat = 0 if seats[0] in skill.LEVELS else 1
            told = ["--skill", f"{seats[0]}," if level_seat == 0 else f",{seats[1]}"]
            partner = seats[1 - level_seat]
            size = (seed, instances * per_instance, per_instance, out)
            if partner == UNCONDITIONED:
                command = run.plays.generate(server, model, *size, plays.partner_args(server), told)
            elif level_seat == 0:
                command = run.plays.generate(server, model, *size, scripted[partner].partner_args(), told)
            else:  # the scripted negotiator in seat 0, the model in seat 1
                first = scripted[partner].first_seat_args()
                command = run.plays.generate(server, model, *size, plays.partner_args(server), told, first)
            steps.append((f"skill level: {seats[0]} vs {seats[1]}", command))
            judged.append((out / "games.jsonl", seats))
        run.shell.run_together(steps)
        if run.cfg.dry_run:
            return
        import pandas as pd

        from ..evaluation.protocol import records_table
        from ..records import read_games

        table = pd.concat([records_table(list(read_games(p)), seats) for p, seats in judged], ignore_index=True)
        levels = run.cfg.league.skill_levels
        partners = list(dict.fromkeys(s for seats in pairings for s in seats if s not in skill.LEVELS))
        scale = {
            "levels": skill.judge_levels(table, levels, partners),
            "steps": skill.level_steps(table, levels, partners),
        }
        text = f"{skill.judged_table(scale['levels'])}\n\n{skill.steps_table(scale['steps'])}"
        write_atomic(out_dir / SKILL_LEVELS_FILE, json.dumps(scale, indent=1, default=float) + "\n")
        write_atomic(out_dir / SKILL_LEVELS_TABLE, text + "\n")
        run.shell.echo(f"skill levels against the references ({out_dir}):\n{text}")

    def skill(self) -> ModuleType:
        """The run's game's skill levels (the command line refused levels for a game without them)."""
        module = skill_of(self.run.game_cls.name)
        assert module is not None, f"the {self.run.game_cls.name} game takes no skill levels"
        return module

    # -- the report ------------------------------------------------------------------------------

    def write_progress(self, metrics: Path, labels: Sequence[str], warm_label: str, source: str) -> Path | None:
        """RUN_DIR/report/progress.md: per promoted checkpoint its win shares against the previous
        one and the warm start, rating, cooperation and diversity (`league.progress`) read on the games
        `source` names, then the league's ratings of every member (from the training games and the
        promotion matches)."""
        if self.run.cfg.dry_run or not metrics.exists():
            return None
        rows = progress(json.loads(metrics.read_text()), labels, warm_label)
        out = metrics.parent.parent / PROGRESS_FILE
        saved = self.run.run_dir / LEAGUE_FILE
        league = self.league if self.league.members or not saved.exists() else League.load(saved, self.run.run_dir)
        ratings = league.ratings()
        lines = ["## Progress per checkpoint", "", f"Read on {source}.", "", progress_table(rows), ""]
        lines += ["## League ratings (Elo, all games)", "", "From the training games and the promotion matches.", ""]
        lines += [f"- {name}: {'–' if r is None else f'{r:.0f}'}" for name, r in ratings.items()]
        write_atomic(out, "\n".join(lines) + "\n")
        return out
