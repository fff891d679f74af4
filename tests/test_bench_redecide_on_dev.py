"""bench/analysis/redecide_on_dev.py on the committed results: every development evaluation it names is
there and on development seeds, and promotion's rule as it is keeps out the one committed development
match that the rule before it (intervals side by side) promoted."""

from __future__ import annotations

import json

import bench_modules
import pytest

redecide = bench_modules.load("analysis/redecide_on_dev.py", "redecide_on_dev")


def test_each_choice_reads_development_evaluations_the_repository_keeps(capsys):
    redecide.main([])
    out = capsys.readouterr().out
    pairs = [pair for choice in redecide.CHOICES for pair in choice.pairs]
    headers = ("| B against", "| match")
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith(headers)]
    assert len(rows) == len(pairs) + len(redecide.PROMOTION_MATCHES)
    for pair in pairs:
        assert any(row.startswith(f"| {pair.what} |") for row in rows), pair.what


def test_the_paired_rule_keeps_out_what_side_by_side_intervals_promote():
    table = redecide.promotion_table(redecide.RESULTS).splitlines()
    verdicts = {line.split("`")[1]: line.rsplit("|", 3)[1:3] for line in table if line.startswith("| `")}
    differ = [name for name, (now, before) in verdicts.items() if now != before]
    assert differ == ["negotiation/qwen_self_play_h100x4_2026-11-28/qself35/crossplay_iter_1__warm/metrics.json"]
    assert [v.strip() for v in verdicts[differ[0]]] == ["kept out", "promoted"]


def test_an_evaluation_off_the_development_seeds_is_refused(tmp_path):
    metrics = json.loads((redecide.RESULTS / redecide.CHOICES[0].pairs[0].a).read_text())
    ((label, rewards),) = metrics["per_instance"].items()
    metrics["per_instance"][label] = {"seed-2000000000": 0.8, **rewards}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(SystemExit, match="'seed-2000000000', not a development instance"):
        redecide.per_instance(tmp_path / "metrics.json")
