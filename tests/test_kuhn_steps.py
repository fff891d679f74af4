"""Kuhn Poker's strategy per training step: each game's counts at the information sets go to the trainer as
game measures (`kuhn_strategy.move_counts` through `evaluation.protocol.game_measures`), and the means a step
logs give back the strategy its games pooled, for the run's summary (`report.strategy_trend`) and
`bench/analysis/steps_table.py --kuhn`."""

from __future__ import annotations

import bench_modules
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.evaluation.protocol import game_measures
from selfplay_gen.iterate import report
from selfplay_gen.records import read_games

kuhn = pytest.importorskip("selfplay_gen.games.textarena.kuhn_strategy")
pytest.importorskip("textarena", reason="the selfplay-gen[textarena] extra is not installed")
steps_table = bench_modules.load("analysis/steps_table.py", "steps_table")


def test_the_means_of_the_games_measures_are_the_strategy_their_moves_pool(tmp_path):
    out = tmp_path / "games.jsonl"
    args = ["--game", "textarena:KuhnPoker-v0", "--backend", "scripted", "--scripted-policy", "random"]
    result = CliRunner().invoke(main, [*args, "-n", "16", "-k", "2", "-q", "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = list(read_games(out))
    measures = pd.DataFrame([game_measures(r) for r in records])
    counts = np.zeros((len(kuhn.NODES), 2))
    for record in records:
        for _, node, aggressive in kuhn.decisions(record):
            counts[node] += (aggressive, 1)
    for node, (moved, aggressed) in enumerate(kuhn.MEASURE_NAMES):
        assert measures[moved].sum() == counts[node, 1] and measures[aggressed].sum() == counts[node, 0]
    assert counts[:, 1].min() > 0  # every set reached, so the check covers all twelve
    strategy = kuhn.strategy_of_means(measures.mean().to_dict())
    np.testing.assert_allclose(strategy, counts[:, 0] / counts[:, 1])
    assert kuhn.strategy_of_means({"agreed": 1.0}) is None


def logged(step: int, strategy: np.ndarray, moves: float = 4.0) -> str:
    """A console line of a step whose games show `strategy` (NaN: a set never reached)."""
    parts = [f"step:{step}", "actor/entropy:0.2", f"timing_s/step:{20 + step}"]
    for share, (moved, aggressed) in zip(strategy, kuhn.MEASURE_NAMES, strict=True):
        n = 0.0 if np.isnan(share) else moves
        parts += [f"games/{moved}/mean:{n}", f"games/{aggressed}/mean:{0.0 if n == 0 else share * n}"]
    return "(TaskRunnerV1 pid=1) " + " - ".join(parts)


def test_each_step_reads_as_its_strategy_worth_and_the_run_says_where_it_went(tmp_path, capsys):
    always = np.ones(len(kuhn.NODES))
    always[[kuhn.INDEX[(True, card, True)] for card in range(3)]] = np.nan  # never checks, so never calls after
    lines = ["(TaskRunnerV1 pid=1) step:0 - val-core/x/reward/mean@1:0.1", logged(1, kuhn.EQUILIBRIUM)]
    lines += [logged(2, always)]
    rows = steps_table.kuhn_table(lines)
    assert [row[0] for row in rows] == ["step", "1", "2"]
    first, second = (dict(zip(rows[0], row)) for row in rows[1:])
    assert float(first["equilibrium_first"]) == pytest.approx(-1 / 18, abs=1e-4)
    assert float(first["equilibrium_second"]) == pytest.approx(1 / 18, abs=1e-4)
    assert float(second["equilibrium_first"]) == pytest.approx(-1 / 9, abs=1e-4)
    assert float(second["best_response_second"]) == pytest.approx(-1 / 3, abs=1e-4)
    assert second[kuhn.node_name((True, 0, True))] == "" and second[kuhn.node_name((True, 0, False))] == "1.000"

    steps = report.console_metrics(lines)
    assert report.strategy_trend(steps) == (
        "strategy of its games against the equilibrium, first / second to act (value -0.056 / +0.056), "
        "-0.056 / +0.056 at step 1 → -0.111 / -0.111 at step 2"
    )
    assert report.strategy_trend(steps[:2]) is None  # one step that logged it
    # in self-play, a policy that always opens with a bet never shows what it does as the second after a check
    unseen = always.copy()
    unseen[[kuhn.INDEX[(False, card, False)] for card in range(3)]] = np.nan
    third = dict(zip(rows[0], steps_table.kuhn_table([logged(3, unseen)])[1]))
    assert float(third["equilibrium_first"]) == pytest.approx(-1 / 9, abs=1e-4) and third["equilibrium_second"] == ""
    assert report.strategy_trend(steps + report.console_metrics([logged(3, unseen)])).endswith("-0.111 / – at step 3")
    assert report.strategy_trend([{"step": 1.0, "games/agreed/mean": 1.0}] * 2) is None

    # the run's curves: a panel of the strategy's worth as each seat, a point where the games reached what it needs
    curves = [report.with_strategy(step) for step in report.console_metrics([*lines, logged(3, unseen)])]
    assert report.curve_panels(curves)[report.STRATEGY_PANEL] == list(report.STRATEGY_CURVES)
    assert [round(s.get("strategy/equilibrium_second", 9), 4) for s in curves] == [9, 0.0556, -0.1111, 9]
    assert report.plot_curves(report.console_metrics(lines), tmp_path / "curves.png")

    log = tmp_path / "verl.log"
    log.write_text("\n".join(lines))
    steps_table.main([str(log), "--kuhn", "--markdown"])
    assert capsys.readouterr().out.splitlines()[2].startswith("| 1 | -0.0556 | 0.0556 |")
    log.write_text(lines[0])
    with pytest.raises(SystemExit, match="no training step logged Kuhn Poker"):
        steps_table.main([str(log), "--kuhn"])
