"""`selfplay-gen iterate`'s decisions and parts, each on its own: warm start, cross-play pairings,
a game's defaults, trainer defaults, verl's option names, summary rows and
tables, verl's console metrics and their plots, servers kept between steps, bash-style quoting."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from test_retention import measurement

from selfplay_gen import games
from selfplay_gen.iterate import decisions, report, trainers
from selfplay_gen.iterate.config import Iteration, PolicyLoss, ServerSettings, TrainJob, Verl, Warm
from selfplay_gen.iterate.server import Slots
from selfplay_gen.iterate.shell import Shell, StepFailed, quote
from selfplay_gen.iterate.verl_jobs import last_step, saved_steps

WORDS = ["plain", "", "a b", 'trainer.logger=["console"]', "it's", "x,y", "~home", "#tag", "a=b", "$HOME", "--seat 0"]


def test_commands_are_quoted_as_bash_quotes_them():
    printed = subprocess.run(["bash", "-c", 'printf "%q\\n" "$@"', "bash", *WORDS], capture_output=True, text=True)
    assert [quote(word) for word in WORDS] == printed.stdout.splitlines()


@pytest.mark.parametrize(
    "policy, agreement, wanted",
    [
        ("teacher", 0.9, True),
        ("format", 0.9, True),  # a model that already agrees still starts from the grammar alone when told so
        ("none", 0.0, False),
        ("auto", 0.49, True),
        ("auto", 0.5, False),  # at the threshold the model plays well enough
        ("auto", None, True),  # not measured (a dry run): the cautious choice
    ],
)
def test_warm_start_decision(policy, agreement, wanted):
    assert decisions.wants_warm_start(policy, agreement, 0.5) is wanted


def test_warm_start_policy_must_be_known():
    with pytest.raises(ValueError, match="auto, teacher, format, none"):
        decisions.wants_warm_start("sometimes", 0.1, 0.5)


def test_dev_agreement_reads_the_evaluation_and_names_a_bad_file(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"models": {"base": {"agreement_rate": {"mean": 0.25}}}}))
    assert decisions.dev_agreement(metrics, "base") == 0.25
    with pytest.raises(ValueError, match=r"metrics.json: no models.warm.agreement_rate.mean"):
        decisions.dev_agreement(metrics, "warm")


LABELS = ["base", "warm", "iter_1", "iter_2"]


def test_crossplay_pairs_each_checkpoint_with_the_initial_one_and_its_predecessor():
    assert decisions.crossplay_pairings(LABELS) == [(2, 1), (3, 1), (3, 2)]  # from the warm start
    assert decisions.crossplay_pairings(["base", "iter_1", "iter_2"]) == [(1, 0), (2, 0), (2, 1)]
    assert decisions.crossplay_pairings(["base"]) == []


def test_crossplay_report_reads_self_play_first_then_both_seat_orders(tmp_path):
    pairs = decisions.crossplay_pairings(LABELS)
    played = [tmp_path / f"p{k}" for k in range(len(pairs))]
    args = decisions.crossplay_inputs(LABELS, pairs, played)
    specs = args[1::2]
    assert set(args[::2]) == {"--from-games"}
    assert [s.split("=")[0] for s in specs[:3]] == ["warm", "iter_1", "iter_2"]  # warm first: it rates 0
    assert specs[3:5] == [f"iter_1,warm={played[0]}/iter_1__warm.jsonl", f"warm,iter_1={played[0]}/warm__iter_1.jsonl"]
    assert len(specs) == 3 + 2 * len(pairs)


def test_games_decide_their_evaluation_sets_and_cross_play():
    matching, negotiation = games.get("matching"), games.get("negotiation")
    assert decisions.evaluation_sets(matching) == ("heldout", "human")
    assert decisions.evaluation_sets(negotiation) == ("heldout",)
    assert decisions.crossplays_by_default(negotiation) and not decisions.crossplays_by_default(matching)

    class NewGame:  # a game that says nothing gets the defaults
        pass

    assert decisions.evaluation_sets(NewGame) == ("heldout",) and not decisions.crossplays_by_default(NewGame)


def test_summary_rows_count_games_and_leave_unmeasured_cells_empty():
    games_summary = {"games": 1024, "agreement_rate": 0.8125, "mean_reward": 0.61234}
    row = ("iter_1", "1024", "0.8125", "0.6123", "813", "")
    assert decisions.summary_row("iter_1", games_summary, 812.6) == row
    assert decisions.summary_row("iter_1", games_summary, 812.6, alike=0.8027) == (*row[:5], "80%")
    assert decisions.summary_row("base", None, 40) == ("base", "", "", "", "40", "")
    assert decisions.summary_row("x", {"games": 0, "mean_reward": float("nan")}, 1)[3] == ""


@pytest.mark.parametrize(
    "name, given, expected",
    [
        ("grpo", {}, (1024, 1, "1e-5", 16, 8, 0)),
        ("filtered-bc", {}, (4096, 2, "1e-3", 32, 32, 16)),
        ("grpo-online", {}, (100, 0, 1, "1e-5", 16, 8, 0)),
        ("dpo", {}, (4096, 1, "5e-6", 4, 4, 16)),
        ("grpo", {"batch_size": 9, "lora_rank": 8}, (1024, 1, "1e-5", 9, 5, 8)),
        ("filtered-bc", {"lr": "5e-4", "mini_batch_size": 4, "lora_rank": 0}, (4096, 2, "5e-4", 32, 4, 0)),
    ],
)
def test_each_trainer_has_its_measured_defaults_and_the_users_settings_win(name, given, expected):
    from dataclasses import replace

    from selfplay_gen.iterate.config import Trainers

    section = trainers.get(name).section
    own = replace(getattr(Trainers(), section), **given)
    trainer = trainers.get(name)(Iteration(trainers=replace(Trainers(), **{section: own})))
    s = trainer.settings
    got = (s.games_per_iter, s.epochs, s.lr, s.batch_size, s.mini_batch_size, s.lora_rank)
    if name == "grpo-online":
        got = (trainer.own.steps, *got)
    assert got == expected


def test_a_trainer_is_one_class_and_one_registry_line():
    from selfplay_gen.iterate.config import Trainers

    @trainers.register("test-only")
    class Constant(trainers.Trainer):
        section = "grpo"

        def train(self, ctx):
            return []

    try:
        assert trainers.get("test-only") is Constant and "test-only" in trainers.names()
        with pytest.raises(ValueError, match="already registered"):
            trainers.register("test-only")(type("Other", (Constant,), {}))
    finally:
        trainers._TRAINERS.pop("test-only")
    with pytest.raises(ValueError, match="known trainers: dpo, filtered-bc, grpo, grpo-online"):
        trainers.get("ppo")
    # every registered trainer has its own section of the configuration, named after it
    sections = {trainers.get(name).section for name in trainers.names()}
    assert sections == {name.replace("-", "_") for name in trainers.names()} == set(vars(Trainers()))


def test_a_trainer_gets_its_stage_context_and_runs_through_it(tmp_path, capsys):
    """A trainer sees one stage's Context (paths, the model it trains from, the game's arguments, the
    limits, a shell, the loop's two steps), not the run: what it asks through them is what the run does."""
    from selfplay_gen.iterate.config import Tools
    from selfplay_gen.iterate.loop import Run

    seen = []

    class Recording(trainers.Trainer):
        section = "filtered_bc"

        def train(self, ctx):
            seen.append(ctx)
            ctx.play(self.settings.games_per_iter, ["--format", "sft", *ctx.limits])
            ctx.shell.run("own step", ["echo", "trainer", ctx.model])
            return ctx.train(self.job(ctx, "sft"))

    cfg = Iteration(
        run_dir=tmp_path / "run", initial_model="/m0", num_iterations=1, warm=Warm(policy="none"), dry_run=True,
        servers=ServerSettings(urls=("http://127.0.0.1:9",)), tools=Tools(python=sys.executable, gen=("gen",),
        convert=("conv",)), verl=Verl(python=sys.executable),
    )  # fmt: skip
    run = Run(cfg)
    run.trainer = Recording(cfg)
    assert run.main() == f"{tmp_path}/run/iter_001/train/hf"
    (ctx,) = seen
    gen = tmp_path / "run" / "iter_001" / "gen"
    assert (ctx.stage.name, ctx.model, ctx.gen) == ("iter_001", "/m0", gen)
    assert ctx.limits == run.limits() and ctx.shell is run.shell
    out = capsys.readouterr().out
    assert f"conv {gen}/games.jsonl --out-dir {gen} --overwrite --format sft --max-prompt-tokens" in out
    assert "+ echo trainer /m0" in out
    assert f"data.train_files={gen}/train.parquet" in out and f"data.val_files={gen}/val.parquet" in out


