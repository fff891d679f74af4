"""`selfplay-gen iterate` (the whole self-play loop), `selfplay-gen generate` (one served model's
games, conversion and evaluation) and `selfplay-gen train` (one verl training job and its merge).
Each reads one configuration tree (`config.Iteration`, `config.Generation`, `config.Training`) whose
flags and environment variables are generated from it (`selfplay_gen.config_tree`); the three
run_selfplay_*.sh scripts pass --script-env, so the variables they document set it too."""

from __future__ import annotations

import shlex
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from .. import config_tree, games, models, serving
from ..atomic import write_atomic
from ..games.base import Game
from ..sampling import GROUP_SIZE
from . import competition, decisions, report, trainers
from .config import Generation, Iteration, ServerSettings, Training, TrainJob, Verl
from .loop import EMBEDDED_MODEL_DIR, Run, embedded_model, train
from .plays import Plays, default_game, environment, partner_args, played_of
from .server import Slots
from .shell import Shell
from .verl_jobs import merge

SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 120}
CONFIG_FILE = "config.yaml"  # a run's configuration, in RUN_DIR
# verl's micro-batches when unset, measured with SmolLM2's vocabulary: a micro-batch's logits are its tokens times
# the vocabulary, so a larger vocabulary gets fewer tokens in proportion
SFT_MICRO_TOKENS, PPO_MICRO_TOKENS, MEASURED_VOCABULARY = 32768, 16384, 49152
CHECKPOINTING_FROM = 1_000_000_000  # parameters from which verl.gradient_checkpointing is on when unset
T = TypeVar("T")


def stop_on_signals() -> None:
    """SIGTERM ends a command as Ctrl-C does, through every `with`, so its servers are stopped."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def configured(tree: type) -> Callable[[Callable], Callable]:
    """The options of a command that reads `tree` (`config_tree.command`), and --script-env and --dry-run."""
    script_env = click.option(
        "--script-env",
        is_flag=True,
        help="Also read the variables the run_selfplay_*.sh scripts document (PORT, TEMPERATURE, ..., named "
        "'script:' beside each setting), below the SELFPLAY_ ones; the scripts pass it.",
    )
    dry_run = click.option("--dry-run", is_flag=True, help="Print every command instead of running it.")
    return config_tree.command(tree, script_env, dry_run, script_env=True)


def load(
    tree: type[T], o: dict[str, Any], alias_applies: Callable[[config_tree.Knob, Mapping[str, Any]], bool] | None = None
) -> tuple[T, tuple[str, ...]]:
    """The command's tree from every source, and the positional arguments that name no knob (verl's)."""
    return config_tree.load(tree, o, script_env=o["script_env"], alias_applies=alias_applies or (lambda k, v: True))


printed = config_tree.printed


def check_skill_levels(game: str | None, levels: tuple[str, ...]) -> None:
    """Levels the game's prompts take (`Game.skill`), at least two, lowest first."""
    if not levels:
        return
    name = game or default_game()
    module = competition.skill_of(name)
    if module is None:
        raise click.BadParameter(f"the {name} game takes no skill levels", param_hint="league.skill_levels")
    known = tuple(module.LEVELS)
    unknown = [level for level in levels if level not in known]
    if unknown:
        raise click.BadParameter(
            f"{', '.join(unknown)}: not skill levels ({', '.join(known)}), in {','.join(levels)!r}",
            param_hint="league.skill_levels",
        )
    if len(set(levels)) < 2 or list(levels) != sorted(set(levels), key=known.index):
        raise click.BadParameter(
            f"{','.join(levels)}: give two or more distinct levels, lowest first ({', '.join(known)})",
            param_hint="league.skill_levels",
        )


def check_overlap(cfg: Iteration, trainer: type[trainers.Trainer]) -> None:
    """Overlap plays the next iteration's games before this one's model is judged: not for a trainer that plays
    inside verl, nor where a model must be judged before the next iteration starts (`loop` says why)."""
    if not trainer.plays_games:
        raise click.BadParameter(
            f"{trainer.name} plays its games inside verl, on-policy, with nothing to play ahead; use overlap=off",
            param_hint="overlap",
        )
    if cfg.league_size > 0 or cfg.promotes() or cfg.league.skill_levels:
        raise click.BadParameter(
            "a league (league_size, league.promotion, league.skill_levels) judges each model before the next "
            "iteration plays; use overlap=off",
            param_hint="overlap",
        )


def check_resident(cfg: Iteration, trainer: type[trainers.Trainer]) -> None:
    """A resident trainer (`iterate.resident`) is offline GRPO's, and trains on from its own weights: not where a
    promotion rule may set an iteration's model aside."""
    if trainer.name != "grpo":
        raise click.BadParameter(
            f"a resident trainer replays each iteration's groups through offline GRPO; {trainer.name} starts its "
            "own job each iteration (use trainer=grpo, or verl.resident=false)",
            param_hint="verl.resident",
        )
    if cfg.promotes():
        raise click.BadParameter(
            "a promotion rule may set an iteration's model aside, while a resident trainer goes on from its own "
            "weights; use league.promotion=off or verl.resident=false",
            param_hint="verl.resident",
        )


