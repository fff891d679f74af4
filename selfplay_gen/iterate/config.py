"""The typed settings of a self-play run: ONE tree (`Iteration`, written to RUN_DIR/config.yaml) with
one default for every knob, so generation, evaluation and every trainer read the same `Sampling`, and a
game played for training, for an evaluation or inside verl's rollout is sampled alike. Flags, environment
variables and config files are generated from the tree (`selfplay_gen.config_tree`): a knob is one line.

The defaults, and why (the sampling's: `selfplay_gen.sampling`):
- max_response_length 3072 tokens per seat: games whose seat outgrows the training limit score 0 at
  generation time, so nothing is cut off at training time.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click

from .. import environments, games, serving
from ..config_tree import Alias, ListOf, Number, Switch, knob, outside, section
from ..options import game_knob, games_per_instance_knob, move_format_knob, reward_mode_knob, teacher_plan_help
from ..reward import RewardTerms
from ..sampling import GROUP_SIZE, POSITIVE, Sampling, number
from .placement import PLACEMENTS

ON_OFF = ("on", "off")
TRUE_FALSE = ("True", "False")
COUNT = click.IntRange(min=0)
SHARE = click.FloatRange(0, 1)


class Command(click.ParamType):
    """A command line as the shell splits it ('python -m selfplay_gen.cli'); a YAML list as it is."""

    name = "command"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple | list):
            return tuple(str(v) for v in value)
        return tuple(shlex.split(str(value)))


@dataclass(frozen=True)
class ServerSettings:
    """SGLang servers: how they are started, where, and for how long one may take to come up."""

    python: str = knob(
        environments.sglang_python(), "Python with sglang [make gpu's .venv-serve where it exists, else python3].",
        alias="SGLANG_PYTHON",
    )  # fmt: skip
    port: int = knob(30000, "Server port; a partner's server takes port + 1.", alias="PORT")
    tp: int = knob(1, "Tensor-parallel size per server.", type=POSITIVE, alias="TP")
    dp: int = knob(
        1, "Data-parallel: this many servers (tp GPUs each, GPUs apart) behind sglang_router on port, their "
        "workers on port + 1000, port + 2000, ...", type=POSITIVE, alias="DP",
    )  # fmt: skip
    workers_per_gpu: int = knob(
        1, "SGLang servers on each GPU (each group of tp), behind sglang_router as DP workers are, each with an "
        "equal part of the memory share one server there would have (its --mem-fraction-static, else "
        f"{serving.LONE_MEM_FRACTION}): a small model's server spends much of each decode step on its own CPU work "
        "(scheduling, each request's results), which another server's scheduler on the same GPU overlaps with "
        "its kernels.", type=POSITIVE, alias="WORKERS_PER_GPU",
    )  # fmt: skip
    extra_args: str | None = knob(
        None, "Server arguments added to SGLang's own (CUDA graphs on) and to the fallbacks for a kernel or "
        "backend the install lacks (said on stderr: python -m selfplay_gen.serving sglang-args); an option "
        "given here replaces the install's. --disable-cuda-graph turns CUDA graphs off; --mem-fraction-static "
        "0.12 leaves room for other runs on the same GPU.", alias="EXTRA_SGLANG_ARGS",
    )  # fmt: skip
    cuda_graph_max_bs: int | None = knob(
        None, "The largest decode batch each server captures a CUDA graph for (SGLang's --cuda-graph-max-bs); a "
        "larger batch decodes without one, each step launching every kernel from the CPU. null: the most games "
        "the run's server plays at once (an iteration's games beside its model's evaluations, or the final "
        "evaluation), where that is more than SGLang's own 256, at most 4,096. 0: SGLang's own. A "
        "--cuda-graph-max-bs, --cuda-graph-bs or --disable-cuda-graph in extra_args goes first.", type=COUNT,
        alias="CUDA_GRAPH_MAX_BS",
    )  # fmt: skip
    dtype: str | None = knob(
        None, "The dtype every server serves in (SGLang's --dtype). null: in iterate, the one SGLang picks for "
        "the initial model (float16 for a float32 one), so that the run's checkpoints, which the merge keeps in "
        "float32, play and are evaluated in the dtype the initial model was; elsewhere SGLang's own choice for "
        "each checkpoint. A --dtype in extra_args goes first.", alias="SERVER_DTYPE",
    )  # fmt: skip
    placement: str = knob(
        "local", "Where the servers run. local: on this machine, DP workers on GPUs apart. ray: across the nodes of "
        "the Ray cluster at RAY_ADDRESS (else the one `ray start` runs here), the DP workers spread one a node "
        "first, each on its node's GPUs and address, the router here; every node must read the run directory at "
        "the same path (a shared filesystem).", type=click.Choice(PLACEMENTS), alias="SERVER_PLACEMENT",
    )  # fmt: skip
    router_args: str | None = knob(
        None, "sglang_router arguments, e.g. --policy round_robin [null: the router's own: cache-aware].",
        alias="ROUTER_ARGS",
    )  # fmt: skip
    timeout_s: float = knob(900.0, "Seconds to wait for /health.", alias="SERVER_TIMEOUT")
    start_tries: int = knob(
        3, "Starts of a server that stopped on 'Not enough memory' (a GPU another process allocated on while it "
        "started), verl's rollout server in a training job included.", type=POSITIVE, alias="SERVER_START_TRIES",
    )  # fmt: skip
    retry_wait_s: float = knob(30.0, "Seconds between those starts.", alias="SERVER_RETRY_WAIT")
    partner_mem_fraction: float = knob(
        0.4, "GPU memory share of each of two servers (--mem-fraction-static).", alias="PARTNER_MEM_FRACTION"
    )
    urls: tuple[str, ...] = knob(
        (), "Use these running servers (or a router) instead of starting one.", alias="SGLANG_URL"
    )
    swap_weights: bool = knob(
        True, "A running server takes the next checkpoint of the same architecture and tokenizer through "
        "SGLang's /update_weights_from_disk (seconds) instead of a restart (minutes); false restarts it.",
        alias=Alias("SWAP_WEIGHTS", TRUE_FALSE),
    )  # fmt: skip
    keep_servers: bool = knob(
        True, "While verl trains, the SGLang servers stay up with their GPU memory released (started with "
        "--enable-memory-saver; /release_memory_occupation, then /resume_memory_occupation and the new "
        "checkpoint's weights) instead of stopping and starting again with a new CUDA-graph capture, so a run "
        "starts its server once (bench/results/kept_iteration_h100_2026-11-26/). A server that cannot release "
        "its memory is stopped as with false.", alias=Alias("KEEP_SERVERS", TRUE_FALSE),
    )  # fmt: skip
    overlap_mem_fraction: float = knob(
        0.3, "With overlap one-step or verl.resident: the GPU memory share (--mem-fraction-static) of the server "
        "that shares the GPU with verl's training (playing the next iteration's games beside it, or beside a "
        "trainer that stays up between iterations); the rest is the trainer's (verl's own rollout engine takes "
        "verl.gpu_memory_utilization of it). Lower it if training runs out of memory.",
        type=click.FloatRange(0, 1, min_open=True), alias="OVERLAP_MEM_FRACTION",
    )  # fmt: skip

    @property
    def workers(self) -> int:
        """The SGLang servers a server of these settings is: one, or the router's workers."""
        return self.dp * self.workers_per_gpu

    def for_games(self, games_at_once: int) -> ServerSettings:
        """These settings for a run whose server plays up to `games_at_once` games at once, its workers' share
        each: `cuda_graph_max_bs` worked out where it is left null (`serving.graph_batch`)."""
        if self.cuda_graph_max_bs is not None:
            return self
        return replace(self, cuda_graph_max_bs=serving.graph_batch(-(-games_at_once // self.workers)))


@dataclass(frozen=True)
class Tools:
    """The commands the stages run, as they are spelled on this machine (`resolved` fills in the defaults)."""

    python: str | None = knob(None, "Python with selfplay_gen importable [null: this one].", alias="SELFPLAY_PYTHON")
    gen: tuple[str, ...] = knob(
        (), "The selfplay-gen command [empty: selfplay-gen if on PATH, else tools.python -m selfplay_gen.cli].",
        type=Command(), alias="SELFPLAY_GEN",
    )  # fmt: skip
    convert: tuple[str, ...] = knob(
        (), "The selfplay-convert command [empty: likewise].", type=Command(), alias="SELFPLAY_CONVERT"
    )
    # verl 0.9.1 stops at start-up in a Python where trl 1.16 imports, so TRL gets a Python of its own
    trl_python: str | None = knob(
        None, "Python with trl and selfplay_gen that runs the dpo trainer [null: tools.python]. verl 0.9.1 stops "
        "at start-up where trl 1.16 imports, so on a machine where verl trains, keep trl in this Python only.",
        alias="TRL_PYTHON",
    )  # fmt: skip

    def resolved(self) -> Tools:
        """The installed commands, else the modules run by `python`; TRL by `trl_python`, else by `python`."""
        python = self.python or sys.executable

        def command(given: tuple[str, ...], script: str, module: str) -> tuple[str, ...]:
            if given:
                return given
            return (script,) if shutil.which(script) else (python, "-m", module)

        return Tools(
            python=python,
            gen=command(self.gen, "selfplay-gen", "selfplay_gen.cli"),
            convert=command(self.convert, "selfplay-convert", "convert.cli"),
            trl_python=self.trl_python or python,
        )

    def trl(self) -> str:
        """The Python that runs TRL."""
        return self.trl_python or self.python or sys.executable


@dataclass(frozen=True)
class Evaluation:
    """Held-out evaluation size (also of each cross-play pairing)."""

    instances: int = knob(
        64, "Held-out instances per evaluation (seeds from 10**9, never trained on).", type=POSITIVE,
        alias="EVAL_INSTANCES",
    )  # fmt: skip
    games_per_instance: int = knob(8, "Games per held-out instance.", type=POSITIVE, alias="EVAL_GAMES_PER_INSTANCE")
    human_games_per_instance: int = knob(2, "Games per human instance.", type=POSITIVE)
    test_instances: int = knob(256, "Instances of the test split (final models only, never tuned on).", type=POSITIVE)
    test_games_per_instance: int = knob(4, "Games per test instance.", type=POSITIVE)
    test_split: bool = knob(
        True, "Evaluate the final model on the test split too (where `eval --instances test` exists).",
        alias="TEST_SPLIT",
    )  # fmt: skip
    retention: bool = knob(
        False, "Run `selfplay-gen retention` on every stage's model (where installed).", alias="RETENTION"
    )
    references: tuple[str, ...] = knob(
        ("auto",), "Fixed opponents of known strength every evaluated model also plays on the development "
        "instances, in both seats (win, draw and loss rates per checkpoint in summary.md): auto: the game's own "
        "(TextArena: random legal play, and minimax at TicTacToe, the equilibrium at Kuhn Poker; none for the "
        "other games); none; or some of the game's, comma-separated.", type=ListOf(click.STRING),
        alias="EVAL_REFERENCES",
    )  # fmt: skip


# How a LoRA actor's weights reach SGLang: merged into the base weights, as a full weight update.
# verl 0.9.1 otherwise sends the adapter itself, as LoadLoRAAdapterFromTensorsReqInput(
# serialized_named_tensors=[one copy per TP rank]), the request as a later SGLang defines it;
# SGLang 0.5.12's request takes one `serialized_tensors` string instead, so the first sync fails
# with a TypeError. The merged update goes through update_weights_from_tensor, the path full
# fine-tuning uses, which both agree on; the rollout then serves what the exported model is (base
# plus adapter, folded), in the rollout's dtype, and SGLang runs without its LoRA kernels. The trained adapter
# itself stays exact in the actor (fp32), and checkpoints keep it apart from the base weights.
LORA_SYNC = "actor_rollout_ref.model.lora.merge=True"


@dataclass(frozen=True)
class PolicyLoss:
    """The GRPO knobs that keep a near-deterministic policy learning, as verl 0.9.1 names them.

    - `adv_estimator`: grpo normalizes each group; reinforce_plus_plus_baseline (or rloo) gives a
      baseline per batch, for groups whose reward differences come from the partner;
    - `clip_ratio_low/high`: clip-higher (DAPO) raises the upper bound (e.g. 0.28) so rare tokens can
      gain probability, which a policy of entropy 0.02 per token otherwise cannot;
    - `use_kl_loss`/`kl_loss_coef`: a KL penalty to the reference policy (off: the reference model is
      not even loaded);
    - `entropy_coeff`: an entropy bonus;
    - `lora_rank`/`lora_alpha`/`target_modules`: LoRA RL (0: full fine-tuning), the adapter trained
      apart from the weights in float32. The adapter is merged into the base
      weights for each sync to the rollout engine (`model.lora.merge`, see `LORA_SYNC`). The rank is
      the trainer's (`trainers.<name>.lora_rank`, or `selfplay-gen train`'s `lora_rank`).
    """

    adv_estimator: str = knob(
        "grpo", "GRPO's advantage estimator (grpo; reinforce_plus_plus_baseline or rloo for one baseline per batch).",
        alias="ADV_ESTIMATOR",
    )  # fmt: skip
    clip_ratio_low: float = knob(0.2, "PPO clip below 1.", alias="CLIP_RATIO_LOW")
    clip_ratio_high: float = knob(
        0.2, "PPO clip above 1; clip-higher (0.28) lets rare tokens gain probability.", alias="CLIP_RATIO_HIGH"
    )
    use_kl_loss: bool = knob(False, "A KL loss to the reference policy.", alias=Alias("USE_KL_LOSS", TRUE_FALSE))
    kl_loss_coef: float = knob(0.001, "Its coefficient.", alias="KL_LOSS_COEF")
    entropy_coeff: float = knob(0.0, "Entropy bonus.", alias="ENTROPY_COEFF")
    lora_rank: int = outside(0)
    lora_alpha: int | None = knob(None, "LoRA alpha [null: 2 x rank].", alias="LORA_ALPHA")
    target_modules: str = knob("all-linear", "LoRA's target modules in GRPO.", alias="TARGET_MODULES")

    def overrides(self) -> list[str]:
        out = [
            f"algorithm.adv_estimator={self.adv_estimator}",
            f"actor_rollout_ref.actor.clip_ratio_low={number(self.clip_ratio_low)}",
            f"actor_rollout_ref.actor.clip_ratio_high={number(self.clip_ratio_high)}",
            f"actor_rollout_ref.actor.use_kl_loss={self.use_kl_loss}",
            f"actor_rollout_ref.actor.entropy_coeff={number(self.entropy_coeff)}",
        ]
        if self.use_kl_loss:
            out.append(f"actor_rollout_ref.actor.kl_loss_coef={number(self.kl_loss_coef)}")
        if self.lora_rank > 0:
            alpha = self.lora_alpha if self.lora_alpha is not None else 2 * self.lora_rank
            out += [
                f"actor_rollout_ref.model.lora_rank={self.lora_rank}",
                f"actor_rollout_ref.model.lora_alpha={alpha}",
                f"actor_rollout_ref.model.target_modules={self.target_modules}",
                LORA_SYNC,
            ]
        return out


LOGGERS = ("console", "tensorboard", "wandb", "mlflow", "swanlab")


@dataclass(frozen=True)
class Verl:
    """How verl runs here: resources, lengths, and engine settings of every training job."""

    python: str = knob(
        environments.verl_python(), "Python with verl; this repository must be importable there [make gpu's "
        ".venv-train where it exists, else python3].", alias="VERL_PYTHON",
    )  # fmt: skip
    n_gpus: int = knob(1, "GPUs per node.", type=POSITIVE, alias="N_GPUS")
    nnodes: int = knob(
        1, "Nodes. offline/online run once, on a Ray cluster's head; sft once per node with verl.node_rank and "
        "verl.master_addr.", type=POSITIVE, alias="NNODES",
    )  # fmt: skip
    node_rank: int | None = knob(None, "sft on several nodes: this node's rank (0 on the first).", alias="NODE_RANK")
    master_addr: str | None = knob(None, "sft on several nodes: the first node's address.", alias="MASTER_ADDR")
    master_port: int = knob(29500, "sft on several nodes: its port.", alias="MASTER_PORT")
    micro_batch_size: int = knob(
        4, "Micro-batch per GPU for updates and log-probs.", type=POSITIVE, alias="MICRO_BATCH_SIZE"
    )
    max_prompt_length: int = knob(
        1024, "data.max_prompt_length (and conversion's prompt limit).", type=POSITIVE, alias="MAX_PROMPT_LENGTH"
    )
    max_response_length: int = knob(
        3072, "data.max_response_length (and a seat's budget in generation).", type=POSITIVE,
        alias="MAX_RESPONSE_LENGTH",
    )  # fmt: skip
    max_length: int | None = knob(
        None, "sft: tokens per chat [null: prompt + response limits].", type=POSITIVE, alias="MAX_LENGTH"
    )
    # a small model's step costs about the same per micro-batch whatever it holds, so the warm start's steps
    # go in 2 micro-batches on one GPU and 1 a GPU on two (bench/results/fsdp2_h200x2_2026-11-26/)
    sft_micro_tokens: int | None = knob(
        None, "sft: tokens per micro-batch a GPU (verl's data.max_token_len_per_gpu); fewer, larger micro-batches "
        "make a small model's step faster. Lower it if a larger model runs out of memory.", type=POSITIVE,
        alias="SFT_MICRO_TOKENS", show_default="32768, fewer in proportion for a vocabulary larger than SmolLM2's",
    )  # fmt: skip
    # a few large micro-batches keep a small model's GPU busy (bench/results/rl_online_tokens_h100_2026-11-25/)
    ppo_micro_tokens: int | None = knob(
        None, "GRPO: tokens per micro-batch for updates and log-probs (verl's use_dynamic_bsz; at least "
        "prompt + response limits); 0: verl.micro_batch_size sequences a micro-batch. Many small micro-batches "
        "leave a small model's GPU mostly idle.", type=COUNT, alias="PPO_MICRO_TOKENS",
        show_default="16384, fewer in proportion for a vocabulary larger than SmolLM2's; at least the prompt + "
        "response limits",
    )  # fmt: skip
    # online GRPO: the untrained seat's sampling temperature (selfplay_loop's +selfplay.partner_temperature)
    rollout_partner_temperature: float | None = knob(
        None, "Online GRPO: the temperature of the seat that is not trained in each game (at most the rollout's). "
        "0: the partner answers greedily, so the rewards of a group's games differ by the trained seat's moves "
        "alone [null: the rollout's temperature].", type=click.FloatRange(min=0), alias="ROLLOUT_PARTNER_TEMPERATURE",
    )  # fmt: skip
    # DAPO's dynamic sampling. Online (verl's algorithm.filter_groups): up to this many batches of games in
    # flight at once (the rollout is bound by its longest games, so a few batches play in about the time of
    # one). Offline: up to this many rounds of games on new instances while the converted groups (constant
    # ones dropped) are fewer than the games' groups, of which it keeps that many, the earliest rounds'
    # (DAPO's batch), so the update costs what any iteration's does
    filter_groups: int = knob(
        0, "GRPO: replace the groups whose games all got one reward (no advantage to learn from) by new games, "
        "DAPO's dynamic sampling. Online: verl's algorithm.filter_groups, with up to N batches of games in flight "
        "at once. Offline: up to N rounds of the iteration's games, each on new instances, while the converted "
        "groups are fewer than the games' groups (conversion drops constant ones), then as many groups as the "
        "games have, the earliest rounds'. 0: off.", type=COUNT, alias="FILTER_GROUPS",
    )  # fmt: skip
    sft_args: str = knob("", "sft: extra Hydra overrides for verl's SFT trainer.", alias="SFT_ARGS")
    rollout_tp: int = knob(1, "Rollout engine: tensor-parallel size.", type=POSITIVE, alias="ROLLOUT_TP")
    gpu_memory_utilization: float = knob(
        0.4, "Rollout engine: its KV-cache share of GPU memory.", alias="GPU_MEMORY_UTILIZATION"
    )
    save_freq: int = knob(50, "Checkpoint every N steps; the last step is always saved.", alias="SAVE_FREQ")
    test_freq: int = knob(-1, "Validate every N steps, -1: never.", alias="TEST_FREQ")
    attn_impl: str = knob(
        "sdpa", "Training attention implementation (verl's default needs flash-attn).", alias="ATTN_IMPL"
    )
    # FSDP1's wrap policy with LoRA makes each adapter matrix its own FSDP unit, each running FSDP's hooks on
    # every micro-batch; FSDP2 wraps the decoder layers and the root, and ran the warm start's SFT step
    # faster (bench/results/fsdp2_h200x2_2026-11-26/)
    fsdp_strategy: str = knob(
        "fsdp2", "verl's FSDP version for training (sft: engine.strategy; GRPO: actor_rollout_ref.actor.strategy). "
        "fsdp2 wraps the decoder layers only; fsdp with LoRA wraps every adapter matrix apart, whose per-module "
        "hooks make a small model's step about twice as long.", type=click.Choice(["fsdp", "fsdp2"]),
        alias="FSDP_STRATEGY",
    )  # fmt: skip
    gradient_checkpointing: bool | None = knob(
        None, "Recompute activations in the backward pass (sft and the GRPO actor): less memory, about a third "
        "more time a step.", alias=Alias("GRADIENT_CHECKPOINTING", TRUE_FALSE),
        show_default="on for a model of a billion parameters or more",
    )  # fmt: skip
    # cuDNN builds a plan for each new shape of a padded micro-batch; false, the faster SFT step side by side
    # (bench/results/grpo_batch_h200x2_2026-11-26/), leaves flash / memory-efficient attention
    # (`selfplay_gen.verl.attention`)
    cudnn_attention: bool = knob(
        False, "Let training's attention (PyTorch SDPA) run on cuDNN, PyTorch's first choice on Hopper GPUs. cuDNN "
        "builds a plan for each new micro-batch shape, which made an SFT step slower; false uses PyTorch's flash "
        "or memory-efficient kernels.", alias=Alias("CUDNN_ATTENTION", TRUE_FALSE),
    )  # fmt: skip
    use_remove_padding: bool = knob(
        False, "Pack a micro-batch's games into one row instead of padding each to the longest "
        "(actor_rollout_ref.model.use_remove_padding): no compute or logits memory on padding. SDPA keeps the "
        "games apart by their positions, without flash-attn, through a block mask over the whole row: its "
        "attention grows with the square of the micro-batch's tokens, not of each game's.",
        alias=Alias("USE_REMOVE_PADDING", TRUE_FALSE),
    )  # fmt: skip
    offline_engine: bool = knob(
        True, "Offline GRPO starts verl's rollout engine, which it never samples from; false: verl's synchronous "
        "trainer without one (selfplay_gen.verl.replay_trainer), no SGLang start, CUDA-graph capture or weight "
        "sync. The rollout engine's settings apply to online GRPO, and to offline GRPO while this is true.",
        alias=Alias("OFFLINE_ENGINE", TRUE_FALSE),
    )  # fmt: skip
    resident: bool = knob(
        False, "Offline GRPO: start verl once for the run and hand it each iteration's groups as they are converted "
        "(selfplay_gen.iterate.resident), instead of starting it every iteration: no start-up after the first "
        "iteration. The optimizer state, the learning-rate schedule and the LoRA adapter carry over between "
        "iterations, each iteration trains the first one's steps, and the servers keep "
        "servers.overlap_mem_fraction of the GPU beside it. Without a rollout engine (as verl.offline_engine "
        "false). Not with a promotion rule, which may set a model aside that the trainer goes on from. A stopped "
        "run resumes from the job's checkpoint in RUN_DIR, which a run carried to another machine as its LoRA "
        "adapters leaves behind: such a run trains with a job per iteration.",
        alias=Alias("RESIDENT_TRAINER", TRUE_FALSE),
    )  # fmt: skip
    enforce_eager: bool = knob(False, "Rollout engine: without CUDA graphs.", alias=Alias("ENFORCE_EAGER", TRUE_FALSE))
    sglang_engine_kwargs: str | None = knob(
        None, "Engine options (key=value) of verl's SGLang rollout, added to the fallbacks for what verl's "
        "Python lacks (python -m selfplay_gen.serving verl-overrides); a key given here replaces the "
        "install's.", alias="SGLANG_ENGINE_KWARGS",
    )  # fmt: skip
    rollout_is: str = knob(
        "token", "offline: truncated importance sampling per token or sequence.",
        type=click.Choice(["token", "sequence"]), alias="ROLLOUT_IS",
    )  # fmt: skip
    rollout_is_threshold: float = knob(
        2.0, "offline: upper bound of the importance weights.", alias="ROLLOUT_IS_THRESHOLD"
    )
    logger: tuple[str, ...] = knob(
        ("console",), f"verl's loggers, comma-separated ({', '.join(LOGGERS)}); the run report plots from console "
        "lines.", type=ListOf(click.Choice(LOGGERS)), alias="LOGGER",
    )  # fmt: skip
    project: str = knob("selfplay", "trainer.project_name.")

    def logger_override(self) -> str:
        return "trainer.logger=[" + ",".join(f'"{name}"' for name in self.logger) + "]"


@dataclass(frozen=True)
class TrainJob:
    """One training run of verl: what it trains, on what, and its optimisation settings."""

    mode: str  # offline | online | sft
    model: str
    train_files: str
    val_files: str
    out_dir: Path
    experiment: str
    lr: str  # as the user spelled it (1e-5), which is how verl's command line shows it
    batch_size: int = 64
    mini_batch_size: int | None = None  # None: batch_size
    epochs: int = 1
    total_steps: int | None = None
    lora_rank: int = 0  # sft
    lora_alpha: int | None = None
    rollout_n: int | None = None  # offline: None reads convert_summary.json
    overrides: tuple[str, ...] = ()


WARM_START_POLICIES = ("auto", "teacher", "format", "none")


@dataclass(frozen=True)
class Warm:
    """The warm start on the game's teacher games, or (`format`) on its random legal play."""

    policy: str = knob(
        "auto", "auto: warm-start on the game's teacher games when the initial model agrees in fewer than "
        "warm.below of its held-out games; teacher: always; format: always, on random legal play (the grammar of "
        "the moves and no strategy: RL then learns the strategy from the rules alone); none: never.",
        type=click.Choice(WARM_START_POLICIES), alias="WARM_START",
    )  # fmt: skip
    below: float = knob(0.5, "Agreement below which auto warm-starts.", alias="WARM_START_BELOW")
    games: int = knob(4096, "Games of the warm start.", type=POSITIVE, alias="WARM_GAMES")
    games_per_instance: int = knob(
        1, "Warm games played on each instance (warm.games in all): with warm.top_fraction below 1, the warm start "
        "imitates each seat's best of them.", type=POSITIVE, alias="WARM_GAMES_PER_INSTANCE",
    )  # fmt: skip
    top_fraction: float = knob(
        1.0, "Share of each instance's warm games each seat imitates, the best by the training reward "
        "(own_plan_weight counts): 1 imitates them all. Below 1 on a format start, the warm start is expert "
        "iteration's first step from random legal play, which the game's reward alone selects.",
        type=click.FloatRange(0, 1, min_open=True), alias="WARM_TOP_FRACTION",
    )  # fmt: skip
    teacher_plan: str | None = knob(None, teacher_plan_help(), alias="TEACHER_PLAN")
    epochs: int = knob(2, "Warm-start epochs.", type=POSITIVE, alias="WARM_EPOCHS")
    lora_rank: int = knob(16, "Warm-start LoRA rank; 0: full fine-tuning.", type=COUNT, alias="WARM_LORA_RANK")
    lr: str | None = knob(
        None, "Warm-start learning rate [null: LoRA 1e-3, full 1e-4].", type=Number(), alias="WARM_LR"
    )

    @property
    def learning_rate(self) -> str:
        return self.lr if self.lr is not None else ("1e-3" if self.lora_rank > 0 else "1e-4")


def one_of(what: str, value: str, choices: tuple[str, ...]) -> str:
    """`value` if it is one of `choices`; else a ValueError naming `what`, the choices and the value."""
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}, not {value!r}")
    return value


PROMOTION_POLICIES = ("auto", "on", "off")
OVERLAP_POLICIES = ("off", "one-step")
LEARNER_POLICIES = ("promoted", "latest")
SELF_PLAY_SEATS = ("seat0", "both")
DPO_PAIR_POLICIES = ("reward", "outcome")
SKILL_DATA = ("quantile", "scripted-strength")  # as the skill levels of a game with levels name them


@dataclass(frozen=True)
class League:
    """Competitive play (with `Iteration.league_size` > 0): who seat 0 meets, how a checkpoint is kept,
    what the trained seat is told.

    - `scripted`: strengths of the scripted negotiators in the opponent pool, beside the last
      `league_size` promoted checkpoints (games with a strength-knobbed scripted player only);
    - `sharpness`: how strongly games are drawn towards opponents rated near the player
      (`league.opponents.opponent_weights`; 0: uniform);
    - `promotion`: auto (on in a league), on, off: a checkpoint replaces the previous one only when its
      cross-play win share's 95% interval lies above 0.5 (`league.promotion`);
    - `baseline`: grpo's reward baseline, group or per-seat (`selfplay-convert --baseline`);
    - `skill_levels`: skill-conditioned play: the warm start imitates the scripted negotiator at each
      level's strength with that level in the prompt, the trained seat plays at the highest level, and
      every model plays its highest level against its lowest (the game's `Game.skill`);
    - `skill_data`: what teaches a level: games chosen by quantile of outcome against fixed references
      (strength), or the scripted negotiator at the level's strength;
    - `eval_strength`: the scripted negotiator every checkpoint also cross-plays at the end;
    - `cooperation`: promotion also asks that the checkpoint's self-play cooperation (joint share of
      the best deal) not fall below the previous one's, paired by instance (`league.promotion`);
    - `joint_margin`, `min_agreement`: bounds on what a promoted checkpoint gives up of the deal, as a
      target states them: its self-play joint share at most this far below the previous one's, and the
      share of its self-play games that end in a deal (`league.promotion.deal_loss`);
    - `self_play`: the share of the trained seat's instances played against a frozen copy of itself
      instead of a drawn opponent (`decisions.league_batches`);
    - `self_play_seats`: the seats those games train: `seat0`, or `both` (each seat is the model the
      iteration started from, so both sides are on-policy, as AlphaStar's main agents learn from both);
    - `learner`: what the next iteration trains after a checkpoint is not promoted: `promoted`, the last
      promoted checkpoint again; `latest`, the checkpoint that was not (AlphaGo Zero's learner goes on
      while its evaluator keeps the best player), so gains too small for one promotion match add up.
      Either way the run's output holds promoted checkpoints only;
    - `past_learners`: every earlier iteration's checkpoint joins the opponent pool, promoted or not, as
      AlphaStar's league keeps every past player. A learner that trains on from kept-out checkpoints then
      meets its own greedier and more yielding versions, not only the promoted ones and its frozen copy;
      without it the pool holds promoted checkpoints only;
    - `report_draw`: the run's cross-play report on a second development draw, apart from the promotion
      matches (`Run.report_draw`);
    - `past_share`: fictitious self-play: the past checkpoints together get this share of the drawn
      instances, the scripted negotiators the rest (`league.opponents.with_share`);
    - `population`: every opponent of the pool gets an equal share of the instances, split exactly, not
      drawn by rating (`league.opponents.stratified`): a population of diverse partners;
    - `partners_per_group`: several partners within one instance's group of games
      (`Competition.draw_layers`);
    - `joint_weight`: the training reward's term for the joint outcome (`selfplay_gen.reward`), a weight on
      the joint share of the best deal, so a semi-competitive seat is paid for deals its partner keeps;
    - `misstatement_penalty`: the training reward's cost of each message the game's state contradicts (an
      offer whose halves do not add up), which a scripted partner forgives and a model partner does not."""

    scripted: tuple[float, ...] = knob(
        (0.3, 0.6, 1.0), "Strengths of the scripted negotiators in the league's pool, comma-separated; empty: none.",
        type=ListOf(SHARE), alias="LEAGUE_SCRIPTED",
    )  # fmt: skip
    sharpness: float = knob(
        1.0, "How strongly opponents rated near the player are preferred (0: uniform draws).",
        type=click.FloatRange(min=0), alias="LEAGUE_SHARPNESS",
    )  # fmt: skip
    promotion: str = knob(
        "auto", "auto: on in a league; on: an iteration's checkpoint is kept (the next iteration's model, the "
        "pool's newest) only when its cross-play win share against the previous one has a 95% interval above 50%; "
        "off: always kept.", type=Switch(PROMOTION_POLICIES), alias="PROMOTION",
    )  # fmt: skip
    baseline: str = knob(
        "group", "grpo: per-seat subtracts each seat's mean training reward over the iteration's games (a per-role "
        "baseline; with loss.adv_estimator=reinforce_plus_plus_baseline or rloo, which compare across a batch).",
        type=click.Choice(["group", "per-seat"]), alias="BASELINE",
    )  # fmt: skip
    skill_levels: tuple[str, ...] = knob(
        (), "For a game whose prompts take a skill level, e.g. novice,intermediate,expert (lowest first): the warm "
        "start imitates the scripted player at each level's strength with the level in the prompt, the trained "
        "seat plays at the highest level, and every model plays its highest level against its lowest (skill.json; "
        "target 65% of decided games).", alias="SKILL_LEVELS",
    )  # fmt: skip
    skill_data: str = knob(
        "quantile", "What teaches a skill level. quantile: scripted negotiators of many strengths play fixed "
        "references (strengths 0.3, 0.6, 1) in both seats, and each game goes to the level whose quantile of the "
        "seat's points against that reference it falls in: a level is how well the seat did; scripted-strength: "
        "the scripted negotiator at the level's strength (novice 0.3, intermediate 0.6, expert 1). Either way every "
        "level is judged against the references and the unconditioned model, and against the level below it "
        "(eval/skill_levels.json; the final model's on the test split too, eval/skill_test/).",
        type=click.Choice(SKILL_DATA), alias="SKILL_DATA",
    )  # fmt: skip
    eval_strength: float | None = knob(
        1.0, "League: every checkpoint also cross-plays the scripted negotiator of this strength at the end.",
        type=SHARE, alias="LEAGUE_EVAL_STRENGTH",
    )  # fmt: skip
    cooperation: bool = knob(
        True, "true: a checkpoint that wins but whose self-play joint share of the best deal falls is not promoted "
        "(it wins by refusing deals): paired by instance, the drop's 95% interval lies below zero and its mean "
        "below the previous checkpoint's interval; false: winning is enough.",
        alias=Alias("PROMOTION_COOPERATION", ON_OFF),
    )  # fmt: skip
    joint_margin: float | None = knob(
        None, "Promotion: the most a checkpoint's self-play joint share of the best deal may fall below the previous "
        "checkpoint's, as a share (0.03: 3 points; the mean, paired by instance in the promotion match) [null: no "
        "bound; `cooperation` still keeps out a fall the intervals show].", type=SHARE, alias="PROMOTION_JOINT_MARGIN",
    )  # fmt: skip
    min_agreement: float | None = knob(
        None, "Promotion: the least share of its self-play games in the promotion match that a checkpoint must end "
        "in a deal (0.97) [null: no bound].", type=SHARE, alias="PROMOTION_MIN_AGREEMENT",
    )  # fmt: skip
    self_play: float = knob(
        0.0, "League: the share of seat 0's instances played against a frozen copy of itself (the model the "
        "iteration started from, on its own server) instead of an opponent drawn by rating. Against scripted "
        "negotiators alone, asking for more always pays, and a model trained so can stop agreeing with its equals; "
        "AlphaStar's main agents play 0.35 against themselves.", type=SHARE, alias="LEAGUE_SELF_PLAY",
    )  # fmt: skip
    learner: str = knob(
        "promoted", "What the next iteration trains after a checkpoint is not promoted. promoted: the last promoted "
        "checkpoint again (the candidate is dropped); latest: the candidate, so small gains add up until one wins "
        "its match (AlphaGo Zero's learner). The opponent pool, the promotion match and the run's output keep "
        "promoted checkpoints only.", type=click.Choice(LEARNER_POLICIES), alias="PROMOTION_LEARNER",
    )  # fmt: skip
    self_play_seats: str = knob(
        "seat0", "League: the seats that the games against the player's frozen copy train. seat0: the trained "
        "seat, as in every other game; both: its copy's seat too, played by the same weights (`selfplay-convert "
        "--seats-of`), so the learner also learns what answering its own demands pays.",
        type=click.Choice(SELF_PLAY_SEATS), alias="LEAGUE_SELF_PLAY_SEATS",
    )  # fmt: skip
    past_learners: bool = knob(
        False, "League: true: every earlier iteration's checkpoint is an opponent, promoted or not, so a learner "
        "that trains on from kept-out checkpoints (league.learner=latest) meets its own greedier and more yielding "
        "versions; false: the pool holds promoted checkpoints only.", alias=Alias("LEAGUE_PAST_LEARNERS", ON_OFF),
    )  # fmt: skip

    report_draw: bool = knob(
        True, "true: the run's cross-play report (win shares, ratings, self-play cooperation per checkpoint, "
        "progress.md) is read on a second draw of development instances, right after the first, so no figure comes "
        "from the promotion matches that chose the checkpoints; false: on the promotion matches' own instances. "
        "Either way the report names its instances.", alias=Alias("LEAGUE_REPORT_DRAW", ON_OFF),
    )  # fmt: skip
    past_share: float | None = knob(
        None, "League, fictitious self-play: the share of the drawn instances whose opponent is a past checkpoint "
        "(the last league_size promoted ones and, with past_learners, every earlier learner), drawn by rating among "
        "them; the scripted negotiators get the rest. null: one draw by rating over the whole pool.", type=SHARE,
        alias="LEAGUE_PAST_SHARE",
    )  # fmt: skip
    population: bool = knob(
        False, "League: a population of diverse partners: every opponent of the pool (the scripted negotiators at "
        "each league.scripted strength, the promoted checkpoints and, with past_learners, every past learner) gets "
        "an equal share of the instances each iteration, split exactly instead of drawn by rating (past_share "
        "still weighs the past checkpoints together), so the trained seat keeps meeting partners that refuse as "
        "well as ones that give way. false: drawn by rating.", alias=Alias("LEAGUE_POPULATION", ON_OFF),
    )  # fmt: skip
    partners_per_group: int = knob(
        1, "League: the partners of one instance's group of games: games_per_instance / N games against each of N "
        "opponents drawn apart, so the group's baseline compares the trained seat's play across partners, the one "
        "that refuses among them (it must divide games_per_instance). 1: one opponent a group, so a group's games "
        "differ in the trained seat's play alone.", type=POSITIVE, alias="LEAGUE_PARTNERS_PER_GROUP",
    )  # fmt: skip
    joint_weight: float = knob(
        0.0, "The training reward's joint-outcome term: + WEIGHT x the game's joint share of the best deal (both "
        "seats' points over the most the two could get together, in [0, 1]), so a seat of the semi-competitive mode "
        "is paid for deals its partner keeps, not only for its own points. Every trainer's "
        "rewards and rankings (selfplay-convert --joint-weight; online +selfplay.joint_weight); evaluation reads the "
        "raw game reward. 0: off.", type=click.FloatRange(min=0), alias="LEAGUE_JOINT_WEIGHT",
    )  # fmt: skip
    misstatement_penalty: float = knob(
        0.0, "The training reward's misstatement term: - PENALTY x the seat's messages that state what the game's "
        "state contradicts (Game.misstatements: an offer whose halves do not add up to the pool, on "
        "which a partner that proposes the half it was offered loses the deal with the writer). A scripted "
        "negotiator reads the writer's half alone and forgives it; the term costs it in every game. Every "
        "trainer's rewards and rankings (selfplay-convert --misstatement-penalty; online "
        "+selfplay.misstatement_penalty); evaluation reads the raw game reward. 0: off.",
        type=click.FloatRange(min=0), alias="LEAGUE_MISSTATEMENT_PENALTY",
    )  # fmt: skip

    def __post_init__(self):
        one_of("learner", self.learner, LEARNER_POLICIES)
        one_of("self-play seats", self.self_play_seats, SELF_PLAY_SEATS)


@dataclass(frozen=True)
class TrainerSettings:
    """What every trainer's section holds; each trainer's section (below) gives its own measured defaults.
    The script variables (GAMES_PER_ITER, RL_LR, ...) set the section of the trainer that runs."""

    games_per_iter: int = knob(0, "Games per iteration.", type=COUNT, alias="GAMES_PER_ITER")
    epochs: int = knob(1, "Training epochs per iteration.", type=POSITIVE, alias="EPOCHS_PER_ITER")
    lr: str = knob("1e-5", "Learning rate of the iterations.", type=Number(), alias="RL_LR")
    batch_size: int = knob(
        16, "Rows per step. With verl.n_gpus > 1, give online GRPO 64 or more: a step of 16 rows is bound by its "
        "longest games and gains little from a second GPU (bench/results/grpo_batch_h200x2_2026-11-26/).",
        type=POSITIVE, alias="RL_BATCH_SIZE",
    )  # fmt: skip
    mini_batch_size: int | None = knob(
        None, "GRPO rows per PPO update [null: the trainer's: GRPO half a step, so the second update is clipped; "
        "else all].", type=POSITIVE, alias="RL_MINI_BATCH_SIZE",
    )  # fmt: skip
    lora_rank: int = knob(
        0, "LoRA rank of the iterations' training; 0: full fine-tuning.", type=COUNT, alias="RL_LORA_RANK"
    )


@dataclass(frozen=True)
class FilteredBCSettings(TrainerSettings):
    """filtered-bc: lr 1e-3 on the best of 8 games of 4,096 gained +0.042 on held-out instances in 3
    iterations (2,048: +0.034; 2e-3 or 5e-4: less)."""

    games_per_iter: int = knob(4096)
    epochs: int = knob(2)
    lr: str = knob("1e-3")
    batch_size: int = knob(32)
    lora_rank: int = knob(16)
    top_fraction: float = knob(
        0.125, "Share of each group's games imitated.", type=click.FloatRange(0, 1, min_open=True),
        alias="TOP_FRACTION",
    )  # fmt: skip
    valid_moves: bool = knob(
        False, "Imitate every seat's own valid moves instead, whatever its game's reward (top_fraction does not "
        "apply; selfplay-convert --valid-moves): a format start from the model's own responses, for a model that "
        "reasons before it moves and makes few valid moves, which a format warm start's bare moves would teach "
        "not to reason.", alias=Alias("VALID_MOVES", TRUE_FALSE),
    )  # fmt: skip


@dataclass(frozen=True)
class GRPOSettings(TrainerSettings):
    """grpo: full fine-tuning below lr 1e-5 did not learn (bench/results/learning/)."""

    games_per_iter: int = knob(1024)


@dataclass(frozen=True)
class OnlineGRPOSettings(TrainerSettings):
    """grpo-online: verl's online self-play loop, `steps` verl steps an iteration."""

    steps: int = knob(
        100, "verl steps per iteration (verl.save_freq: which are exported and evaluated).", type=POSITIVE,
        alias="ONLINE_STEPS",
    )  # fmt: skip
    test_freq: int = knob(
        10, "Validate on development instances every N steps, sampled as the rollout samples.", alias="ONLINE_TEST_FREQ"
    )
    test_instances: int = knob(
        16, "Development instances each validation plays (from seed 10**9).", type=POSITIVE,
        alias="ONLINE_TEST_INSTANCES",
    )  # fmt: skip
    move_credit: float = knob(
        0.0, "Weight of the game's credit for parts of a move (Game.move_credits: each line of a proposal by "
        "how far its reviewer stands above the paper's average on the table the seat sees, in standard "
        "deviations), added to the advantage of their tokens (+selfplay.move_credit), so a proposal's good lines "
        "are told from its bad ones where the game's reward credits the whole game alike. 0: off.",
        type=click.FloatRange(min=0), alias="MOVE_CREDIT",
    )  # fmt: skip


@dataclass(frozen=True)
class DPOSettings(TrainerSettings):
    """dpo: TRL's DPOTrainer on each group's best game against its worst."""

    games_per_iter: int = knob(4096)
    lr: str = knob("5e-6")
    batch_size: int = knob(4)
    lora_rank: int = knob(16)
    pairs_per_group: int = knob(
        1, "The most preference pairs of one (group, seat), the widest gap first; above 1, every win against "
        "every loss of a group (a league's group of games against one opponent is often all won or lost).",
        type=POSITIVE, alias="DPO_PAIRS_PER_GROUP",
    )  # fmt: skip
    pairs: str = knob(
        "reward", "How a seat's games of a group are ranked into pairs. 'reward': by the seat's own reward (no "
        "deal ranks below any deal); 'outcome': as the rules judge a competitive game, a win above a tie above a "
        "loss (a game without a deal is a tie, so a walked-away game is preferred to a deal lost by a point, and "
        "DPO on many such pairs learns to walk away).", type=click.Choice(DPO_PAIR_POLICIES), alias="DPO_PAIRS",
    )  # fmt: skip


@dataclass(frozen=True)
class Trainers:
    """One section per trainer (`trainers.get(name).section` names its own); `Iteration.trainer` picks
    the one that runs."""

    filtered_bc: FilteredBCSettings = section(FilteredBCSettings)
    grpo: GRPOSettings = section(GRPOSettings)
    grpo_online: OnlineGRPOSettings = section(OnlineGRPOSettings)
    dpo: DPOSettings = section(DPOSettings)


def verl_overrides_knob() -> tuple[str, ...]:
    return knob(
        (), "verl's own Hydra overrides for every training job (on the command line: the arguments that name no "
        "setting here), last, so they win.", cli=False,
    )  # fmt: skip


@dataclass(frozen=True)
class Iteration:
    """Everything `selfplay-gen iterate` reads: the run's configuration tree (RUN_DIR/config.yaml)."""

    run_dir: Path = knob(Path("data/iterations"), "Run directory (stages, reports, summary.md).", alias="RUN_DIR")
    initial_model: str | None = knob(
        None, "Hugging Face model directory to start from [null: the embedded SmolLM2-135M-Instruct, converted "
        "once].", alias="INITIAL_MODEL",
    )  # fmt: skip
    game: str | None = game_knob()
    reward_mode: str | None = reward_mode_knob()
    move_format: str | None = move_format_knob()
    own_plan_weight: float = knob(
        0.0, "The training reward's own-view term, for a game whose seats share one reward over values each sees "
        "in part: + WEIGHT x what the agreed outcome is worth on what the seat sees, as a share of the best it "
        "could plan alone (hidden values guessed; 0 without a deal). The shared reward also counts the values a "
        "seat cannot see; this term pays each seat by its own view alone. Every trainer's rewards and rankings "
        "(selfplay-convert --own-plan-weight; online +selfplay.own_plan_weight); evaluation reads the raw game "
        "reward. 0: off.",
        type=click.FloatRange(min=0), alias="OWN_PLAN_WEIGHT",
    )  # fmt: skip
    num_iterations: int = knob(3, "RL iterations.", type=COUNT, alias="NUM_ITERATIONS")
    trainer: str = knob(
        "filtered-bc", "filtered-bc: SFT on each group's best games (the default: at equal GPU time no GRPO beat it "
        "by its interval, and an iteration costs less GPU time); grpo: offline GRPO on whole groups; grpo-online: "
        "verl's online self-play loop, trainers.grpo_online.steps steps an iteration; dpo: DPO (TRL) on each "
        "group's best game against its worst. Each trainer's settings: trainers.<name>.", alias="TRAINER",
    )  # fmt: skip
    trainers: Trainers = section(Trainers)
    games_per_instance: int = games_per_instance_knob()
    crossplay: bool | None = knob(
        None, "true: checkpoints play each other after the iterations [null: the game's crossplay_by_default].",
        alias=Alias("CROSSPLAY", ("1", "0")),
    )  # fmt: skip
    league_size: int = knob(
        0, "0: self-play; N: a league: seat 0 (the only one trained) meets, per instance, an opponent drawn by "
        "rating closeness from the last N promoted checkpoints and the scripted negotiators at league.scripted, "
        "one partner server at a time; a checkpoint is kept only when it beats the previous one "
        "(league.promotion).", type=COUNT, alias="LEAGUE_SIZE",
    )  # fmt: skip
    league: League = section(League)
    overlap: str = knob(
        "off", "off: each iteration plays its games, then trains on them (the reference). one-step: verl's "
        "one-step-off-policy schedule: while the trainer learns from iteration N's games, the server plays "
        "iteration N+1's with the model iteration N started from (and evaluates that model alongside), keeping its "
        "GPU memory (servers.overlap_mem_fraction); iteration N+1 then trains on games one policy version old, "
        "their records naming the model that played them (RUN_DIR/iter_NNN/gen/played_by.json) and carrying its "
        "log-probs, which offline GRPO's importance weights (verl.rollout_is) correct for. Not with grpo-online "
        "(it plays inside verl) nor a league or promotion (which judge each model before the next iteration).",
        type=Switch(OVERLAP_POLICIES), alias="OVERLAP",
    )  # fmt: skip
    time_budget_min: float | None = knob(
        None, "Minutes of training for the run: an iteration starts only while one as long as the last finished "
        "one would end within them (equal-time comparisons from one warm start: each iteration's generation, "
        "conversion, training and merge count; the base evaluation and the warm start do not).",
        type=click.FloatRange(min=0, min_open=True), alias="TIME_BUDGET_MIN",
    )  # fmt: skip
    warm: Warm = section(Warm)
    sampling: Sampling = section(Sampling)
    servers: ServerSettings = section(ServerSettings)
    evaluation: Evaluation = section(Evaluation)
    verl: Verl = section(Verl)
    loss: PolicyLoss = section(PolicyLoss)
    tools: Tools = section(Tools)
    overrides: tuple[str, ...] = verl_overrides_knob()
    dry_run: bool = outside(False)

    def overlaps(self) -> bool:
        """Whether the next iteration's games are played while this one trains (`overlap` one-step)."""
        return self.overlap == "one-step"

    def promotes(self) -> bool:
        """Whether each iteration's checkpoint must beat the previous one to be kept."""
        policy = one_of("promotion", self.league.promotion, PROMOTION_POLICIES)
        return policy == "on" or (policy == "auto" and self.league_size > 0)

    def reward_terms(self) -> RewardTerms:
        """The training reward's opt-in terms the run sets (`selfplay_gen.reward`), which every trainer is told."""
        return RewardTerms(
            joint_weight=self.league.joint_weight,
            own_plan_weight=self.own_plan_weight,
            misstatement_penalty=self.league.misstatement_penalty,
        )

    def sampling_for_run(self) -> Sampling:
        """The run's sampling: a seat's budget is the training response limit unless set (longer games score
        0), and a teacher plan whose moves are long gets the new tokens a turn its game says it needs
        (`Game.teacher_new_tokens`: a by-score plan's proposals, some 650 tokens, need 768)."""
        sampling = self.sampling
        if sampling.max_response_tokens is None:
            sampling = replace(sampling, max_response_tokens=self.verl.max_response_length)
        needed = 0
        for name in games.mixture(self.game or games.UNNAMED):  # the longest moves of a mix's games
            game = games.get(name)
            plan = self.warm.teacher_plan or game.teacher.get("plan", "")
            needed = max(needed, game.teacher_new_tokens.get(plan, 0))
        if sampling.max_new_tokens < needed:
            sampling = replace(sampling, max_new_tokens=needed)
        return sampling


@dataclass(frozen=True)
class Generation:
    """Everything `selfplay-gen generate` reads: one served model's games, their conversion and its evaluation."""

    model: str | None = knob(
        None, "Model directory to serve and tokenize with [null: the embedded SmolLM2-135M-Instruct warm start, "
        "converted once; with servers.urls, the servers' own].", alias="MODEL_NAME",
    )  # fmt: skip
    num_games: int = knob(256, "Games to play; 0: evaluate only.", type=COUNT, alias="NUM_GAMES")
    games_per_instance: int = games_per_instance_knob()
    seed: int = knob(0, "Seed of the first instance; instances are seed, seed+1, ...", alias="SEED")
    out_dir: Path = knob(Path("data/selfplay"), "Games, parquet and server logs.", alias="OUT_DIR")
    gen_args: str = knob("", "Extra arguments of the generation command.", alias="GEN_ARGS")
    convert_args: str = knob("", "Extra arguments of the conversion command.", alias="CONVERT_ARGS")
    eval_dir: Path | None = knob(
        None, "Evaluate the served model into eval_dir/<set> (held-out; and the game's other sets) [null: no "
        "evaluation].", alias="EVAL_DIR",
    )  # fmt: skip
    eval_label: str | None = knob(
        None, "The model's label in the reports [null: its directory's name].", alias="EVAL_LABEL"
    )
    eval_append_to: Path | None = knob(
        None, "Run-level reports: eval_append_to/<set> gets this model as its next row.", alias="EVAL_APPEND_TO"
    )
    partner_model: str | None = knob(
        None, "A second model for seat 1 of the training games, served on servers.port + 1 (the evaluation stays "
        "self-play).", alias="PARTNER_MODEL",
    )  # fmt: skip
    partner_label: str | None = knob(None, "The partner's label [null: its directory's name].", alias="PARTNER_LABEL")
    crossplay_dir: Path | None = knob(
        None, "Cross-play of the model and partner_model on held-out instances, both seat orders, into this "
        "directory.", alias="CROSSPLAY_DIR",
    )  # fmt: skip
    game: str | None = game_knob()
    reward_mode: str | None = reward_mode_knob()
    move_format: str | None = move_format_knob()
    sampling: Sampling = section(Sampling)
    servers: ServerSettings = section(ServerSettings)
    evaluation: Evaluation = section(Evaluation)
    tools: Tools = section(Tools)


TRAIN_MODES = ("offline", "online", "sft")


@dataclass(frozen=True)
class Training:
    """Everything `selfplay-gen train` reads: one verl training job and its merge."""

    mode: str = knob(
        "offline", "offline: GRPO on replayed games (selfplay-convert parquet); online: GRPO on games verl's rollout "
        "plays (selfplay-gen init parquet); sft: supervised fine-tuning on chats (selfplay-convert --format sft).",
        type=click.Choice(TRAIN_MODES), alias="MODE",
    )  # fmt: skip
    model_path: str | None = knob(None, "Hugging Face model directory to train (required).", alias="MODEL_PATH")
    train_files: str | None = knob(
        None, "Training parquet [null: data/selfplay/train.parquet; sft: data/sft/...; online: data/online/...].",
        alias="TRAIN_FILES",
    )  # fmt: skip
    val_files: str | None = knob(
        None, "Validation parquet [null: beside it, val.parquet; online: test.parquet].", alias="VAL_FILES"
    )
    out_dir: Path = knob(Path("data/train"), "checkpoints/ and the merged model hf/ go here.", alias="OUT_DIR")
    batch_size: int = knob(64, "Rows per step.", type=POSITIVE, alias="TRAIN_BATCH_SIZE")
    mini_batch_size: int | None = knob(
        None, "PPO mini-batch [null: batch_size].", type=POSITIVE, alias="MINI_BATCH_SIZE"
    )
    epochs: int = knob(1, "Passes over train_files.", type=POSITIVE, alias="EPOCHS")
    total_steps: int | None = knob(
        None, "Stop after this many steps [null: epochs decide].", type=POSITIVE, alias="TOTAL_STEPS"
    )
    lr: str | None = knob(None, "Learning rate [null: GRPO 1e-6, sft 1e-4].", type=Number(), alias="LR")
    lora_rank: int = knob(
        0, "LoRA rank (sft: model.lora_rank; GRPO: actor_rollout_ref.model.lora_rank); 0: full fine-tuning.",
        type=COUNT, alias="LORA_RANK",
    )  # fmt: skip
    rollout_n: int | None = knob(
        None, f"Games per row [null: online {GROUP_SIZE}; offline: rollout_n of convert_summary.json beside "
        "train_files].",
        type=POSITIVE, alias="ROLLOUT_N",
    )  # fmt: skip
    experiment: str | None = knob(None, "trainer.experiment_name [null: selfplay-MODE].", alias="EXPERIMENT")
    sampling: Sampling = section(Sampling)
    verl: Verl = section(Verl)
    loss: PolicyLoss = section(PolicyLoss)
    overrides: tuple[str, ...] = verl_overrides_knob()
