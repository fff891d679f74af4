"""Scripted players: the model-free baseline only ever makes valid moves, always reaches an
agreement within the default limits, and `share` spreads the rewards it gets."""

import json
from importlib import resources

import numpy as np
import pytest

from selfplay_gen.games import GameConfig
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance
from selfplay_gen.games.matching.moves import parse_move
from selfplay_gen.games.matching.record import ACCEPTED
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.runner import GameSpec, play_game

SEEDED = [Instance.from_seed(seed) for seed in range(30)]
HUMAN = [
    Instance.from_human_record(json.loads(line), source=f"human-{i:03d}")
    for i, line in enumerate(
        resources.files("selfplay_gen")
        .joinpath("games/matching/data/optimization_human_games.jsonl")
        .read_text()
        .splitlines()[:20]
    )
]


def scripted(share: float):
    return lambda spec, seat, game, start: ScriptedPlayer(
        spec.instance, seat, share=share, rng=np.random.default_rng([spec.game_index, seat])
    )


async def play(instance: Instance, share: float, k: int = 0) -> dict:
    seat = scripted(share)
    return await play_game(GameSpec(f"{instance.id}/{k}", 0, k, instance), (seat, seat), GameConfig(), {})


@pytest.mark.parametrize("share", [0.0, 0.3, 0.5, 1.0])
async def test_scripted_games_are_valid_and_always_agree(share):
    for k, instance in enumerate(SEEDED + HUMAN):
        record = await play(instance, share, k)
        kinds = [event["kind"] for event in record["events"]]
        assert "invalid" not in kinds, record["events"]
        assert record["outcome"]["termination"] == ACCEPTED and record["failure"] is None
        assert kinds[-1] == "accept" and kinds[-2] == "propose"
        assert 0 < record["outcome"]["normalized_reward"] <= 1


async def test_sharing_more_earns_more():
    async def mean_reward(share):
        return np.mean([(await play(inst, share))["outcome"]["normalized_reward"] for inst in SEEDED])

    silent, open_book = await mean_reward(0.0), await mean_reward(1.0)
    assert open_book > silent + 0.05


async def test_games_of_one_instance_differ_at_intermediate_share():
    rewards = [(await play(SEEDED[0], 0.5, k))["outcome"]["normalized_reward"] for k in range(8)]
    assert len(set(rewards)) > 1


async def test_shared_cells_reach_the_partner():
    record = await play(SEEDED[1], 1.0)
    first = record["events"][0]
    assert first["kind"] == "message" and first["text"].startswith("Scores I see (0-99): ")
    assert record["players"][1]["messages"][1]["content"].startswith("Partner: [message] Scores I see")


async def test_free_text_that_looks_like_a_shared_cell_is_ignored():
    """A model partner may write 'Name - Thing: 5' about anything; only real cells are learned."""
    instance = SEEDED[2]
    player = ScriptedPlayer(instance, 1, share=0.0)
    hidden = next((r, p) for r in range(8) for p in range(8) if not instance.masks[1][r][p])
    cell = f"{REVIEWERS[hidden[0]]} - {PAPERS[hidden[1]]}: 97"
    player.partner_moved(parse_move(f"[message] Hello - World: 5; Ava Li - BERT: 9; {cell}"))
    assert player.known[hidden] == 97 and (player.known >= 0).sum() == sum(map(sum, instance.masks[1])) + 1
    assert parse_move(await player.act()).kind == "propose"
