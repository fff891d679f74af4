"""The table as players read it, the cells a message states, and the teacher's demonstration
protocol: valid, grounded, and good enough to be worth imitating."""

import json

import numpy as np
import pytest

from selfplay_gen.games import GameConfig
from selfplay_gen.games.matching import prompts
from selfplay_gen.games.matching.instance import PAPERS, REVIEWERS, Instance
from selfplay_gen.games.matching.record import ACCEPTED
from selfplay_gen.games.matching.scripted import ScriptedPlayer, TeacherPlayer
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


async def teacher_game(instance: Instance, plan: str = "by-reviewer", seed: int = 0) -> dict:
    seat = lambda spec, s, game, start: TeacherPlayer(spec.instance, s, plan, rng=np.random.default_rng(seed))
    return await play_game(GameSpec(f"{instance.id}/0", 0, 0, instance), (seat, seat), GameConfig(), {})


async def test_teacher_games_are_short_valid_grounded_and_agree():
    for instance in HELDOUT[:40]:
        record = await teacher_game(instance)
        assert [e["kind"] for e in record["events"]] == ["message", "propose", "accept"]
        assert record["outcome"]["termination"] == ACCEPTED
        stated = prompts.stated_cells(record["events"][0]["text"])
        assert set(stated) == visible(instance, 0)  # every cell, exactly as its table shows it


def merged(instance: Instance) -> list[dict[int, int]]:
    """What the proposer knows after the first message: per reviewer, paper -> value."""
    known: list[dict[int, int]] = [{} for _ in REVIEWERS]
    for r, p, v in visible(instance, 0):
        known[r][p] = v
    for r, p, v in visible(instance, 1):
        known[r][p] = v  # the proposer's own value wins
    return known


def best_free_papers(known: list[dict[int, int]], order) -> dict[int, int]:
    """Reviewer by reviewer in `order`: the known paper of highest value not yet taken."""
    taken, expected = set(), {}
    for r in order:
        free = {p: v for p, v in known[r].items() if p not in taken}
        if free:
            expected[r] = max(free, key=free.get)
            taken.add(expected[r])
    return expected


async def test_teacher_proposes_the_best_free_known_paper_reviewer_by_reviewer():
    instance = HELDOUT[1]
    record = await teacher_game(instance)
    expected = best_free_papers(merged(instance), range(8))
    pairs = dict(record["outcome"]["proposal"])
    assert all(pairs[r] == p for r, p in expected.items())
    reasoning = record["players"][1]["messages"][-1]["content"].split("[propose]")[0]
    assert reasoning.splitlines()[0].endswith(" -> " + (PAPERS[expected[0]] if 0 in expected else "later"))


async def test_teacher_records_name_each_rise_of_the_running_maximum_and_pick_the_last():
    """by-reviewer-records proposes what by-reviewer proposes; each line's records are the cells, in the
    line's order, that beat every cell before them, and the pick is the last of them."""
    for instance in HELDOUT[:20]:
        plain, records = await teacher_game(instance), await teacher_game(instance, "by-reviewer-records")
        assert records["outcome"]["proposal"] == plain["outcome"]["proposal"]
        reasoning = records["players"][1]["messages"][-1]["content"].split("[propose]")[0]
        for line in reasoning.strip().splitlines():
            if line.endswith("-> later"):
                assert " | " not in line
                continue
            cells_text, rest = line.split(": ", 1)[1].split(" | ")
            chain, pick = rest.split(" -> ")
            cells = [(name, int(value)) for name, value in (cell.rsplit(" ", 1) for cell in cells_text.split(", "))]
            rises = [cell for i, cell in enumerate(cells) if all(cell[1] > v for _, v in cells[:i])]
            assert chain == " < ".join(f"{name} {value}" for name, value in rises)
            assert pick == rises[-1][0] == max(cells, key=lambda cell: cell[1])[0]


async def test_teacher_by_score_takes_known_cells_from_the_highest_down():
    for instance in HELDOUT[3:13]:
        record = await teacher_game(instance, "by-score")
        assert [e["kind"] for e in record["events"]] == ["message", "propose", "accept"]
        known = merged(instance)
        cells = sorted(((v, r, p) for r, row in enumerate(known) for p, v in row.items()), key=lambda c: (-c[0], c[1:]))
        expected: dict[int, int] = {}
        for _, r, p in cells:
            if r not in expected and p not in expected.values():
                expected[r] = p
        pairs = dict(record["outcome"]["proposal"])
        assert all(pairs[r] == p for r, p in list(expected.items())[:7])  # the eighth pair is what is left
        lines = record["players"][1]["messages"][-1]["content"].split("[propose]")[0].splitlines()
        assert lines[0] == "Known scores, highest first:"
        listed = [int(line.rsplit(":", 1)[0].rsplit(" ", 1)[1]) for line in lines[1:]]
        assert listed == sorted(listed, reverse=True)
        assert sum(line.endswith(": take") for line in lines) == min(7, len(expected))


