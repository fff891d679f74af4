"""bench/analysis/pick_formats.py teaches the same lines the teacher writes: its `records` ending is the
by-reviewer-records plan's line, and every format ends with the row's first maximum."""

import bench_modules

from selfplay_gen.games.matching.instance import PAPERS
from selfplay_gen.games.matching.scripted import TeacherPlayer

pick_formats = bench_modules.load("analysis/pick_formats.py", "pick_formats")


def test_the_records_rows_are_the_teachers_lines_and_every_format_ends_on_the_maximum():
    rows = pick_formats.rows(range(10**9, 10**9 + 5))
    assert rows and all(len(cells) >= 2 for _, cells in rows)
    for r, cells in rows:
        known = [{} for _ in range(8)]
        known[r] = dict(cells)  # alone in its table, the reviewer's free papers are all its cells
        lines, picks = TeacherPlayer._by_reviewer(known, records=True)
        assert pick_formats.prefix((r, cells)) + pick_formats.ending(cells, "records").rstrip() == lines[r]
        for fmt in pick_formats.FORMATS:
            assert pick_formats.ending(cells, fmt).rstrip().endswith(f"-> {PAPERS[picks[r]]}")
    cells = [(0, 5), (1, 9), (2, 7), (3, 12)]
    assert pick_formats.ending(cells, "chain") == (
        " | BLEU 5 | Electra 9 > 5: Electra 9 | GloVe 7 < 9 | GLUE 12 > 9: GLUE 12 -> GLUE\n"
    )
    assert pick_formats.ending(cells, "records") == " | BLEU 5 < Electra 9 < GLUE 12 -> GLUE\n"
