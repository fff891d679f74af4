"""`verl.use_remove_padding=true` without flash-attn: verl's training engine then packs a micro-batch's games
into one row, with no attention mask and each game's positions restarting at 0, and relies on the attention
to keep the games apart. Transformers' SDPA path (our workers' attention) does, from the positions alone:
verl's own input and output preparation gives the same log-probs packed as padded, and as each game alone."""

from __future__ import annotations

import types

import pytest
import torch


@pytest.fixture(scope="module")
def engine(local_model_dir):
    """verl's FSDPEngineWithLMHead around the model, with only what its micro-batch preparation reads (one
    process, no sequence parallelism, no FSDP wrapping)."""
    from transformers import AutoModelForCausalLM
    from verl.utils.torch_functional import entropy_from_logits
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    model = AutoModelForCausalLM.from_pretrained(local_model_dir, attn_implementation="sdpa", dtype=torch.float32)
    engine = object.__new__(FSDPEngineWithLMHead)
    engine.module = model.eval()
    engine.pad_to_length, engine.pad_to_length_bucket, engine.use_ulysses_sp = False, 0, False
    engine.compute_entropy_from_logits = entropy_from_logits
    engine.engine_config = types.SimpleNamespace(entropy_checkpointing=False, entropy_from_logits_with_chunking=False)
    return engine


def log_probs(engine, games: list[torch.Tensor], remove_padding: bool) -> list[torch.Tensor]:
    """Each game's token log-probs as verl's engine computes them for one micro-batch of `games`."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    jagged = {
        "input_ids": torch.nested.nested_tensor(games, layout=torch.jagged),
        "position_ids": torch.nested.nested_tensor([torch.arange(len(g)) for g in games], layout=torch.jagged),
    }
    batch = TensorDict({**jagged, "temperature": torch.ones(len(games))}, batch_size=[len(games)])
    tu.assign_non_tensor(batch, use_remove_padding=remove_padding, calculate_entropy=False)
    inputs, args = engine.prepare_model_inputs(batch)
    assert (inputs["attention_mask"] is None) == remove_padding  # packed: nothing but positions to go by
    with torch.no_grad():
        output = engine.module(**inputs, use_cache=False)
    return list(engine.prepare_model_outputs(output, args, batch, None)["log_probs"].unbind())


def test_packed_games_score_as_padded_and_as_alone(engine):
    torch.manual_seed(0)
    games = [torch.randint(10, 40000, (n,)) for n in (13, 40, 6, 21)]
    packed, padded = log_probs(engine, games, True), log_probs(engine, games, False)
    for game, pack, pad in zip(games, packed, padded, strict=True):
        with torch.no_grad():
            logits = engine.module(input_ids=game[None], use_cache=False).logits[0]
        alone = torch.log_softmax(logits, -1)[torch.arange(len(game) - 1), game[1:]]
        # the last position predicts the next game's first token (verl masks it): compare the rest
        assert torch.allclose(pack[:-1], alone, atol=1e-4) and torch.allclose(pad[:-1], alone, atol=1e-4)
    # and packing does change what a game sees if its positions do not restart: the check can fail
    shifted = log_probs(engine, [torch.cat(games)], True)[0]
    assert not torch.allclose(shifted[13 : 13 + 39], packed[1][:-1], atol=1e-2)