async def test_shuffled_records_take_the_reviewers_in_the_order_drawn_for_the_game():
    """The records plan, reviewer by reviewer in a random order (one per game, from its seed): the
    lines and the proposal follow that order, each pick is the best paper still free, and one
    instance's games end in different plans where the records plan's always end in one."""
    proposals = []
    for seed in range(8):
        instance = HELDOUT[5]
        record = await teacher_game(instance, "shuffled-records", seed)
        assert record["outcome"]["termination"] == ACCEPTED
        reasoning, proposal = record["players"][1]["messages"][-1]["content"].split("[propose]")
        names = [line.split(":")[0] for line in reasoning.strip().splitlines()]
        order = [int(r) for r in np.random.default_rng(seed).permutation(8)]
        assert names == [REVIEWERS[r] for r in order]
        expected = best_free_papers(merged(instance), order)
        pairs = dict(record["outcome"]["proposal"])
        assert all(pairs[r] == p for r, p in expected.items())
        proposed = [line.split(": ")[1] for line in proposal.strip().splitlines()[1:]]
        assert proposed[: len(expected)] == [REVIEWERS[r] for r in expected]  # in the plan's order
        proposals.append(json.dumps(record["outcome"]["proposal"]))
        again = await teacher_game(instance, "shuffled-records", seed)
        assert again["outcome"]["proposal"] == record["outcome"]["proposal"]  # the seed decides
    assert len(set(proposals)) > 1


async def groups(plan: str, seeds: int = 4) -> list[list[float]]:
    """Per instance of the first 60 held-out ones, the rewards of the plan's games with seeds 0..seeds-1."""
    return [
        [(await teacher_game(inst, plan, seed))["outcome"]["normalized_reward"] for seed in range(seeds)]
        for inst in HELDOUT[:60]
    ]


async def test_shuffled_records_score_as_the_records_plan_and_their_best_order_far_more():
    fixed = await groups("by-reviewer-records", 1)
    shuffled = await groups("shuffled-records")
    assert abs(np.mean(shuffled) - np.mean(fixed)) < 0.03
    assert np.mean([max(group) for group in shuffled]) > np.mean(fixed) + 0.04


async def test_ranked_records_take_the_reviewers_by_their_best_known_value_shifted_by_the_games_noise():
    """The records plan with the reviewers ranked by their highest known value plus Gumbel noise drawn
    from the game's seed: the lines follow that ranking, each pick is the best paper still free."""
    instance = HELDOUT[5]
    known = merged(instance)
    for seed in range(8):
        record = await teacher_game(instance, "ranked-records", seed)
        assert record["outcome"]["termination"] == ACCEPTED
        reasoning, proposal = record["players"][1]["messages"][-1]["content"].split("[propose]")
        names = [line.split(":")[0] for line in reasoning.strip().splitlines()]
        noise = np.random.default_rng(seed).gumbel(scale=TeacherPlayer.RANK_NOISE, size=8)
        top = [max(row.values(), default=-np.inf) + shift for row, shift in zip(known, noise)]
        order = sorted(range(8), key=lambda r: -top[r])
        assert names == [REVIEWERS[r] for r in order]
        expected = best_free_papers(known, order)
        assert all(dict(record["outcome"]["proposal"])[r] == p for r, p in expected.items())
        proposed = [line.split(": ")[1] for line in proposal.strip().splitlines()[1:]]
        assert proposed[: len(expected)] == [REVIEWERS[r] for r in expected]


async def test_ranked_records_score_above_the_records_plan_and_their_groups_differ():
    fixed = await groups("by-reviewer-records", 1)
    ranked = await groups("ranked-records")
    assert np.mean(ranked) > np.mean(fixed) + 0.015
    assert np.mean([len(set(group)) > 1 for group in ranked]) > 0.8
    assert np.mean([max(group) for group in ranked]) > np.mean(ranked) + 0.03


