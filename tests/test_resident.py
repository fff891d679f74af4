"""A resident trainer (`verl.resident`): offline GRPO's verl job started once per run, its rows arriving one
part per iteration. verl's own config, trainer and dataloader read the parts in order, wait at a part not yet
written, and a job started again resumes at the part after its last checkpoint; the loop starts the job once
for the whole run and merges each iteration's checkpoint, with a stand-in for what only a GPU runs (the FSDP
update, the model merger)."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from selfplay_gen.iterate.config import PolicyLoss, Sampling, TrainJob, Verl
from selfplay_gen.iterate.resident import Resident
from selfplay_gen.iterate.shell import Shell
from selfplay_gen.iterate.verl_jobs import ppo_command
from selfplay_gen.verl import config_path
from selfplay_gen.verl.parts import fill
from selfplay_gen.verl.replay_trainer import ReplayTrainer


def rows_file(tmp_path: Path, seed: int, instances: int = 6) -> Path:
    """Rows verl reads (two an instance, one per seat), told apart by their instance's seed and seat."""
    from selfplay_gen.verl.init_data import init_command

    out = tmp_path / f"rows_{seed}"
    args = ["--num-train", str(instances), "--num-test", "1", "--seed", str(seed), "--out-dir", str(out)]
    result = CliRunner().invoke(init_command, args)
    assert result.exit_code == 0, result.output
    return out / "train.parquet"


def keys(rows) -> list[tuple[int, int]]:
    """(instance seed, seat) of each row of a parquet table's rows or of a batch verl fetched."""
    infos = rows["extra_info"]
    return [(json.loads(info["instance"])["seed"], int(info["player"])) for info in infos]


def part_keys(path: Path) -> list[tuple[int, int]]:
    return keys({"extra_info": pq.read_table(path).column("extra_info").to_pylist()})


def resident_config(tmp_path: Path, model: str, first: Path, iterations: int, batch: int):
    """verl's config of the resident job the loop would start at its first iteration (whose rows are `first`),
    as verl's entry point composes and its task runner resolves it; the resident and the spec it wrote."""
    resident = Resident(Shell(), tmp_path / "run", iterations)
    job = TrainJob(
        mode="offline", model=model, train_files=str(first), val_files=str(first), out_dir=tmp_path / "iter",
        experiment="iter_001", lr="1e-5", batch_size=batch, rollout_n=8,
    )  # fmt: skip
    spec = resident.spec(job)
    steps = spec.rows_per_part // batch
    command = ppo_command(
        resident.job(job, steps), Verl(python=sys.executable), PolicyLoss(), Sampling(), config_path(), 8
    )
    overrides = [w for w in command[command.index("verl.trainer.main_ppo") + 1 :] if not w.startswith("hydra.")]
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    OmegaConf.resolve(config)
    return config, resident, spec


