"""`python -m selfplay_gen.verl.merge_lora HF_DIR`: fold HF_DIR/lora_adapter into HF_DIR's weights.

verl's model merger writes a LoRA run's *base* weights to HF_DIR and the adapter apart, in
HF_DIR/lora_adapter. A server given HF_DIR then plays the untrained model: the first LoRA warm
start scored 0.000 on held-out games, like the raw base, at a training loss of 0.10. peft folds
the adapter in here, so HF_DIR is the trained model; the adapter stays beside it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from ..models import fold_adapter

ADAPTER_DIR = "lora_adapter"


@click.command()
@click.argument("hf_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def main(hf_dir: Path) -> None:
    adapter = hf_dir / ADAPTER_DIR
    if not (adapter / "adapter_config.json").exists():
        raise click.ClickException(f"{adapter}/adapter_config.json not found: not a LoRA run's merged directory")
    folded = hf_dir.with_name(hf_dir.name + ".folding")  # written apart, then swapped in whole
    shutil.rmtree(folded, ignore_errors=True)
    fold_adapter(hf_dir, adapter, folded)
    shutil.copytree(adapter, folded / ADAPTER_DIR)
    shutil.rmtree(hf_dir)
    folded.rename(hf_dir)
    click.echo(f"folded {adapter} into {hf_dir}")


if __name__ == "__main__":
    main()
