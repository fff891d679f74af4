"""Kuhn Poker's strategy read from games (`kuhn_strategy`): each move's information set, replayed from
the record, is the one the environment was in; the exact values of strategies worked out by hand."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from selfplay_gen import games
from selfplay_gen.games.textarena import kuhn_strategy as kuhn

pytest.importorskip("textarena", reason="the selfplay-gen[textarena] extra is not installed")


def test_exact_values_of_strategies_worked_out_by_hand():
    eq = kuhn.values(kuhn.EQUILIBRIUM)
    # the equilibrium earns the game's value against itself and against the best response to it
    assert eq["equilibrium_first"] == pytest.approx(-1 / 18) and eq["equilibrium_second"] == pytest.approx(1 / 18)
    assert eq["best_response_first"] == pytest.approx(-1 / 18) and eq["best_response_second"] == pytest.approx(1 / 18)
    # always bet, always call: against the equilibrium, first to act J-Q 0, J-K -2, Q-J +1, Q-K -2, K-J +1,
    # K-Q 4/3 (a sixth each); a best response calls with Q and K and folds J: -2, -2, +1, -2, +1, +2
    aggressive = kuhn.values(np.ones(len(kuhn.NODES)))
    assert aggressive["equilibrium_first"] == pytest.approx(-1 / 9)
    assert aggressive["equilibrium_second"] == pytest.approx(-1 / 9)
    assert aggressive["best_response_first"] == pytest.approx(-1 / 3)
    assert aggressive["best_response_second"] == pytest.approx(-1 / 3)
    # a strategy that never checks needs no share for calling after its own check
    no_calls = np.ones(len(kuhn.NODES))
    no_calls[[kuhn.INDEX[(True, card, True)] for card in range(3)]] = np.nan
    assert kuhn.values(no_calls)["equilibrium_first"] == pytest.approx(-1 / 9)
    # one that does check and was never seen facing the bet after it has no value as the first to act
    checks = no_calls.copy()
    checks[kuhn.INDEX[(True, 0, False)]] = 0.5
    read = kuhn.values(checks)
    assert np.isnan(read["equilibrium_first"]) and not np.isnan(read["equilibrium_second"])


def test_each_move_is_replayed_in_the_information_set_it_was_made_in():
    """Random play, the information set read from the live game before each move, against the one the
    record's replay gives."""
    nodes = set()
    for seed in range(100):
        game = games.get("textarena:KuhnPoker-v0")()
        game.reset(game.instance_type.from_seed(seed))
        rng, seen = random.Random(seed), []
        while not game.done:
            mover, state = game.to_move, game.env.state.game_state
            legal = list(state["current_legal_action_tree"])
            node = (state["starting_player"] == mover, state["player_cards"][mover], "call" in legal)
            move = rng.choice([*legal, "nonsense"])  # an invalid move now and then, which changes nothing
            if game.step(mover, f"I play [{move}]" if move != "nonsense" else "hmm").valid:
                seen.append((mover, kuhn.INDEX[node], move in ("bet", "call")))
        record = {"game": game.name, "game_id": f"g{seed}", "instance": {"seed": seed}, "events": game.events()}
        assert kuhn.decisions(record) == seen
        nodes |= {node for _, node, _ in seen}
    assert nodes == set(range(len(kuhn.NODES)))


def test_a_strategy_is_read_with_its_counts_and_intervals():
    """Three moves at each information set on each of 8 instances, aggressive as often as the equilibrium
    is (its shares are thirds), except that half the instances never bluff a jack as the first to act."""
    rows = []
    for i in range(8):
        for node, share in zip(kuhn.NODES, kuhn.EQUILIBRIUM, strict=True):
            aggressive = 0 if node == (True, 0, False) and i % 2 else round(3 * share)
            rows += [(f"seed-{i}", kuhn.INDEX[node], k < aggressive) for k in range(3)]
    moves = pd.DataFrame(rows, columns=["instance_id", "node", "aggressive"])
    summary = kuhn.summarize(moves, 500, np.random.default_rng(0))
    assert summary["moves"] == 8 * 12 * 3 and summary["instances"] == 8
    assert summary["shares"]["first, J, opening: bet"] == {"share": pytest.approx(1 / 6), "moves": 24}
    assert summary["shares"]["second, Q, facing a bet: call"] == {"share": pytest.approx(1 / 3), "moves": 24}
    # bluffing less than the equilibrium loses nothing against it, and the best response takes it
    first = summary["equilibrium_first"]
    assert first["mean"] == pytest.approx(-1 / 18) and first["ci"] == pytest.approx([-1 / 18, -1 / 18])
    exploited = summary["best_response_first"]
    assert exploited["mean"] < -1 / 18 - 0.01 and exploited["ci"][0] <= exploited["mean"] <= exploited["ci"][1]


def test_the_run_summary_shows_each_checkpoints_strategy_against_the_references(tmp_path):
    """Scripted seats stand in for checkpoints: the equilibrium (iter_1, its moves against random play) is worth
    exactly the game's value against the equilibrium, and random play (base) less, as first and as second to act."""
    from click.testing import CliRunner

    from selfplay_gen.cli import main
    from selfplay_gen.iterate import report

    run_dir = tmp_path / "run"
    game = ["--game", "textarena:KuhnPoker-v0", "--backend", "scripted", "--instances", "dev"]
    game += ["--num-instances", "12", "-k", "2", "--bootstrap", "200", "-q"]
    for stage, label, policy, reference in (
        ("base", "base", "random", "equilibrium"),
        ("iter_001", "iter_1", "equilibrium", "random"),
    ):
        out = run_dir / stage / "eval" / f"heldout_vs_{reference}"
        args = ["eval", *game, "--scripted-policy", policy, "--partner-scripted-policy", reference]
        args += ["--label", label, "--partner-label", reference, "--out", str(out)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
    text = report.write_summary(run_dir)
    section = text.split("## Kuhn Poker strategy")[1]
    rows = {
        cells[0]: cells for line in section.splitlines() if (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    assert rows["model"][3:] == list(kuhn.VALUES.values())
    assert rows["iter_1"][1] == "random" and rows["iter_1"][3:5] == [
        "-0.056 [-0.056, -0.056]",
        "0.056 [0.056, 0.056]",
    ]
    assert float(rows["base"][3].split()[0]) < -0.1 and float(rows["base"][4].split()[0]) < 0
