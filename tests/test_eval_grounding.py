"""Grounding: parsing stated table cells from messages, and checking them against the speaker's view."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from selfplay_gen.evaluation.cli import generate_games
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching.grounding import count_grounded, grounding
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance
from selfplay_gen.games.matching.metrics import game_table, human_table, summarize
from selfplay_gen.games.matching.prompts import stated_cells
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.records import read_games

AVA, DANIEL, NOAH = (REVIEWERS.index(n) for n in ("Ava Li", "Daniel Nguyen", "Noah Wilson"))
BLEU, ELECTRA, GLOVE, GLUE, QUAC, SWAG = (PAPERS.index(p) for p in ("BLEU", "Electra", "GloVe", "GLUE", "QuAC", "SWAG"))


def test_prompt_form_and_older_form_are_parsed():
    text = "My scores: Ava Li: GLUE 421, QuAC 779; Daniel Nguyen: BLEU 120"
    assert stated_cells(text) == [(AVA, GLUE, 421), (AVA, QUAC, 779), (DANIEL, BLEU, 120)]
    assert stated_cells("Scores I see (0-99): Ava Li - GLUE: 57; Noah Wilson - SWAG: 3") == [
        (AVA, GLUE, 57),
        (NOAH, SWAG, 3),
    ]


def test_parsing_ignores_case_separators_and_things_that_are_not_cells():
    assert stated_cells("ava  LI: glue=421, glove - 5, Electra:7") == [
        (AVA, GLUE, 421),
        (AVA, GLOVE, 5),
        (AVA, ELECTRA, 7),
    ]
    assert stated_cells("GLUE 421 before any reviewer is named") == []
    assert stated_cells("Ava Li is great for GLUE, maybe 4.5 times better") == []
    assert stated_cells("Ava Li: GLUE 4.5") == []  # a decimal is no table value
    assert stated_cells("Ava: GLUE 421") == []  # first names alone do not count
    assert stated_cells("Proposal:\nGLUE: Ava Li\nBLEU: Daniel Nguyen") == []


def test_stated_cells_are_grounded_only_in_the_speakers_own_view():
    inst = Instance.from_seed(1)
    own = inst.view(0)
    (r, p), (r2, p2) = [(r, p) for r in range(8) for p in range(8) if own[r][p] is not None][:2]
    hidden = next((r, p) for r in range(8) for p in range(8) if own[r][p] is None)
    text = (
        f"My scores: {REVIEWERS[r]}: {PAPERS[p]} {own[r][p]}; {REVIEWERS[r2]}: {PAPERS[p2]} {own[r2][p2] + 1}; "
        f"{REVIEWERS[hidden[0]]}: {PAPERS[hidden[1]]} 100"
    )
    # right value, wrong value, a cell the speaker cannot see
    assert count_grounded(inst, [(0, text)]) == (3, 1)
    partner = inst.view(1)
    grounded_for_partner = sum(partner[a][b] == v for a, b, v in stated_cells(text))
    assert count_grounded(inst, [(1, text)]) == (3, grounded_for_partner)
    assert count_grounded(inst, [(0, text), (0, "no numbers here")]) == (3, 1)


@pytest.fixture(scope="module")
def scripted_records(tmp_path_factory):
    path = tmp_path_factory.mktemp("grounding") / "games.jsonl"
    instances = [Instance.from_seed(s) for s in range(3)]

    def seat(spec, s, game, start):
        return ScriptedPlayer(spec.instance, s, share=0.9, rng=np.random.default_rng([spec.game_index, s]))

    asyncio.run(
        generate_games(
            path, instances, 1, (seat, seat), GameConfig("matching", Limits(max_moves=30)), 3, {}, progress=False
        )
    )
    return list(read_games(path))


def test_scripted_players_state_normalized_values_that_are_mostly_ungrounded(scripted_records):
    for rec in scripted_records:
        messages = [e["text"] for e in rec["events"] if e["kind"] == "message"]
        stated, grounded = grounding(rec)
        assert stated == sum(len(stated_cells(m)) for m in messages) == sum(m.count(" - ") for m in messages) > 0
        assert grounded < stated / 2  # 0-99 relative values rarely equal the scaled ones


def test_grounding_in_game_rows_and_summaries(scripted_records):
    games = game_table(scripted_records, ("m", "m"))
    s = summarize(games, 200, np.random.default_rng(0))
    stated, grounded = games["stated_cells"].sum(), games["grounded_cells"].sum()
    assert s["grounding_rate"]["mean"] == pytest.approx(grounded / stated)
    lo, hi = s["grounding_rate"]["ci"]
    assert lo <= grounded / stated <= hi
    assert s["cells_stated_per_game"]["mean"] == pytest.approx(stated / len(games))  # one game per instance


def test_nothing_stated_gives_no_grounding_rate():
    humans = human_table()[:5]
    humans[["stated_cells", "grounded_cells"]] = 0
    assert summarize(humans, 100, np.random.default_rng(0))["grounding_rate"] == {"mean": None, "ci": None}


def test_a_seats_own_plan_is_worth_one_of_itself_and_a_random_matching_about_0_7():
    """`Instance.own_plan_share`: the table the seat sees, hidden cells at HIDDEN_VALUE; its no-talk plan there
    scores 1, any other matching less, and random matchings on average sum / 8 / best of that table."""
    from selfplay_gen.games.matching.assignment import max_matching
    from selfplay_gen.games.matching.instance import HIDDEN_VALUE

    inst = Instance.from_seed(7)
    guess = np.where(np.asarray(inst.masks[1], bool), np.asarray(inst.table), HIDDEN_VALUE)
    best, plan = max_matching(guess)
    assert inst.own_plan_share(1, plan) == pytest.approx(1.0)
    identity = [(i, i) for i in range(8)]
    assert inst.own_plan_share(1, identity) == pytest.approx(sum(guess[i, i] for i in range(8)) / best)
    assert inst.own_plan_share(1, identity) < 1
    rng = np.random.default_rng(0)
    shares = [inst.own_plan_share(1, list(enumerate(rng.permutation(8)))) for _ in range(3000)]
    assert np.mean(shares) == pytest.approx(guess.sum() / 8 / best, abs=0.01)
    assert inst.random_plan_share(1) == pytest.approx(guess.sum() / 8 / best)


def test_own_plan_share_in_game_rows_summaries_and_human_games(scripted_records):
    games = game_table(scripted_records, ("m", "m"))
    proposing = games.dropna(subset=["own_plan_share"])
    assert len(proposing) > 0 and ((proposing["own_plan_share"] > 0) & (proposing["own_plan_share"] <= 1)).all()
    s = summarize(games, 200, np.random.default_rng(0))
    by_instance = proposing.groupby("instance_id")["own_plan_share"].mean()
    assert s["own_plan_share"]["mean"] == pytest.approx(by_instance.mean())
    humans = human_table()
    assert humans["own_plan_share"].notna().sum() == (humans["proposals"] > 0).sum()
    assert 0.7 < summarize(humans, 100, np.random.default_rng(0))["own_plan_share"]["mean"] < 1
