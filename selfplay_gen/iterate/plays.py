"""The `selfplay-gen` command lines a stage plays with: training games against a served model,
their conversion, the model's evaluations (development instances, the game's other instance sets,
the test split) and cross-play against a partner. One place builds them, so generation, evaluation and every
trainer sample alike."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .config import Evaluation, Sampling, Tools
from .server import Started

# The development instances (`evaluation.splits.DEV`) as a run names them: its `eval --instances` value
# (the split's former name, which eval still takes) and its evaluations' directories (RUN_DIR/<stage>/eval/
# heldout, RUN_DIR/report/heldout), kept so that every run directory made before resumes and reads alike.
DEV_SET = "heldout"
TEST_SET = "test"
# a model against a fixed reference on the development instances (`Part.references`): <stage>/eval/heldout_vs_NAME
VERSUS = f"{DEV_SET}_vs_"


@functools.cache
def default_game() -> str:
    """The game `selfplay-gen` plays when told none (its `--game` default), so commands name a game
    only when it is another one."""
    from ..cli import play

    return next(str(p.default) for p in play.params if p.name == "game")


def game_args(game: str, reward_mode: str | None) -> tuple[str, ...]:
    out = () if game == default_game() else ("--game", game)
    return out + (("--reward-mode", reward_mode) if reward_mode else ())


@dataclass(frozen=True)
class Part:
    """One game of a run as its evaluations see it (`decisions.parts`): a run of one game has one part, a
    mix of games one per game, each evaluated apart into its own directory under each evaluation's."""

    dir: str  # under each evaluation's directory ('' for a run of one game)
    game: tuple[str, ...]  # game_args() of this game
    sets: tuple[str, ...]  # its evaluation's instance sets (DEV_SET first)
    # fixed opponents every evaluated model also plays (`decisions.references`): name -> the options seating it
    references: Mapping[str, list[str]] = field(default_factory=dict)

    def at(self, name: str) -> str:
        """An evaluation's name (and directory) for this game: `name`, or `name`/dir in a mix."""
        return f"{name}/{self.dir}" if self.dir else name


@dataclass(frozen=True)
class Plays:
    tools: Tools
    game: tuple[str, ...]  # game_args() of the run's game, or of its mix of games (generation, init, warm start)
    sampling: Sampling
    evaluation: Evaluation
    parts: tuple[Part, ...]  # what the evaluations play: each game of the run apart

    def sampling_args(self, server: Started, model: str | None) -> list[str]:
        return [
            "--backend",
            "sglang",
            *server.base_url_args(),
            *(["--model", model] if model else []),
            *self.sampling.args(),
        ]

    def generate(
        self, server: Started, model: str | None, seed: int, num_games: int, games_per_instance: int, out_dir: Path,
        partner: list[str], extra: list[str],
    ) -> list[str]:  # fmt: skip
        return [
            *self.tools.gen, *self.game, *self.sampling_args(server, model), "--seed", str(seed),
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
                    *self.tools.gen, "eval", *part.game, *self.sampling_args(server, model), "--instances", name,
                    *size, "--label", label, "--out", str(eval_dir / where), "--resume", "--quiet", *append,
                ]  # fmt: skip
                out.append((where, command))
            for name, partner in part.references.items():
                where = part.at(f"{VERSUS}{name}")
                command = self.crossplay(server, model, label, partner, name, eval_dir / where, game=part.game)
                out.append((where, command))
        return out

    def crossplay(
        self, server: Started, model: str | None, label: str, partner: list[str], partner_label: str, out: Path,
        draw: int = 1, split: str = DEV_SET, game: tuple[str, ...] | None = None,
    ) -> list[str]:  # fmt: skip
        """The model against a partner, both seat orders, of `game` (a game of the run's mix; the run's game
        by default): on the `draw`-th set of `evaluation.instances` development instances (`dev_draw`), or on
        the test split (`split` TEST_SET: evaluation.test_instances, test_games_per_instance games each)."""
        e = self.evaluation
        if split == TEST_SET:
            size = ["--num-instances", str(e.test_instances), "-k", str(e.test_games_per_instance)]
        else:
            offset = ["--seed", str(dev_offset(e, draw))] if draw > 1 else []
            size = ["--num-instances", str(e.instances), *offset, "-k", str(e.games_per_instance)]
        return [
            *self.tools.gen, "eval", *(self.game if game is None else game), *self.sampling_args(server, model),
            *partner, "--instances", split, *size, "--label", label, "--partner-label", partner_label, "--out",
            str(out), "--resume", "--quiet",
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
