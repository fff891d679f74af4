"""Online GRPO's trainer (`selfplay_gen.verl.online_trainer`) logs, for each training step, the mean of each game
measure over the step's games, read from the trajectories' `extra_fields` as verl's TransferQueue holds them."""

from __future__ import annotations

import types

import torch
from omegaconf import OmegaConf
from tensordict import NonTensorData, NonTensorStack, TensorDict
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from selfplay_gen.verl import online_trainer
from selfplay_gen.verl.online_trainer import SelfPlayTrainer, credited, step_measures


def game(**measures: float) -> dict:
    """A trajectory's extra fields as the online agent loop returns them."""
    return {"game_id": "g", "termination": "accepted", "reward_extra_info": measures}


def test_a_steps_measures_are_their_games_means_without_the_padding_rows():
    fields = [game(agreed=1.0, invalid=0.0), game(agreed=0.0, invalid=3.0), game(agreed=1.0, invalid=0.0), None]
    tags = [{}, {"is_padding": False}, {"is_padding": True}, {}]  # the third fills the batch; the fourth has none
    assert step_measures(fields, tags) == {"games/agreed/mean": 0.5, "games/invalid/mean": 1.5}
    assert step_measures([game()], [{}]) == {}


def test_the_trainer_adds_the_measures_of_the_steps_games_to_verls_metrics(monkeypatch):
    batch = types.SimpleNamespace(keys=["u0_0_0", "u0_1_0"], partition_id="train", tags=[{}, {}])
    asked = []

    def kv_batch_get(keys, partition_id, select_fields):
        asked.append((keys, partition_id, select_fields))
        rows = NonTensorStack(NonTensorData(game(stated_cells=4.0)), NonTensorData(game(stated_cells=8.0)))
        return TensorDict({"extra_fields": rows}, batch_size=[2])

    def verls_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
        metrics["critic/score/mean"] = 0.25

    monkeypatch.setattr(online_trainer.tq, "kv_batch_get", kv_batch_get)
    monkeypatch.setattr(PPOTrainerSync, "_compute_metrics", verls_metrics)
    trainer, metrics = SelfPlayTrainer.__new__(SelfPlayTrainer), {}
    trainer._compute_metrics(batch, metrics, {}, 3, 0)
    assert metrics == {"critic/score/mean": 0.25, "games/stated_cells/mean": 6.0}
    assert asked == [(batch.keys, "train", ["extra_fields"])]
    # trajectories stored without extra fields: verl's metrics alone, no failed step
    monkeypatch.setattr(online_trainer.tq, "kv_batch_get", lambda **_: TensorDict({}, batch_size=[2]))
    metrics = {}
    trainer._compute_metrics(batch, metrics, {}, 4, 0)
    assert metrics == {"critic/score/mean": 0.25}


def test_credited_adds_the_weighted_credit_of_each_named_token_and_nothing_else():
    advantages = torch.nested.as_nested_tensor([torch.full((4,), 0.5), torch.full((3,), -1.0)], layout=torch.jagged)
    fields = [{"move_credits": [[1, 2.0], [3, -1.0]]}, {"game_id": "g"}]
    rows = [row.tolist() for row in credited(advantages, fields, 0.25).unbind()]
    assert rows == [[0.5, 1.0, 0.5, 0.25], [-1.0, -1.0, -1.0]]
    assert [row.tolist() for row in advantages.unbind()] == [[0.5] * 4, [-1.0] * 3]  # verl's, untouched
    uncredited = credited(advantages, [None, {"move_credits": []}], 1.0)
    assert [row.tolist() for row in uncredited.unbind()] == [[0.5] * 4, [-1.0] * 3]


def test_the_trainer_adds_move_credits_to_verls_advantages_only_when_weighted(monkeypatch):
    """`+selfplay.move_credit`: after verl's advantages are in the TransferQueue, each credited token's is raised by
    the weight times its credit and written back; without the weight verl's stand."""
    batch = types.SimpleNamespace(keys=["u0_0_0", "u0_1_0"], partition_id="train", tags=[{}, {}])
    store = {
        "advantages": torch.nested.as_nested_tensor([torch.ones(3), torch.zeros(2)], layout=torch.jagged),
        "extra_fields": NonTensorStack(NonTensorData({"move_credits": [[0, 1.0]]}), NonTensorData({})),
    }

    def kv_batch_get(keys, partition_id, select_fields):
        assert (keys, partition_id) == (batch.keys, "train")
        return TensorDict({name: store[name] for name in select_fields}, batch_size=[2])

    def kv_batch_put(keys, partition_id, fields):
        assert (keys, partition_id) == (batch.keys, "train")
        store.update(fields.items())
        return batch

    monkeypatch.setattr(online_trainer.tq, "kv_batch_get", kv_batch_get)
    monkeypatch.setattr(online_trainer.tq, "kv_batch_put", kv_batch_put)
    monkeypatch.setattr(PPOTrainerSync, "_compute_advantage", lambda self, batch, metrics: batch)
    trainer = SelfPlayTrainer.__new__(SelfPlayTrainer)
    trainer.config = OmegaConf.create({"selfplay": {"move_credit": 0.5}})
    assert trainer._compute_advantage(batch, {}) is batch
    assert [row.tolist() for row in store["advantages"].unbind()] == [[1.5, 1.0, 1.0], [0.0, 0.0]]
    trainer.config = OmegaConf.create({})
    trainer._compute_advantage(batch, {})
    assert [row.tolist() for row in store["advantages"].unbind()] == [[1.5, 1.0, 1.0], [0.0, 0.0]]  # untouched
