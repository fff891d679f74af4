"""The table as players read it, the cells a message states, and the teacher's demonstration
protocol: valid, grounded, and good enough to be worth imitating."""

import json

import numpy as np

from selfplay_gen import prompts
from selfplay_gen.game import ACCEPTED
from selfplay_gen.games import GameConfig
from selfplay_gen.instance import PAPERS, REVIEWERS, Instance
from selfplay_gen.players import ScriptedPlayer, TeacherPlayer
from selfplay_gen.runner import GameSpec, play_game

HELDOUT = [Instance.from_seed(10**9 + i) for i in range(120)]


def visible(instance: Instance, seat: int) -> set[tuple[int, int, int]]:
    return {(r, p, v) for r, row in enumerate(instance.view(seat)) for p, v in enumerate(row) if v is not None}


def test_table_names_the_paper_of_every_visible_value():
    instance = HELDOUT[0]
    table = prompts.render_table(instance.view(0))
    lines = table.splitlines()
    assert [line.split(":")[0] for line in lines] == list(REVIEWERS)
    assert set(prompts.stated_cells(table)) == visible(instance, 0)


def test_a_reviewer_without_visible_cells_reads_none():
    view = [[None] * 8 for _ in range(8)]
    view[3][4] = 77
    assert prompts.render_table(view).splitlines()[0] == "Ava Li: none"
    assert prompts.stated_cells(prompts.render_table(view)) == [(3, 4, 77)]


async def teacher_game(instance: Instance) -> dict:
    seat = lambda spec, s, game, start: TeacherPlayer(spec.instance, s)
    return await play_game(GameSpec(f"{instance.id}/0", 0, 0, instance), (seat, seat), GameConfig(), {})


async def test_teacher_games_are_short_valid_grounded_and_agree():
    for instance in HELDOUT[:40]:
        record = await teacher_game(instance)
        assert [e["kind"] for e in record["events"]] == ["message", "propose", "accept"]
        assert record["outcome"]["termination"] == ACCEPTED
        stated = prompts.stated_cells(record["events"][0]["text"])
        assert set(stated) == visible(instance, 0)  # every cell, exactly as its table shows it


async def test_teacher_proposes_the_best_free_known_paper_reviewer_by_reviewer():
    instance = HELDOUT[1]
    record = await teacher_game(instance)
    known = [dict() for _ in REVIEWERS]
    for r, p, v in visible(instance, 0):
        known[r][p] = v
    for r, p, v in visible(instance, 1):
        known[r][p] = v  # the proposer's own value wins
    taken, expected = set(), {}
    for r in range(8):
        free = {p: v for p, v in known[r].items() if p not in taken}
        if free:
            expected[r] = max(free, key=free.get)
            taken.add(expected[r])
    pairs = dict(record["outcome"]["proposal"])
    assert all(pairs[r] == p for r, p in expected.items())
    reasoning = record["players"][1]["messages"][-1]["content"].split("[propose]")[0]
    assert reasoning.splitlines()[0].endswith(" -> " + (PAPERS[expected[0]] if 0 in expected else "later"))


async def test_teacher_beats_random_matching_and_sits_near_the_no_talk_plan():
    rewards = [(await teacher_game(inst))["outcome"]["normalized_reward"] for inst in HELDOUT]
    random_matching = [np.sum(inst.table) / 8 / inst.best_reward for inst in HELDOUT]
    assert np.mean(rewards) > np.mean(random_matching) + 0.15
    assert 0.78 < np.mean(rewards) < 0.88


async def test_teacher_answers_a_proposal_and_reads_shared_cells():
    instance = HELDOUT[2]
    seats = (
        lambda spec, s, game, start: ScriptedPlayer(spec.instance, s, share=1.0, rng=np.random.default_rng(0)),
        lambda spec, s, game, start: TeacherPlayer(spec.instance, s),
    )
    record = await play_game(GameSpec("x/0", 0, 0, instance), seats, GameConfig(), {})
    assert record["outcome"]["agreed"]
    assert "invalid" not in [e["kind"] for e in record["events"]]


def test_teacher_games_evaluate_fully_grounded(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.cli import main

    result = CliRunner().invoke(
        main,
        [
            "eval",
            "--backend",
            "scripted",
            "--scripted-policy",
            "teacher",
            "--instances",
            "heldout",
            "--num-instances",
            "6",
            "-k",
            "1",
            "--out",
            str(tmp_path),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "metrics.json").read_text())["models"]["scripted-teacher"]
    assert summary["grounding_rate"]["mean"] == 1.0 and summary["agreement_rate"]["mean"] == 1.0