def verls_trainer(config) -> ReplayTrainer:
    """The trainer verl's task runner builds, with its tokenizer and dataloaders as its `init` builds them."""
    trainer = ReplayTrainer(config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    return trainer


def test_verls_trainer_takes_each_part_when_it_arrives_and_resumes_at_the_part_after_its_checkpoint(
    tmp_path, local_model_dir
):
    first, second = rows_file(tmp_path, 100), rows_file(tmp_path, 200)
    config, resident, spec = resident_config(tmp_path, local_model_dir, first, iterations=3, batch=4)
    assert (spec.parts, spec.rows_per_part) == (3, 12)  # 12 rows make 3 steps of 4, every iteration
    assert (config.trainer.save_freq, config.trainer.total_training_steps, config.trainer.resume_mode) == (3, 9, "auto")
    trainer = verls_trainer(config)
    assert len(trainer.train_dataset) == 36 and trainer.total_training_steps == 9

    fill(first, spec, 1, epochs=1, seed=1)
    fetched = [keys(trainer._fetch_one_gen_batch()) for _ in range(3)]
    assert sum(fetched, []) == part_keys(spec.part(1))
    assert sorted(part_keys(spec.part(1))) == sorted(part_keys(first))  # each of the iteration's rows once
    state = trainer.train_dataloader.state_dict()  # what verl saves with step 3's checkpoint

    got: list = []
    waiting = threading.Thread(target=lambda: got.append(keys(trainer._fetch_one_gen_batch())))
    waiting.start()
    time.sleep(2.5)
    assert waiting.is_alive() and not got  # step 4 waits for part 2
    fill(second, spec, 2, epochs=1, seed=2)
    waiting.join(timeout=30)
    assert got == [part_keys(spec.part(2))[:4]]

    again = verls_trainer(config)  # the job started again, as verl resumes from step 3's checkpoint
    again.train_dataloader.load_state_dict(state)
    assert keys(again._fetch_one_gen_batch()) == part_keys(spec.part(2))[:4]


def test_a_part_repeats_or_cuts_its_iterations_rows_to_the_size_of_every_part(tmp_path):
    from selfplay_gen.verl.parts import Spec

    rows = rows_file(tmp_path, 300, instances=3)  # 6 rows
    spec = Spec(str(tmp_path / "parts"), parts=2, rows_per_part=8)
    assert fill(rows, spec, 1, epochs=1, seed=5) == 6
    filled = part_keys(spec.part(1))
    assert len(filled) == 8 and set(filled) == set(part_keys(rows))  # all six, then two again
    assert len(set(filled[:6])) == 6  # a whole pass before any row comes twice
    fill(rows, Spec(spec.parts_dir, 2, 4), 2, epochs=2, seed=5)
    assert len(set(part_keys(spec.part(2)))) == 4  # cut: the first pass's first four


def test_verls_dataset_for_other_files_is_its_own(tmp_path, local_model_dir):
    first = rows_file(tmp_path, 400)
    config, _, _ = resident_config(tmp_path, local_model_dir, first, iterations=2, batch=4)
    trainer = verls_trainer(config)  # the validation set is a plain file: verl's RLHFDataset reads it
    assert trainer.val_dataset.spec is None and len(trainer.val_dataset) == 12


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--trainer", "filtered-bc"], "filtered-bc starts its own job each iteration"),
        (["--trainer", "grpo", "--league.promotion", "on"], "a promotion rule may set an iteration's model aside"),
    ],
)
def test_a_resident_trainer_is_offline_grpos_and_goes_without_promotion(tmp_path, args, why):
    from selfplay_gen.iterate.cli import iterate_command

    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--warm.policy", "none"]
    result = CliRunner().invoke(iterate_command, [*common, *args, "--verl.resident", "true"])
    assert result.exit_code == 2 and why in result.output


# Stand-ins for the commands the loop runs that need a GPU or a server: selfplay-gen (games, evaluations: it logs
# what it played with which model), selfplay-convert (an iteration's groups: rows of instances seeded by the
# iteration), and verl's Python (the job: tests/stand_in_verl.py; the merger: the model's files, and where from)
GEN = """#!/usr/bin/env bash
args=("$@"); out=""; model=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in --out) out=${args[i+1]};; --model) model=${args[i+1]};; esac
done
kind=generate; [[ $1 == eval ]] && kind=eval
[[ $kind == generate && -e FAIL && $out == *iter_003* ]] && exit 3
echo "$kind $out $model" >> LOG
[[ $kind == generate ]] && touch "$out"
exit 0
"""
CONVERT = """#!/usr/bin/env bash
gen=$(dirname "$1"); n=$(basename "$(dirname "$gen")"); n=$((10#${n#iter_}))
exec PY -m selfplay_gen.cli init --num-train 6 --num-test 1 --seed $((n * 100)) --out-dir "$gen" --overwrite
"""
VERL = """#!/usr/bin/env bash
case $2 in
  verl.trainer.main_ppo)  # a start short of GPU memory, once the test asks for one
    if [ -e SHORT ]; then rm SHORT; echo "RuntimeError: Not enough memory. Please try to increase"; exit 1; fi
    shift 2; exec PY STAND_IN "$@";;
  selfplay_gen.verl.merge_lora)  # --checkpoint LOCAL_DIR HF_DIR
    from=$4 target=$5
    mkdir -p "$target" && cp MODEL/* "$target"/ && echo "$from" > "$target/merged_from"
    ls "$from/../../../parts" > "$target/parts_at_merge";;
  *) exec PY "$@";;
esac
"""


