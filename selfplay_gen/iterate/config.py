"""Typed settings of a self-play run, with ONE set of defaults for every stage: generation,
evaluation and every trainer read the same `Sampling`, so a game played for training, for an
evaluation or inside verl's rollout is sampled alike.

The defaults, and why:
- temperature 0.7: the warm start plays 0.679 at 0.7 and 0.658 at 1.0 on held-out instances
  (bench/results/learning/), and offline GRPO replays games at the temperature they were played at;
- max_new_tokens 512 per turn, in generation, evaluation and verl's online rollout alike (a
  by-score teacher plan needs 768, see `Iteration.sampling_for`);
- max_response_length 3072 tokens per seat: games whose seat outgrows the training limit score 0 at
  generation time, so nothing is cut off at training time.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import environments


@dataclass(frozen=True)
class Sampling:
    """How every game of a run is sampled and limited."""

    temperature: float = 0.7
    top_p: float = 1.0
    max_moves: int = 30
    max_new_tokens: int = 512
    max_response_tokens: int | None = None  # a seat's budget past its first prompt; None: no limit

    def args(self) -> list[str]:
        """The sampling options of `selfplay-gen` and `selfplay-gen eval`."""
        out = ["--temperature", number(self.temperature), "--max-moves", str(self.max_moves)]
        out += ["--max-new-tokens", str(self.max_new_tokens)]
        if self.max_response_tokens is not None:
            out += ["--max-response-tokens", str(self.max_response_tokens)]
        return out


@dataclass(frozen=True)
class ServerSettings:
    """SGLang servers: how they are started, where, and for how long one may take to come up."""

    python: str = field(default_factory=environments.sglang_python)  # make gpu's serving environment, else python3
    port: int = 30000
    tp: int = 1
    dp: int = 1  # > 1: that many servers, GPUs apart, behind sglang_router
    # None: SGLang's own defaults (CUDA graphs on), with a fallback only for what the install lacks
    # (`selfplay_gen.serving`, probed in `python` when the settings are read)
    extra_args: str | None = None
    timeout_s: float = 900.0
    start_tries: int = 3  # starts of a server that stopped on "Not enough memory"
    retry_wait_s: float = 30.0
    partner_mem_fraction: float = 0.4  # each of two servers sharing the GPU takes this share
    urls: tuple[str, ...] = ()  # running servers to use instead of starting one
    # a running server takes a new checkpoint of the same architecture and tokenizer through
    # /update_weights_from_disk instead of being restarted (`server.Slots`)
    swap_weights: bool = True
    # while verl trains, a server stays up with its GPU memory released (started with SGLang's
    # --enable-memory-saver) instead of being stopped and started again (`server.Slots.free_gpu`): a run
    # then starts its server once (bench/results/kept_iteration_h100_2026-11-26/)
    keep_servers: bool = True


@dataclass(frozen=True)
class Tools:
    """The commands the stages run, as they are spelled on this machine."""

    python: str = "python3"  # with selfplay_gen importable
    gen: tuple[str, ...] = ()
    convert: tuple[str, ...] = ()
    # TRL's DPO trainer runs here (selfplay_gen importable, trl installed). verl 0.9.1 stops at start-up in
    # a Python where trl 1.16 imports, so TRL gets a Python of its own whose path its children do not inherit
    trl_python: str = "python3"

    @classmethod
    def find(
        cls, python: str | None = None, gen: str | None = None, convert: str | None = None, trl: str | None = None
    ) -> Tools:
        """The installed commands, else the modules run by `python` (SELFPLAY_PYTHON); TRL by `trl`
        (TRL_PYTHON), else by `python`."""
        python = python or sys.executable

        def command(given: str | None, script: str, module: str) -> tuple[str, ...]:
            if given:
                return tuple(shlex.split(given))
            return (script,) if shutil.which(script) else (python, "-m", module)

        return cls(
            python=python,
            gen=command(gen, "selfplay-gen", "selfplay_gen.cli"),
            convert=command(convert, "selfplay-convert", "convert.cli"),
            trl_python=trl or python,
        )


@dataclass(frozen=True)
class Evaluation:
    """Held-out evaluation size (also of each cross-play pairing); human instances get 2 games each."""

    instances: int = 64
    games_per_instance: int = 8
    human_games_per_instance: int = 2
    test_instances: int = 256  # the test split: reported for final models only, never tuned on
    test_games_per_instance: int = 4
    test_split: bool = True  # the final model also on the test split, where `eval --instances test` exists
    retention: bool = False  # `selfplay-gen retention` on every stage's model


# How a LoRA actor's weights reach SGLang: merged into the base weights, as a full weight update.
# verl 0.9.1 otherwise sends the adapter itself, as LoadLoRAAdapterFromTensorsReqInput(
# serialized_named_tensors=[one copy per TP rank]), the request as a later SGLang defines it;
# SGLang 0.5.12's request takes one `serialized_tensors` string instead, so the first sync fails
# with a TypeError. The merged update goes through update_weights_from_tensor, the path full
# fine-tuning uses, which both agree on; the rollout then serves what the exported model is (base
# plus adapter, folded in bf16), and SGLang runs without its LoRA kernels. The trained adapter
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
    - `lora_rank`/`lora_alpha`/`target_modules`: LoRA RL, so small steps are not rounded away in the
      bf16 weights of full fine-tuning (0: full fine-tuning). The adapter is merged into the base
      weights for each sync to the rollout engine (`model.lora.merge`, see `LORA_SYNC`).
    """

    adv_estimator: str = "grpo"
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    entropy_coeff: float = 0.0
    lora_rank: int = 0
    lora_alpha: int | None = None  # None: 2 x lora_rank
    target_modules: str = "all-linear"

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

    python: str = field(default_factory=environments.verl_python)  # make gpu's training environment, else python3
    n_gpus: int = 1
    nnodes: int = 1
    node_rank: int | None = None  # sft on several nodes: this node's rank
    master_addr: str | None = None
    master_port: int = 29500
    micro_batch_size: int = 4
    max_prompt_length: int = 1024
    max_response_length: int = 3072
    max_length: int | None = None  # sft: tokens per chat (prompt + response limits)
    # sft: tokens per micro-batch (verl's max_token_len_per_gpu). A small model's step costs about the
    # same per micro-batch whatever it holds, so the warm start's steps go in 2 micro-batches on one GPU
    # and 1 a GPU on two; lower it for a larger model (bench/results/fsdp2_h200x2_2026-11-26/)
    sft_micro_tokens: int = 32768
    # GRPO: tokens per micro-batch (verl's use_dynamic_bsz) for updates and log-probs; 0 keeps
    # micro_batch_size sequences a micro-batch. A few large micro-batches keep a small model's GPU busy
    # (bench/results/rl_online_tokens_h100_2026-11-25/)
    ppo_micro_tokens: int = 16384
    # online GRPO: the untrained seat's sampling temperature in each game (selfplay_loop's
    # +selfplay.partner_temperature; 0: greedy, so a group's differences come from the trained seat);
    # None: the rollout's
    rollout_partner_temperature: float | None = None
    # GRPO: DAPO's dynamic sampling: a group whose games all got one reward has no advantage to learn
    # from, so it is replaced by new games. Online (verl's algorithm.filter_groups): up to this many
    # batches of games in flight at once (the rollout is bound by its longest games, so a few batches
    # play in about the time of one). Offline: up to this many rounds of games on new instances while
    # the converted groups (constant ones dropped) are fewer than the games' groups, of which it keeps
    # that many, the earliest rounds' (DAPO's batch), so the update costs what any iteration's does. 0: off.
    filter_groups: int = 0
    sft_args: str = ""
    rollout_tp: int = 1
    gpu_memory_utilization: float = 0.4
    save_freq: int = 50
    test_freq: int = -1
    attn_impl: str = "sdpa"  # verl's default needs flash-attn
    # verl's FSDP version for every training job (SFT's engine.strategy, GRPO's actor_rollout_ref.actor
    # .strategy). FSDP1's wrap policy with LoRA makes each adapter matrix its own FSDP unit, each running
    # FSDP's hooks on every micro-batch; FSDP2 wraps the decoder layers and the root, and ran the warm
    # start's SFT step faster (bench/results/fsdp2_h200x2_2026-11-26/)
    fsdp_strategy: str = "fsdp2"
    # recompute activations in the backward pass instead of keeping them (verl's
    # model.enable_gradient_checkpointing, SFT and the GRPO actor): memory for about a third more time a
    # step; a small model fits without it, a larger one may not
    gradient_checkpointing: bool = False
    # SDPA's cuDNN backend in the training processes (PyTorch's first choice on Hopper), which builds a
    # plan for each new shape of a padded micro-batch; False, the faster SFT step side by side
    # (bench/results/grpo_batch_h200x2_2026-11-26/), leaves flash / memory-efficient attention
    # (`selfplay_gen.verl.attention`)
    cudnn_attention: bool = False
    use_remove_padding: bool = False
    enforce_eager: bool = False  # the rollout engine keeps SGLang's CUDA graphs
    # None: SGLang's own choices, with a fallback only for what verl's Python lacks (`selfplay_gen.serving`)
    sglang_engine_kwargs: str | None = None
    rollout_is: str = "token"
    rollout_is_threshold: float = 2.0
    logger: tuple[str, ...] = ("console",)
    project: str = "selfplay"

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


