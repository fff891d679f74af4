"""The remedies a negotiation league can choose so that a seat wins without wrecking the deal, each
shown changing what the trainer is fed, on games the scripted negotiators play (no model): the
joint-outcome term of the training reward, the pool's share of past checkpoints (fictitious
self-play), groups mixed over several partners, the development draw the run's ratings are read
on apart from the promotion match, and skill levels defined by strength."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import ChatSeat
from selfplay_gen.games.negotiation import Instance, render_share
from selfplay_gen.records import read_games
from selfplay_gen.reward import RewardTerms, joint_share, training_reward
from selfplay_gen.runner import GameSpec, play_game

# --- the joint-outcome term ------------------------------------------------------------------------


class Proposer(ChatSeat):
    """Proposes one share at its first turn: two of them make the deal the test asks for."""

    def __init__(self, seat: int, system: str, share):
        super().__init__(seat, system)
        self.share = share

    async def respond(self) -> str:
        return f"[propose] {render_share(self.share)}"


def deal(instance: Instance, share0) -> dict:
    """The record of a semi-competitive game in which seat 0 takes `share0` and seat 1 the rest."""
    shares = (share0, instance.rest(share0))
    seats = [lambda spec, s, game, start: Proposer(s, start.system[s], shares[s])] * 2
    spec = GameSpec(f"{instance.id}/{share0}", 0, 0, instance)
    config = GameConfig("negotiation", options={"reward_mode": "semi-competitive"})
    return asyncio.run(play_game(spec, seats, config, {}))


def equal_points_unequal_joint() -> tuple[dict, dict]:
    """Two deals of one instance in which seat 0 gets the same points and the joint share differs."""
    for seed in range(100):
        instance = Instance.from_seed(seed)
        by_own: dict[int, list] = {}
        for share in instance.shares():
            by_own.setdefault(instance.value(0, share), []).append(share)
        for own, shares in sorted(by_own.items(), reverse=True):
            partner = {instance.value(1, instance.rest(s)): s for s in shares}
            if own > 0 and len(partner) > 1:
                return deal(instance, partner[min(partner)]), deal(instance, partner[max(partner)])
    raise AssertionError("no instance of the first 100 seeds has such a pair")


def test_the_joint_term_ranks_a_deal_with_a_higher_joint_share_higher_at_equal_own_points():
    low, high = equal_points_unequal_joint()
    assert low["outcome"]["agreed"] and high["outcome"]["agreed"]
    assert low["outcome"]["points"][0] == high["outcome"]["points"][0] > 0
    assert joint_share(low) < joint_share(high) <= 1
    # unweighted, the seat's reward is its points alone: the two deals are equal
    assert training_reward(low, 0) == training_reward(high, 0) == low["outcome"]["rewards"][0]
    for weight in (0.5, 5.0):
        joint = RewardTerms(joint_weight=weight)
        assert training_reward(high, 0, joint) > training_reward(low, 0, joint)
        assert training_reward(high, 0, joint) == pytest.approx(
            high["outcome"]["points"][0] + weight * joint_share(high)
        )
    assert high["outcome"]["rewards"][0] == high["outcome"]["points"][0]  # the record's game reward is untouched
    matching = {"game_id": "g", "game": "matching", "outcome": {"rewards": [1.0, 1.0]}, "players": [{}, {}]}
    with pytest.raises(ValueError, match="records no points and best_joint"):
        training_reward(matching, 0, RewardTerms(joint_weight=1.0))


def play(out: Path, *args: str) -> Path:
    base = ["play", "--game", "negotiation", "--backend", "scripted", "-q", "--out", str(out)]
    result = CliRunner().invoke(main, [*base, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def convert(games: Path, out: Path, *args: str) -> dict:
    from convert.cli import main as convert_main

    result = CliRunner().invoke(convert_main, [str(games), "--out-dir", str(out), "--val-fraction", "0", *args])
    assert result.exit_code == 0, result.output
    return json.loads((out / "convert_summary.json").read_text())


def test_convert_adds_the_joint_term_to_the_training_reward_and_reports_it_apart(tmp_path):
    import pandas as pd

    # random negotiators: the games of one instance end in different deals, so DPO has pairs to rank
    games = play(tmp_path / "g.jsonl", "--scripted-policy", "random", "-n", "96", "-k", "8")
    records = {r["game_id"]: r for r in read_games(games)}
    mean_share = sum(map(joint_share, records.values())) / len(records)
    plain = convert(games, tmp_path / "plain", "--format", "dpo", "--seat", "0")
    joint = convert(games, tmp_path / "joint", "--format", "dpo", "--seat", "0", "--joint-weight", "50")
    # the game reward the evaluation reads is the same; the training reward carries the term, reported apart
    assert joint["mean_rewards"] == plain["mean_rewards"]
    assert plain["joint_outcome"] == {"weight": 0.0, "mean_term": 0.0}
    assert joint["joint_outcome"]["mean_term"] == pytest.approx(50 * mean_share)
    assert joint["mean_training_reward"] == pytest.approx(plain["mean_training_reward"] + 50 * mean_share)

    def pairs(out: Path) -> list[tuple[str, str]]:
        info = pd.read_parquet(out / "train.parquet")["extra_info"]
        return [(row["chosen_game_id"], row["rejected_game_id"]) for row in info]

    by_points, by_joint = pairs(tmp_path / "plain"), pairs(tmp_path / "joint")
    assert by_points != by_joint  # the weight changes which games the trainer prefers
    for chosen, rejected in by_points:
        assert records[chosen]["outcome"]["points"][0] > records[rejected]["outcome"]["points"][0]
    for chosen, rejected in by_joint:
        ranked = [training_reward(records[game], 0, RewardTerms(joint_weight=50)) for game in (chosen, rejected)]
        assert ranked[0] > ranked[1]


def dry_iterate(tmp_path: Path, *args: str) -> list[str]:
    from selfplay_gen.iterate.cli import iterate_command

    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(tmp_path / "run"), "--tools.gen", "gen"]
    common += ["--tools.convert", "conv", "--verl.python", sys.executable, "--game", "negotiation"]
    common += ["--warm.policy", "none"]
    result = CliRunner().invoke(iterate_command, [*common, *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_a_run_feeds_the_joint_weight_to_every_trainers_rewards(tmp_path):
    league = ["--league_size", "1", "--num_iterations", "1", "--league.joint_weight", "2.5"]
    for trainer in ("grpo", "filtered-bc", "dpo"):
        lines = dry_iterate(tmp_path / trainer, "--trainer", trainer, *league)
        (convert,) = [line for line in lines if line.startswith("+ conv ") and "/iter_001/" in line]
        assert "--joint-weight 2.5" in convert, trainer
    online = dry_iterate(tmp_path / "online", "--trainer", "grpo-online", "--num_iterations", "1", *league[4:])
    (train,) = [line for line in online if "-m verl.trainer.main_ppo" in line]
    assert "+selfplay.joint_weight=2.5" in train
    plain = dry_iterate(tmp_path / "plain", "--trainer", "grpo", *league[:4])
    assert not any("--joint-weight" in line or "joint_weight=" in line for line in plain)


# --- the misstatement term ---------------------------------------------------------------------------


class Talker(ChatSeat):
    """Says `message` at its first turn, then proposes `share`."""

    def __init__(self, seat: int, system: str, message: str | None, share):
        super().__init__(seat, system)
        self.replies = [f"[message] {message}"] if message else []
        self.replies.append(f"[propose] {render_share(share)}")

    async def respond(self) -> str:
        return self.replies.pop(0)


def talked_deal(instance: Instance, message: str, game_id: str) -> dict:
    """A game in which seat 0 says `message`, seat 1 proposes the pool's rest of seat 0's share, and seat 0
    proposes its share: a deal whatever the message said."""
    share0 = (instance.counts[0], 0, 0)
    seats = [
        lambda spec, s, game, start: Talker(s, start.system[s], message, share0),
        lambda spec, s, game, start: Talker(s, start.system[s], None, instance.rest(share0)),
    ]
    config = GameConfig("negotiation", options={"reward_mode": "semi-competitive"})
    return asyncio.run(play_game(GameSpec(game_id, 0, 0, instance), seats, config, {}))


def test_an_offer_whose_halves_do_not_add_up_costs_its_writer_the_misstatement_penalty(tmp_path):
    from selfplay_gen.games.negotiation.game import NegotiationGame
    from selfplay_gen.games.negotiation.moves import misstates, stated_split

    instance = Instance.from_seed(3)
    a, b, c = instance.counts
    adds_up = f"I take {render_share((a, 0, 0))}; you take {render_share((0, b, c))}."
    slipped = f"I take {render_share((a, 0, 0))}; you take {render_share((a, b, c))}."
    assert stated_split(adds_up, instance.counts) == ((a, 0, 0), (0, b, c))
    assert not misstates(adds_up, instance.counts) and misstates(slipped, instance.counts)
    assert stated_split("I take the books, you take the rest.", instance.counts) is None
    honest, slip = talked_deal(instance, adds_up, "honest"), talked_deal(instance, slipped, "slip")
    assert honest["outcome"]["agreed"] and slip["outcome"]["agreed"]
    assert honest["outcome"]["rewards"] == slip["outcome"]["rewards"]  # the rules do not count it
    assert [NegotiationGame.misstatements(slip, seat) for seat in (0, 1)] == [1, 0]
    assert NegotiationGame.misstatements(honest, 0) == 0
    # the penalty costs the writer alone, each misstatement once; unweighted, nothing
    for seat in (0, 1):
        assert training_reward(slip, seat) == training_reward(honest, seat) == slip["outcome"]["rewards"][seat]
    penalty = RewardTerms(misstatement_penalty=2.0)
    assert training_reward(slip, 0, penalty) == pytest.approx(slip["outcome"]["rewards"][0] - 2.0)
    assert training_reward(slip, 1, penalty) == slip["outcome"]["rewards"][1]
    # convert: the trainer prefers the game without the slip, and reports the term apart from the game reward
    games = tmp_path / "g.jsonl"
    games.write_text("".join(json.dumps(r) + "\n" for r in (honest, slip)))
    summary = convert(games, tmp_path / "dpo", "--format", "dpo", "--seat", "0", "--misstatement-penalty", "2")
    assert summary["misstatements"] == {"penalty": 2.0, "mean_term": pytest.approx(-2.0 / 4)}
    assert summary["mean_rewards"] == [float(honest["outcome"]["rewards"][s]) for s in (0, 1)]
    import pandas as pd

    (pair,) = pd.read_parquet(tmp_path / "dpo" / "train.parquet")["extra_info"]
    assert (pair["chosen_game_id"], pair["rejected_game_id"]) == ("honest", "slip")


def test_a_run_feeds_the_misstatement_penalty_to_offline_and_online_rewards(tmp_path):
    league = ["--league_size", "1", "--num_iterations", "1", "--league.misstatement_penalty", "1.5"]
    lines = dry_iterate(tmp_path / "grpo", "--trainer", "grpo", *league)
    (convert,) = [line for line in lines if line.startswith("+ conv ") and "/iter_001/" in line]
    assert "--misstatement-penalty 1.5" in convert
    online = dry_iterate(tmp_path / "online", "--trainer", "grpo-online", "--num_iterations", "1", *league[4:])
    (train,) = [line for line in online if "-m verl.trainer.main_ppo" in line]
    assert "+selfplay.misstatement_penalty=1.5" in train


def test_the_online_loop_and_convert_read_one_set_of_reward_terms_and_refuse_a_negative_one():
    from convert.pipeline import ConvertError, Options

    settings = {"misstatement_penalty": "1.5", "joint_weight": 2, "max_moves": 9}  # as +selfplay.* reach the loop
    assert RewardTerms.of(settings) == RewardTerms(joint_weight=2.0, misstatement_penalty=1.5)
    assert RewardTerms.of(settings).named() == {"joint_weight": 2.0, "misstatement_penalty": 1.5}  # the terms on
    assert Options(joint_weight=2.0, misstatement_penalty=1.5).reward_terms() == RewardTerms.of(settings)
    with pytest.raises(ValueError, match="misstatement_penalty must be >= 0, got -1"):
        RewardTerms.of({"misstatement_penalty": -1})
    with pytest.raises(ConvertError, match="joint_weight must be >= 0, got -0.5"):
        Options(joint_weight=-0.5)


# --- fictitious self-play: the pool's share of past checkpoints ------------------------------------


@pytest.mark.parametrize("share", [0.6, 0.9])
def test_past_checkpoints_are_drawn_with_the_share_asked_for_whatever_their_ratings(share):
    from selfplay_gen.league import choose_opponents, opponent_weights

    # the past checkpoints are rated far below the player, so by rating alone they are seldom drawn
    ratings = {"iter_3": 400.0, "warm": 0.0, "iter_1": 50.0, "scripted@0.3": 300.0, "scripted@1": 420.0}
    candidates = ["warm", "iter_1", "scripted@0.3", "scripted@1"]
    past = ["warm", "iter_1"]
    by_rating = opponent_weights(ratings, "iter_3", candidates)
    assert sum(by_rating[n] for n in past) < 0.3
    drawn = choose_opponents(ratings, "iter_3", 20_000, 0, candidates, past=past, past_share=share)
    frequency = {n: drawn.count(n) / len(drawn) for n in candidates}
    assert sum(frequency[n] for n in past) == pytest.approx(share, abs=0.015)
    # within each side the ratings still decide: iter_1 is nearer the player than warm, scripted@1 than @0.3
    assert frequency["iter_1"] > frequency["warm"] and frequency["scripted@1"] > frequency["scripted@0.3"]
    assert frequency["iter_1"] / frequency["warm"] == pytest.approx(by_rating["iter_1"] / by_rating["warm"], rel=0.15)
    # without a share, one draw by rating over the whole pool, as before
    plain = choose_opponents(ratings, "iter_3", 20_000, 0, candidates)
    assert sum(plain.count(n) for n in past) / len(plain) == pytest.approx(sum(by_rating[n] for n in past), abs=0.015)


def test_a_pool_with_no_past_checkpoint_draws_the_scripted_negotiators_alone():
    from selfplay_gen.league import with_share

    weights = {"scripted@0.3": 0.4, "scripted@1": 0.6}
    assert with_share(weights, ["warm"], 0.9) == weights
    with pytest.raises(ValueError, match=r"share of past checkpoints must be in \[0, 1\], got 1.5"):
        with_share(weights, ["scripted@1"], 1.5)


def test_the_dry_run_names_the_past_checkpoints_share_of_the_draws(tmp_path):
    from selfplay_gen.iterate import decisions

    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "2", "--league.past_learners",
        "true", "--league.past_share", "0.7", "--trainers.grpo.games_per_iter", "256",
    )  # fmt: skip
    unrated = {"iter_1": None, "base": None, "scripted@0.3": None, "scripted@0.6": None, "scripted@1": None}
    candidates = ["base", "scripted@0.3", "scripted@0.6", "scripted@1"]
    expected = decisions.league_batches(unrated, "iter_1", candidates, 256, 8, 2_000_000, past=["base"], past_share=0.7)
    drawn = ", ".join(f"{name} {games}" for name, games in expected)
    head = "iteration 2: seat 0 (iter_1, trained) plays, by rating, past checkpoints (base) 70% of the draws"
    assert f"{head}: {drawn} games" in lines
    assert dict(expected)["base"] / 256 == pytest.approx(0.7, abs=0.15)


# --- the run's report read apart from the promotion matches ----------------------------------------


@pytest.mark.parametrize("report_draw", [True, False])
def test_the_report_is_read_on_a_second_development_draw_apart_from_the_promotion_matches(tmp_path, report_draw):
    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "2", "--evaluation.instances", "48",
        "--league.report_draw", "true" if report_draw else "false",
    )  # fmt: skip
    run = tmp_path / "run"
    evals = [line for line in lines if line.startswith("+ gen eval") and "--partner-label" in line]
    promotion = [line for line in evals if f"--out {run}/crossplay/iter_1__base/eval" in line]
    # the promotion match (and, without a second draw, the report too): the first draw, dev seeds from 10**9
    assert len(promotion) == (1 if report_draw else 2) and not any("--seed" in line for line in promotion)
    final = [line for line in evals if "/crossplay/draw_2/" in line]
    if report_draw:
        # every pairing of the report again, on the 48 instances after the promotion matches'
        assert final and all("--num-instances 48 --seed 48 " in line for line in final)
        assert any("--label iter_1 --partner-label base" in line for line in final)
        assert any("--partner-label scripted@1" in line for line in final)
        source = "development draw 2 (48 instances, seeds 1_000_000_048 to 1_000_000_095), apart from the promotion"
    else:
        assert not final
        source = "development draw 1 (48 instances, seeds 1_000_000_000 to 1_000_000_047): the promotion matches'"
    (said,) = [line for line in lines if line.startswith("crossplay report: read on ")]
    assert said.startswith(f"crossplay report: read on {source}")
    (inputs, tested) = [line for line in lines if line.startswith("+ gen eval") and "--from-games" in line]
    assert (f"{run}/crossplay/draw_2/iter_1__base/eval/games" in inputs) is report_draw
    # the final model also against the initial one and the scripted reference on the test split, reported apart
    final = [line for line in evals if f"{run}/crossplay/test/" in line]
    assert len(final) == 2 and all("--instances test --num-instances 256 -k 4 --label iter_2" in f for f in final)
    assert {f.split("--partner-label ")[1].split()[0] for f in final} == {"base", "scripted@1"}
    assert tested.endswith(f"--out {run}/report/crossplay_test") and "iter_1" not in tested.replace(str(run), "")
    assert "crossplay report of the final model: read on the test split (256 instances from seed 2_000_000_000)" in (
        "\n".join(lines)
    )


# --- skill levels as strength ----------------------------------------------------------------------


def test_quantile_levels_order_by_win_rate_against_the_scripted_references(tmp_path):
    from selfplay_gen.games.negotiation import skill
    from selfplay_gen.games.negotiation.prompts import SKILLS

    files = []
    for strength in (0.0, 0.5, 1.0):
        for reference in skill.REFERENCES:
            for seat in (0, 1):
                own, other = (strength, reference) if seat == 0 else (reference, strength)
                out = tmp_path / f"s{strength}_r{reference}_seat{seat}.jsonl"
                strengths = ["--scripted-strength", f"{own}", "--partner-scripted-strength", f"{other}"]
                play(out, *strengths, "-n", "12", "-k", "1", "--seed", str(100 * len(files)))
                files.append(f"{seat}={out}")
    out = tmp_path / "levels.jsonl"
    result = CliRunner().invoke(skill.levels_command, [*files, "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    records = list(read_games(out))
    assert len(records) == 3 * 3 * 2 * 12
    judged = json.loads(out.with_suffix(".levels.json").read_text())
    assert "| expert | scripted@1 | 24 |" in result.output  # the table: a row per level and reference
    for reference in ("scripted@0.3", "scripted@0.6", "scripted@1"):
        shares = [judged[level][reference]["win_share"]["mean"] for level in skill.LEVELS]
        shares = [0.5 if share is None else share for share in shares]  # every game tied: an even match
        points = [judged[level][reference]["points"]["mean"] for level in skill.LEVELS]
        assert shares[0] <= shares[1] <= shares[2] and shares[0] < shares[2], reference  # novice to expert
        assert points[0] < points[1] < points[2], reference
        assert all(0 <= judged[level][reference]["joint"]["mean"] <= 1 for level in skill.LEVELS)
    # each game's graded seat is told its level, in words that never tell it to give way; the reference is not
    for record in records:
        graded = (
            0 if record["settings"]["seat1"]["strength"] in skill.REFERENCES and "skill" in record["players"][0] else 1
        )
        level = record["players"][graded]["skill"]
        assert SKILLS[level] in record["players"][graded]["messages"][0]["content"]
        assert not any(text in record["players"][1 - graded]["messages"][0]["content"] for text in SKILLS.values())
    assert not any(word in text for text in SKILLS.values() for word in ("accept", "concede", "little", "readily"))
    # the games convert into the warm start's chats with each level's prompt
    summary = convert(out, tmp_path / "sft", "--format", "sft", "--top-fraction", "1")
    assert summary["seats_retokenized"] == 2 * len(records)


def test_a_skill_run_chooses_level_games_by_quantile_and_judges_every_level_on_the_references(tmp_path):
    from selfplay_gen.games.negotiation import skill

    run = tmp_path / "run"
    lines = dry_iterate(
        tmp_path, "--league.skill_levels", "novice,intermediate,expert", "--warm.policy", "teacher",
        "--warm.games", "360", "--num_iterations", "1", "--league_size", "1",
    )  # fmt: skip
    warm = [line for line in lines if line.startswith("+ gen ") and "/warm/gen/levels/" in line]
    cells = len(skill.PLAYER_STRENGTHS) * len(skill.REFERENCES) * 2
    assert len(warm) == cells and all("--num-games 10 " in line and "--skill" not in line for line in warm)
    seeds = sorted(int(line.split("--seed ")[1].split()[0]) for line in warm)
    assert seeds == list(range(500_000_000, 500_000_000 + 10 * cells, 10))  # no instance twice
    assert any(
        "--scripted-strength 1 --partner-scripted-strength 0.2 " in line and "/levels/seat1_0.2_vs_1/" in line
        for line in warm
    )
    (levels,) = [line for line in lines if "-m selfplay_gen.games.negotiation.skill" in line]
    assert f"1={run}/warm/gen/levels/seat1_0.2_vs_1/games.jsonl" in levels
    assert levels.endswith(f"--out {run}/warm/gen/games.jsonl --levels novice\\,intermediate\\,expert")
    # each model's levels: in seat 0 against every reference, and against itself unconditioned in both seats
    judged = [line for line in lines if f"{run}/warm/eval/skill/" in line and line.startswith("+ gen ")]
    for level in skill.LEVELS:
        for reference in skill.REFERENCES:
            (line,) = [j for j in judged if f"/skill/{level}__scripted_{reference:g}/" in j]
            assert f"--partner-scripted-strength {reference:g}" in line and f"--skill {level}\\," in line
        assert any(f"/skill/{level}__unconditioned/" in j and "--partner-backend sglang" in j for j in judged)
        assert any(f"/skill/unconditioned__{level}/" in j and f"--skill \\,{level}" in j for j in judged)
    assert not any(f"{run}/base/eval/skill/" in line for line in lines)  # the base model has no levels


def test_the_final_models_levels_are_judged_on_the_test_split_in_both_seat_orders(tmp_path):
    from selfplay_gen.evaluation.splits import TEST

    skilled = ["--league.skill_levels", "novice,intermediate,expert", "--warm.policy", "teacher", "--warm.games", "360"]
    skilled += ["--num_iterations", "0", "--league_size", "1", "--evaluation.test_instances", "8"]
    lines = dry_iterate(tmp_path, *skilled, "--evaluation.test_games_per_instance", "2")
    tested = [line for line in lines if line.startswith("+ gen ") and "/warm/eval/skill_test/skill/" in line]
    assert len(tested) == 8 and all(f"--seed {TEST.start} --num-games 16 --games-per-instance 2 " in t for t in tested)
    for level in ("novice", "intermediate", "expert"):
        (first,) = [t for t in tested if f"/skill/{level}__scripted_1/" in t]
        assert "--backend sglang" in first and "--partner-scripted-strength 1" in first
        assert f"--skill {level}\\," in first
        (second,) = [t for t in tested if f"/skill/scripted_1__{level}/" in t]
        assert "--backend scripted --scripted-strength 1 " in second and "--partner-backend sglang" in second
        assert f"--skill \\,{level}" in second
    assert sum("unconditioned" in t for t in tested) == 2  # the highest level against the model's own play, both ways
    dev_only = dry_iterate(tmp_path / "dev", *skilled, "--evaluation.test_split", "false")
    assert not any("/skill_test/" in line for line in dev_only)


# --- a population of diverse partners --------------------------------------------------------------


def test_a_population_gives_every_partner_its_equal_share_whatever_the_ratings():
    from selfplay_gen.iterate import decisions

    ratings = {"iter_2": 400.0, "warm": 0.0, "iter_1": 50.0, "scripted@0.2": 100.0, "scripted@0.6": 300.0}
    ratings |= {"scripted@1": 420.0}
    candidates = ["warm", "iter_1", "scripted@0.2", "scripted@0.6", "scripted@1"]
    by_rating = dict(decisions.league_batches(ratings, "iter_2", candidates, 8 * 50, 8, seed=3))
    population = dict(decisions.league_batches(ratings, "iter_2", candidates, 8 * 50, 8, seed=3, population=True))
    assert population == {name: 80 for name in candidates}  # 10 groups each, drawn by no rating
    assert by_rating != population and by_rating.get("warm", 0) < 80  # by rating, the far-below warm start is rare
    # the past checkpoints together keep their share, each side split evenly (groups left over to the earlier
    # names); a self-play share comes first
    mixed = decisions.league_batches(
        ratings, "iter_2", candidates, 8 * 50, 8, seed=3, self_play=0.2, past=["warm", "iter_1"], past_share=0.5,
        population=True,
    )  # fmt: skip
    assert mixed[0] == ("iter_2", 80)
    assert dict(mixed[1:]) == {"warm": 80, "iter_1": 80, "scripted@0.2": 56, "scripted@0.6": 56, "scripted@1": 48}


def test_the_dry_run_shows_a_population_of_diverse_partners(tmp_path):
    lines = dry_iterate(
        tmp_path, "--trainer", "grpo", "--league_size", "2", "--num_iterations", "2", "--league.population", "true",
        "--league.scripted", "0.2,0.4,0.6,0.8,1", "--trainers.grpo.games_per_iter", "400",
    )  # fmt: skip
    first = "iteration 1: seat 0 (base, trained) plays, an equal share each (population): scripted@0.2 80, "
    assert f"{first}scripted@0.4 80, scripted@0.6 80, scripted@0.8 80, scripted@1 80 games" in lines
    second = next(line for line in lines if line.startswith("iteration 2: seat 0 (iter_1, trained) plays"))
    assert "base 72" in second and "scripted@1 64" in second  # 50 groups over six partners: 9, 9, 8, 8, 8, 8


# --- several partners within a group ---------------------------------------------------------------


def play_the_plan(tmp_path: Path, partners: int) -> tuple[Path, list[str]]:
    """A DPO league's first iteration as its dry run plans it, each planned game played by scripted negotiators
    (the full-strength one standing in for the trained model), joined as the run joins them."""
    import shlex

    lines = dry_iterate(
        tmp_path, "--trainer", "dpo", "--league_size", "1", "--num_iterations", "1", "--trainers.dpo.games_per_iter",
        "64", "--league.partners_per_group", str(partners),
    )  # fmt: skip
    run = tmp_path / "run"
    planned = [line for line in lines if line.startswith("+ gen ") and f"{run}/iter_001/gen/vs/" in line]
    for line in planned:
        words = shlex.split(line[2:])
        value = {key: words[words.index(key) + 1] for key in ("--seed", "--num-games", "--games-per-instance")}
        numbered = words[words.index("--first-game-index") :][:2] if "--first-game-index" in words else []
        out, strength = words[words.index("--out") + 1], words[words.index("--partner-scripted-strength") + 1]
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        play(Path(out), "--scripted-strength", "1", "--partner-scripted-strength", strength, "--seed",
             value["--seed"], "-n", value["--num-games"], "-k", value["--games-per-instance"], *numbered)  # fmt: skip
    (cat,) = [line for line in lines if line.startswith("+ cat ") and "/iter_001/gen/games.jsonl" in line]
    parts = cat[len("+ cat ") :].split(" > ")[0].split()
    games = tmp_path / "games.jsonl"
    games.write_text("".join(Path(part).read_text() for part in parts))
    return games, planned


def test_several_partners_share_a_group_so_its_games_differ_by_partner(tmp_path):
    from convert.cli import main as convert_main

    one, planned = play_the_plan(tmp_path / "one", 1)
    assert all("--games-per-instance 8" in line for line in planned)
    # one partner a group: the scripted stand-in plays alike in every game of a group, so DPO finds no pair
    result = CliRunner().invoke(convert_main, [str(one), "--out-dir", str(tmp_path / "one_dpo"), "--format", "dpo"])
    assert result.exit_code == 3 and "no training rows are left" in result.output
    mixed, planned = play_the_plan(tmp_path / "two", 2)
    assert all("--games-per-instance 4" in line for line in planned)
    assert sum(int(line.split("--num-games ")[1].split()[0]) for line in planned) == 64
    records = {r["game_id"]: r for r in read_games(mixed)}
    by_instance: dict[str, list] = {}
    for record in records.values():
        by_instance.setdefault(record["instance_id"], []).append(record["settings"]["seat1"]["strength"])
    assert len(by_instance) == 8 and all(len(strengths) == 8 for strengths in by_instance.values())
    assert sum(len(set(strengths)) > 1 for strengths in by_instance.values()) >= 4  # most groups: two partners
    summary = convert(mixed, tmp_path / "two_dpo", "--format", "dpo", "--seat", "0")
    assert summary["dpo"]["pairs"] > 0
    import pandas as pd

    for row in pd.read_parquet(tmp_path / "two_dpo" / "train.parquet")["extra_info"]:
        chosen, rejected = records[row["chosen_game_id"]], records[row["rejected_game_id"]]
        assert chosen["instance_id"] == rejected["instance_id"]
        assert chosen["settings"]["seat1"]["strength"] != rejected["settings"]["seat1"]["strength"]
    from selfplay_gen.iterate.cli import iterate_command

    odd = CliRunner().invoke(iterate_command, ["--dry-run", "--league.partners_per_group", "3"])
    assert odd.exit_code == 2 and "3 partners cannot share a group of 8 games evenly" in odd.output


def test_a_resumed_stage_records_every_layer_of_its_mixed_groups_again(tmp_path):
    from selfplay_gen.iterate import competition
    from selfplay_gen.iterate.config import Iteration, ServerSettings, Tools, Warm
    from selfplay_gen.iterate.config import League as LeagueSettings
    from selfplay_gen.iterate.loop import Run
    from selfplay_gen.iterate.stages import Stage

    cfg = Iteration(
        run_dir=tmp_path / "run", initial_model="/m0", game="negotiation", num_iterations=1, league_size=1,
        warm=Warm(policy="none"), league=LeagueSettings(scripted=(0.3, 1.0), partners_per_group=2),
        servers=ServerSettings(urls=("http://127.0.0.1:9",)), tools=Tools(python=sys.executable, gen=("false",)),
    )  # fmt: skip
    run = Run(cfg)
    run.advance("/m0", "base", run.run_dir / "base")
    stage = Stage("iter_001", "iter_1", run.run_dir / "iter_001", 1_000_000)
    out = stage.dir / "gen"
    layers = [{"scripted@0.3": 8, "scripted@1": 8}, {"scripted@1": 8, "scripted@0.3": 8}]
    for layer, drawn in enumerate(layers):
        for k, name in enumerate(drawn):
            path = competition.layer_file(out, name, layer)
            path.parent.mkdir(parents=True, exist_ok=True)
            seed = str(1_000_000 + 2 * k)
            play(path, "--scripted-strength", "1", "--partner-scripted-strength", name.split("@")[1], "--seed", seed,
                 "-n", "8", "-k", "4", "--first-game-index", str(4 * layer))  # fmt: skip
    chosen = {"player": "base", "games": {"scripted@0.3": 16, "scripted@1": 16}, "layers": layers}
    (out / competition.OPPONENTS_FILE).write_text(json.dumps(chosen))
    comp = competition.Competition(run)
    comp.start(1)
    comp.replay(stage)
    wins = comp.league.wins
    assert sum(wins["base"].values()) + sum(wins[n]["base"] for n in ("scripted@0.3", "scripted@1")) == 32
    assert competition.layer_file(out, "scripted@1", 1) == out / "vs" / "scripted_1" / "layer_2" / "games.jsonl"
    competition.layer_file(out, "scripted@1", 1).unlink()
    with pytest.raises(FileNotFoundError, match=r"scripted_1/layer_2/games.jsonl: missing"):
        competition.Competition(run).replay(stage)