def stand_in(tmp_path: Path, name: str, text: str, model: str) -> str:
    path = tmp_path / name
    stand_in_verl = Path(__file__).with_name("stand_in_verl.py")
    text = text.replace("PY", sys.executable).replace("STAND_IN", str(stand_in_verl)).replace("MODEL", model)
    text = text.replace("SHORT", str(tmp_path / "short_of_memory"))
    path.write_text(text.replace("LOG", str(tmp_path / "played.log")).replace("FAIL", str(tmp_path / "fail")))
    path.chmod(0o755)
    return str(path)


def resident_run(tmp_path: Path, model: str, overlap: str = "off"):
    """Three offline GRPO iterations with a resident trainer, 12 groups each (3 steps of 4), against a given
    server URL."""
    from selfplay_gen.iterate.config import GRPOSettings, Iteration, ServerSettings, Tools, Trainers, Warm

    return Iteration(
        run_dir=tmp_path / "run", initial_model=model, num_iterations=3, trainer="grpo", warm=Warm(policy="none"),
        trainers=Trainers(grpo=GRPOSettings(batch_size=4)),
        servers=ServerSettings(urls=("http://127.0.0.1:9",), retry_wait_s=0),
        tools=Tools(python=sys.executable, gen=(stand_in(tmp_path, "gen", GEN, model),),
                    convert=(stand_in(tmp_path, "convert", CONVERT, model),)),
        verl=Verl(python=stand_in(tmp_path, "verl-python", VERL, model), resident=True), overlap=overlap,
    )  # fmt: skip


def fetched(run_dir: Path) -> tuple[list[dict], dict[int, list[tuple[int, int]]]]:
    """The stand-in job's starts, and the rows of each step it trained."""
    lines = [json.loads(line) for line in (run_dir / "resident" / "fetched.jsonl").read_text().splitlines()]
    starts = [line for line in lines if "started_at_step" in line]
    return starts, {line["step"]: [tuple(r) for r in line["rows"]] for line in lines if "step" in line}


def test_the_loop_starts_verl_once_and_trains_each_iteration_on_its_own_groups_resuming_after_a_stop(
    tmp_path, local_model_dir
):
    """Iterations 1 and 2 train in one job (started again once its rollout server found the GPU short of memory);
    iteration 3's games fail while the job waits for part 3, which ends it; the run started again starts the job
    again, which resumes from step 6's checkpoint."""
    from selfplay_gen.iterate import report
    from selfplay_gen.iterate.loop import Run
    from selfplay_gen.iterate.shell import StepFailed

    run_dir = tmp_path / "run"
    (tmp_path / "fail").touch()
    (tmp_path / "short_of_memory").touch()
    started = time.monotonic()
    with pytest.raises(StepFailed, match="iteration 3"):
        Run(resident_run(tmp_path, local_model_dir)).main()
    assert time.monotonic() - started < 120  # the job waiting for part 3 is ended, not waited for
    starts, steps = fetched(run_dir)
    assert starts == [{"started_at_step": 0, "model": local_model_dir}] and sorted(steps) == list(range(1, 7))
    assert not (tmp_path / "short_of_memory").exists()  # the first start stopped short of memory; the second trained
    (tmp_path / "fail").unlink()
    assert Run(resident_run(tmp_path, local_model_dir)).main() == f"{run_dir}/iter_003/train/hf"
    starts, steps = fetched(run_dir)
    assert [s["started_at_step"] for s in starts] == [0, 6] and sorted(steps) == list(range(1, 10))
    for i in (1, 2, 3):  # steps 3i-2..3i: iteration i's part, each of its 12 groups once
        rows = sum((steps[s] for s in range(3 * i - 2, 3 * i + 1)), [])
        assert rows == part_keys(run_dir / "resident" / "parts" / f"part_{i:03d}.parquet")
        assert {seed for seed, _ in rows} == set(range(100 * i, 100 * i + 6)) and len(set(rows)) == 12
        hf = run_dir / f"iter_{i:03d}" / "train" / "hf"  # iteration i's model: the checkpoint of step 3i
        # its adapter is the job's, trained through the run from its first model: a refold goes onto that one
        assert (run_dir / f"iter_{i:03d}" / "trained_from").read_text().strip() == local_model_dir
        assert (hf / "merged_from").read_text().strip() == f"{run_dir}/resident/checkpoints/global_step_{3 * i}/actor"
        assert (hf / "parts_at_merge").read_text().split() == [f"part_00{j}.parquet" for j in range(1, i + 1)]
        assert [row["step"] for row in json.loads((hf.parent / report.STEPS_FILE).read_text())] == [
            3 * i - 2, 3 * i - 1, 3 * i
        ]  # fmt: skip
    played = [line.split() for line in (tmp_path / "played.log").read_text().splitlines()]
    by = {Path(out).parts[-3]: model for kind, out, model in played if kind == "generate"}
    assert by == {"iter_001": local_model_dir, "iter_002": f"{run_dir}/iter_001/train/hf",
                  "iter_003": f"{run_dir}/iter_002/train/hf"}  # fmt: skip
    first, second, third = (
        [t for t in report.timings(run_dir / f"iter_00{i}") if t.step.startswith("train")] for i in (1, 2, 3)
    )
    assert [t.step for t in first + second + third] == ["train (offline, resident)"] * 3
    assert first[0].startup_s > 0 and second[0].startup_s == 0.0 and third[0].startup_s > 0  # started in 1 and 3


