"""The `selfplay-gen` command lines a stage plays with: training games against a served model,
their conversion, the model's evaluations (development instances, the game's other instance sets,
the test split) and cross-play against a partner. One place builds them, and each reads the run's
configuration of its games from a file (`selfplay-gen play --config`), so generation, evaluation and every
trainer sample alike, with the defaults of one tree."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import config_tree, games
from ..options import GAME_OPTIONS, Eval, GameChoice, Play, Played
from ..sampling import Sampling
from .config import Evaluation, Tools
from .server import Started
from .shell import Shell

# The development instances (`evaluation.splits.DEV`) as a run names them: its `eval --instances` value
# (the split's former name, which eval still takes) and its evaluations' directories (RUN_DIR/<stage>/eval/
# heldout, RUN_DIR/report/heldout), kept so that every run directory made before resumes and reads alike.
DEV_SET = "heldout"
TEST_SET = "test"
CONFIG_FILE = "play.yaml"  # the configuration of the games of a stage's play and eval commands
# a model against a fixed reference on the development instances (`Part.references`): <stage>/eval/heldout_vs_NAME
VERSUS = f"{DEV_SET}_vs_"


def default_game() -> str:
    """The game `selfplay-gen` plays when told none (`game: null`), so commands name a game only when it
    is another one."""
    return games.UNNAMED


class ChosenGame(Protocol):
    """A configuration that names a game and its options (`Iteration`, `Generation`)."""

    @property
    def game(self) -> str | None: ...
    @property
    def reward_mode(self) -> str | None: ...
    @property
    def move_format(self) -> str | None: ...


def played_of(cfg: ChosenGame, sampling: Sampling | None = None) -> Played:
    """The game and its options that `cfg` chooses, sampled as `sampling` says (the defaults without it)."""
    return Played(game=cfg.game, sampling=sampling or Sampling(), **{k: getattr(cfg, k) for k in GAME_OPTIONS})


def game_args(cfg: ChosenGame) -> tuple[str, ...]:
    """The game's options of a command that takes no configuration file (`selfplay-gen init`)."""
    game = cfg.game or default_game()
    out = () if game == default_game() else ("--game", game)
    flags = {knob.name: knob.flag for knob in config_tree.knobs(GameChoice) if knob.name in GAME_OPTIONS}
    return out + tuple(part for name in GAME_OPTIONS if (value := getattr(cfg, name)) for part in (flags[name], value))


def environment() -> dict[str, str]:
    """The environment of a run's commands: this one without the variables that set a setting of `play` or
    `eval` (SELFPLAY_SAMPLING__TEMPERATURE, ...), which would go over the configuration file a stage wrote
    for them: what the run was told reaches its games by that file alone."""
    named = {k.env for tree in (Play, Eval) for k in config_tree.knobs(tree)}
    return {name: value for name, value in os.environ.items() if name not in named}


@dataclass(frozen=True)
class Part:
    """One game of a run as its evaluations see it (`decisions.parts`): a run of one game has one part, a
    mix of games one per game, each evaluated apart into its own directory under each evaluation's."""

    dir: str  # under each evaluation's directory ('' for a run of one game)
    played: Played  # this game's configuration (the run's, its game this one), which its commands read
    sets: tuple[str, ...]  # its evaluation's instance sets (DEV_SET first)
    # fixed opponents every evaluated model also plays (`decisions.references`): name -> the options seating it
    references: Mapping[str, list[str]] = field(default_factory=dict)

    def at(self, name: str) -> str:
        """An evaluation's name (and directory) for this game: `name`, or `name`/dir in a mix."""
        return f"{name}/{self.dir}" if self.dir else name

    @property
    def config_file(self) -> str:
        """The name of its configuration file in an evaluation's directory, which its games share."""
        return f"play_{self.dir}.yaml" if self.dir else CONFIG_FILE


