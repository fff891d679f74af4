"""`selfplay-gen iterate` (the whole self-play loop), `selfplay-gen generate` (one served model's
games, conversion and evaluation) and `selfplay-gen train` (one verl training job and its merge).
Every option also reads the environment variable its help names, which is how the three
run_selfplay_*.sh scripts pass their settings on."""

from __future__ import annotations

import functools
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .. import games, serving
from . import competition, config, decisions, report, trainers
from .config import Evaluation, Iteration, PolicyLoss, Sampling, ServerSettings, Tools, TrainJob, Verl, Warm
from .loop import Run, train
from .plays import Plays, default_game, game_args, partner_args
from .server import Slots
from .shell import Shell
from .verl_jobs import merge

SETTINGS = {"help_option_names": ["-h", "--help"], "show_default": True}


def stop_on_signals() -> None:
    """SIGTERM ends a command as Ctrl-C does, through every `with`, so its servers are stopped."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def opt(name: str, envvar: str, **kwargs: Any) -> Callable:
    return click.option(name, envvar=envvar, show_envvar=True, **kwargs)


def known_game(ctx: click.Context, param: click.Parameter, name: str) -> str:
    """A game the registry has (one of a family, e.g. textarena:TicTacToe-v0, made to check it)."""
    try:
        games.get(name)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    return name


def options(*decorators: Callable) -> Callable:
    def apply(function: Callable) -> Callable:
        return functools.reduce(lambda f, d: d(f), reversed(decorators), function)

    return apply


def strengths(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    """0.3,0.6,1 -> (0.3, 0.6, 1.0); each in [0, 1]."""
    out = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        try:
            strength = float(part)
        except ValueError:
            strength = -1.0
        if not 0 <= strength <= 1:
            raise click.BadParameter(f"{part!r} is not a strength in [0, 1] (in {value!r})")
        out.append(strength)
    return tuple(out)


def skill_levels(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    """novice,expert -> ("novice", "expert"); checked against the game's levels once the game is known."""
    return tuple(filter(None, (p.strip() for p in value.split(","))))


def check_skill_levels(game: str | None, levels: tuple[str, ...]) -> None:
    """Levels the game's prompts take (`Game.skill`), at least two, lowest first."""
    if not levels:
        return
    name = game or default_game()
    module = competition.skill_of(name)
    if module is None:
        raise click.BadParameter(f"the {name} game takes no skill levels", param_hint="SKILL_LEVELS")
    known = tuple(module.LEVELS)
    unknown = [level for level in levels if level not in known]
    if unknown:
        raise click.BadParameter(
            f"{', '.join(unknown)}: not skill levels ({', '.join(known)}), in {','.join(levels)!r}",
            param_hint="SKILL_LEVELS",
        )
    if len(set(levels)) < 2 or list(levels) != sorted(set(levels), key=known.index):
        raise click.BadParameter(
            f"{','.join(levels)}: give two or more distinct levels, lowest first ({', '.join(known)})",
            param_hint="SKILL_LEVELS",
        )


