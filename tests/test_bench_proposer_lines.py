"""bench/analysis/proposer_lines.py: the teacher's own games have no faulty reasoning line and score what
the teacher scores; a line whose pick is not the largest of its list, or that lists a taken
paper, is counted as such."""

import json
import subprocess
import sys
from pathlib import Path

import bench_modules
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main

REPO = Path(__file__).resolve().parents[1]
proposer_lines = bench_modules.load("analysis/proposer_lines.py", "proposer_lines")
analyse, check_lines, line_order = proposer_lines.analyse, proposer_lines.check_lines, proposer_lines.line_order


@pytest.mark.parametrize("plan", ["by-reviewer", "by-reviewer-records"])
def test_teacher_games_have_no_faulty_line(tmp_path, plan):
    games = tmp_path / "games.jsonl"
    args = ["--backend", "scripted", "--scripted-policy", "teacher", "--teacher-plan", plan, "--seed", "1000000000"]
    args += ["--num-games", "8"]
    result = CliRunner().invoke(main, [*args, "-k", "1", "--out", str(games), "--quiet"])
    assert result.exit_code == 0, result.output
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "analysis" / "proposer_lines.py"),
            str(games),
            str(tmp_path / "out.json"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    assert report == analyse(str(games))
    assert report["games_with_a_proposal_turn"] == 8 and report["reasoning_lines"] == 64
    assert report["line_errors"] == {}
    assert report["lines_with_an_error_by_place"] == {str(place): 0.0 for place in range(1, 9)}
    assert report["model_reward_accepted"] == report["teacher_on_same_dialogues"] > 0.6


def test_faulty_lines_are_counted_by_kind():
    own = [[None] * 8 for _ in range(8)]
    own[0][0], own[0][1] = 50, 70  # Ava Li: BLEU 50, Electra 70
    own[1][1], own[1][2] = 90, 10  # Daniel Nguyen: Electra 90, GloVe 10
    told: dict = {r: {} for r in range(8)}
    good = "Ava Li: BLEU 50, Electra 70 -> Electra\nDaniel Nguyen: GloVe 10 -> GloVe"
    assert sum(v for k, v in check_lines(good, own, told).items() if k != "lines") == 0
    errors = check_lines("Ava Li: BLEU 50, Electra 70 -> BLEU\nDaniel Nguyen: GloVe 10 -> GloVe", own, told)
    assert errors["picks other than the largest of its list"] == 1
    assert errors["picks other than the best free paper"] == 2  # Daniel Nguyen's best free paper is then Electra
    errors = check_lines("Ava Li: BLEU 50, Electra 70 -> Electra\nDaniel Nguyen: Electra 90 -> Electra", own, told)
    assert errors["lists a taken paper"] == 1 and errors["misses a free cell"] == 1
    # line by line, in order: the second line's errors follow from the paper the first one took
    late = "Ava Li: BLEU 50, Electra 70 -> Electra\nsomething else\nDaniel Nguyen: Electra 90 -> Electra"
    assert proposer_lines.line_errors(late, own, told) == [
        set(),
        {"unreadable line"},
        {"lists a taken paper", "misses a free cell", "picks other than the best free paper"},
    ]


def test_line_order_reads_whether_the_reviewers_come_highest_first():
    known: list[dict[int, int]] = [{} for _ in range(8)]
    # highest known values: Ava Li 70, Daniel Nguyen 90, Andrei Petrov 10
    known[0], known[1], known[3] = {0: 50, 1: 70}, {1: 90}, {2: 10}
    highest_first = "Daniel Nguyen: Electra 90 -> Electra\nAva Li: BLEU 50 -> BLEU\nAndrei Petrov: GloVe 10 -> GloVe"
    assert line_order(highest_first, known) == (1.0, True)
    lowest_first = "Andrei Petrov: GloVe 10 -> GloVe\nAva Li: Electra 70 -> Electra\nDaniel Nguyen: BLEU 9 -> BLEU"
    assert line_order(lowest_first, known) == (-1.0, False)
    assert line_order("Ava Li: BLEU 50 -> BLEU\nDaniel Nguyen: Electra 90 -> Electra", known) is None  # two lines


def test_the_ranked_and_sorted_teachers_lines_follow_the_highest_known_value_and_the_shuffled_teachers_do_not(
    tmp_path,
):
    correlation = {}
    for plan in ("ranked-records", "shuffled-records", "sorted-records", "chained-records"):
        games = tmp_path / f"{plan}.jsonl"
        args = ["--backend", "scripted", "--scripted-policy", "teacher", "--teacher-plan", plan, "--seed", "1000000000"]
        result = CliRunner().invoke(main, [*args, "--num-games", "48", "-k", "1", "--out", str(games), "--quiet"])
        assert result.exit_code == 0, result.output
        report = analyse(str(games), plan)
        assert report["teacher_plan"] == plan and report["line_errors"] == {}
        correlation[plan] = report["line_order"]["rank_correlation_with_highest_known_value"]
    assert correlation["ranked-records"] > 0.5 > 0.25 > correlation["shuffled-records"]
    assert correlation["sorted-records"] > correlation["ranked-records"]  # the same ranking, without noise
    assert correlation["chained-records"] == correlation["sorted-records"]  # the same picks in the same order