async def test_sorted_records_write_each_reviewers_highest_value_and_the_order_before_the_picks():
    """The sorted plan works out the ranking in writing: one records line per reviewer with a known cell, in
    table order, whose last record is its highest known value; then the reviewers by that value, highest
    first (table order among equals); then the records plan's lines in that order, each pick the best
    paper still free."""
    for instance in HELDOUT[:12]:
        known = [dict(sorted(row.items())) for row in merged(instance)]  # equal values: the first paper wins
        record = await teacher_game(instance, "sorted-records")
        assert record["outcome"]["termination"] == ACCEPTED
        reasoning, proposal = record["players"][1]["messages"][-1]["content"].split("[propose]")
        lines = reasoning.strip().splitlines()
        with_cells = [r for r in range(8) if known[r]]
        assert lines[0] == "Highest known values:"
        tops = lines[1 : 1 + len(with_cells)]
        assert [line.split(":")[0] for line in tops] == [REVIEWERS[r] for r in with_cells]
        for line, r in zip(tops, with_cells):
            records = [cell.rsplit(" ", 1) for cell in line.split(": ", 1)[1].split(" < ")]
            values = [int(v) for _, v in records]
            assert values == sorted(set(values)) and values[-1] == max(known[r].values())
            assert all(known[r][PAPERS.index(p)] == int(v) for p, v in records)
        order = sorted(range(8), key=lambda r: (-max(known[r].values(), default=-1), r))
        expected_order = " > ".join(f"{REVIEWERS[r]} {max(known[r].values())}" for r in order if known[r])
        assert lines[1 + len(with_cells)] == "Order: " + expected_order
        picks = lines[2 + len(with_cells) :]
        assert [line.split(":")[0] for line in picks] == [REVIEWERS[r] for r in order]
        expected = best_free_papers(known, order)
        assert all(dict(record["outcome"]["proposal"])[r] == p for r, p in expected.items())
        proposed = [line.split(": ")[1] for line in proposal.strip().splitlines()[1:]]
        assert proposed[: len(expected)] == [REVIEWERS[r] for r in expected]


async def test_sorted_records_score_as_the_ranked_plan_and_above_the_records_plan():
    fixed = await groups("by-reviewer-records", 1)
    ranked = await groups("ranked-records")
    sorted_ = await groups("sorted-records", 1)
    assert np.mean(sorted_) > np.mean(fixed) + 0.015
    assert abs(np.mean(sorted_) - np.mean(ranked)) < 0.02


async def test_chained_records_work_out_the_order_one_place_at_a_time_and_propose_as_the_sorted_plan():
    """After the highest known values, a line per place but the last: the running records of the highest
    values over the reviewers not yet placed, in table order, whose last record takes the place (the first
    among equals); then the sorted plan's pick lines and the sorted plan's proposal."""
    for instance in HELDOUT[:12]:
        known = [dict(sorted(row.items())) for row in merged(instance)]
        record = await teacher_game(instance, "chained-records")
        assert record["outcome"]["termination"] == ACCEPTED
        sorted_ = await teacher_game(instance, "sorted-records")
        assert record["outcome"]["proposal"] == sorted_["outcome"]["proposal"]
        reasoning = record["players"][1]["messages"][-1]["content"].split("[propose]")[0]
        sorted_reasoning = sorted_["players"][1]["messages"][-1]["content"].split("[propose]")[0]
        lines, sorted_lines = reasoning.strip().splitlines(), sorted_reasoning.strip().splitlines()
        with_cells = [r for r in range(8) if known[r]]
        highest = 1 + len(with_cells)
        assert lines[:highest] == sorted_lines[:highest]  # `Highest known values:` and a line per reviewer
        places = lines[highest : highest + len(with_cells) - 1]
        left, order = list(with_cells), []
        for n, line in enumerate(places, 1):
            number, chain = line.split(": ", 1)
            assert number == str(n)
            records = [(REVIEWERS.index(name), int(v)) for name, v in (c.rsplit(" ", 1) for c in chain.split(" < "))]
            assert records[0][0] == left[0]  # the chain starts at the first reviewer not yet placed
            assert all(v == max(known[r].values()) for r, v in records)
            # each record beats every reviewer before it; the last beats or equals every one after it
            for r, v in records[1:]:
                assert v > max(max(known[q].values()) for q in left[: left.index(r)])
            winner, top = records[-1]
            assert top == max(max(known[q].values()) for q in left)
            assert all(max(known[q].values()) < top for q in left[: left.index(winner)])
            order.append(winner)
            left.remove(winner)
        order += left
        assert lines[highest + len(places) :] == sorted_lines[highest + 1 :]  # the pick lines, `Order:` aside
        assert [line.split(":")[0] for line in lines[highest + len(places) :]] == [REVIEWERS[r] for r in order]


