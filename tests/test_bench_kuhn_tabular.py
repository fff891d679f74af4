"""bench/analysis/kuhn_tabular_grpo.py's filtered-imitation loop: imitating won matches makes the table read the
cards, and its report shows each iteration."""

import argparse
import json

import bench_modules
import numpy as np
import pytest

from selfplay_gen.games.textarena import kuhn_strategy as kuhn

kuhn_tabular = bench_modules.load("analysis/kuhn_tabular_grpo.py", "kuhn_tabular_grpo")


def test_imitating_won_matches_calls_by_the_card_and_gains_on_random_play():
    (table,) = kuhn_tabular.filtered_imitation(1, instances=512, seed=3)
    calls = [table[kuhn.INDEX[(False, card, True)]] for card in range(3)]  # second to act, facing a bet
    assert calls[0] < 0.45 < 0.55 < calls[2] and calls[0] < calls[1] < calls[2]
    start, learned = kuhn.values(np.full(len(kuhn.NODES), 0.5)), kuhn.values(table)
    assert learned["equilibrium_first"] > start["equilibrium_first"] + 0.02
    assert learned["equilibrium_second"] > start["equilibrium_second"] + 0.02


def test_a_match_plays_its_three_deals_and_sums_seat_0s_chips():
    rng = np.random.default_rng(0)
    always = np.ones(len(kuhn.NODES))  # every seat bets and calls: each hand goes to a showdown for 2 chips
    deals = [(2, 0), (0, 1), (1, 2)]
    chips, moves = kuhn_tabular.match(always, deals, rng)
    assert chips == 2 - 2 - 2 and len(moves) == 6


def test_the_report_has_random_play_each_iteration_and_the_equilibrium(monkeypatch):
    real = kuhn_tabular.filtered_imitation
    monkeypatch.setattr(kuhn_tabular, "filtered_imitation", lambda n: real(n, instances=64))
    lines = kuhn_tabular.filtered_report(2).splitlines()
    rows = ["| random play", "| iteration 1", "| iteration 2", "| equilibrium"]
    assert [line.split(" | ")[0] for line in lines[2:]] == rows
    assert lines[2].split(" | ")[1] == "-0.167"  # random play against the equilibrium, exactly


def test_a_shared_term_ties_the_cards_of_a_decision_and_the_own_term_unties_them():
    def shares_by_kind(table):  # {kind of decision: its three sets' shares, by card}
        return {kind: [table[kuhn.INDEX[(kind[0], card, kind[1])]] for card in range(3)] for kind in kuhn_tabular.KINDS}

    (blind,) = kuhn_tabular.train("chips", 0.0, 6, 0.5, seed=1, record_at=[6], card_weight=0.0).values()
    assert all(np.ptp(shares) < 1e-12 for shares in shares_by_kind(blind).values())
    assert np.ptp(blind) > 0.05  # it did learn, per kind of decision
    (reading,) = kuhn_tabular.train("chips", 0.0, 6, 0.5, seed=1, record_at=[6], card_weight=1.0).values()
    assert max(np.ptp(shares) for shares in shares_by_kind(reading).values()) > 0.05


def test_an_arm_is_a_reward_and_a_kl_coefficient_and_a_wrong_one_is_refused():
    assert kuhn_tabular.arm("chips:0.2") == ("chips", 0.2)
    assert kuhn_tabular.arm("outcome") == ("outcome", 0.0)
    for wrong, named in (("points:0.1", "'points'"), ("chips:much", "'much'")):
        with pytest.raises(argparse.ArgumentTypeError, match=named):
            kuhn_tabular.arm(wrong)


def test_a_run_shorter_than_the_usual_record_steps_records_only_the_steps_it_takes(tmp_path, monkeypatch):
    args = ["--steps", "4", "--seeds", "1", "--arm", "chips:0.2", "--at", "2,48", "--out", str(tmp_path)]
    monkeypatch.setattr("sys.argv", ["kuhn_tabular_grpo.py", *args])
    kuhn_tabular.main()
    rows = json.loads((tmp_path / "kuhn_tabular_grpo.json").read_text())
    assert [(r["reward"], r["kl"], r["step"]) for r in rows] == [("chips", 0.2, step) for step in (0, 2, 4)]