def verl_config():
    import verl

    path = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    return OmegaConf.load(path)


def test_grpo_settings_are_verls_own_option_names():
    config = verl_config()
    loss = PolicyLoss(use_kl_loss=True, lora_rank=8, clip_ratio_high=0.28, adv_estimator="reinforce_plus_plus")
    overrides = loss.overrides()
    assert "actor_rollout_ref.actor.clip_ratio_high=0.28" in overrides
    assert "actor_rollout_ref.model.lora_alpha=16" in overrides  # 2 x rank
    missing = object()
    for override in overrides:
        key = override.split("=")[0]
        assert OmegaConf.select(config, key, default=missing) is not missing, key
    assert not any("lora" in o or "kl_loss_coef" in o for o in PolicyLoss().overrides())  # off unless asked


def test_grpo_micro_batches_are_token_budgets_that_verl_applies_to_updates_and_log_probs(tmp_path):
    from hydra import compose, initialize_config_module

    def actor_overrides(out: str) -> list[str]:
        (train,) = [line for line in out.splitlines() if "-m verl.trainer.main_ppo" in line]
        return [w for w in train.split() if w.startswith("actor_rollout_ref.actor.") and "clip" not in w]

    def composed(overrides: list[str]):
        with initialize_config_module("verl.trainer.config", version_base=None):
            return compose("ppo_trainer", overrides=overrides)

    cfg = composed(actor_overrides(dry_iterate(tmp_path, "--trainer", "grpo-online", "--num_iterations", "1")))
    # the default: 16,384 tokens a micro-batch; verl's worker asserts that the rollout's log-prob
    # batching follows the actor's
    assert cfg.actor_rollout_ref.rollout.log_prob_use_dynamic_bsz is True
    assert cfg.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu == 16384
    actor = cfg.actor_rollout_ref.actor
    assert actor.use_dynamic_bsz is True and actor.ppo_max_token_len_per_gpu == 16384
    # limits longer than the default budget raise it to one whole sequence
    longer = dry_iterate(tmp_path, "--trainer", "grpo-online", "--num_iterations", "1", MAX_RESPONSE_LENGTH="20000")
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=21024" in actor_overrides(longer)
    # 0: a fixed number of sequences a micro-batch
    fixed = actor_overrides(
        dry_iterate(tmp_path, "--trainer", "grpo-online", "--num_iterations", "1", PPO_MICRO_TOKENS="0")
    )
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4" in fixed
    assert composed(fixed).actor_rollout_ref.actor.use_dynamic_bsz is False
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    result = CliRunner().invoke(iterate_command, ["--dry-run", "--verl.ppo_micro_tokens", "2048"])
    assert result.exit_code == 2 and "2048 tokens cannot hold one sequence of up to 4096" in result.output


def test_grpo_workers_install_chunked_logprobs_when_they_build_their_model_config(
    tmp_path, local_model_dir, monkeypatch
):
    """The log-prob patch comes in through verl's `external_lib`, which a worker imports once Ray has
    given it its GPU; a Ray worker_process_setup_hook ran before that, and on two GPUs both FSDP
    ranks then opened the first one."""
    from hydra import compose, initialize_config_module
    from verl.utils import torch_functional
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import HFModelConfig

    from selfplay_gen.verl.logprobs import chunked_logprobs

    (train,) = [
        line
        for line in dry_iterate(tmp_path, "--trainer", "grpo-online", "--num_iterations", "1").splitlines()
        if "-m verl.trainer.main_ppo" in line
    ]
    assert "setup_hook" not in train
    model = [w for w in train.split() if w.startswith("actor_rollout_ref.model.") and "path=" not in w]
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=[f"actor_rollout_ref.model.path={local_model_dir}", *model])
    # a fresh worker: verl's own fallback in place, the patch module not yet imported
    import selfplay_gen.verl as package

    monkeypatch.setattr(torch_functional, "logprobs_from_logits_v2", torch_functional.logprobs_from_logits_naive)
    monkeypatch.delitem(sys.modules, "selfplay_gen.verl.worker_setup", raising=False)
    monkeypatch.delattr(package, "worker_setup", raising=False)
    omega_conf_to_dataclass(cfg.actor_rollout_ref.model, dataclass_type=HFModelConfig)
    assert torch_functional.logprobs_from_logits_v2 is chunked_logprobs


def test_online_grpo_can_answer_with_a_greedy_partner_through_the_agent_loops_setting(tmp_path):
    def ppo_line(out: str) -> str:
        (train,) = [line for line in out.splitlines() if "-m verl.trainer.main_ppo" in line]
        return train

    default = ppo_line(dry_iterate(tmp_path, "--trainer", "grpo-online", "--num_iterations", "1"))
    assert "partner_temperature" not in default
    greedy = ppo_line(
        dry_iterate(tmp_path, "--trainer", "grpo-online", "--num_iterations", "1", ROLLOUT_PARTNER_TEMPERATURE="0")
    )
    assert "+selfplay.partner_temperature=0.0" in greedy.split()