def install_choice(python: str, what: str) -> serving.ServerChoice:
    """SGLang's settings for the install behind `python`, each fallback said on stderr."""
    try:
        installed = serving.probe(python)
    except click.ClickException as err:  # e.g. a dry run naming another machine's Python: assume the least
        click.echo(f"{what}: {err.message}; taking the fallback for every part", err=True)
        installed = {}
    choice = serving.choose(installed)
    for reason in choice.reasons:
        click.echo(f"{what}: {reason}", err=True)
    return choice


def with_servers(servers: ServerSettings) -> ServerSettings:
    """The server settings with SGLang's arguments worked out for the install, and the user's added to
    them (`serving.with_own_args`)."""
    install = install_choice(servers.python, "sglang server").sglang_args()
    return replace(
        servers, extra_args=shlex.join(serving.with_own_args(install, shlex.split(servers.extra_args or "")))
    )


def with_verl(verl: Verl, model: str | None = None) -> Verl:
    """verl's settings with what is left to the machine and the model worked out: the rollout's engine options for
    the install; the tokens of a micro-batch (at least one sequence of the longest the limits allow), fewer for a
    model of a larger vocabulary; and gradient checkpointing for a model of a billion parameters or more, whose
    activations (each game padded to the longest of its micro-batch) outgrow a GPU shared with servers. `model`:
    the run's initial model (None: the embedded one)."""
    vocab = models.vocab_size(model) if model else None

    def tokens(measured: int, longest: int) -> int:
        if vocab and vocab > MEASURED_VOCABULARY:
            measured = measured * MEASURED_VOCABULARY // vocab // 1024 * 1024
        return max(measured, longest)

    longest = verl.max_prompt_length + verl.max_response_length
    if verl.ppo_micro_tokens is None:
        verl = replace(verl, ppo_micro_tokens=tokens(PPO_MICRO_TOKENS, longest))
    elif 0 < verl.ppo_micro_tokens < longest:
        raise click.BadParameter(
            f"{verl.ppo_micro_tokens} tokens cannot hold one sequence of up to {longest} (prompt + response limits)",
            param_hint="verl.ppo_micro_tokens",
        )
    if verl.sft_micro_tokens is None:
        verl = replace(verl, sft_micro_tokens=tokens(SFT_MICRO_TOKENS, verl.max_length or longest))
    if verl.gradient_checkpointing is None:
        parameters = models.parameter_count(model) if model else None
        verl = replace(verl, gradient_checkpointing=bool(parameters and parameters >= CHECKPOINTING_FROM))
    install = install_choice(verl.python, "verl rollout").engine_kwargs()
    kwargs = serving.with_own_kwargs(install, (verl.sglang_engine_kwargs or "").split())
    return replace(verl, sglang_engine_kwargs=" ".join(kwargs))


def trainer_alias(knob: config_tree.Knob, values: Mapping[str, Any]) -> bool:
    """A script's trainer variable (RL_LR, GAMES_PER_ITER, ...) sets the section of the trainer that runs."""
    if not knob.path.startswith("trainers."):
        return True
    try:
        return knob.path.split(".")[1] == trainers.get(values.get("trainer", Iteration.trainer)).section
    except ValueError:  # no such trainer: said once the tree is read
        return False


@click.command("iterate", context_settings=SETTINGS)
@configured(Iteration)
def iterate_command(**o: Any) -> None:
    """Self-play iterations: evaluate the initial model, warm-start it when it cannot play, then per
    iteration play games with the current model on new instances, convert, train and merge; every model is
    evaluated with the server that plays its games; checkpoints of a competitive game cross-play. With
    --overlap one-step, the next iteration's games are played while this one trains (by the model this one
    started from, one policy version behind). Stages live under RUN_DIR (base/, warm/, iter_NNN/,
    crossplay/), each skipped once its DONE marker exists, so a stopped run resumes (an iteration whose
    model was trained and merged, its trained.json, at that model's evaluation). RUN_DIR/config.yaml holds
    the run's configuration (read it back with --config), RUN_DIR/report/<set> every model's evaluation
    rows, RUN_DIR/summary.md each stage's games, reward and wall time (per step, start-up apart).

    OVERRIDES: `path=value` sets a setting (trainers.grpo.lr=1e-5); an argument whose key lies outside the
    tree's sections goes to verl as a Hydra override (trainer.test_freq=5)."""
    stop_on_signals()
    iterate(o)


