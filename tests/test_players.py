"""LLM seats: the per-seat token budget that keeps every game inside the training limits."""

import pytest

from selfplay_gen.backends.base import BackendOptions, SamplingParams, backend_class
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import CONTEXT_LENGTH, Limits
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.players import LLMPlayer
from selfplay_gen.runner import GameSpec, play_game

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("budget", [12, None])
async def test_a_seat_past_its_response_budget_ends_the_game_with_reward_zero(tokenizer, local_model_dir, budget):
    instance = Instance.from_seed(3)
    params = SamplingParams(1.0, 1.0, 24, (tokenizer.eos_token_id,))
    async with backend_class("local")(BackendOptions(model=local_model_dir, seed=1), tokenizer) as backend:

        def seat(spec, s, game, start):
            return LLMPlayer(
                s, start.system[s], backend, tokenizer, params, f"{spec.game_id}#{s}", response_length=budget
            )

        record = await play_game(
            GameSpec("b/0", 0, 0, instance), (seat, seat), GameConfig(limits=Limits(max_moves=2)), {}
        )
    first = record["players"][0]
    grown = len(first["token_ids"]) - first["turns"][0]["prompt_len"]
    if budget is None:
        assert record["outcome"]["termination"] != CONTEXT_LENGTH and grown > 12
    else:
        assert record["outcome"]["termination"] == CONTEXT_LENGTH
        assert record["outcome"]["normalized_reward"] == 0 and grown <= budget
