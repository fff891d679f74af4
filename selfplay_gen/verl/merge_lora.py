"""`python -m selfplay_gen.verl.merge_lora [--checkpoint LOCAL_DIR] HF_DIR`: fold HF_DIR/lora_adapter into
HF_DIR's weights.

verl's model merger writes a LoRA run's *base* weights to HF_DIR and the adapter apart, in
HF_DIR/lora_adapter. A server given HF_DIR then plays the untrained model: the first LoRA warm
start scored 0.000 on held-out games, like the raw base, at a training loss of 0.10. peft folds
the adapter in here, so HF_DIR is the trained model; the adapter stays beside it.

`--checkpoint LOCAL_DIR HF_DIR` first merges verl's FSDP checkpoint at LOCAL_DIR into HF_DIR with verl's model
merger, in this same process, then folds the adapter it wrote (a LoRA run's; a full fine-tuning's checkpoint is
its model): one Python start-up (torch, transformers, verl: seconds each) where verl's merger command followed
by this one takes two, on every iteration's critical path.

Both keep the trained model's float32 weights. An iteration's update is mostly smaller than a weight's bfloat16
rounding step: folded into bfloat16 weights (verl's merger writes bfloat16), most of it rounds back and the model
served is mostly the one the iteration started from (bench/results/fold_precision_2026-12-01/). The merger's
cast to bfloat16 is left out (`_checkpoint_precision`) and the fold runs in float32.

`--onto MODEL_DIR HF_DIR...` folds a chain instead: a run carried to another machine as adapters
alone, each stage's adapter trained on the model the stage before made. The first HF_DIR's adapter
is folded onto MODEL_DIR's weights, each next one onto the model just made, in one process that
keeps the model in memory (`models.fold_adapters`), so no stage's weights are read back from disk.

`--scale S` folds S times each adapter's update: a fraction gives the model that far along the straight line from
the one the adapter was trained on to the trained one (WiSE-FT), for an update that overshoots; the adapter beside
the folded model stays whole.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import click

from ..models import fold_adapter, fold_adapters

ADAPTER_DIR = "lora_adapter"


def _adapter(hf_dir: Path) -> Path:
    adapter = hf_dir / ADAPTER_DIR
    if not (adapter / "adapter_config.json").exists():
        raise click.ClickException(f"{adapter}/adapter_config.json not found: not a LoRA run's merged directory")
    return adapter


def _folding(hf_dir: Path) -> Path:
    """Where HF_DIR's folded model is written apart, to be swapped in whole."""
    folded = hf_dir.with_name(hf_dir.name + ".folding")
    shutil.rmtree(folded, ignore_errors=True)
    return folded


def _swap_in(hf_dir: Path, folded: Path, scale: float, fold_s: float, write_s: float) -> None:
    shutil.copytree(hf_dir / ADAPTER_DIR, folded / ADAPTER_DIR)
    shutil.rmtree(hf_dir)
    folded.rename(hf_dir)
    scaled = f" at scale {scale:g}" if scale != 1 else ""
    click.echo(f"folded {hf_dir / ADAPTER_DIR} into {hf_dir}{scaled} (fold {fold_s:.1f} s, write {write_s:.1f} s)")


@contextlib.contextmanager
def _checkpoint_precision() -> Iterator[None]:
    """verl's FSDP merger reads every tensor of the checkpoint as `tensor.bfloat16()` (its
    `_load_and_merge_state_dicts`, with no setting to keep the precision): inside this block that cast returns
    the tensor as saved (the actor's float32 weights and adapter)."""
    import torch

    def as_saved(tensor: torch.Tensor, *_args: object, **_kwargs: object) -> torch.Tensor:
        return tensor

    with mock.patch.object(torch.Tensor, "bfloat16", as_saved):
        yield


def _label_float32(hf_dir: Path) -> None:
    """The merger labels the model it writes bfloat16 whatever its tensors are; engines and transformers load a
    model at its label's precision, so HF_DIR's config names the float32 its weights are kept in."""
    path = hf_dir / "config.json"
    config = json.loads(path.read_text())
    for key in ("dtype", "torch_dtype"):
        if key in config:
            config[key] = "float32"
    path.write_text(json.dumps(config, indent=2) + "\n")


def merge_checkpoint(local_dir: Path, target: Path) -> None:
    """verl's FSDP model merger on `local_dir` into `target`, with the settings its command line gives by default,
    keeping the checkpoint's precision (`_checkpoint_precision`)."""
    import argparse
    import time

    from verl.model_merger.base_model_merger import generate_config_from_args
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    started = time.monotonic()
    args = argparse.Namespace(
        operation="merge", backend="fsdp", local_dir=str(local_dir), target_dir=str(target), hf_upload_path=None,
        private=False, tie_word_embedding=False, trust_remote_code=False, is_value_model=False,
        use_cpu_initialization=False,
    )  # fmt: skip
    merger = FSDPModelMerger(generate_config_from_args(args))
    with _checkpoint_precision():
        merger.merge_and_save()
    merger.cleanup()
    _label_float32(target)
    click.echo(f"merged {local_dir} into {target} in {time.monotonic() - started:.1f} s")


@click.command()
@click.argument("hf_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--onto",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Fold the HF_DIRS' adapters as a chain, the first onto this model's weights, each next onto the model "
    "the one before made [default: each HF_DIR onto its own weights].",
)
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Merge this verl FSDP checkpoint directory (global_step_N/actor, or an SFT step) into the one HF_DIR "
    "first, as `python -m verl.model_merger merge --backend fsdp` does but in the checkpoint's precision, then "
    "fold its adapter (a LoRA run's; without one the merged model is the trained one).",
)
@click.option(
    "--scale",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Fold this multiple of each adapter's update: 1 the trained model, 0.5 the model halfway between the one "
    "the adapter was trained on and the trained one (WiSE-FT's interpolation).",
)
def main(hf_dirs: tuple[Path, ...], onto: Path | None, checkpoint: Path | None, scale: float) -> None:
    if checkpoint is not None:
        if onto is not None or len(hf_dirs) != 1:
            raise click.UsageError("--checkpoint merges into one HF_DIR, without --onto")
        merge_checkpoint(checkpoint, hf_dirs[0])
        if not (hf_dirs[0] / ADAPTER_DIR).is_dir():
            return
    adapters = [_adapter(hf_dir) for hf_dir in hf_dirs]  # all checked before anything is written
    if onto is None:
        for hf_dir, adapter in zip(hf_dirs, adapters, strict=True):
            folded = _folding(hf_dir)
            times = fold_adapter(hf_dir, adapter, folded, scale)
            click.echo(f"read {hf_dir} in {times.read_s:.1f} s")
            _swap_in(hf_dir, folded, scale, *times.links[0])
        return
    folds = [_folding(hf_dir) for hf_dir in hf_dirs]
    times = fold_adapters(onto, list(zip(adapters, folds, strict=True)), scale)
    click.echo(f"read {onto} in {times.read_s:.1f} s")
    for hf_dir, folded, link in zip(hf_dirs, folds, times.links, strict=True):
        _swap_in(hf_dir, folded, scale, *link)


if __name__ == "__main__":
    main()