def iterate(o: dict[str, Any]) -> str | None:
    cfg, rest = load(Iteration, o, trainer_alias)
    cfg = replace(cfg, overrides=(*cfg.overrides, *rest), dry_run=o["dry_run"])
    try:
        trainer = trainers.get(cfg.trainer)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="trainer") from None
    check_skill_levels(cfg.game, cfg.league.skill_levels)
    played = (cfg.game or default_game()).split(games.MIX)
    without = [name for name in played if cfg.own_plan_weight and not games.get(name).own_plan]
    if without:
        raise click.BadParameter(
            f"{', '.join(without)} records no own-plan shares (what the agreed outcome is worth on what each seat "
            "sees), so its games have no own-plan term; leave own_plan_weight at 0",
            param_hint="own_plan_weight",
        )
    credit = cfg.trainers.grpo_online.move_credit
    uncredited = [name for name in played if credit and games.get(name).move_credits is Game.move_credits]
    if uncredited:
        raise click.BadParameter(
            f"{', '.join(uncredited)} credits no part of a move apart from its game (`Game.move_credits`); leave "
            "trainers.grpo_online.move_credit at 0",
            param_hint="trainers.grpo_online.move_credit",
        )
    if cfg.league.skill_levels and cfg.warm.games_per_instance > 1:
        raise click.BadParameter(
            f"a skill-conditioned warm start plays one game an instance at each level, not "
            f"{cfg.warm.games_per_instance}; leave warm.games_per_instance at 1",
            param_hint="warm.games_per_instance",
        )
    if cfg.games_per_instance % cfg.league.partners_per_group:
        raise click.BadParameter(
            f"{cfg.league.partners_per_group} partners cannot share a group of {cfg.games_per_instance} games evenly; "
            "give a divisor of games_per_instance",
            param_hint="league.partners_per_group",
        )
    try:
        decisions.parts(played_of(cfg), cfg.evaluation.references)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="evaluation.references") from None
    if len(games.mixture(cfg.game or default_game())) > 1 and (cfg.league_size > 0 or cfg.promotes()):
        raise click.BadParameter(
            "a mix of games trains one model on all of them by self-play; a league (league_size, league.promotion) "
            "plays one game",
            param_hint="game",
        )
    if cfg.league.baseline == "per-seat" and trainer.name == "grpo" and cfg.loss.adv_estimator == "grpo":
        raise click.BadParameter(
            "grpo's estimator centers each group, which cancels a per-seat baseline; set loss.adv_estimator to "
            "reinforce_plus_plus_baseline or rloo (one baseline across the batch)",
            param_hint="league.baseline=per-seat",
        )
    if cfg.overlaps():
        check_overlap(cfg, trainer)
    if cfg.verl.resident:
        check_resident(cfg, trainer)
    if printed(cfg, o):
        return None
    run = replace(
        cfg, servers=with_servers(cfg.servers), verl=with_verl(cfg.verl, cfg.initial_model), tools=cfg.tools.resolved()
    )
    if not cfg.dry_run:
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        note_changes(cfg.run_dir / CONFIG_FILE, cfg)
        write_atomic(cfg.run_dir / CONFIG_FILE, config_tree.to_yaml(cfg))
    return Run(run).main()


def note_changes(path: Path, cfg: Iteration) -> None:
    """A run started again in its RUN_DIR with other settings says which (its stages already done keep theirs)."""
    if not path.exists():
        return
    known = {k.path: k for k in config_tree.knobs(Iteration)}
    try:
        before = config_tree.flat(config_tree.build(Iteration, config_tree.read(path, known)))
    except click.UsageError as error:
        click.echo(f"note: the run's earlier configuration is unreadable ({error.format_message()})", err=True)
        return
    now = config_tree.flat(cfg)
    changed = [f"{name}: {before[name]!r} -> {now[name]!r}" for name in now if before.get(name) != now[name]]
    if changed:
        click.echo(f"note: {path} changes since the run last started: {'; '.join(changed)}", err=True)