@dataclass(frozen=True)
class Warm:
    """The warm start on the game's teacher games."""

    policy: str = "auto"  # auto | teacher | none
    below: float = 0.5  # auto: warm-start when held-out agreement is below this
    games: int = 4096
    teacher_plan: str | None = None
    epochs: int = 2
    lora_rank: int = 16
    lr: str | None = None  # None: 1e-3 with LoRA, 1e-4 without

    @property
    def learning_rate(self) -> str:
        return self.lr if self.lr is not None else ("1e-3" if self.lora_rank > 0 else "1e-4")


def one_of(what: str, value: str, choices: tuple[str, ...]) -> str:
    """`value` if it is one of `choices`; else a ValueError naming `what`, the choices and the value."""
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}, not {value!r}")
    return value


PROMOTION_POLICIES = ("auto", "on", "off")
LEARNER_POLICIES = ("promoted", "latest")
SELF_PLAY_SEATS = ("seat0", "both")
DPO_PAIR_POLICIES = ("reward", "outcome")


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
    - `eval_strength`: the scripted negotiator every checkpoint also cross-plays at the end;
    - `cooperation`: promotion also asks that the checkpoint's self-play cooperation (joint share of
      the best deal) not fall below the previous one's, paired by instance (`league.promotion`);
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
      without it the pool holds promoted checkpoints only."""

    scripted: tuple[float, ...] = (0.3, 0.6, 1.0)
    sharpness: float = 1.0
    promotion: str = "auto"
    baseline: str = "group"
    skill_levels: tuple[str, ...] = ()
    eval_strength: float | None = 1.0
    cooperation: bool = True
    self_play: float = 0.0
    learner: str = "promoted"
    self_play_seats: str = "seat0"
    past_learners: bool = False

    def __post_init__(self):
        one_of("learner", self.learner, LEARNER_POLICIES)
        one_of("self-play seats", self.self_play_seats, SELF_PLAY_SEATS)


@dataclass(frozen=True)
class Iteration:
    """Everything `selfplay-gen iterate` reads."""

    run_dir: Path = Path("data/iterations")
    initial_model: str | None = None
    game: str | None = None  # None: the game `selfplay-gen` plays when told none
    reward_mode: str | None = None
    num_iterations: int = 3
    trainer: str = "filtered-bc"
    games_per_iter: int | None = None  # None: the trainer's default
    games_per_instance: int = 8
    epochs_per_iter: int | None = None
    lr: str | None = None
    batch_size: int | None = None
    mini_batch_size: int | None = None
    lora_rank: int | None = None
    top_fraction: float = 0.125
    dpo_pairs_per_group: int = 1  # dpo: the most preference pairs of one (group, seat) (selfplay-convert's)
    dpo_pairs: str = "reward"  # dpo: how a group's games are ranked (`--dpo-pairs`)
    online_steps: int = 100  # grpo-online: verl steps per iteration
    online_test_freq: int = 10  # grpo-online: validate every N steps
    online_test_instances: int = 16  # grpo-online: validation instances (the first development ones)
    crossplay: bool | None = None  # None: the game decides
    league_size: int = 0
    league: League = field(default_factory=League)
    time_budget_min: float | None = None  # no iteration starts that, as long as the last, would end past it
    warm: Warm = field(default_factory=Warm)
    sampling: Sampling = field(default_factory=Sampling)
    servers: ServerSettings = field(default_factory=ServerSettings)
    evaluation: Evaluation = field(default_factory=Evaluation)
    verl: Verl = field(default_factory=Verl)
    loss: PolicyLoss = field(default_factory=PolicyLoss)
    tools: Tools = field(default_factory=Tools)
    overrides: tuple[str, ...] = ()
    dry_run: bool = False

    def promotes(self) -> bool:
        """Whether each iteration's checkpoint must beat the previous one to be kept."""
        policy = one_of("promotion", self.league.promotion, PROMOTION_POLICIES)
        return policy == "on" or (policy == "auto" and self.league_size > 0)

    def dpo_pairs_by(self) -> str:
        """How DPO ranks a group's games into pairs (`selfplay-convert --dpo-pairs`). By the seat's own
        reward unless told otherwise: ranked by outcome, a game without a deal is a tie and beats a deal
        lost by a point, so DPO on many such pairs learns to walk away and self-play cooperation collapses."""
        return one_of("dpo pairs", self.dpo_pairs, DPO_PAIR_POLICIES)

    def sampling_for_run(self) -> Sampling:
        """The run's sampling: a seat's budget is the training response limit (longer games score 0),
        and a teacher plan whose moves are long gets the new tokens a turn its game says it needs
        (`Game.teacher_new_tokens`: a by-score plan's proposals, some 650 tokens, need 768)."""
        from .. import games

        sampling = replace(self.sampling, max_response_tokens=self.verl.max_response_length)
        game = games.get(self.game or games.UNNAMED)
        plan = self.warm.teacher_plan or game.teacher.get("plan", "")
        needed = game.teacher_new_tokens.get(plan, 0)
        if sampling.max_new_tokens < needed:
            sampling = replace(sampling, max_new_tokens=needed)
        return sampling


def number(value: float) -> str:
    """A number as a user writes it: 1.0 -> 1.0, 0.7 -> 0.7, 1e-05 -> 1e-05."""
    return repr(float(value)) if not float(value).is_integer() else f"{float(value):.1f}"
