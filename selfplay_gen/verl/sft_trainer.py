"""`python -m selfplay_gen.verl.sft_trainer HYDRA_OVERRIDE...`: verl's own SFT trainer
(`verl.trainer.sft_trainer`, same config and overrides) with chunked log-probs installed
(see `logprobs`). run_selfplay_training.sh MODE=sft launches it under torchrun."""

from verl.trainer import sft_trainer

from .logprobs import install

if __name__ == "__main__":
    install()
    sft_trainer.main()