@click.command("generate", context_settings=SETTINGS)
@configured(Generation)
def generate_command(**o: Any) -> None:
    """Start an SGLang server for `model` (or use servers.urls), play num_games games (against
    partner_model in seat 1 when set) into OUT_DIR/games.jsonl (resumable), convert them into
    OUT_DIR/*.parquet and, with eval_dir, evaluate the served model with the same server. Servers are
    stopped on every way out. OVERRIDES: `path=value` settings (sampling.temperature=0.7)."""
    stop_on_signals()
    cfg, rest = load(Generation, o)
    if rest:
        raise click.UsageError(f"{rest[0]!r} names no setting (see --print-config)")
    if cfg.crossplay_dir and not cfg.partner_model:
        raise click.UsageError("crossplay_dir needs partner_model (the opponent)")
    if printed(cfg, o):
        return
    model, out_dir, eval_dir, crossplay_dir = cfg.model, cfg.out_dir, cfg.eval_dir, cfg.crossplay_dir
    if not cfg.servers.urls and not model:
        model = EMBEDDED_MODEL_DIR if o["dry_run"] else embedded_model()
    shell = Shell(o["dry_run"], environment())
    played = played_of(cfg, cfg.sampling)
    plays = Plays(cfg.tools.resolved(), played, cfg.evaluation, decisions.parts(played, ("none",)), shell)
    label = cfg.eval_label or Path(model or "model").name
    if not shell.dry_run:
        out_dir.mkdir(parents=True, exist_ok=True)
    serve_partner = bool(cfg.partner_model) and (cfg.num_games > 0 or crossplay_dir is not None)
    games_at_once = plays.games_at_once(cfg.num_games) if eval_dir else cfg.num_games
    with Slots(with_servers(cfg.servers).for_games(games_at_once), shell) as slots:
        server = slots.serve(0, model or "", out_dir / "sglang.log", shared=serve_partner)
        partner = []
        if serve_partner:
            partner = partner_args(slots.serve(1, cfg.partner_model or "", out_dir / "sglang-partner.log", shared=True))
        # the games and the evaluations play at once on the server: each keeps it busy through the others' tails
        steps = []
        if cfg.num_games > 0:
            steps.append((
                "generate",
                plays.generate(server, model, cfg.seed, cfg.num_games, cfg.games_per_instance, out_dir, partner,
                               shlex.split(cfg.gen_args)),
            ))  # fmt: skip
        if eval_dir is not None:
            evaluations = plays.evaluations(server, model, label, eval_dir, cfg.eval_append_to)
            steps += [(f"evaluate ({name})", command) for name, command in evaluations]
        shell.run_together(steps)
        if cfg.num_games > 0:
            shell.run("convert", plays.convert(out_dir, shlex.split(cfg.convert_args)))
        if crossplay_dir is not None:
            partner_label = cfg.partner_label or Path(cfg.partner_model or "").name
            shell.run("cross-play", plays.crossplay(server, model, label, partner, partner_label, crossplay_dir))
    if cfg.num_games > 0:
        click.echo(f"games: {out_dir}/games.jsonl, summary: {out_dir}/games.summary.json, parquet: {out_dir}")
    if eval_dir is not None:
        sets = [part.at(name) for part in plays.parts for name in part.sets]
        click.echo(f"evaluation: {' '.join(str(eval_dir / s) for s in sets)} (report.md in each)")
    if crossplay_dir is not None:
        click.echo(f"cross-play: {crossplay_dir}/report.md")


MODE_DATA = {
    "offline": ("data/selfplay", "val.parquet"),
    "sft": ("data/sft", "val.parquet"),
    "online": ("data/online", "test.parquet"),
}


@click.command("train", context_settings=SETTINGS)
@configured(Training)
def train_command(**o: Any) -> None:
    """Train model_path with verl (GRPO through verl.trainer.main_ppo and this project's agent loops, or
    SFT through verl's SFT trainer), then merge the last checkpoint into OUT_DIR/hf (a LoRA adapter
    folded in). OVERRIDES: `path=value` sets a setting (lr=1e-5); an argument whose key lies outside the
    tree's sections goes to verl as a Hydra override, last, so it wins."""
    stop_on_signals()
    cfg, rest = load(Training, o)
    cfg = replace(cfg, overrides=(*cfg.overrides, *rest))
    if not cfg.model_path:
        raise click.UsageError("set model_path (a Hugging Face model directory)")
    if printed(cfg, o):
        return
    mode, rank = cfg.mode, cfg.lora_rank
    data, val = MODE_DATA[mode]
    shell = Shell(o["dry_run"])
    verl = with_verl(cfg.verl, cfg.model_path)
    job = TrainJob(
        mode=mode, model=cfg.model_path, train_files=cfg.train_files or f"{data}/train.parquet",
        val_files=cfg.val_files or f"{data}/{val}", out_dir=cfg.out_dir,
        experiment=cfg.experiment or f"selfplay-{mode}", lr=cfg.lr or ("1e-4" if mode == "sft" else "1e-6"),
        batch_size=cfg.batch_size,
        mini_batch_size=cfg.mini_batch_size, epochs=cfg.epochs, total_steps=cfg.total_steps, lora_rank=rank,
        lora_alpha=cfg.loss.lora_alpha, rollout_n=cfg.rollout_n or (GROUP_SIZE if mode == "online" else None),
        overrides=cfg.overrides,
    )  # fmt: skip
    loss = replace(cfg.loss, lora_rank=rank) if mode != "sft" and rank > 0 else cfg.loss
    train(shell, job, verl, loss, cfg.sampling, job.out_dir / report.TRAIN_LOG)
    merge(shell, job, verl, None, job.out_dir / "hf")