@dataclass(frozen=True)
class Plays:
    """The run's `play` and `eval` commands. Each reads the configuration of its games (the run's `played`:
    its game, or mix of games, and their sampling; an evaluation of one game of a mix, that game's
    `Part.played`), written once to a file beside the command's output, and gets on its command line only
    what differs from one command to the next: its seats, instances and output."""

    tools: Tools
    played: Played  # the run's game or mix of games (generation, init, warm start)
    evaluation: Evaluation
    parts: tuple[Part, ...]  # what the evaluations play: each game of the run apart
    shell: Shell
    written: dict[Path, Played] = field(default_factory=dict)

    def config(self, directory: Path, played: Played | None = None, name: str = CONFIG_FILE) -> list[str]:
        """`--config FILE`: the configuration of `played` (the run's by default) in directory/`name`, written
        the first time a command of this run names it."""
        played = self.played if played is None else played
        path = directory / name
        if self.written.get(path) != played:
            self.shell.write(path, config_tree.to_yaml(played))
            self.written[path] = played
        return ["--config", str(path)]

    def seat_args(self, server: Started, model: str | None) -> list[str]:
        return ["--backend", "sglang", *server.base_url_args(), *(["--model", model] if model else [])]

    def generate(
        self, server: Started, model: str | None, seed: int, num_games: int, games_per_instance: int, out_dir: Path,
        partner: list[str], extra: list[str], first: list[str] | None = None,
    ) -> list[str]:  # fmt: skip
        """The command that plays `num_games` games from `seed` into out_dir/games.jsonl: the served model in seat 0
        (or whom `first` seats there) and `partner` in seat 1."""
        seat = self.seat_args(server, model) if first is None else first
        return [
            *self.tools.gen, *self.config(out_dir), *seat, "--seed", str(seed),
            "--num-games", str(num_games), "--games-per-instance", str(games_per_instance),
            "--out", str(out_dir / "games.jsonl"), "--resume", *partner, *extra,
        ]  # fmt: skip

    def convert(self, out_dir: Path, args: list[str]) -> list[str]:
        return [*self.tools.convert, str(out_dir / "games.jsonl"), "--out-dir", str(out_dir), "--overwrite", *args]

    def evaluations(
        self,
        server: Started,
        model: str | None,
        label: str,
        eval_dir: Path,
        append_to: Path | None,
        final: bool = False,
    ) -> list[tuple[str, list[str]]]:
        """(name, command) for every evaluation set of every game of the run (`Part`), and for every fixed
        reference the model's games against it on the development instances, both seat orders (`VERSUS`);
        `final` adds the test split where it exists."""
        e = self.evaluation
        out = []
        for part in self.parts:
            for name in [*part.sets, *([TEST_SET] if final and e.test_split else [])]:
                if name == DEV_SET:
                    size = ["--num-instances", str(e.instances), "-k", str(e.games_per_instance)]
                elif name == TEST_SET:
                    size = ["--num-instances", str(e.test_instances), "-k", str(e.test_games_per_instance)]
                else:
                    size = ["-k", str(e.human_games_per_instance)]
                where = part.at(name)
                append = ["--append-to", str(append_to / where)] if append_to is not None else []
                command = [
                    *self.tools.gen, "eval", *self.config(eval_dir, part.played, part.config_file),
                    *self.seat_args(server, model), "--instances", name, *size, "--label", label, "--out",
                    str(eval_dir / where), "--resume", "--quiet", *append,
                ]  # fmt: skip
                out.append((where, command))
            for name, partner in part.references.items():
                where = part.at(f"{VERSUS}{name}")
                command = self.crossplay(server, model, label, partner, name, eval_dir / where, played=part.played)
                out.append((where, command))
        return out

    def games_at_once(self, num_games: int) -> int:
        """The most games the run's server plays at once: `num_games` training games beside the evaluations of
        the model that plays them (`evaluations`, each set's games in flight together), or the final model's
        evaluations with the test split."""
        e = self.evaluation
        dev = e.instances * e.games_per_instance

        def games_of(name: str, part: Part) -> int:
            if name == DEV_SET:
                return dev
            game = games.get(games.mixture(part.played.game or default_game())[0])
            return game.human_games * e.human_games_per_instance

        evaluations = sum(
            sum(games_of(name, part) for name in part.sets) + 2 * dev * len(part.references) for part in self.parts
        )
        test = e.test_instances * e.test_games_per_instance * len(self.parts) if e.test_split else 0
        return evaluations + max(num_games, test)

    def crossplay(
        self, server: Started, model: str | None, label: str, partner: list[str], partner_label: str, out: Path,
        draw: int = 1, split: str = DEV_SET, played: Played | None = None,
    ) -> list[str]:  # fmt: skip
        """The model against a partner, both seat orders, of `played` (a game of the run's mix, `Part.played`;
        the run's game by default): on the `draw`-th set of `evaluation.instances` development instances
        (`dev_draw`), or on the test split (`split` TEST_SET: evaluation.test_instances, test_games_per_instance
        games each)."""
        e = self.evaluation
        if split == TEST_SET:
            size = ["--num-instances", str(e.test_instances), "-k", str(e.test_games_per_instance)]
        else:
            offset = ["--seed", str(dev_offset(e, draw))] if draw > 1 else []
            size = ["--num-instances", str(e.instances), *offset, "-k", str(e.games_per_instance)]
        return [
            *self.tools.gen, "eval", *self.config(out, played), *self.seat_args(server, model), *partner,
            "--instances", split, *size, "--label", label, "--partner-label", partner_label, "--out", str(out),
            "--resume", "--quiet",
        ]  # fmt: skip


def dev_offset(evaluation: Evaluation, draw: int) -> int:
    """The first development seed offset of the `draw`-th set of `evaluation.instances` instances: the first
    draw (offset 0) is the one every model's evaluation and the promotion matches play; a second one lies
    right after it, so figures read on it come from games that chose nothing."""
    return (draw - 1) * evaluation.instances


def dev_draw(evaluation: Evaluation, draw: int) -> str:
    """The development instances of the `draw`-th set, in words with their seeds, as a report names them."""
    from ..evaluation.splits import DEV

    first = DEV.start + dev_offset(evaluation, draw)
    last = first + evaluation.instances - 1
    return f"development draw {draw} ({evaluation.instances} instances, seeds {first:_} to {last:_})"


def partner_args(server: Started) -> list[str]:
    return ["--partner-backend", "sglang", "--partner-base-url", server.url, "--partner-model", server.model]
