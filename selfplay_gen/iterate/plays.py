"""The `selfplay-gen` command lines a stage plays with: training games against a served model,
their conversion, the model's evaluations (development instances, the game's other instance sets,
the test split) and cross-play against a partner. One place builds them, and each reads the run's
configuration of its games from a file (`selfplay-gen play --config`), so generation, evaluation and every
trainer sample alike, with the defaults of one tree."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import config_tree, games
from ..options import Eval, Play, Played
from .config import Evaluation, Tools
from .server import Started
from .shell import Shell

# The development instances (`evaluation.splits.DEV`) as a run names them: its `eval --instances` value
# (the split's former name, which eval still takes) and its evaluations' directories (RUN_DIR/<stage>/eval/
# heldout, RUN_DIR/report/heldout), kept so that every run directory made before resumes and reads alike.
DEV_SET = "heldout"
TEST_SET = "test"
CONFIG_FILE = "play.yaml"  # the configuration of the games of a stage's play and eval commands


def default_game() -> str:
    """The game `selfplay-gen` plays when told none (`game: null`), so commands name a game only when it
    is another one."""
    return games.UNNAMED


def game_args(game: str, reward_mode: str | None) -> tuple[str, ...]:
    """The game's options of a command that takes no configuration file (`selfplay-gen init`)."""
    out = () if game == default_game() else ("--game", game)
    return out + (("--reward-mode", reward_mode) if reward_mode else ())


def environment() -> dict[str, str]:
    """The environment of a run's commands: this one without the variables that set a setting of `play` or
    `eval` (SELFPLAY_SAMPLING__TEMPERATURE, ...), which would go over the configuration file a stage wrote
    for them: what the run was told reaches its games by that file alone."""
    named = {k.env for tree in (Play, Eval) for k in config_tree.knobs(tree)}
    return {name: value for name, value in os.environ.items() if name not in named}


@dataclass(frozen=True)
class Plays:
    """The run's `play` and `eval` commands. Each reads the run's configuration of its games (`played`: the
    game and its sampling, written once to CONFIG_FILE beside the command's output) and gets on its command
    line only what differs from one command to the next: its seats, instances and output."""

    tools: Tools
    played: Played
    evaluation: Evaluation
    sets: tuple[str, ...]  # the evaluation's instance sets (DEV_SET first)
    shell: Shell
    written: set[Path] = field(default_factory=set)

    def config(self, directory: Path) -> list[str]:
        """`--config FILE`: the games' configuration in directory/CONFIG_FILE, written the first time a command
        of this run names it."""
        path = directory / CONFIG_FILE
        if path not in self.written:
            self.shell.write(path, config_tree.to_yaml(self.played))
            self.written.add(path)
        return ["--config", str(path)]

    def seat_args(self, server: Started, model: str | None) -> list[str]:
        return ["--backend", "sglang", *server.base_url_args(), *(["--model", model] if model else [])]

    def generate(
        self, server: Started, model: str | None, seed: int, num_games: int, games_per_instance: int, out_dir: Path,
        partner: list[str], extra: list[str],
    ) -> list[str]:  # fmt: skip
        return [
            *self.tools.gen, *self.config(out_dir), *self.seat_args(server, model), "--seed", str(seed),
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
        """(set, command) for every evaluation set; `final` adds the test split where it exists."""
        e = self.evaluation
        sets = [*self.sets, *([TEST_SET] if final and e.test_split else [])]
        out = []
        for name in sets:
            if name == DEV_SET:
                size = ["--num-instances", str(e.instances), "-k", str(e.games_per_instance)]
            elif name == TEST_SET:
                size = ["--num-instances", str(e.test_instances), "-k", str(e.test_games_per_instance)]
            else:
                size = ["-k", str(e.human_games_per_instance)]
            append = ["--append-to", str(append_to / name)] if append_to is not None else []
            command = [
                *self.tools.gen, "eval", *self.config(eval_dir), *self.seat_args(server, model), "--instances", name,
                *size, "--label", label, "--out", str(eval_dir / name), "--resume", "--quiet", *append,
            ]  # fmt: skip
            out.append((name, command))
        return out

    def crossplay(
        self, server: Started, model: str | None, label: str, partner: list[str], partner_label: str, out: Path
    ) -> list[str]:
        e = self.evaluation
        return [
            *self.tools.gen, "eval", *self.config(out), *self.seat_args(server, model), *partner, "--instances",
            DEV_SET, "--num-instances", str(e.instances), "-k", str(e.games_per_instance), "--label", label,
            "--partner-label", partner_label, "--out", str(out), "--resume", "--quiet",
        ]  # fmt: skip


def partner_args(server: Started) -> list[str]:
    return ["--partner-backend", "sglang", "--partner-base-url", server.url, "--partner-model", server.model]
