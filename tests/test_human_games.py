"""The 134 games people played (DialOp's release): our instances and scoring reproduce their
recorded optimum and the reward of their final proposal, and our proposal texts round-trip."""

import json
from importlib import resources

import pytest

from selfplay_gen.games.matching.instance import Instance, score
from selfplay_gen.games.matching.moves import InvalidMove, parse_move, render_proposal

RECORDS = [
    json.loads(line)
    for line in resources.files("selfplay_gen")
    .joinpath("games/matching/data/optimization_human_games.jsonl")
    .read_text()
    .splitlines()
]


def last_proposal(record: dict) -> dict:
    return [entry for entry in record["action_log"] if entry["type"] == "proposal"][-1]


def test_all_134_games_are_there():
    assert len(RECORDS) == 134


@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_human_game(index):
    record = RECORDS[index]
    instance = Instance.from_human_record(record, source=f"human-{index:03d}")
    assert instance.best_reward == record["best_assignment_reward"]
    pairs = [tuple(pair) for pair in last_proposal(record)["proposal_ids"]]  # [reviewer, paper]
    assert score(instance, pairs) == record["proposal_reward"]
    move = parse_move("[propose] " + render_proposal(pairs))
    assert move.kind == "propose" and sorted(move.pairs) == sorted(pairs)
    assert score(instance, move.pairs) == record["proposal_reward"]


def test_the_web_interface_proposal_texts_parse_to_their_ids():
    """The site's own texts ('Proposal:<br/>&emsp; - BLEU: Noah Wilson<br/>...') parse to the ids it
    sent, except in the one game that ran with another roster of reviewer names."""
    other_roster = []
    for index, record in enumerate(RECORDS):
        proposal = last_proposal(record)
        try:
            move = parse_move("[propose] " + proposal["proposal"])
        except InvalidMove as err:
            other_roster.append(index)
            assert "unknown reviewer" in str(err)
            continue
        assert sorted(move.pairs) == sorted(tuple(pair) for pair in proposal["proposal_ids"])
    assert len(other_roster) == 1