def test_online_grpo_can_replace_groups_of_one_reward_through_verls_dapo_sampling(tmp_path):
    """FILTER_GROUPS=N: verl's own config takes the overrides (the reward is the canonical one each game's
    reward_score gives, which verl's v1 trainer reads at sampling time when no reward model runs), and the
    online stage draws rows for N batches a step."""
    from hydra import compose, initialize_config_module
    from verl.trainer.config import FilterGroupsConfig
    from verl.utils.config import omega_conf_to_dataclass

    def run(**env: str) -> list[str]:
        out = dry_iterate(
            tmp_path, "--trainer", "grpo-online", "--num_iterations", "1", "--trainers.grpo_online.steps", "10", **env
        )
        (train,) = [line for line in out.splitlines() if "-m verl.trainer.main_ppo" in line]
        (init,) = [line for line in out.splitlines() if " init " in line]
        return [*train.split(), *init.split()]

    default = run()
    assert not any(word.startswith("algorithm.filter_groups") for word in default)
    assert default[default.index("--num-train") + 1] == "80"  # 10 steps x 16 rows, two rows an instance
    words = run(FILTER_GROUPS="4")
    assert words[words.index("--num-train") + 1] == "320"
    overrides = [w for w in words if w.startswith("algorithm.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=overrides)
    chosen = omega_conf_to_dataclass(cfg.algorithm.filter_groups, dataclass_type=FilterGroupsConfig)
    assert (chosen.enable, chosen.metric, chosen.max_inflight_gen_batches) == (True, "reward", 4)
    assert cfg.reward.reward_model.enable is False  # verl's v1 trainer refuses filtering with a colocated one
    offline = dry_iterate(tmp_path, "--trainer", "grpo", "--num_iterations", "1", FILTER_GROUPS="4")
    # converted groups of one reward are dropped already
    assert not any(word.startswith("algorithm.filter_groups") for word in offline.split())


def test_a_format_warm_start_imitates_random_legal_play_not_the_teacher(tmp_path):
    out = dry_iterate(tmp_path, "--num_iterations", "0", "--warm.policy", "format", "--warm.teacher_plan", "by-score")
    (games,) = [line for line in out.splitlines() if "--backend scripted" in line]
    assert "--scripted-policy random" in games and "teacher" not in games  # no teacher plan reaches it
    assert "sft_trainer" in out


def test_verls_hydra_run_directory_is_each_jobs_own(tmp_path):
    """verl's trainers are Hydra applications, which write their composed config under outputs/ of the
    directory they start in unless hydra.run.dir says where: each job puts it beside its checkpoints."""
    from hydra import compose, initialize_config_module

    out = dry_iterate(tmp_path, "--trainer", "grpo-online", "--num_iterations", "1", "--warm.policy", "teacher")
    run = tmp_path / "run"
    jobs = (("verl.sft_trainer", "sft_trainer_engine", "warm"), ("trainer.main_ppo", "ppo_trainer", "iter_001"))
    for module, config, stage in jobs:
        (line,) = [line for line in out.splitlines() if f".{module} " in line]
        (chosen,) = [w for w in line.split() if w.startswith("hydra.")]
        with initialize_config_module("verl.trainer.config", version_base=None):
            cfg = compose(config, overrides=[chosen], return_hydra_config=True)
        assert cfg.hydra.run.dir == str(run / stage / "train" / "hydra")


def test_grpo_reads_its_rows_in_the_trainers_process_so_teardown_kills_no_loader_worker(tmp_path):
    """verl's GRPO returns from its last step with the train iterator still prefetching; Ray's teardown
    then killed the dataloader's worker processes, and torch reported it as a crash of a finished run.
    The job asks for no workers; with workers, killing them raises that error (or, when the loader
    notices before the SIGCHLD handler does, its twin "exited unexpectedly")."""
    import signal

    import torch
    from hydra import compose, initialize_config_module
    from torchdata.stateful_dataloader import StatefulDataLoader

    for trainer in ("grpo", "grpo-online"):
        out = dry_iterate(tmp_path, "--trainer", trainer, "--num_iterations", "1")
        (train,) = [line for line in out.splitlines() if "-m verl.trainer.main_ppo" in line]
        chosen = [w for w in train.split() if w.startswith("data.dataloader")]
        assert chosen == ["data.dataloader_num_workers=0"], trainer
    with initialize_config_module("verl.trainer.config", version_base=None):
        workers = compose("ppo_trainer", overrides=chosen).data.dataloader_num_workers
    # batches as lists, not tensors: a tensor crosses from a worker as a shared-memory handle, and a worker
    # killed while handing one over resets that connection before the loader can notice the death
    rows = list(range(64))
    loader = iter(StatefulDataLoader(rows, batch_size=4, num_workers=workers, collate_fn=list))
    next(loader)
    assert not torch.multiprocessing.active_children()  # nothing for a teardown to kill
    prefetching = iter(StatefulDataLoader(rows, batch_size=4, num_workers=2, collate_fn=list))
    next(prefetching)
    with pytest.raises(
        RuntimeError, match=r"DataLoader worker \(pid.*(is killed by signal: Killed|exited unexpectedly)"
    ):
        for worker in prefetching._workers:  # what Ray's teardown does to them
            os.kill(worker.pid, signal.SIGKILL)
        for _ in prefetching:
            pass
    del prefetching


def test_verl_loggers_are_selectable():
    assert Verl().logger_override() == 'trainer.logger=["console"]'
    assert Verl(logger=("console", "tensorboard")).logger_override() == 'trainer.logger=["console","tensorboard"]'
    assert OmegaConf.select(verl_config(), "trainer.logger") is not None


def test_one_set_of_sampling_defaults_for_every_stage():
    run = Iteration().sampling_for_run()
    assert run.max_response_tokens == Verl().max_response_length  # a seat's budget is the training limit
    by_score = Iteration(warm=Warm(teacher_plan="by-score")).sampling_for_run()
    assert by_score.max_new_tokens == 768
    records = Iteration(warm=Warm(teacher_plan="by-reviewer-records")).sampling_for_run()
    assert records.max_new_tokens == 640  # its proposals take up to about 480 of the default 512
    plans = (("sampled-by-score", 768), ("shuffled-records", 640), ("ranked-records", 640), ("sorted-records", 896))
    plans += (("chained-records", 896),)
    for plan, tokens in plans:
        assert Iteration(warm=Warm(teacher_plan=plan)).sampling_for_run().max_new_tokens == tokens
    # no plan named: the game's own teacher plan decides (the matching game's is by-reviewer-records)
    assert Iteration().sampling_for_run().max_new_tokens == 640
    assert Iteration(warm=Warm(teacher_plan="by-reviewer")).sampling_for_run().max_new_tokens == 512
    assert Iteration(game="negotiation").sampling_for_run().max_new_tokens == 512  # its teacher has no plans


CONSOLE = """\
(TaskRunner pid=1) step:1 - actor/entropy:0.52 - actor/pg_clipfrac:0.01 - critic/score/mean:0.4 - timing_s/gen:3.2 \
- games/agreed/mean:0.5 - games/invalid/mean:1.25
(TaskRunner pid=1) something else
(TaskRunner pid=1) step:2 - actor/entropy:0.48 - actor/pg_clipfrac:0.02 - critic/score/mean:0.5 - actor/kl_loss:0.001 \
- games/agreed/mean:0.625 - games/invalid/mean:1.0 \
- val-core/selfplay_matching/reward/mean@1:np.float64(0.816) - val-aux/num_turns/min:np.int64(3) \
- val-aux/selfplay_matching/agreed/mean@1:np.float64(0.9) \
- val-aux/selfplay_matching/stated_cells/mean@1:np.float64(7.5)
"""


def test_the_summary_says_whether_training_reward_rises_and_entropy_collapses(tmp_path):
    """Under the run's curves: the training games' mean reward and the token entropy from the first step to the
    last, and entropy falling below a quarter of its start called collapsing."""
    falling = [{"step": float(i), "actor/entropy": e} for i, e in enumerate([0.42, 0.35, 0.17, 0.06], 1)]
    assert report.training_trend(falling) == (
        "token entropy 0.420 → 0.060 nats from step 1 to 4: **collapsing** (entropy below 25% of its start)"
    )
    assert report.training_trend(falling[:1]) is None and report.training_trend([{"step": 1.0}]) is None
    kept = [{"step": 1.0, "actor/entropy": 0.24}, {"step": 16.0, "actor/entropy": 0.21}]
    assert report.training_trend(kept) == "token entropy 0.240 → 0.210 nats from step 1 to 16"
    rising = [{**k, "critic/score/mean": r} for k, r in zip(kept, (0.164, 0.459))]
    assert report.training_trend(rising) == (
        "reward of its games 0.164 → 0.459, token entropy 0.240 → 0.210 nats from step 1 to 16"
    )
    online = [{**s, "games/agreed/mean": a} for s, a in zip(rising, (0.39, 0.8))]
    assert report.training_trend(online) == (
        "reward of its games 0.164 → 0.459, token entropy 0.240 → 0.210 nats, agreement 0.390 → 0.800 from step 1 to 16"
    )
    assert report.training_trend([{k: v for k, v in s.items() if "entropy" not in k} for s in rising]) == (
        "reward of its games 0.164 → 0.459 from step 1 to 16"
    )
    train = tmp_path / "iter_001" / "train"
    train.mkdir(parents=True)
    (train / report.STEPS_FILE).write_text(json.dumps(falling))
    assert report.plot_curves(falling, train / "curves.png")
    summary = report.write_summary(tmp_path)
    plot, trend = summary.split("## Training curves")[1].split("\n\n")[1:3]
    assert plot.endswith("(iter_001/train/curves.png)") and "0.060 nats from step 1 to 4: **collapsing**" in trend


def test_verls_console_metrics_are_read_and_plotted(tmp_path):
    steps = report.console_metrics(CONSOLE.splitlines())
    assert [s["step"] for s in steps] == [1.0, 2.0]
    assert steps[0]["actor/entropy"] == 0.52 and steps[1]["actor/kl_loss"] == 0.001
    assert steps[0]["timing_s/gen"] == 3.2
    # validation values come as numpy prints them
    assert steps[1]["val-core/selfplay_matching/reward/mean@1"] == 0.816 and steps[1]["val-aux/num_turns/min"] == 3
    assert report.plot_curves(steps, tmp_path / "curves.png") and (tmp_path / "curves.png").stat().st_size > 1000
    assert steps[0]["games/agreed/mean"] == 0.5 and steps[1]["games/invalid/mean"] == 1.0
    # beside verl's own curves, what the games did: each training step's (the online trainer's means) and each
    # validation's (verl's), a panel a measure
    assert report.curve_panels(steps) == {
        "reward (critic/score/mean)": ["critic/score/mean"],
        "entropy (actor/entropy)": ["actor/entropy"],
        "KL (actor/kl_loss)": ["actor/kl_loss"],
        "clip fraction (actor/pg_clipfrac)": ["actor/pg_clipfrac"],
        "reward (mean a game)": ["val-core/selfplay_matching/reward/mean@1"],
        "agreed (mean a game)": ["games/agreed/mean", "val-aux/selfplay_matching/agreed/mean@1"],
        "invalid (mean a game)": ["games/invalid/mean"],
        "stated_cells (mean a game)": ["val-aux/selfplay_matching/stated_cells/mean@1"],
    }
    labels = [report.series_label(name) for name in report.curve_panels(steps)["agreed (mean a game)"]]
    assert labels == ["training games", "validation: selfplay_matching"]
    assert not report.plot_curves([{"step": 1.0, "other": 1.0}], tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_the_summary_lists_stages_in_run_order_with_wall_time_per_step_and_retention(tmp_path):
    """Retention rows read `selfplay-gen retention`'s own measurement files, each against the first stage."""
    for name, label, seconds in (("iter_001", "iter_1", 30), ("base", "base", 10), ("warm", "warm", 20)):
        (tmp_path / name).mkdir()
        report.write_row(tmp_path / name, decisions.summary_row(label, {"games": 8, "agreement_rate": 0.5}, seconds))
    report.add_timing(tmp_path / "iter_001", report.Timing("generate", 61.0, 100.0))
    report.add_timing(tmp_path / "iter_001", report.Timing("train (offline)", 0.0, 400.0))
    right = [f"q{i}" for i in range(8)]
    (tmp_path / "warm" / report.RETENTION_FILE).write_text(json.dumps(measurement(12.5, right)))
    (tmp_path / "iter_001" / report.RETENTION_FILE).write_text(json.dumps(measurement(14.0, right[:7])))
    text = report.write_summary(tmp_path)
    lines = text.splitlines()
    assert lines[0] == "| " + " | ".join(decisions.SUMMARY_HEADER) + " |"
    assert [line.split(" | ")[0] for line in lines[2:5]] == ["| base", "| warm", "| iter_1"]  # run order
    assert "| iter_1 | generate | 61 | 100 |  |" in lines and "| iter_1 | train (offline) | 0 | 400 |  |" in lines
    retention = lines[lines.index("## Capability retention") + 4 :][:2]  # each set against the first measured
    assert retention[0] == "| warm | 12.500 | +0.0% | 0.800 | +0.0 | no |"
    assert retention[1].startswith("| iter_1 | 14.000 | +12.0% | 0.700 | -10.0 | perplexity rose 12.50 -> 14.00")
    assert "multiple-choice accuracy fell 0.800 -> 0.700" in retention[1]
    other = report.retention_section([("warm", measurement(12.5, right)), ("base", measurement(12, right, tokens=9))])
    assert "| base |  |  |  |  | not comparable with warm: the perplexities cover different tokens" in other[1]
    assert (tmp_path / "summary.md").read_text() == text
    assert (tmp_path / "summary.tsv").read_text().splitlines()[1] == "base\t8\t0.5000\t\t10\t"
    assert "Games alike" not in text  # no stage converted groups


def test_the_summary_says_which_stages_played_one_game_an_instance(tmp_path):
    """The games-alike column reads each stage's conversion (instances whose games all earned one reward); a
    stage at ALIKE_FLAG or more is named, a teacher's one game an instance and a row written before the column
    are left blank."""

    def converted(stage: str, constant: int, most: int = 8) -> Path:
        path = tmp_path / stage / "gen" / "convert_summary.json"
        path.parent.mkdir(parents=True)
        groups = {"instances": 512, "constant_instances": constant, "games_per_instance": {"min": 1, "max": most}}
        path.write_text(json.dumps({"groups": groups}))
        return path

    assert decisions.games_alike(tmp_path / "none.json") is None
    assert decisions.games_alike(converted("warm", 512, most=1)) is None  # one teacher game an instance
    rows = {"iter_001": ("iter_1", 411), "iter_002": ("iter_2", 128)}
    for stage, (label, constant) in rows.items():
        alike = decisions.games_alike(converted(stage, constant))
        report.write_row(tmp_path / stage, decisions.summary_row(label, {"games": 4096}, 60, alike))
    (tmp_path / "base").mkdir()
    report.write_json_atomic(tmp_path / "base" / report.ROW_FILE, {"row": ["base", "", "", "", "10"]})  # 5 cells
    text = report.write_summary(tmp_path)
    assert "| base |  |  |  | 10 |  |" in text
    assert "| iter_1 | 4096 |  |  | 60 | 80% |" in text and "| iter_2 | 4096 |  |  | 60 | 25% |" in text
    assert "**iter_1: games alike in 50% or more of the instances**" in text and "iter_2:" not in text


def test_checkpoints_are_found_by_step(tmp_path):
    with pytest.raises(StepFailed, match="no checkpoint under"):
        last_step(tmp_path)
    for step in (50, 100, 7):
        (tmp_path / f"global_step_{step}").mkdir()
    assert saved_steps(tmp_path) == [7, 50, 100] and last_step(tmp_path) == 100
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("50")
    assert last_step(tmp_path) == 50


def test_evaluations_run_together_and_a_failure_names_its_step(tmp_path):
    """Each command waits for the other's file: run one after the other, both would time out."""
    a, b = tmp_path / "a", tmp_path / "b"

    def waits_for(mine: Path, theirs: Path) -> list[str]:
        return ["timeout", "20", "bash", "-c", f"touch {mine}; until [ -e {theirs} ]; do sleep 0.05; done"]

    Shell().run_together([("heldout", waits_for(a, b)), ("human", waits_for(b, a))])
    with pytest.raises(StepFailed, match="step 'human' failed \\(exit 3\\)"):
        Shell().run_together([("heldout", ["true"]), ("human", ["bash", "-c", "exit 3"])])


def test_a_slot_keeps_its_server_for_the_same_model(tmp_path, capsys):
    slots = Slots(
        ServerSettings(port=31000, keep_servers=False, extra_args="--mem-fraction-static=0.25 --tp-size 1"),
        Shell(dry_run=True),
    )
    slots.serve(0, "/m", tmp_path / "a.log")
    slots.serve(0, "/m", tmp_path / "b.log")  # kept
    slots.serve(1, "/p", tmp_path / "p.log", shared=True)
    slots.serve(0, "/m", tmp_path / "c.log", shared=True)  # a smaller memory share: started again
    launches = [line for line in capsys.readouterr().out.splitlines() if "launch_server" in line]
    assert len(launches) == 3 and "--mem-fraction-static=0.25 --tp-size 1" in launches[0]
    # a shared GPU's share replaces the lone server's, which SGLang would otherwise meet twice
    assert "--port 31001" in launches[1] and launches[1].endswith(
        "--tp-size 1 --mem-fraction-static 0.4 > " + f"{tmp_path}/p.log 2>&1 &"
    )
    assert all(line.count("--mem-fraction-static") == 1 for line in launches)
    given = Slots(ServerSettings(urls=("http://a:1", "http://b:2")), Shell(dry_run=True)).serve(0, "/m", tmp_path / "x")
    assert given.base_url_args() == ["--base-url", "http://a:1", "--base-url", "http://b:2"]


def test_a_server_is_stopped_when_its_block_ends(tmp_path):
    """A real process group behind the context manager: the server answers /health, and is gone after."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/usr/bin/env bash\nwhile [[ $1 != --port ]]; do shift; done\n"
        f'exec {sys.executable} -m http.server --bind 127.0.0.1 --directory {tmp_path} "$2"\n'
    )
    (tmp_path / "health").write_text("ok")  # GET /health answers 200
    fake.chmod(0o755)
    from fake_sglang import free_port

    settings = ServerSettings(python=str(fake), port=free_port(), timeout_s=30)
    with Slots(settings, Shell()) as slots:
        started = slots.serve(0, "/m", tmp_path / "server.log")
        pid = slots._servers[0][1].processes[0].pid
        assert started.url.endswith(str(settings.port)) and started.startup_s > 0
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def checkpoint_like(source: str, path: Path, **config_changes) -> str:
    """A checkpoint directory whose files are `source`'s, with `config_changes` in its config.json."""
    path.mkdir()
    for file in Path(source).iterdir():
        if file.name != "config.json":
            (path / file.name).symlink_to(file)
    config = json.loads((Path(source) / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **config_changes}))
    return str(path)


@pytest.mark.slow
def test_a_slot_loads_a_like_checkpoint_into_its_running_server(tmp_path, local_model_dir, capsys):
    """The raw and the warm-started embedded model share architecture and tokenizer: the server of one
    takes the other's weights (one launch, and /get_model_info names the new one). A checkpoint of
    another config gets a new server; a swap the server refuses falls back to a restart."""
    import urllib.request

    from fake_sglang import free_port, launcher

    from selfplay_gen import models

    raw, warm = local_model_dir, models.resolve(models.DEFAULT_MODEL)
    other = checkpoint_like(raw, tmp_path / "other", rope_theta=12345.0)
    settings = ServerSettings(python=launcher(tmp_path), port=free_port(), timeout_s=120)

    def serving(url: str) -> str:
        with urllib.request.urlopen(f"{url}/get_model_info", timeout=10) as answer:
            return json.loads(answer.read())["model_path"]

    with Slots(settings, Shell()) as slots:
        first = slots.serve(0, raw, tmp_path / "a.log")
        pid = slots._servers[0][1].processes[0].pid
        swapped = slots.serve(0, warm, tmp_path / "b.log")
        assert slots._servers[0][1].processes[0].pid == pid and serving(swapped.url) == warm
        assert swapped.url == first.url and 0 < swapped.startup_s < first.startup_s
        slots.serve(0, other, tmp_path / "c.log")  # rope_theta differs: restarted
        assert slots._servers[0][1].processes[0].pid != pid and serving(swapped.url) == other
        # a checkpoint whose weights cannot be read: the running server says so, then a new one is tried
        broken = checkpoint_like(other, tmp_path / "broken")
        for weights in Path(broken).glob("*.safetensors"):
            weights.unlink()
        with pytest.raises(StepFailed, match="start-server"):
            slots.serve(0, broken, tmp_path / "d.log")
    out, err = capsys.readouterr()
    assert out.count("launch_server") == 3  # raw, other, broken: warm came by swap
    assert f"took {warm}'s weights" in err
    assert "a new server for " + other + ": their config.json differ" in err
    assert f"did not take {broken}'s weights (Failed to update weights" in err


@pytest.mark.slow
async def test_the_swap_command_gives_a_running_server_a_like_checkpoint(tokenizer, local_model_dir, tmp_path):
    """`python -m selfplay_gen.serving swap` (offline_gpu/gpu_rl.sh between checkpoints)."""
    import asyncio

    from click.testing import CliRunner
    from fake_sglang import FakeSGLang

    from selfplay_gen import models
    from selfplay_gen.serving import main as server_main

    warm = models.resolve(models.DEFAULT_MODEL)
    other = checkpoint_like(local_model_dir, tmp_path / "other", num_hidden_layers=2)
    async with FakeSGLang(tokenizer, local_model_dir) as fake:

        def swap(served: str, model: str):
            return CliRunner().invoke(server_main, ["swap", fake.url, served, model])

        result = await asyncio.to_thread(swap, local_model_dir, warm)
        assert result.exit_code == 0 and f"serves {warm}" in result.output
        assert fake.model_dir == warm and fake.weight_updates == 1
        refused = await asyncio.to_thread(swap, warm, other)
        assert refused.exit_code == 1 and "keeps " + warm + ": their config.json differ" in refused.output
        assert fake.weight_updates == 1  # not asked: the architecture differs


def test_swapping_weights_can_be_turned_off_and_dry_runs_show_it(tmp_path, capsys):
    for swap, expected in ((True, 1), (False, 2)):
        slots = Slots(ServerSettings(port=31000, swap_weights=swap), Shell(dry_run=True))
        slots.serve(0, "/iter_1", tmp_path / "a.log")
        slots.serve(0, "/iter_2", tmp_path / "b.log")
        out = capsys.readouterr().out
        assert out.count("launch_server") == expected
        assert ("update_weights_from_disk model_path=/iter_2" in out) == swap
    slots = Slots(ServerSettings(port=31000, dp=2), Shell(dry_run=True))  # behind a router: each worker swaps
    slots.serve(0, "/iter_1", tmp_path / "a.log")
    slots.serve(0, "/iter_2", tmp_path / "b.log")
    out = capsys.readouterr().out
    assert out.count("-m sglang.launch_server --model-path /iter_1") == 2 and out.count("launch_router") == 1
    assert "--port 32000 --tp 1 --base-gpu-id 0" in out and "--port 33000 --tp 1 --base-gpu-id 1" in out
    assert "--port 31000 --worker-urls http://127.0.0.1:32000 http://127.0.0.1:33000" in out
    assert "--prometheus-port 34000" in out  # a metrics port of its own: a partner's router can run beside
    for worker in (32000, 33000):
        assert f"POST http://127.0.0.1:{worker}/update_weights_from_disk model_path=/iter_2" in out


SAMPLING = {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 2}


@pytest.mark.slow
def test_kept_servers_release_their_memory_for_training_and_take_the_next_checkpoint(tmp_path, local_model_dir, capsys):
    """KEEP_SERVERS=True: before training a server releases its GPU memory and stays up; its next use
    takes the memory back and loads that use's weights, the same checkpoint's or the next one's,
    in the same process. A slot asked for another architecture is restarted as before."""
    from fake_sglang import free_port, launcher

    from selfplay_gen import models

    raw, warm = local_model_dir, models.resolve(models.DEFAULT_MODEL)
    settings = ServerSettings(python=launcher(tmp_path), port=free_port(), timeout_s=120, keep_servers=True)

    def generates(url: str) -> int:
        request = urllib.request.Request(
            f"{url}/generate",
            json.dumps({"input_ids": [1, 2, 3], "sampling_params": SAMPLING}).encode(),
            {"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status
        except urllib.error.HTTPError as err:
            return err.code

    with Slots(settings, Shell()) as slots:
        first = slots.serve(0, raw, tmp_path / "a.log")
        pid = slots._servers[0][1].processes[0].pid
        assert "--enable-memory-saver" in slots._servers[0][1].stages()[0][0].command
        slots.free_gpu()
        assert generates(first.url) == 500  # the stand-in refuses to compute without its memory
        again = slots.serve(0, raw, tmp_path / "a.log")  # the same model after training: weights reloaded
        assert slots._servers[0][1].processes[0].pid == pid and generates(again.url) == 200
        slots.free_gpu()
        slots.free_gpu()  # a released server stays released, and up
        nxt = slots.serve(0, warm, tmp_path / "b.log")
        assert slots._servers[0][1].processes[0].pid == pid and generates(nxt.url) == 200
        assert 0 < nxt.startup_s < first.startup_s
        with urllib.request.urlopen(f"{nxt.url}/get_model_info", timeout=10) as answer:
            assert json.loads(answer.read())["model_path"] == warm
        slots.free_gpu()
        other = checkpoint_like(raw, tmp_path / "other", rope_theta=12345.0)
        slots.serve(0, other, tmp_path / "c.log")  # another config: a new server
        assert slots._servers[0][1].processes[0].pid != pid
        # a server that refuses to resume (here: someone resumed it already) is started again
        pid = slots._servers[0][1].processes[0].pid
        slots.free_gpu()
        urllib.request.urlopen(urllib.request.Request(f"{nxt.url}/resume_memory_occupation", b"{}"), timeout=10)
        restarted = slots.serve(0, other, tmp_path / "d.log")
        assert slots._servers[0][1].processes[0].pid != pid and generates(restarted.url) == 200
    err = capsys.readouterr().err
    assert err.count("released its GPU memory") == 4 and f"took {warm}'s weights" in err
    assert "did not resume ('kv_cache')" in err


@pytest.mark.slow
async def test_a_server_without_the_memory_saver_is_stopped_rather_than_kept(tokenizer, local_model_dir):
    """SGLang answers /release_memory_occupation without --enable-memory-saver yet keeps its memory,
    which verl then lacks: such a server is not kept, and the reason is said."""
    import asyncio

    from fake_sglang import FakeSGLang

    from selfplay_gen.serving import release_memory

    async with FakeSGLang(tokenizer, local_model_dir) as plain:
        why = await asyncio.to_thread(release_memory, plain.url, 30)
        assert why == "it was started without --enable-memory-saver" and not plain.released
    async with FakeSGLang(tokenizer, local_model_dir, memory_saver=True) as saver:
        assert await asyncio.to_thread(release_memory, saver.url, 30) is None and saver.released


def test_kept_servers_in_a_dry_run(tmp_path, capsys):
    slots = Slots(ServerSettings(port=31000, dp=2, keep_servers=True), Shell(dry_run=True))
    slots.serve(0, "/iter_1", tmp_path / "a.log")
    slots.free_gpu()
    slots.serve(0, "/iter_2", tmp_path / "b.log")
    out = capsys.readouterr().out
    assert out.count("launch_server") == 2 and out.count("--enable-memory-saver") == 2
    for worker in (32000, 33000):
        for step in ("release_memory_occupation", "resume_memory_occupation", "update_weights_from_disk"):
            assert f"POST http://127.0.0.1:{worker}/{step}" in out
    assert "--enable-memory-saver" not in _stages(ServerSettings(port=31000, keep_servers=False))


def _stages(settings: ServerSettings) -> str:
    from selfplay_gen.iterate.server import SGLangServer

    server = SGLangServer("/m", 31000, Path("a.log"), settings, Shell(dry_run=True), None)
    return " ".join(word for stage in server.stages() for launch in stage for word in launch.command)


def test_swap_blocker_names_what_differs(tmp_path, local_model_dir):
    from selfplay_gen.serving import swap_blocker

    same = checkpoint_like(local_model_dir, tmp_path / "same", _name_or_path="elsewhere")
    assert swap_blocker(local_model_dir, same) is None  # only the note of where it came from differs
    # verl saves bfloat16 checkpoints; a float32 server loads their weights in its own dtype
    halved = checkpoint_like(local_model_dir, tmp_path / "halved", dtype="bfloat16", torch_dtype="bfloat16")
    assert swap_blocker(local_model_dir, halved) is None
    wider = checkpoint_like(local_model_dir, tmp_path / "wider", hidden_size=1024)
    assert swap_blocker(local_model_dir, wider) == "their config.json differ"
    assert swap_blocker(local_model_dir, str(tmp_path / "gone")) == f"{tmp_path / 'gone'} has no config.json"
    retokenized = checkpoint_like(local_model_dir, tmp_path / "retokenized")
    (Path(retokenized) / "tokenizer.json").unlink()
    assert swap_blocker(local_model_dir, retokenized) == (
        f"tokenizer.json is in only one of {local_model_dir} and {retokenized}"
    )


def test_the_served_dtype_is_sglangs_choice_for_the_checkpoint(tmp_path, local_model_dir):
    from selfplay_gen.serving import served_dtype

    assert served_dtype(local_model_dir) == "float16"  # the embedded model is float32
    assert served_dtype(checkpoint_like(local_model_dir, tmp_path / "bf16", dtype="bfloat16")) == "bfloat16"
    old = checkpoint_like(local_model_dir, tmp_path / "old", dtype=None, torch_dtype="bfloat16")
    assert served_dtype(old) == "bfloat16"  # transformers before 4.56 named it torch_dtype
    gemma = checkpoint_like(local_model_dir, tmp_path / "gemma", model_type="gemma2")
    assert served_dtype(gemma) == "bfloat16"
    assert served_dtype(str(tmp_path / "gone")) is None


def test_every_server_of_a_run_serves_in_the_initial_models_dtype(tmp_path, local_model_dir):
    """verl saves checkpoints in bfloat16 and SGLang serves the float32 embedded model in float16: each
    server of the run, the initial model's and every checkpoint's, is given the initial model's dtype, so
    the paired differences compare models and not dtypes; servers.dtype or a --dtype of extra_args go first."""
    args = ["--initial_model", local_model_dir, "--num_iterations", "2", "--warm.policy", "none"]
    args += ["--servers.keep_servers", "false", "--servers.swap_weights", "false"]
    out = dry_iterate(tmp_path / "a", *args)
    launches = [line for line in out.splitlines() if "-m sglang.launch_server" in line]
    assert len(launches) >= 3 and all(" --dtype float16" in line for line in launches)
    assert any("iter_002" in line for line in launches)
    chosen = dry_iterate(tmp_path / "b", *args, "--servers.dtype", "bfloat16")
    assert chosen.count("--dtype bfloat16") == chosen.count("-m sglang.launch_server")
    assert "--dtype float16" not in chosen
    given = dry_iterate(tmp_path / "c", *args, "--servers.extra_args", "--dtype=float32")
    assert "--dtype=float32" in given and "--dtype float16" not in given
    bf16 = checkpoint_like(local_model_dir, tmp_path / "bf16", dtype="bfloat16")
    assert "--dtype bfloat16" in dry_iterate(tmp_path / "d", *args, "--initial_model", bf16)


def test_servers_capture_cuda_graphs_up_to_the_games_they_play_at_once(tmp_path):
    """An iteration's 1,024 games play beside the evaluation of the model that plays them (32 x 4 development
    games and 134 human ones): the server captures CUDA graphs for decode batches up to all 1,286, so that no
    decode step of a full generation runs without one; servers.cuda_graph_max_bs sets the batch, 0 leaves
    SGLang's own, and a run of fewer games than SGLang's own 256 adds nothing."""

    def launches(name: str, games: int, *more: str) -> list[str]:
        args = ["--num_iterations", "1", "--warm.policy", "none", "--trainer", "grpo"]
        args += ["--trainers.grpo.games_per_iter", str(games), "--evaluation.instances", "32"]
        args += ["--evaluation.games_per_instance", "4", "--evaluation.human_games_per_instance", "1"]
        out = dry_iterate(tmp_path / name, *args, *more)
        return [line for line in out.splitlines() if "-m sglang.launch_server" in line]

    off = ("--evaluation.test_split", "false")
    assert all("--cuda-graph-max-bs 1286 " in line for line in launches("a", 1024, *off))
    # the final evaluation with the test split (256 x 4) is the most a run of fewer games plays at once
    assert all("--cuda-graph-max-bs 1286 " in line for line in launches("b", 64))
    assert all("--cuda-graph-max-bs 512 " in line for line in launches("c", 1024, "--servers.cuda_graph_max_bs", "512"))
    for name, more in (
        ("d", ("--servers.cuda_graph_max_bs", "0")),
        ("e", ("--servers.extra_args", "--disable-cuda-graph")),
    ):
        lines = launches(name, 1024, *off, *more)
        assert lines and not any("--cuda-graph-max-bs" in line for line in lines)
    few = launches("f", 64, *off, "--game", "negotiation", "--evaluation.references", "none")  # 64 beside 32 x 4
    assert few and not any("--cuda-graph-max-bs" in line for line in few)


def dry_iterate(tmp_path, *args, **env):
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--tools.gen", "gen"]
    common += ["--tools.convert", "conv", "--verl.python", sys.executable, "--script-env"]
    result = CliRunner().invoke(iterate_command, [*common, *args], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_online_grpo_plays_inside_verl_for_many_steps_and_validates_every_n(tmp_path):
    out = dry_iterate(
        tmp_path, "--trainer", "grpo-online", "--num_iterations", "1", "--warm.policy", "none",
        "--trainers.grpo_online.steps", "40", "--trainers.grpo_online.lora_rank", "16",
        "--loss.clip_ratio_high", "0.28", "--verl.logger", "console,tensorboard",
        "--trainers.grpo_online.test_instances", "64",
    )  # fmt: skip
    run = tmp_path / "run"
    init = f"+ gen init --num-train 320 --num-test 64 --seed 1000000 --out-dir {run}/iter_001/gen --overwrite"
    assert init in out.splitlines()  # 40 steps x 16 rows, two rows (seats) an instance
    (train,) = [line for line in out.splitlines() if "-m verl.trainer.main_ppo" in line]
    for override in (
        f"data.train_files={run}/iter_001/gen/train.parquet",
        f"data.val_files={run}/iter_001/gen/test.parquet",
        "actor_rollout_ref.rollout.n=8 ",
        "+selfplay.max_new_tokens=640",  # the matching teacher plan's proposals need 640
        "actor_rollout_ref.rollout.temperature=0.7",
        # validation samples as the games it stands for do (verl's default is greedy)
        "actor_rollout_ref.rollout.val_kwargs.temperature=0.7",
        "actor_rollout_ref.rollout.val_kwargs.top_p=1",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=True",
        "trainer.total_training_steps=40",
        "trainer.test_freq=10",
        "actor_rollout_ref.model.lora_rank=16 actor_rollout_ref.model.lora_alpha=32",
        "actor_rollout_ref.model.lora.merge=True",  # LoRA reaches SGLang as merged weights
        "actor_rollout_ref.actor.clip_ratio_high=0.28",
        'trainer.logger=\\[\\"console\\"\\,\\"tensorboard\\"\\]',
    ):
        assert override in train, override
    assert (
        "calculate_log_probs" not in train
        and "--backend sglang --base-url" not in out.split("gen init")[1].split("\n")[0]
    )
    assert (  # verl's merger and the LoRA adapter's fold in one process
        f"-m selfplay_gen.verl.merge_lora --checkpoint {run}/iter_001/train/checkpoints/global_step_N/actor "
        f"{run}/iter_001/train/hf" in out
    )
    # the starting model is evaluated before training, the trained one after
    assert (
        f"--label base --out {run}/base/eval/heldout" in out
        and f"--label iter_1 --out {run}/iter_001/eval/heldout" in out
    )


def test_retention_and_the_test_split_run(tmp_path):
    out = dry_iterate(tmp_path, "--num_iterations", "1", "--warm.policy", "none", "--evaluation.retention", "true")
    assert f"gen retention --model /m0 --out {tmp_path}/run/base/retention.json" in out
    tested = [line for line in out.splitlines() if "--instances test " in line]
    assert len(tested) == 1  # the final model only
    assert all("--label iter_1" in line for line in tested)


def test_an_unknown_logger_is_refused(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    result = CliRunner().invoke(iterate_command, ["--dry-run", "--verl.logger", "console,tensorbored"])
    assert result.exit_code == 2 and "'tensorbored' is not one of 'console', 'tensorboard'" in result.output
    # from a variable too, named
    result = CliRunner().invoke(iterate_command, ["--dry-run"], env={"SELFPLAY_VERL__LOGGER": "wandb,tensorbored"})
    assert result.exit_code == 2 and "environment variable SELFPLAY_VERL__LOGGER: verl.logger=" in result.output


def test_a_step_logs_its_output_times_its_start_up_and_names_itself_when_it_fails(tmp_path, capsys):
    log = tmp_path / "train" / "verl.log"
    script = "echo starting; sleep 0.5; printf 'Training Progress: 0%%\\r'; echo 'step:1 - actor/entropy:0.5'"
    startup = Shell().run("train", ["bash", "-c", script], log, ready="Training Progress")
    assert startup is not None and startup >= 0.5
    printed = capsys.readouterr().out
    assert "step:1 - actor/entropy:0.5" in log.read_text() and "starting" in printed
    took = re.search(r"^\(train: ([0-9.]+) s\)$", printed, re.M)  # what the step cost, in the run's log
    assert took and float(took.group(1)) >= 0.5
    assert Shell().run("quiet", ["true"], log, ready="never") is None  # no such line: start-up unknown
    with pytest.raises(StepFailed, match=r"step 'merge' failed \(exit 3\)"):
        Shell().run("merge", ["bash", "-c", "exit 3"])
    assert "(merge: " in capsys.readouterr().out  # a failed step says how long it ran, too
    assert Shell(dry_run=True).run("merge", ["bash", "-c", "exit 3"]) is None  # a dry run only prints
    assert "(merge" not in capsys.readouterr().out


def test_a_failed_stage_is_not_marked_done_and_a_rerun_resumes_from_its_markers(tmp_path):
    """A run against a given server whose evaluation command fails stops naming the step and leaves
    no DONE marker; once the evaluation is there, the rerun marks the stage done with its summary row."""
    from selfplay_gen.iterate.config import Tools
    from selfplay_gen.iterate.loop import Run

    run_dir = tmp_path / "run"
    failing = Iteration(
        run_dir=run_dir, initial_model="/m0", num_iterations=0, warm=Warm(policy="none"),
        servers=ServerSettings(urls=("http://127.0.0.1:9",)), tools=Tools(python=sys.executable, gen=("false",)),
    )  # fmt: skip
    with pytest.raises(StepFailed, match=r"step 'base: evaluate \(heldout\)' failed \(exit 1\)"):
        Run(failing).main()
    assert not (run_dir / "base" / "DONE").exists() and not (run_dir / "base" / "eval" / "DONE").exists()
    (run_dir / "base" / "eval").mkdir(parents=True, exist_ok=True)  # it holds the evaluation's play.yaml
    (run_dir / "base" / "eval" / "DONE").touch()  # evaluated meanwhile
    assert Run(failing).main() == "/m0"
    assert (run_dir / "base" / "DONE").exists()
    summary = (run_dir / "summary.md").read_text().splitlines()
    assert summary[2].startswith("| base |  |  |  | ")  # no training games in the base stage


@pytest.mark.slow
def test_a_model_is_evaluated_while_its_server_plays_its_training_games(tmp_path, local_model_dir, monkeypatch):
    """The model a stage starts from, not yet evaluated, is evaluated together with that stage's games on the
    same server: each fake command waits until the other kind has started, so run one after the other they
    would fail; the wall-time table holds one row for both, with the start-up of the server they share and
    the GPUs' utilization meanwhile (a stand-in nvidia-smi on PATH)."""
    from fake_sglang import free_port, launcher

    from selfplay_gen.iterate.config import Tools
    from selfplay_gen.iterate.loop import Run

    fake = tmp_path / "selfplay-gen"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f"if [[ $1 == eval ]]; then touch {tmp_path}/eval; other={tmp_path}/gen; "
        f"else touch {tmp_path}/gen; other={tmp_path}/eval; fi\n"
        "for _ in $(seq 400); do [[ -e $other ]] && exit 0; sleep 0.05; done; exit 9\n"
    )
    fake.chmod(0o755)
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/usr/bin/env bash\nwhile true; do echo 37; sleep 0.05; done\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "run"
    (run_dir / "base").mkdir(parents=True)
    (run_dir / "base" / "DONE").touch()  # the stage, but not its evaluation
    cfg = Iteration(
        run_dir=run_dir, initial_model=local_model_dir, num_iterations=1, trainer="filtered-bc",
        warm=Warm(policy="none"), servers=ServerSettings(python=launcher(tmp_path), port=free_port(), timeout_s=120),
        tools=Tools(python=sys.executable, gen=(str(fake),), convert=("false",)),
    )  # fmt: skip
    with pytest.raises(StepFailed, match="step 'iteration 1: convert' failed"):
        Run(cfg).main()
    (row,) = json.loads((run_dir / "iter_001" / "timings.json").read_text())["steps"]
    assert row["step"] == "evaluate base + generate" and row["startup_s"] > 0  # the stand-in server's start
    assert row["gpu_percent"] == 37.0
    # the model the stage trains from, for a restore that has its adapter alone (gpu_learning.sh restore)
    assert (run_dir / "iter_001" / "trained_from").read_text() == f"{local_model_dir}\n"


def test_a_finished_stage_with_nothing_to_serve_is_said_with_what_to_do(tmp_path, capsys):
    """A stage marked DONE whose model directory lost its weights and has no adapter to fold back: said at once,
    since a server would fail on it only later and with SGLang's words."""
    from selfplay_gen.iterate.loop import Run
    from selfplay_gen.iterate.stages import Stage

    stage = Stage.iteration(tmp_path / "run", 1)
    (stage.model_dir / "other").mkdir(parents=True)
    (stage.dir / "DONE").touch()
    run = Run(Iteration(run_dir=tmp_path / "run", initial_model=str(tmp_path), warm=Warm(policy="none")))
    run.refold(stage)
    said = " ".join(capsys.readouterr().err.split())
    assert re.search(r"iter_001/DONE, but .* holds neither .* will fail \(remove .*iter_001 to run the stage", said)


def test_metrics_come_from_tensorboard_events_when_verl_logged_there(tmp_path):
    """verl's tensorboard logger writes with torch's SummaryWriter into TENSORBOARD_DIR, which the run
    sets under the stage's train/; the curves are read back from those events."""
    from torch.utils.tensorboard import SummaryWriter

    from selfplay_gen.iterate.loop import job_env, plot_training_log

    assert job_env(Verl(cudnn_attention=True), tmp_path) == []  # console only: verl's own places
    where = job_env(Verl(logger=("console", "tensorboard", "wandb"), cudnn_attention=True), tmp_path)
    assert where == ["env", f"TENSORBOARD_DIR={tmp_path}/tensorboard", f"WANDB_DIR={tmp_path}/wandb"]
    writer = SummaryWriter(str(tmp_path / report.TENSORBOARD_DIR))
    for step in (1, 2, 3):
        writer.add_scalar("actor/entropy", 0.5 / step, step)
        writer.add_scalar("critic/score/mean", 0.1 * step, step)
    writer.close()
    steps = report.tensorboard_metrics(tmp_path / report.TENSORBOARD_DIR)
    assert [s["step"] for s in steps] == [1.0, 2.0, 3.0] and steps[2]["critic/score/mean"] == pytest.approx(0.3)
    plot_training_log(tmp_path)
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert json.loads((tmp_path / "metrics.json").read_text())[0]["actor/entropy"] == pytest.approx(0.5)


def test_dpo_trains_on_each_groups_best_game_against_its_worst(tmp_path):
    out = dry_iterate(tmp_path, "--trainer", "dpo", "--num_iterations", "1", "--warm.policy", "none")
    run = tmp_path / "run"
    lines = out.splitlines()
    (convert,) = [line for line in lines if line.startswith(f"+ conv {run}/iter_001/gen/games.jsonl")]
    assert "--format dpo --dpo-pairs reward --dpo-pairs-per-group 1" in convert  # by reward unless named
    (train,) = [line for line in lines if "-m selfplay_gen.train.dpo" in line]
    assert f"--model /m0 --pairs {run}/iter_001/gen/train.parquet --out {run}/iter_001/train/hf" in train
    assert "--lora-rank 16 --lr 5e-6 --epochs 1 --batch-size 4" in train
    assert train.startswith(f"+ {sys.executable} -m selfplay_gen.train.dpo")  # TRL_PYTHON: SELFPLAY_PYTHON's
    trl = dry_iterate(tmp_path, "--trainer", "dpo", "--num_iterations", "1", "--warm.policy", "none",
                      TRL_PYTHON="/opt/trl/bin/python")  # fmt: skip
    (train,) = [line for line in trl.splitlines() if "-m selfplay_gen.train.dpo" in line]
    assert train.startswith("+ /opt/trl/bin/python -m selfplay_gen.train.dpo")
    assert trl.count("/opt/trl") == 1  # no other step runs in the Python that has trl
    assert f"--label iter_1 --out {run}/iter_001/eval/heldout" in out  # evaluated as any other stage's model


def test_out_of_memory_advice_for_grpo_names_the_actors_micro_batches_and_the_rollouts_share(tmp_path):
    from dataclasses import replace

    from selfplay_gen.iterate.loop import memory_advice

    job = TrainJob("online", "/m", "", "", out_dir=tmp_path, experiment="x", lr="1e-6")
    advice = memory_advice(job, Verl(gradient_checkpointing=True, ppo_micro_tokens=16384), tmp_path / "verl.log")
    assert "lower verl.ppo_micro_tokens (now 16384)" in advice
    assert "lower verl.gpu_memory_utilization, the rollout engine's share (now 0.4)" in advice
    assert "gradient_checkpointing" not in advice  # already on
    offline = replace(job, mode="offline")
    engine = memory_advice(offline, Verl(ppo_micro_tokens=16384), tmp_path / "verl.log")
    assert "ppo_micro_tokens" in engine and "gpu_memory_utilization" in engine
    none = memory_advice(offline, Verl(ppo_micro_tokens=16384, offline_engine=False), tmp_path / "verl.log")
    assert "ppo_micro_tokens" in none and "gpu_memory_utilization" not in none  # it starts no rollout engine


def test_a_training_job_whose_rollout_server_found_too_little_memory_starts_again(tmp_path, monkeypatch):
    """verl starts its rollout server inside the job; one that stops on 'Not enough memory' (another process
    allocated on the GPU while it started) is started again, as the run's own servers are, up to start_tries."""
    from selfplay_gen.iterate import loop
    from selfplay_gen.iterate.config import Sampling
    from selfplay_gen.iterate.shell import Shell, StepFailed

    calls, log = tmp_path / "calls", tmp_path / "verl.log"

    def job_failing(times: int, message: str) -> list[str]:
        """A job that fails its first `times` starts, printing `message`."""
        script = f"echo x >> {calls}; if [ $(wc -l < {calls}) -le {times} ]; then echo '{message}'; exit 1; fi"
        return ["bash", "-c", script]

    monkeypatch.setattr(loop, "check_steps", lambda job: None)
    job = TrainJob("offline", "/m", str(log), str(log), out_dir=tmp_path / "out", experiment="x", lr="1e-6")
    log.touch()
    short = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    starts = ServerSettings(start_tries=3, retry_wait_s=0)

    def trained(times: int, message: str, settings: ServerSettings | None = starts) -> int:
        calls.write_text("")
        monkeypatch.setattr(loop, "verl_command", lambda *args: job_failing(times, message))
        try:
            loop.train(Shell(), job, Verl(), PolicyLoss(), Sampling(), log, starts=settings)
        except StepFailed:
            return -len(calls.read_text().split())
        return len(calls.read_text().split())

    assert trained(2, short) == 3  # two short starts, then the job
    assert trained(3, short) == -3  # start_tries starts, all short: the failure stands
    assert trained(1, "Traceback: some other error") == -1  # any other failure is not tried again
    assert trained(1, short, settings=None) == -1  # a caller that gives no start settings: one start


def test_a_format_warm_start_can_imitate_each_seats_best_random_games(tmp_path):
    """Expert iteration's first step from random legal play: many games an instance, each seat's best by the
    training reward kept."""
    out = dry_iterate(
        tmp_path, "--num_iterations", "0", "--warm.policy", "format", "--warm.games", "4096",
        "--warm.games_per_instance", "64", "--warm.top_fraction", "0.015625", "--own_plan_weight", "1",
    )  # fmt: skip
    (games,) = [line for line in out.splitlines() if "--backend scripted" in line]
    assert "--num-games 4096 --games-per-instance 64" in games
    (convert,) = [line for line in out.splitlines() if line.startswith("+ conv ")]
    assert "--top-fraction 0.015625 --own-plan-weight 1" in convert
    plain = dry_iterate(tmp_path / "plain", "--num_iterations", "0", "--warm.policy", "format")
    (convert,) = [line for line in plain.splitlines() if line.startswith("+ conv ")]
    assert "--top-fraction 1.0 " in convert and "--own-plan-weight" not in convert
    assert "--games-per-instance 1 " in plain


def test_online_grpo_passes_the_move_credit_to_verl_and_refuses_it_for_a_game_that_gives_none(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    args = ("--trainer", "grpo-online", "--num_iterations", "1")
    credited = dry_iterate(tmp_path, *args, "--trainers.grpo_online.move_credit", "0.5")
    assert "+selfplay.move_credit=0.5" in credited
    assert "+selfplay.move_credit" not in dry_iterate(tmp_path / "plain", *args)
    refused = ["--dry-run", "--run_dir", str(tmp_path / "neg"), "--game", "negotiation", *args,
               "--trainers.grpo_online.move_credit", "0.5"]  # fmt: skip
    result = CliRunner().invoke(iterate_command, refused)
    assert result.exit_code == 2 and "negotiation credits no part of a move" in result.output


def test_a_skill_conditioned_warm_start_refuses_several_games_an_instance(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.iterate.cli import iterate_command

    args = ["--dry-run", "--run_dir", str(tmp_path), "--game", "negotiation", "--league.skill_levels",
            "novice,expert", "--warm.games_per_instance", "8"]  # fmt: skip
    result = CliRunner().invoke(iterate_command, args)
    assert result.exit_code == 2 and "warm.games_per_instance" in result.output
