"""`python -m selfplay_gen.verl.sft_trainer HYDRA_OVERRIDE...`: verl's own SFT trainer
(`verl.trainer.sft_trainer`, same config and overrides) in a process set up as GRPO's workers are
(`worker_setup`: chunked log-probs, the attention backend choice). run_selfplay_training.sh MODE=sft
launches it under torchrun."""

from verl.trainer import sft_trainer

if __name__ == "__main__":
    from . import worker_setup  # noqa: F401  (importing it sets this process up)

    sft_trainer.main()
