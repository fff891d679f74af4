"""`trainer.v1.trainer_mode=selfplay_online`: verl's synchronous V1 trainer for online GRPO, which also logs
what each training step's games did and can credit parts of a move apart from the game.

verl logs a training step's reward, entropy and lengths. What the seats did (agreement, invalid moves, cells
stated, proposals: each game's `reward_extra_info`, from `evaluation.protocol.game_measures`) it averages only
over validation games (val-aux/<data source>/<measure>/mean@1), every `test_freq` steps and on other instances.
A strategy emerges, or a policy collapses, between validations, in the games it trains on. This trainer adds
the mean of each measure over a step's games to the step's metrics, as `games/<measure>/mean`
(`STEP_MEASURES`), which verl's loggers write beside its own and the run report plots per step.

With `+selfplay.move_credit=W` it also adds W x the credit the game gives each token of a move's parts
(`Game.move_credits`: each line of a proposal by its value on the proposer's table) to verl's
advantages, which credit a whole game's tokens alike: `selfplay_loop` names each credited token in the
trajectory's `extra_fields["move_credits"]`.

The games' measures are in the TransferQueue with the rest of each trajectory (verl's agent loop stores the
agent loop's `extra_fields`), where verl's validation reads them too. verl looks a trainer up by name in its
task runner's process, so the job names this module in `VERL_USE_EXTERNAL_MODULES`
(`iterate.verl_jobs.ONLINE_TRAINER_MODE`), as for `replay_trainer`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import torch
import transfer_queue as tq
from omegaconf import DictConfig
from tensordict import TensorDict
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from . import ONLINE_MODE, STEP_MEASURES
from .replay_trainer import as_synchronous


def step_measures(extra_fields: Iterable[Any], tags: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The mean over a step's games of each measure their rows' `extra_fields` carry in `reward_extra_info`;
    the rows verl adds to fill a batch (tagged `is_padding`) are not games of the step."""
    values: dict[str, list[float]] = defaultdict(list)
    for fields, tag in zip(extra_fields, tags, strict=True):
        if tag.get("is_padding", False) or not isinstance(fields, Mapping):
            continue
        for name, value in (fields.get("reward_extra_info") or {}).items():
            values[name].append(float(value))
    return {f"{STEP_MEASURES}/{name}/mean": sum(v) / len(v) for name, v in sorted(values.items())}


def credited(advantages: torch.Tensor, extra_fields: Iterable[Any], weight: float) -> torch.Tensor:
    """Each row's advantages (a jagged nested tensor, one row a trajectory's response) with `weight` x the credit
    of each token its `extra_fields["move_credits"]` names ([response index, credit], `selfplay_loop`) added."""
    rows = [row.clone() for row in advantages.unbind()]
    for row, fields in zip(rows, extra_fields, strict=True):
        for index, credit in (fields.get("move_credits") or []) if isinstance(fields, Mapping) else []:
            row[int(index)] += weight * credit
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


@register_trainer(ONLINE_MODE)
class SelfPlayTrainer(PPOTrainerSync):
    """verl's sync PPO trainer, its step metrics with the step's game measures (see the module docstring)."""

    def __init__(self, config: DictConfig):
        as_synchronous(config)
        super().__init__(config)

    def _compute_advantage(self, batch, metrics):
        """verl's advantages, plus `selfplay.move_credit` x each token's credit for the part of a move it
        writes (`Game.move_credits`): where the game's reward credits a whole game alike, the credit tells a
        proposal's good lines from its bad ones."""
        batch = super()._compute_advantage(batch, metrics)
        weight = float((self.config.get("selfplay") or {}).get("move_credit", 0.0))
        if weight:
            fields = ["advantages", "extra_fields"]
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
            extra = data.pop("extra_fields", None)  # a step whose trajectories carry none credits nothing
            if extra is not None:
                advantages = credited(data["advantages"], extra.tolist(), weight)
                update = TensorDict({"advantages": advantages}, batch_size=len(batch.keys))
                batch = tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=update)
        return batch

    def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        fields = data.pop("extra_fields", None)  # as verl's validation reads them; a step without any logs none
        if fields is not None:
            metrics.update(step_measures(fields.tolist(), batch.tags))