def test_with_overlap_the_job_has_the_next_iterations_groups_before_this_ones_merge(
    tmp_path, local_model_dir, monkeypatch
):
    """Overlap one-step plays and converts iteration N+1's games while N trains, so their part is written as N's
    checkpoint is saved and the job trains on while N's merge runs (without overlap, the next part waits for the
    merge: the test above)."""
    from selfplay_gen.iterate.loop import Run

    def parts_at_merges(run_dir: Path) -> list[list[str]]:
        return [(run_dir / f"iter_00{i}/train/hf/parts_at_merge").read_text().split() for i in (1, 2, 3)]

    names = [f"part_00{i}.parquet" for i in (1, 2, 3)]
    (tmp_path / "overlap").mkdir()
    # each checkpoint but the last is saved once the next iteration's games are played ahead and converted
    games = tmp_path / "overlap" / "run" / "iter_{part:03d}" / "gen" / "played_by.json"
    monkeypatch.setenv("STAND_IN_SAVE_AFTER", str(games))
    monkeypatch.setenv("STAND_IN_SAVE_AFTER_TEXT", '"complete": true')
    Run(resident_run(tmp_path / "overlap", local_model_dir, overlap="one-step")).main()
    monkeypatch.delenv("STAND_IN_SAVE_AFTER")
    assert parts_at_merges(tmp_path / "overlap" / "run") == [names[:2], names, names]
    starts, steps = fetched(tmp_path / "overlap" / "run")
    assert len(starts) == 1 and sorted(steps) == list(range(1, 10))


def test_the_plan_of_a_resident_run_starts_verl_once_without_its_rollout_engine(tmp_path):
    from selfplay_gen.iterate.cli import iterate_command

    args = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--warm.policy", "none"]
    args += ["--trainer", "grpo", "--num_iterations", "3", "--verl.python", sys.executable, "--verl.resident", "true"]
    result = CliRunner().invoke(iterate_command, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    (job,) = [line for line in lines if "verl.trainer.main_ppo" in line]  # one job for the three iterations
    assert "data.custom_cls.name=ArrivingRows" in job and "trainer.v1.trainer_mode=replay" in job
    assert "gpu_memory_utilization" not in job  # no rollout engine, though verl.offline_engine is true
    waits = [line for line in lines if line.startswith("+ # wait for")]
    assert [w.rsplit("/", 1)[1] for w in waits] == ["global_step_1xS", "global_step_2xS", "global_step_3xS"]
    servers = [line for line in lines if "sglang.launch_server" in line]
    assert servers and all("--mem-fraction-static 0.3" in line for line in servers)  # a share beside the trainer