async def test_sampled_by_score_takes_known_cells_by_value_plus_the_games_noise():
    """by-score with each cell's value shifted by Gumbel noise drawn from the game's seed: the listed cells
    follow value plus noise, their values are the known ones, and the picks are by-score's rule in that order."""
    instance = HELDOUT[4]
    known = merged(instance)
    for seed in range(6):
        record = await teacher_game(instance, "sampled-by-score", seed)
        assert record["outcome"]["termination"] == ACCEPTED
        lines = record["players"][1]["messages"][-1]["content"].split("[propose]")[0].strip().splitlines()
        assert lines[0] == "Known scores, high ones first:"
        noise = np.random.default_rng(seed).gumbel(scale=TeacherPlayer.SCORE_NOISE, size=(8, 8))
        cells = sorted(((v + noise[r][p], r, p) for r, row in enumerate(known) for p, v in row.items()), reverse=True)
        listed = [line.rsplit(":", 1)[0] for line in lines[1:]]
        assert listed == [f"{REVIEWERS[r]} - {PAPERS[p]} {known[r][p]}" for _, r, p in cells][: len(listed)]
        picks: dict[int, int] = {}
        for _, r, p in cells:
            if len(picks) < 7 and r not in picks and p not in picks.values():
                picks[r] = p
        assert all(dict(record["outcome"]["proposal"])[r] == p for r, p in picks.items())


async def test_sampled_by_score_scores_about_by_score_and_its_groups_differ():
    by_score = await groups("by-score", 1)
    sampled = await groups("sampled-by-score")
    assert abs(np.mean(sampled) - np.mean(by_score)) < 0.015
    assert np.mean([len(set(group)) > 1 for group in sampled]) > 0.5
    assert np.mean([max(group) for group in sampled]) > np.mean(by_score) + 0.02


def test_an_unknown_teacher_plan_is_refused():
    with pytest.raises(
        ValueError,
        match="unknown teacher plan 'hungarian'; choose one of by-reviewer, by-reviewer-records, shuffled-records, "
        "ranked-records, sorted-records, chained-records, by-score, sampled-by-score$",
    ):
        TeacherPlayer(HELDOUT[0], 1, "hungarian")


async def test_teacher_beats_random_matching_and_sits_near_the_no_talk_plan():
    random_matching = np.mean([np.sum(inst.table) / 8 / inst.best_reward for inst in HELDOUT])
    by_reviewer = np.mean([(await teacher_game(inst))["outcome"]["normalized_reward"] for inst in HELDOUT])
    by_score = np.mean([(await teacher_game(inst, "by-score"))["outcome"]["normalized_reward"] for inst in HELDOUT])
    assert by_reviewer > random_matching + 0.15
    assert 0.78 < by_reviewer < 0.86 < by_score < 0.92


async def test_teacher_answers_a_proposal_and_reads_shared_cells():
    instance = HELDOUT[2]
    seats = (
        lambda spec, s, game, start: ScriptedPlayer(spec.instance, s, share=1.0, rng=np.random.default_rng(0)),
        lambda spec, s, game, start: TeacherPlayer(spec.instance, s),
    )
    record = await play_game(GameSpec("x/0", 0, 0, instance), seats, GameConfig(), {})
    assert record["outcome"]["agreed"]
    assert "invalid" not in [e["kind"] for e in record["events"]]


@pytest.mark.parametrize("plan", ["by-reviewer", "by-reviewer-records", "by-score"])
def test_teacher_games_evaluate_fully_grounded(tmp_path, plan):
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
            "--teacher-plan",
            plan,
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
    record = json.loads(next((tmp_path / "games").glob("*.jsonl")).read_text().splitlines()[0])
    assert record["settings"]["seat1"] | {"plan": plan} == record["settings"]["seat1"]


def test_a_teacher_plan_for_a_game_whose_teacher_has_none_is_refused(tmp_path):
    from click.testing import CliRunner

    from selfplay_gen.cli import main

    args = ["play", "--game", "negotiation", "--backend", "scripted", "--scripted-policy", "teacher"]
    out = tmp_path / "g.jsonl"
    result = CliRunner().invoke(main, [*args, "--teacher-plan", "by-score", "--num-games", "1", "--out", str(out)])
    assert result.exit_code == 2
    assert "Invalid value for --teacher-plan: the negotiation teacher has no plans" in result.output
    assert not out.exists()
