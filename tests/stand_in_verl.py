"""A stand-in for verl's offline GRPO job where no GPU is: `python stand_in_verl.py HYDRA_OVERRIDE...`.

What runs is verl's: its config composed from the job's command line, the trainer its trainer mode names
(selfplay_gen's replay trainer), that trainer's tokenizer, datasets and dataloader, and each step's batch as
verl's step fetches it. What a GPU would do in between (the FSDP update) is left out; each step logs the rows it
was given to RESIDENT_DIR/fetched.jsonl, prints verl's console line, and every `trainer.save_freq` steps saves
what the loop reads of a checkpoint: the dataloader's state (data.pt), an actor directory and the tracker file
(with STAND_IN_SAVE_AFTER, once a file of the test's appears). A job started again resumes as verl's
`resume_mode=auto` does, from the latest checkpoint's dataloader state."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

import selfplay_gen.verl.replay_trainer  # noqa: F401  (verl imports it in its processes: VERL_USE_EXTERNAL_MODULES)

# a file whose name may hold {part}: the checkpoint before part N waits until the file for N holds the text
# STAND_IN_SAVE_AFTER_TEXT (or exists), so a test orders the job's saves after work of its own
SAVE_AFTER, SAVE_AFTER_TEXT = "STAND_IN_SAVE_AFTER", "STAND_IN_SAVE_AFTER_TEXT"


def wait_for(path: Path, text: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and text in path.read_text()):
        if time.monotonic() > deadline:
            sys.exit(f"stand-in verl: {path} did not hold {text!r} in {timeout_s:g} s")
        time.sleep(0.1)


def main(overrides: list[str]) -> None:
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=[o for o in overrides if not o.startswith("hydra.")])
    OmegaConf.resolve(config)
    trainer = get_trainer_cls(config.trainer.v1.trainer_mode)(config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    checkpoints = Path(config.trainer.default_local_dir)
    tracker = checkpoints / "latest_checkpointed_iteration.txt"
    start = int(tracker.read_text()) if config.trainer.resume_mode == "auto" and tracker.exists() else 0
    if start:
        trainer.train_dataloader.load_state_dict(torch.load(checkpoints / f"global_step_{start}" / "data.pt"))
    fetched = checkpoints.parent / "fetched.jsonl"
    with fetched.open("a") as log:
        log.write(json.dumps({"started_at_step": start, "model": config.actor_rollout_ref.model.path}) + "\n")
    print("Training Progress: 0%", flush=True)
    total, every = trainer.total_training_steps, config.trainer.save_freq
    for step in range(start + 1, total + 1):
        batch = trainer._fetch_one_gen_batch()
        rows = [[json.loads(info["instance"])["seed"], int(info["player"])] for info in batch["extra_info"]]
        with fetched.open("a") as log:
            log.write(json.dumps({"step": step, "rows": rows}) + "\n")
        print(f"step:{step} - actor/entropy:{1 / step:.4f} - actor/pg_loss:0.0", flush=True)
        if step % every == 0 or step == total:
            if step < total and os.environ.get(SAVE_AFTER):
                wait_for(
                    Path(os.environ[SAVE_AFTER].format(part=step // every + 1)), os.environ.get(SAVE_AFTER_TEXT, "")
                )
            saved = checkpoints / f"global_step_{step}"
            (saved / "actor").mkdir(parents=True)
            torch.save(trainer.train_dataloader.state_dict(), saved / "data.pt")
            tracker.write_text(str(step))


if __name__ == "__main__":
    main(sys.argv[1:])