def learning_rate(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A learning rate as written (1e-5: verl's command line shows it so), checked to be a number."""
    if value is not None:
        try:
            float(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a number") from None
    return value


BOOL = click.Choice(["True", "False"])
S = Sampling()
SV = ServerSettings()
V = Verl()
L = PolicyLoss()
E = Evaluation()
IT = Iteration()
LG = config.League()
W = Warm()

sampling_options = options(
    opt(
        "--temperature",
        "TEMPERATURE",
        type=float,
        default=S.temperature,
        help="Sampling temperature of every game, evaluation and rollout.",
    ),
    opt("--top-p", "TOP_P", type=float, default=S.top_p, help="Rollout top_p, as generated."),
    opt("--max-moves", "MAX_MOVES", type=int, default=S.max_moves, help="Valid moves per game."),
    opt(
        "--max-new-tokens",
        "MAX_NEW_TOKENS",
        type=int,
        default=S.max_new_tokens,
        help="New tokens per turn (generation, evaluation, online rollout).",
    ),
)
server_options = options(
    opt(
        "--sglang-url",
        "SGLANG_URL",
        default="",
        help="Use these running servers (space-separated) or a router instead of starting one.",
    ),
    opt("--sglang-python", "SGLANG_PYTHON", default=SV.python, help="Python with sglang."),
    opt("--port", "PORT", type=int, default=SV.port, help="Server port; a partner's server takes PORT + 1."),
    opt("--tp", "TP", type=int, default=SV.tp, help="Tensor-parallel size per server."),
    opt(
        "--dp",
        "DP",
        type=int,
        default=SV.dp,
        help="Data-parallel: this many servers (TP GPUs each, GPUs apart) behind sglang_router on PORT, their "
        "workers on PORT + 1000, PORT + 2000, ...",
    ),
    opt(
        "--extra-sglang-args",
        "EXTRA_SGLANG_ARGS",
        default=SV.extra_args,
        help="Server arguments [default: SGLang's own (CUDA graphs on), with a fallback only for a kernel or "
        "backend the install lacks, said on stderr: python -m selfplay_gen.serving sglang-args]; add "
        "--disable-cuda-graph to turn CUDA graphs off.",
    ),
    opt("--server-timeout", "SERVER_TIMEOUT", type=float, default=SV.timeout_s, help="Seconds to wait for /health."),
    opt(
        "--server-start-tries",
        "SERVER_START_TRIES",
        type=click.IntRange(min=1),
        default=SV.start_tries,
        help=(
            "Starts of a server that stopped on 'Not enough memory' (a GPU another process allocated on while it "
            "started)."
        ),
    ),
    opt(
        "--server-retry-wait",
        "SERVER_RETRY_WAIT",
        type=float,
        default=SV.retry_wait_s,
        help="Seconds between those starts.",
    ),
    opt(
        "--partner-mem-fraction",
        "PARTNER_MEM_FRACTION",
        type=float,
        default=SV.partner_mem_fraction,
        help="GPU memory share of each of two servers (--mem-fraction-static).",
    ),
    opt(
        "--swap-weights",
        "SWAP_WEIGHTS",
        type=BOOL,
        default=str(SV.swap_weights),
        help="A running server takes the next checkpoint of the same architecture and tokenizer through "
        "SGLang's /update_weights_from_disk (seconds) instead of a restart (minutes); False restarts it.",
    ),
    opt(
        "--keep-servers",
        "KEEP_SERVERS",
        type=BOOL,
        default=str(SV.keep_servers),
        help="While verl trains, the SGLang servers stay up with their GPU memory released (started with "
        "--enable-memory-saver; /release_memory_occupation, then /resume_memory_occupation and the new "
        "checkpoint's weights) instead of stopping and starting again with a new CUDA-graph capture, so a run "
        "starts its server once. A server that cannot release its memory is stopped as with False.",
    ),
)
tool_options = options(
    opt(
        "--selfplay-python",
        "SELFPLAY_PYTHON",
        default=None,
        help="Python with selfplay_gen importable [default: this one].",
    ),
    opt(
        "--selfplay-gen",
        "SELFPLAY_GEN",
        default=None,
        help="The selfplay-gen command [default: selfplay-gen if on PATH, else SELFPLAY_PYTHON -m selfplay_gen.cli].",
    ),
    opt(
        "--selfplay-convert", "SELFPLAY_CONVERT", default=None, help="The selfplay-convert command [default: likewise]."
    ),
    opt(
        "--trl-python",
        "TRL_PYTHON",
        default=None,
        help="Python with trl and selfplay_gen that runs TRAINER=dpo [default: SELFPLAY_PYTHON]. verl 0.9.1 stops "
        "at start-up where trl 1.16 imports, so on a machine where verl trains, keep trl in this Python only.",
    ),
)
game_options = options(
    opt(
        "--game",
        "GAME",
        default=None,
        callback=lambda ctx, param, name: name if name is None else known_game(ctx, param, name),
        help=f"The game: {', '.join(games.names() + games.families())} [default: the one selfplay-gen plays "
        "when told none].",
    ),
    opt(
        "--reward-mode",
        "REWARD_MODE",
        default=None,
        help=(
            "The game's reward mode, for a game with modes (e.g. cooperative | semi-competitive | competitive) "
            "[default: the game's]."
        ),
    ),
)
eval_options = options(
    opt(
        "--eval-instances",
        "EVAL_INSTANCES",
        type=int,
        default=E.instances,
        help="Held-out instances per evaluation (seeds from 10**9, never trained on).",
    ),
    opt(
        "--eval-games-per-instance",
        "EVAL_GAMES_PER_INSTANCE",
        type=int,
        default=E.games_per_instance,
        help="Games per held-out instance (human instances: 2).",
    ),
)
verl_options = options(
    opt(
        "--verl-python",
        "VERL_PYTHON",
        default=V.python,
        help="Python with verl; this repository must be importable there.",
    ),
    opt("--n-gpus", "N_GPUS", type=int, default=V.n_gpus, help="GPUs per node."),
    opt(
        "--nnodes",
        "NNODES",
        type=int,
        default=V.nnodes,
        help=(
            "Nodes. offline/online run once, on a Ray cluster's head; sft once per node with NODE_RANK and MASTER_ADDR."
        ),
    ),
    opt(
        "--node-rank",
        "NODE_RANK",
        type=int,
        default=None,
        help="sft on several nodes: this node's rank (0 on the first).",
    ),
    opt("--master-addr", "MASTER_ADDR", default=None, help="sft on several nodes: the first node's address."),
    opt("--master-port", "MASTER_PORT", type=int, default=V.master_port, help="sft on several nodes: its port."),
    opt(
        "--micro-batch-size",
        "MICRO_BATCH_SIZE",
        type=int,
        default=V.micro_batch_size,
        help="Micro-batch per GPU for updates and log-probs.",
    ),
    opt(
        "--max-prompt-length",
        "MAX_PROMPT_LENGTH",
        type=int,
        default=V.max_prompt_length,
        help="data.max_prompt_length (and conversion's prompt limit).",
    ),
    opt(
        "--max-response-length",
        "MAX_RESPONSE_LENGTH",
        type=int,
        default=V.max_response_length,
        help="data.max_response_length (and a seat's budget in generation).",
    ),
    opt(
        "--max-length",
        "MAX_LENGTH",
        type=int,
        default=None,
        help="sft: tokens per chat [default: prompt + response limits].",
    ),
    opt(
        "--sft-micro-tokens",
        "SFT_MICRO_TOKENS",
        type=int,
        default=V.sft_micro_tokens,
        help="sft: tokens per micro-batch a GPU (verl's data.max_token_len_per_gpu); fewer, larger micro-batches "
        "make a small model's step faster. Lower it if a larger model runs out of memory.",
    ),
    opt(
        "--ppo-micro-tokens",
        "PPO_MICRO_TOKENS",
        type=click.IntRange(min=0),
        default=None,
        show_default=f"{V.ppo_micro_tokens}, or the prompt + response limits if longer",
        help="GRPO: tokens per micro-batch for updates and log-probs (verl's use_dynamic_bsz; at least "
        "prompt + response limits); 0: --micro-batch-size sequences a micro-batch. Many small micro-batches "
        "leave a small model's GPU mostly idle.",
    ),
    opt("--sft-args", "SFT_ARGS", default=V.sft_args, help="sft: extra Hydra overrides for verl's SFT trainer."),
    opt(
        "--rollout-partner-temperature",
        "ROLLOUT_PARTNER_TEMPERATURE",
        type=click.FloatRange(min=0),
        default=None,
        help="Online GRPO: the temperature of the seat that is not trained in each game (at most the rollout's). "
        "0: the partner answers greedily, so the rewards of a group's games differ by the trained seat's moves "
        "alone  [default: the rollout's temperature].",
    ),
    opt(
        "--filter-groups",
        "FILTER_GROUPS",
        type=click.IntRange(min=0),
        default=V.filter_groups,
        help="GRPO: replace the groups whose games all got one reward (no advantage to learn from) by new games, "
        "DAPO's dynamic sampling. Online: verl's algorithm.filter_groups, with up to N batches of games in flight "
        "at once. Offline: up to N rounds of GAMES_PER_ITER games, each on new instances, while the converted "
        "groups are fewer than the games' groups (conversion drops constant ones), then as many groups as the games "
        "have, the earliest rounds'. 0: off.",
    ),
    opt("--rollout-tp", "ROLLOUT_TP", type=int, default=V.rollout_tp, help="Rollout tensor-parallel size."),
    opt(
        "--gpu-memory-utilization",
        "GPU_MEMORY_UTILIZATION",
        type=float,
        default=V.gpu_memory_utilization,
        help="Rollout KV-cache share of GPU memory.",
    ),
    opt(
        "--save-freq",
        "SAVE_FREQ",
        type=int,
        default=V.save_freq,
        help="Checkpoint every N steps; the last step is always saved.",
    ),
    opt("--test-freq", "TEST_FREQ", type=int, default=V.test_freq, help="Validate every N steps, -1: never."),
    opt(
        "--attn-impl",
        "ATTN_IMPL",
        default=V.attn_impl,
        help="Training attention implementation (verl's default needs flash-attn).",
    ),
    opt(
        "--fsdp-strategy",
        "FSDP_STRATEGY",
        type=click.Choice(["fsdp", "fsdp2"]),
        default=V.fsdp_strategy,
        help="verl's FSDP version for training (sft: engine.strategy; GRPO: actor_rollout_ref.actor.strategy). "
        "fsdp2 wraps the decoder layers only; fsdp with LoRA wraps every adapter matrix apart, whose per-module "
        "hooks make a small model's step about twice as long.",
    ),
    opt(
        "--gradient-checkpointing",
        "GRADIENT_CHECKPOINTING",
        type=BOOL,
        default=str(V.gradient_checkpointing),
        help="Recompute activations in the backward pass (sft and the GRPO actor): less memory, about a third "
        "more time a step. A 1.5B model may need it.",
    ),
    opt(
        "--cudnn-attention",
        "CUDNN_ATTENTION",
        type=BOOL,
        default=str(V.cudnn_attention),
        help="Let training's attention (PyTorch SDPA) run on cuDNN, PyTorch's first choice on Hopper GPUs. cuDNN "
        "builds a plan for each new micro-batch shape, which made an SFT step slower; False (the default) uses "
        "PyTorch's flash or memory-efficient kernels.",
    ),
    opt(
        "--use-remove-padding",
        "USE_REMOVE_PADDING",
        type=BOOL,
        default=str(V.use_remove_padding),
        help="actor_rollout_ref.model.use_remove_padding.",
    ),
    opt(
        "--enforce-eager", "ENFORCE_EAGER", type=BOOL, default=str(V.enforce_eager), help="Rollout without CUDA graphs."
    ),
    opt(
        "--sglang-engine-kwargs",
        "SGLANG_ENGINE_KWARGS",
        default=V.sglang_engine_kwargs,
        help="Engine options of verl's SGLang rollout [default: SGLang's own, with a fallback only for what "
        "verl's Python lacks: python -m selfplay_gen.serving verl-overrides].",
    ),
    opt(
        "--rollout-is",
        "ROLLOUT_IS",
        type=click.Choice(["token", "sequence"]),
        default=V.rollout_is,
        help="offline: truncated importance sampling per token or sequence.",
    ),
    opt(
        "--rollout-is-threshold",
        "ROLLOUT_IS_THRESHOLD",
        type=float,
        default=V.rollout_is_threshold,
        help="offline: upper bound of the importance weights.",
    ),
    opt(
        "--logger",
        "LOGGER",
        default="console",
        help=f"verl's loggers, comma-separated ({', '.join(config.LOGGERS)}); the run report plots from console lines.",
    ),
    opt(
        "--adv-estimator",
        "ADV_ESTIMATOR",
        default=L.adv_estimator,
        help="GRPO's advantage estimator (grpo; reinforce_plus_plus_baseline or rloo for one baseline per batch).",
    ),
    opt("--clip-ratio-low", "CLIP_RATIO_LOW", type=float, default=L.clip_ratio_low, help="PPO clip below 1."),
    opt(
        "--clip-ratio-high",
        "CLIP_RATIO_HIGH",
        type=float,
        default=L.clip_ratio_high,
        help="PPO clip above 1; clip-higher (0.28) lets rare tokens gain probability.",
    ),
    opt(
        "--use-kl-loss", "USE_KL_LOSS", type=BOOL, default=str(L.use_kl_loss), help="A KL loss to the reference policy."
    ),
    opt("--kl-loss-coef", "KL_LOSS_COEF", type=float, default=L.kl_loss_coef, help="Its coefficient."),
    opt("--entropy-coeff", "ENTROPY_COEFF", type=float, default=L.entropy_coeff, help="Entropy bonus."),
    opt("--target-modules", "TARGET_MODULES", default=L.target_modules, help="LoRA's target modules in GRPO."),
    opt("--lora-alpha", "LORA_ALPHA", type=int, default=None, help="LoRA alpha [default: 2 x rank]."),
)


def tools_from(o: dict) -> Tools:
    return Tools.find(o.pop("selfplay_python"), o.pop("selfplay_gen"), o.pop("selfplay_convert"), o.pop("trl_python"))


def sampling_from(o: dict, max_response_tokens: int | None = None) -> Sampling:
    return Sampling(
        o.pop("temperature"), o.pop("top_p"), o.pop("max_moves"), o.pop("max_new_tokens"), max_response_tokens
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


def servers_from(o: dict) -> ServerSettings:
    extra = o.pop("extra_sglang_args")
    if extra is None:
        extra = shlex.join(install_choice(o["sglang_python"], "sglang server").sglang_args())
    return ServerSettings(
        o.pop("sglang_python"), o.pop("port"), o.pop("tp"), o.pop("dp"), extra,
        o.pop("server_timeout"), o.pop("server_start_tries"), o.pop("server_retry_wait"), o.pop("partner_mem_fraction"),
        tuple(o.pop("sglang_url").split()), o.pop("swap_weights") == "True", o.pop("keep_servers") == "True",
    )  # fmt: skip


def verl_from(o: dict) -> tuple[Verl, PolicyLoss]:
    loggers = tuple(name.strip() for name in o.pop("logger").split(",") if name.strip())
    unknown = [name for name in loggers if name not in config.LOGGERS]
    if unknown:
        raise click.BadParameter(
            f"unknown logger {unknown[0]!r}; verl has {', '.join(config.LOGGERS)}", param_hint="--logger"
        )
    engine_kwargs = o.pop("sglang_engine_kwargs")
    if engine_kwargs is None:
        engine_kwargs = " ".join(install_choice(o["verl_python"], "verl rollout").engine_kwargs())
    longest = o["max_prompt_length"] + o["max_response_length"]
    micro_tokens = o.pop("ppo_micro_tokens")
    if micro_tokens is None:  # the default holds one sequence of the longest the limits allow
        micro_tokens = max(V.ppo_micro_tokens, longest)
    verl = Verl(
        python=o.pop("verl_python"), n_gpus=o.pop("n_gpus"), nnodes=o.pop("nnodes"), node_rank=o.pop("node_rank"),
        master_addr=o.pop("master_addr"), master_port=o.pop("master_port"), micro_batch_size=o.pop("micro_batch_size"),
        max_prompt_length=o.pop("max_prompt_length"), max_response_length=o.pop("max_response_length"),
        max_length=o.pop("max_length"), sft_micro_tokens=o.pop("sft_micro_tokens"),
        ppo_micro_tokens=micro_tokens, sft_args=o.pop("sft_args"),
        rollout_partner_temperature=o.pop("rollout_partner_temperature"), filter_groups=o.pop("filter_groups"),
        rollout_tp=o.pop("rollout_tp"), gpu_memory_utilization=o.pop("gpu_memory_utilization"),
        save_freq=o.pop("save_freq"), test_freq=o.pop("test_freq"), attn_impl=o.pop("attn_impl"),
        fsdp_strategy=o.pop("fsdp_strategy"), gradient_checkpointing=o.pop("gradient_checkpointing") == "True",
        cudnn_attention=o.pop("cudnn_attention") == "True",
        use_remove_padding=o.pop("use_remove_padding") == "True", enforce_eager=o.pop("enforce_eager") == "True",
        sglang_engine_kwargs=engine_kwargs, rollout_is=o.pop("rollout_is"),
        rollout_is_threshold=o.pop("rollout_is_threshold"), logger=loggers or ("console",),
    )  # fmt: skip
    if 0 < verl.ppo_micro_tokens < longest:
        raise click.BadParameter(
            f"{verl.ppo_micro_tokens} tokens cannot hold one sequence of up to {longest} (prompt + response limits)",
            param_hint="--ppo-micro-tokens / PPO_MICRO_TOKENS",
        )
    loss = PolicyLoss(
        adv_estimator=o.pop("adv_estimator"), clip_ratio_low=o.pop("clip_ratio_low"),
        clip_ratio_high=o.pop("clip_ratio_high"), use_kl_loss=o.pop("use_kl_loss") == "True",
        kl_loss_coef=o.pop("kl_loss_coef"), entropy_coeff=o.pop("entropy_coeff"),
        target_modules=o.pop("target_modules"), lora_alpha=o.get("lora_alpha"),
    )  # fmt: skip
    return verl, loss


@click.command("iterate", context_settings=SETTINGS)
@opt(
    "--run-dir",
    "RUN_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=IT.run_dir,
    help="Run directory (stages, reports, summary.md).",
)
@opt(
    "--initial-model",
    "INITIAL_MODEL",
    default=None,
    help="Hugging Face model directory to start from [default: the embedded SmolLM2-135M-Instruct, converted once].",
)
@opt("--num-iterations", "NUM_ITERATIONS", type=click.IntRange(min=0), default=IT.num_iterations, help="RL iterations.")
@opt(
    "--trainer",
    "TRAINER",
    type=click.Choice(trainers.names()),
    default=IT.trainer,
    help=(
        "filtered-bc: SFT on each group's best games (the default: at equal GPU time no GRPO beat "
        "it by its interval, and an iteration costs less GPU time); grpo: offline GRPO on whole groups; "
        "grpo-online: verl's online self-play loop, ONLINE_STEPS steps an iteration; dpo: DPO (TRL) on each group's "
        "best game against its worst."
    ),
)
@opt(
    "--games-per-iter",
    "GAMES_PER_ITER",
    type=click.IntRange(min=1),
    default=None,
    help="Games per iteration [default: grpo 1024, filtered-bc 4096].",
)
@opt(
    "--games-per-instance",
    "GAMES_PER_INSTANCE",
    type=click.IntRange(min=1),
    default=IT.games_per_instance,
    help="Games per instance = GRPO group size.",
)
@opt(
    "--epochs-per-iter",
    "EPOCHS_PER_ITER",
    type=click.IntRange(min=1),
    default=None,
    help="Training epochs per iteration [default: grpo 1, filtered-bc 2].",
)
@opt(
    "--lr",
    "RL_LR",
    default=None,
    callback=learning_rate,
    help="Learning rate of the iterations [default: grpo 1e-5, filtered-bc 1e-3, grpo-online 1e-5].",
)
@opt(
    "--batch-size",
    "RL_BATCH_SIZE",
    type=click.IntRange(min=1),
    default=None,
    help="Rows per step [default: grpo 16 groups, grpo-online 16 instances, filtered-bc 32, dpo 4 pairs]. "
    "With N_GPUS > 1, give online GRPO 64 or more: a step of 16 rows is bound by its longest games and gains "
    "little from a second GPU (bench/results/grpo_batch_h200x2_2026-11-26/).",
)
@opt(
    "--mini-batch-size",
    "RL_MINI_BATCH_SIZE",
    type=click.IntRange(min=1),
    default=None,
    help="GRPO rows per PPO update [default: half a step, so the second update is clipped].",
)
@opt(
    "--lora-rank",
    "RL_LORA_RANK",
    type=click.IntRange(min=0),
    default=None,
    help="LoRA rank of the iterations' training, 0: full fine-tuning [default: filtered-bc 16, grpo 0].",
)
@opt(
    "--top-fraction",
    "TOP_FRACTION",
    type=click.FloatRange(0, 1, min_open=True),
    default=IT.top_fraction,
    help="filtered-bc: share of each group's games imitated.",
)
@opt(
    "--dpo-pairs-per-group",
    "DPO_PAIRS_PER_GROUP",
    type=click.IntRange(min=1),
    default=IT.dpo_pairs_per_group,
    help="dpo: the most preference pairs of one (group, seat), the widest gap first; above 1, every win "
    "against every loss of a group (a league's group of games against one opponent is often all won or lost).",
)
@opt(
    "--dpo-pairs",
    "DPO_PAIRS",
    type=click.Choice(config.DPO_PAIR_POLICIES),
    default=IT.dpo_pairs,
    help="dpo: how a seat's games of a group are ranked into pairs. 'reward': by the seat's own reward (no "
    "deal ranks below any deal); 'outcome': as the rules judge a competitive game, a win above a tie above a "
    "loss (a game without a deal is a tie, so a walked-away game is preferred to a deal lost by a point, and "
    "DPO on many such pairs learns to walk away).",
)
@opt(
    "--online-steps",
    "ONLINE_STEPS",
    type=click.IntRange(min=1),
    default=IT.online_steps,
    help="grpo-online: verl steps per iteration (SAVE_FREQ: which are exported and evaluated).",
)
@opt(
    "--online-test-freq",
    "ONLINE_TEST_FREQ",
    type=int,
    default=IT.online_test_freq,
    help="grpo-online: validate on development instances every N steps.",
)
@opt(
    "--online-test-instances",
    "ONLINE_TEST_INSTANCES",
    type=click.IntRange(min=1),
    default=IT.online_test_instances,
    help="grpo-online: development instances each validation plays (from seed 10**9).",
)
@opt(
    "--crossplay",
    "CROSSPLAY",
    type=click.Choice(["0", "1"]),
    default=None,
    help="1: checkpoints play each other after the iterations [default: the game's crossplay_by_default].",
)
@opt(
    "--league-size",
    "LEAGUE_SIZE",
    type=click.IntRange(min=0),
    default=IT.league_size,
    help=(
        "0: self-play; N: a league: seat 0 (the only one trained) meets, per instance, an opponent drawn by rating "
        "closeness from the last N promoted checkpoints and the scripted negotiators at LEAGUE_SCRIPTED, one "
        "partner server at a time; a checkpoint is kept only when it beats the previous one (PROMOTION)."
    ),
)
@opt(
    "--league-scripted",
    "LEAGUE_SCRIPTED",
    default=",".join(f"{s:g}" for s in LG.scripted),
    callback=strengths,
    help="Strengths of the scripted negotiators in the league's pool, comma-separated; empty: none.",
)
@opt(
    "--league-sharpness",
    "LEAGUE_SHARPNESS",
    type=click.FloatRange(min=0),
    default=LG.sharpness,
    help="How strongly opponents rated near the player are preferred (0: uniform draws).",
)
@opt(
    "--league-past-learners",
    "LEAGUE_PAST_LEARNERS",
    type=click.Choice(["on", "off"]),
    default="on" if LG.past_learners else "off",
    help="League: on: every earlier iteration's checkpoint is an opponent, promoted or not, so a learner that "
    "trains on from kept-out checkpoints (PROMOTION_LEARNER=latest) meets its own greedier and more yielding "
    "versions; off: the pool holds promoted checkpoints only.",
)
@opt(
    "--league-self-play-seats",
    "LEAGUE_SELF_PLAY_SEATS",
    type=click.Choice(config.SELF_PLAY_SEATS),
    default=LG.self_play_seats,
    help="League: the seats that the games against the player's frozen copy train. seat0: the trained seat, as in "
    "every other game; both: its copy's seat too, played by the same weights (`selfplay-convert --seats-of`), so "
    "the learner also learns what answering its own demands pays.",
)
@opt(
    "--league-self-play",
    "LEAGUE_SELF_PLAY",
    type=click.FloatRange(0, 1),
    default=LG.self_play,
    help=(
        "League: the share of seat 0's instances played against a frozen copy of itself (the model the iteration "
        "started from, on its own server) instead of an opponent drawn by rating. Against scripted negotiators "
        "alone, asking for more always pays, and a model trained so can stop agreeing with its equals; AlphaStar's "
        "main agents play 0.35 against themselves."
    ),
)
@opt(
    "--league-eval-strength",
    "LEAGUE_EVAL_STRENGTH",
    type=click.FloatRange(0, 1),
    default=LG.eval_strength,
    help="League: every checkpoint also cross-plays the scripted negotiator of this strength at the end.",
)
@opt(
    "--promotion",
    "PROMOTION",
    type=click.Choice(config.PROMOTION_POLICIES),
    default=LG.promotion,
    help=(
        "auto: on in a league; on: an iteration's checkpoint is kept (the next iteration's model, the pool's newest) "
        "only when its cross-play win share against the previous one has a 95% interval above 50%; off: always kept."
    ),
)
@opt(
    "--promotion-cooperation",
    "PROMOTION_COOPERATION",
    type=click.Choice(["on", "off"]),
    default="on" if LG.cooperation else "off",
    help="on: a checkpoint that wins but whose self-play joint share of the best deal falls is not promoted "
    "(it wins by refusing deals): paired by instance, the drop's 95% interval lies below zero and its mean below "
    "the previous checkpoint's interval; off: winning is enough.",
)
@opt(
    "--promotion-learner",
    "PROMOTION_LEARNER",
    type=click.Choice(config.LEARNER_POLICIES),
    default=LG.learner,
    help="What the next iteration trains after a checkpoint is not promoted. promoted: the last promoted checkpoint "
    "again (the candidate is dropped); latest: the candidate, so small gains add up until one wins its match "
    "(AlphaGo Zero's learner). The opponent pool, the promotion match and the run's output keep promoted "
    "checkpoints only.",
)
@opt(
    "--baseline",
    "BASELINE",
    type=click.Choice(["group", "per-seat"]),
    default=LG.baseline,
    help=(
        "grpo: per-seat subtracts each seat's mean training reward over the iteration's games (a per-role baseline; "
        "with ADV_ESTIMATOR=reinforce_plus_plus_baseline or rloo, which compare across a batch)."
    ),
)
@opt(
    "--skill-levels",
    "SKILL_LEVELS",
    default="",
    callback=skill_levels,
    help=(
        "for a game whose prompts take a skill level, e.g. novice,intermediate,expert (lowest first): the warm "
        "start imitates the scripted player at each level's strength with the level in the prompt, the trained "
        "seat plays at the highest level, and "
        "every model plays its highest level against its lowest (skill.json; target 65% of decided games)."
    ),
)
@opt(
    "--time-budget-min",
    "TIME_BUDGET_MIN",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Minutes of training for the run: an iteration starts only while one as long as the last finished "
    "one would end within them (equal-time comparisons from one warm start: each iteration's generation, "
    "conversion, training and merge count; the base evaluation and the warm start do not).",
)
@opt(
    "--warm-start",
    "WARM_START",
    type=click.Choice(decisions.WARM_START_POLICIES),
    default=W.policy,
    help=(
        "auto: warm-start on the game's teacher games when the initial model agrees in fewer than "
        "WARM_START_BELOW of its held-out games; teacher: always; format: always, on random legal play (the "
        "grammar of the moves and no strategy: RL then learns the strategy from the rules alone); none: never."
    ),
)
@opt(
    "--warm-start-below",
    "WARM_START_BELOW",
    type=float,
    default=W.below,
    help="Agreement below which auto warm-starts.",
)
@opt("--warm-games", "WARM_GAMES", type=click.IntRange(min=1), default=W.games, help="Teacher games of the warm start.")
@opt(
    "--teacher-plan",
    "TEACHER_PLAN",
    default=None,
    help="The teacher's plan, for a game whose teacher has several [default: the game's own teacher plan]: e.g. "
    "by-reviewer (about 0.82) | by-reviewer-records (the same picks, written as the running maximum's records; "
    "MAX_NEW_TOKENS at least 640) | shuffled-records (the records plan with the reviewers in a random order per "
    "game: a choice left for RL) | ranked-records (the reviewers ranked by their best known value with noise: "
    "about 0.86, a choice left for RL) | sorted-records (the same ranking without noise, worked out in writing "
    "before the picks: about 0.85; MAX_NEW_TOKENS at least 896) | chained-records (the same picks, the order "
    "worked out one place at a time: about 0.85; MAX_NEW_TOKENS at least 896) | by-score (about 0.88; "
    "MAX_NEW_TOKENS at least 768) | sampled-by-score "
    "(by-score with noise on the values: about 0.88, a choice left for RL; MAX_NEW_TOKENS at least 768).",
)
@opt("--warm-epochs", "WARM_EPOCHS", type=click.IntRange(min=1), default=W.epochs, help="Warm-start epochs.")
@opt(
    "--warm-lora-rank",
    "WARM_LORA_RANK",
    type=click.IntRange(min=0),
    default=W.lora_rank,
    help="Warm-start LoRA rank; 0: full fine-tuning.",
)
@opt(
    "--warm-lr",
    "WARM_LR",
    default=None,
    callback=learning_rate,
    help="Warm-start learning rate [default: LoRA 1e-3, full 1e-4].",
)
@opt(
    "--retention/--no-retention",
    "RETENTION",
    default=E.retention,
    help="Run `selfplay-gen retention` on every stage's model (where installed).",
)
@opt(
    "--test-split/--no-test-split",
    "TEST_SPLIT",
    default=E.test_split,
    help="Evaluate the final model on the test split too (where `eval --instances test` exists).",
)
@game_options
@sampling_options
@server_options
@eval_options
@verl_options
@tool_options
@click.option("--dry-run", is_flag=True, help="Print every command instead of running it.")
@click.argument("overrides", nargs=-1, type=click.UNPROCESSED)
def iterate_command(**o: Any) -> None:
    """Self-play iterations: evaluate the initial model, warm-start it when it cannot play, then per
    iteration play games with the current model on new instances, convert, train and merge; every
    model is evaluated with the server that plays its games; checkpoints of a competitive game
    cross-play. Stages live under RUN_DIR (base/, warm/, iter_NNN/, crossplay/), each skipped once its
    DONE marker exists, so a stopped run resumes (an iteration whose model was trained and merged, its
    trained.json, at that model's evaluation). RUN_DIR/report/<set> has every model's evaluation
    rows, RUN_DIR/summary.md each stage's games, reward and wall time (per step, start-up apart).
    OVERRIDES go to verl as Hydra overrides."""
    stop_on_signals()
    iterate(o)


def iterate(o: dict[str, Any]) -> str:
    cfg = Iteration(
        run_dir=o.pop("run_dir"), initial_model=o.pop("initial_model"), game=o.pop("game"),
        reward_mode=o.pop("reward_mode"), num_iterations=o.pop("num_iterations"), trainer=o.pop("trainer"),
        games_per_iter=o.pop("games_per_iter"), games_per_instance=o.pop("games_per_instance"),
        epochs_per_iter=o.pop("epochs_per_iter"), lr=o.pop("lr"), batch_size=o.pop("batch_size"),
        mini_batch_size=o.pop("mini_batch_size"), lora_rank=o.pop("lora_rank"), top_fraction=o.pop("top_fraction"),
        dpo_pairs_per_group=o.pop("dpo_pairs_per_group"), dpo_pairs=o.pop("dpo_pairs"),
        online_steps=o.pop("online_steps"), online_test_freq=o.pop("online_test_freq"),
        online_test_instances=o.pop("online_test_instances"),
        crossplay=None if o["crossplay"] is None else o.pop("crossplay") == "1", league_size=o.pop("league_size"),
        league=config.League(o.pop("league_scripted"), o.pop("league_sharpness"), o.pop("promotion"),
                             o.pop("baseline"), o.pop("skill_levels"), o.pop("league_eval_strength"),
                             o.pop("promotion_cooperation") == "on", o.pop("league_self_play"),
                             o.pop("promotion_learner"), o.pop("league_self_play_seats"),
                             o.pop("league_past_learners") == "on"),
        time_budget_min=o.pop("time_budget_min"),
        warm=Warm(o.pop("warm_start"), o.pop("warm_start_below"), o.pop("warm_games"), o.pop("teacher_plan"),
                  o.pop("warm_epochs"), o.pop("warm_lora_rank"), o.pop("warm_lr")),
        sampling=sampling_from(o), servers=servers_from(o),
        evaluation=Evaluation(o.pop("eval_instances"), o.pop("eval_games_per_instance"), retention=o.pop("retention"),
                              test_split=o.pop("test_split")),
        tools=tools_from(o), overrides=tuple(o.pop("overrides")), dry_run=o.pop("dry_run"),
    )  # fmt: skip
    verl, loss = verl_from(o)
    check_skill_levels(cfg.game, cfg.league.skill_levels)
    if cfg.league.baseline == "per-seat" and cfg.trainer == "grpo" and loss.adv_estimator == "grpo":
        raise click.BadParameter(
            "grpo's estimator centers each group, which cancels a per-seat baseline; set ADV_ESTIMATOR to "
            "reinforce_plus_plus_baseline or rloo (one baseline across the batch)",
            param_hint="BASELINE=per-seat",
        )
    from dataclasses import replace

    return Run(replace(cfg, verl=verl, loss=loss)).main()


@click.command("generate", context_settings=SETTINGS)
@opt(
    "--model",
    "MODEL_NAME",
    default=None,
    help="Model directory to serve and tokenize with (required unless SGLANG_URL is set).",
)
@opt("--num-games", "NUM_GAMES", type=click.IntRange(min=0), default=256, help="Games to play; 0: evaluate only.")
@opt(
    "--games-per-instance",
    "GAMES_PER_INSTANCE",
    type=click.IntRange(min=1),
    default=8,
    help="Games per instance = GRPO group size.",
)
@opt("--seed", "SEED", type=int, default=0, help="Seed of the first instance; instances are SEED, SEED+1, ...")
@opt(
    "--max-response-tokens",
    "MAX_RESPONSE_TOKENS",
    type=int,
    default=None,
    help=(
        "A seat's budget past its first prompt; set it to the training max_response_length so longer games score 0 "
        "[default: no limit]."
    ),
)
@opt(
    "--out-dir",
    "OUT_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data/selfplay"),
    help="Games, parquet and server logs.",
)
@opt("--gen-args", "GEN_ARGS", default="", help="Extra arguments of the generation command.")
@opt("--convert-args", "CONVERT_ARGS", default="", help="Extra arguments of the conversion command.")
@opt(
    "--eval-dir",
    "EVAL_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=(
        "Evaluate the served model into EVAL_DIR/<set> (held-out; and the game's other sets) [default: no evaluation]."
    ),
)
@opt(
    "--eval-label", "EVAL_LABEL", default=None, help="The model's label in the reports [default: its directory's name]."
)
@opt(
    "--eval-append-to",
    "EVAL_APPEND_TO",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run-level reports: EVAL_APPEND_TO/<set> gets this model as its next row.",
)
@opt(
    "--partner-model",
    "PARTNER_MODEL",
    default=None,
    help="A second model for seat 1 of the training games, served on PORT + 1 (the evaluation stays self-play).",
)
@opt("--partner-label", "PARTNER_LABEL", default=None, help="The partner's label [default: its directory's name].")
@opt(
    "--crossplay-dir",
    "CROSSPLAY_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Cross-play of the model and PARTNER_MODEL on held-out instances, both seat orders, into CROSSPLAY_DIR.",
)
@game_options
@sampling_options
@server_options
@eval_options
@tool_options
@click.option("--dry-run", is_flag=True, help="Print the commands instead of running them.")
def generate_command(**o: Any) -> None:
    """Start an SGLang server for MODEL_NAME (or use SGLANG_URL), play NUM_GAMES games (against
    PARTNER_MODEL in seat 1 when set) into OUT_DIR/games.jsonl (resumable), convert them into
    OUT_DIR/*.parquet and, with EVAL_DIR, evaluate the served model with the same server. Servers are
    stopped on every way out."""
    stop_on_signals()
    model, partner_model, num_games = o.pop("model"), o.pop("partner_model"), o.pop("num_games")
    out_dir, crossplay_dir, eval_dir = o.pop("out_dir"), o.pop("crossplay_dir"), o.pop("eval_dir")
    if crossplay_dir and not partner_model:
        raise click.UsageError("CROSSPLAY_DIR needs PARTNER_MODEL (the opponent)")
    servers = servers_from(o)
    if not servers.urls and not model:
        raise click.UsageError("set MODEL_NAME (a model directory) or SGLANG_URL")
    game = o.pop("game") or default_game()
    shell = Shell(o.pop("dry_run"))
    plays = Plays(
        tools_from(o), game_args(game, o.pop("reward_mode")), sampling_from(o, o.pop("max_response_tokens")),
        Evaluation(o.pop("eval_instances"), o.pop("eval_games_per_instance")),
        decisions.evaluation_sets(games.get(game)),
    )  # fmt: skip
    label = o.pop("eval_label") or Path(model or "model").name
    if not shell.dry_run:
        out_dir.mkdir(parents=True, exist_ok=True)
    serve_partner = bool(partner_model) and (num_games > 0 or crossplay_dir is not None)
    with Slots(servers, shell) as slots:
        server = slots.serve(0, model or "", out_dir / "sglang.log", shared=serve_partner)
        partner = []
        if serve_partner:
            partner = partner_args(slots.serve(1, partner_model, out_dir / "sglang-partner.log", shared=True))
        # the games and the evaluations play at once on the server: each keeps it busy through the others' tails
        steps = []
        if num_games > 0:
            steps.append((
                "generate",
                plays.generate(server, model, o.pop("seed"), num_games, o.pop("games_per_instance"), out_dir, partner,
                               shlex.split(o.pop("gen_args"))),
            ))  # fmt: skip
        if eval_dir is not None:
            evaluations = plays.evaluations(server, model, label, eval_dir, o.pop("eval_append_to"))
            steps += [(f"evaluate ({name})", command) for name, command in evaluations]
        shell.run_together(steps)
        if num_games > 0:
            shell.run("convert", plays.convert(out_dir, shlex.split(o.pop("convert_args"))))
        if crossplay_dir is not None:
            partner_label = o.pop("partner_label") or Path(partner_model).name
            shell.run("cross-play", plays.crossplay(server, model, label, partner, partner_label, crossplay_dir))
    if num_games > 0:
        click.echo(f"games: {out_dir}/games.jsonl, summary: {out_dir}/games.summary.json, parquet: {out_dir}")
    if eval_dir is not None:
        click.echo(f"evaluation: {' '.join(str(eval_dir / s) for s in plays.sets)} (report.md in each)")
    if crossplay_dir is not None:
        click.echo(f"cross-play: {crossplay_dir}/report.md")


MODE_DATA = {
    "offline": ("data/selfplay", "val.parquet"),
    "sft": ("data/sft", "val.parquet"),
    "online": ("data/online", "test.parquet"),
}


@click.command("train", context_settings=SETTINGS)
@opt(
    "--mode",
    "MODE",
    type=click.Choice(["offline", "online", "sft"]),
    default="offline",
    help=(
        "offline: GRPO on replayed games (selfplay-convert parquet); online: GRPO on games verl's rollout plays "
        "(selfplay-gen init parquet); sft: supervised fine-tuning on chats (selfplay-convert --format sft)."
    ),
)
@opt("--model-path", "MODEL_PATH", default=None, help="Hugging Face model directory to train (required).")
@opt(
    "--train-files",
    "TRAIN_FILES",
    default=None,
    help="Training parquet [default: data/selfplay/train.parquet; sft: data/sft/...; online: data/online/...].",
)
@opt(
    "--val-files",
    "VAL_FILES",
    default=None,
    help="Validation parquet [default: beside it, val.parquet; online: test.parquet].",
)
@opt(
    "--out-dir",
    "OUT_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data/train"),
    help="checkpoints/ and the merged model hf/ go here.",
)
@opt("--train-batch-size", "TRAIN_BATCH_SIZE", type=click.IntRange(min=1), default=64, help="Rows per step.")
@opt(
    "--mini-batch-size",
    "MINI_BATCH_SIZE",
    type=click.IntRange(min=1),
    default=None,
    help="PPO mini-batch [default: TRAIN_BATCH_SIZE].",
)
@opt("--epochs", "EPOCHS", type=click.IntRange(min=1), default=1, help="Passes over TRAIN_FILES.")
@opt(
    "--total-steps",
    "TOTAL_STEPS",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many steps [default: EPOCHS decide].",
)
@opt("--lr", "LR", default=None, callback=learning_rate, help="Learning rate [default: GRPO 1e-6, sft 1e-4].")
@opt(
    "--lora-rank",
    "LORA_RANK",
    type=click.IntRange(min=0),
    default=0,
    help="LoRA rank (sft: model.lora_rank; GRPO: actor_rollout_ref.model.lora_rank); 0: full fine-tuning.",
)
@opt(
    "--rollout-n",
    "ROLLOUT_N",
    type=click.IntRange(min=1),
    default=None,
    help="Games per row [default: online 8; offline: rollout_n of convert_summary.json beside TRAIN_FILES].",
)
@opt("--experiment", "EXPERIMENT", default=None, help="trainer.experiment_name [default: selfplay-MODE].")
@sampling_options
@verl_options
@click.option("--dry-run", is_flag=True, help="Print the commands instead of running them.")
@click.argument("overrides", nargs=-1, type=click.UNPROCESSED)
def train_command(**o: Any) -> None:
    """Train MODEL_PATH with verl (GRPO through verl.trainer.main_ppo and this project's agent loops, or
    SFT through verl's SFT trainer), then merge the last checkpoint into OUT_DIR/hf (a LoRA adapter
    folded in). OVERRIDES go to verl as Hydra overrides, last, so they win."""
    stop_on_signals()
    mode = o.pop("mode")
    if not o["model_path"]:
        raise click.UsageError("set MODEL_PATH (a Hugging Face model directory)")
    data, val = MODE_DATA[mode]
    shell = Shell(o.pop("dry_run"))
    verl, loss = verl_from(o)
    rank = o.pop("lora_rank")
    job = TrainJob(
        mode=mode, model=o.pop("model_path"), train_files=o.pop("train_files") or f"{data}/train.parquet",
        val_files=o.pop("val_files") or f"{data}/{val}", out_dir=o.pop("out_dir"),
        experiment=o.pop("experiment") or f"selfplay-{mode}", lr=o.pop("lr") or ("1e-4" if mode == "sft" else "1e-6"),
        batch_size=o.pop("train_batch_size"), mini_batch_size=o.pop("mini_batch_size"), epochs=o.pop("epochs"),
        total_steps=o.pop("total_steps"), lora_rank=rank, lora_alpha=o.get("lora_alpha"),
        rollout_n=o.pop("rollout_n") or (8 if mode == "online" else None), overrides=tuple(o.pop("overrides")),
    )  # fmt: skip
    if mode != "sft" and rank > 0:
        from dataclasses import replace

        loss = replace(loss, lora_rank=rank)
    sampling = sampling_from(o)
    train(shell, job, verl, loss, sampling, job.out_dir / report.TRAIN_LOG)
    merge(shell, job, verl, None, job.out_dir / "hf", lora=rank > 0)
