"""TextArena's two-player environments through the whole loop, with no change to their code:
`selfplay-gen play --game textarena:ENV_ID` with scripted seats, `selfplay-convert`, `selfplay-gen
eval`; the adapter against the environment called directly; the scripted references' strength
(minimax never loses, Kuhn Poker's equilibrium is worth -1/18 a hand to the first to act)."""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
from itertools import permutations
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from dry_runs import config_of

from convert.cli import main as convert_main
from selfplay_gen import games
from selfplay_gen.backends.base import Backend, Generation, SamplingParams
from selfplay_gen.cli import main
from selfplay_gen.games import GameConfig
from selfplay_gen.games.move_formats import BOXED_ASK, NO_BOXED_MOVE
from selfplay_gen.games.textarena import fixes, kuhn_strategy
from selfplay_gen.games.textarena import game as adapter
from selfplay_gen.players import LLMPlayer
from selfplay_gen.records import GameWriter, read_games
from selfplay_gen.runner import plan_games, run_games
from selfplay_gen.viewer.replay import describe

ta = pytest.importorskip("textarena", reason="the selfplay-gen[textarena] extra is not installed")

SPIRAL = ("TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0")
# two-player environments a random legal player finishes (each ends by its own rules); those left
# out need what a run here cannot have (nltk's word lists downloaded at run time: Hangman,
# WordChains, LetterAuction, DontSayIt; an OpenRouter key: Debate) or do not load on this Python
# (Chess, Checkers: f-strings of Python 3.12), see `adapter.check_env`
PLAYED = (*SPIRAL, "LiarsDice-v0", "ConnectFour-v0", "Nim-v0", "SimpleTak-v0", "Othello-v0-tiny")
PLAYED += ("IteratedRockPaperScissors-v0", "IndianPoker-v0-short", "TruthAndDeception-v0")


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def convert(games_file: Path, out: Path, fmt: str) -> list[dict]:
    result = CliRunner().invoke(
        convert_main, [str(games_file), "--format", fmt, "--top-fraction", "1", "--out-dir", str(out)]
    )
    assert result.exit_code == 0, result.output
    return [row for split in ("train", "val") for row in pq.read_table(out / f"{split}.parquet").to_pylist()]


def played_twice(tmp_path: Path, base: list[str], *option: str) -> list[tuple[dict, dict]]:
    """The games of one `selfplay-gen` command line without and with `option`, paired game by game."""
    run(*base, "--out", str(tmp_path / "without.jsonl"))
    run(*base, *option, "--out", str(tmp_path / "with.jsonl"))
    return list(zip(read_games(tmp_path / "without.jsonl"), read_games(tmp_path / "with.jsonl"), strict=True))


async def play(env_id: str, seed: int, policies: tuple[str, str], moves: list | None = None):
    """One game of the adapter with scripted seats; `moves` gets (seat, text) of every turn."""
    game = games.get(f"textarena:{env_id}")()
    start = game.reset(game.instance_type.from_seed(seed))
    seats = [game.scripted_player(s, seed=(seed, s), policy=p) for s, p in enumerate(policies)]
    for s, seat in enumerate(seats):
        seat.observe(start.told[s], None)
    while not game.done:
        mover = game.to_move
        text = await seats[mover].act()
        if moves is not None:
            moves.append((mover, text))
        step = game.step(mover, text)
        for s, seat in enumerate(seats):
            seat.observe(step.told[s], step)
    return game


@pytest.mark.parametrize("env_id", SPIRAL)
def test_the_adapter_plays_as_the_environment_called_directly(env_id):
    """Same seed, same moves: the environment as TextArena makes it (wrappers and all, with the
    adapter's one correction, `fixes.py`, applied to Kuhn Poker's) gives the same turns, the same
    end and the same rewards."""
    for seed in range(4):
        moves: list = []
        game = asyncio.run(play(env_id, seed, ("random", "random"), moves))
        env = ta.make(env_id)
        env.reset(num_players=2, seed=seed)
        done = False
        for mover, text in moves:
            assert not done and env.state.current_player_id == mover
            fixes.before_step(env.env.env, text)  # under its two wrappers
            done, _ = env.step(action=text)
        rewards, info = env.close()
        assert done and game.outcome is not None
        assert game.outcome.rewards == (float(rewards[0]), float(rewards[1]))
        assert game.outcome.details["reason"] == " ".join(sorted({i["reason"] for i in info.values()}))


def test_interleaved_games_draw_as_a_game_alone():
    """Kuhn Poker deals from Python's global random: two games stepped in turn deal as each alone."""
    alone = [asyncio.run(play("KuhnPoker-v0", seed, ("random", "random"))).events() for seed in (3, 4)]

    async def together():
        return await asyncio.gather(*(play("KuhnPoker-v0", seed, ("random", "random")) for seed in (3, 4)))

    assert [g.events() for g in asyncio.run(together())] == alone


class MoveListBackend(Backend):
    """Stands in for a model, token in, token out: plays one of the moves the newest user turn
    lists in quotes ('[4]', '[bet]'), at random per session and turn."""

    name = model = "move-list"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids, params, *, session, messages=None) -> Generation:
        last_user = self.tokenizer.decode(prompt_ids).rsplit("<|im_start|>user\n", 1)[-1]
        moves = re.findall(r"'(\[[^\]']+\])'", last_user) or ["[check]"]
        text = random.Random(f"{session}/{len(prompt_ids)}").choice(moves)
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return Generation(ids, [-0.5] * len(ids), "stop", len(prompt_ids))


@pytest.mark.parametrize("env_id", ["TicTacToe-v0", "KuhnPoker-v0"])
def test_model_seats_play_token_exact_and_convert_to_grpo_groups_per_instance_and_seat(env_id, tmp_path, tokenizer):
    """Model seats (a stand-in backend through the real tokenizer and chat template) keep each
    seat's context append-only over the environment's messages, and their games convert into one
    GRPO row per instance and seat holding its K games."""
    backend, config, k = MoveListBackend(tokenizer), GameConfig(f"textarena:{env_id}"), 4

    def seat(spec, s, game, start):
        return LLMPlayer(s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}")

    instances = games.seeded(config.name, range(6))
    out = tmp_path / "games.jsonl"
    with GameWriter(out) as writer:
        settings = {"backend": "test", "sampling": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16}}
        asyncio.run(
            run_games(plan_games(instances, k, 6 * k), (seat, seat), config, writer, 4, settings, progress=False)
        )
    records = list(read_games(out))
    assert len(records) == 24 and all(r["failure"] is None and r["outcome"]["terminated"] for r in records)
    assert all(p["kind"] == "llm" and p["invariant_ok"] for r in records for p in r["players"])

    result = CliRunner().invoke(convert_main, [str(out), "--val-fraction", "0", "--out-dir", str(tmp_path / "grpo")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "grpo" / "convert_summary.json").read_text())
    rows = pq.read_table(tmp_path / "grpo" / "train.parquet").to_pylist()
    assert summary["rollout_n"] == k and summary["grpo"]["rows"] == len(rows) > 0
    assert len(rows) + summary["grpo"]["dropped_constant"] == 2 * 6
    for row in rows:
        info = row["extra_info"]
        assert len(info["game_ids"]) == k and len({g.split("/")[0] for g in info["game_ids"]}) == 1


def test_kuhn_bets_go_into_the_pot():
    """TextArena's Kuhn Poker says a bet adds a chip to the pot and never adds it; through the
    adapter a called bet is won for two chips, a checked hand for one, as its rules say."""
    for moves, stake in ((["[bet]", "[call]"], 2), (["[check]", "[check]"], 1), (["[bet]", "[fold]"], 1)):
        game = games.get("textarena:KuhnPoker-v0")()
        game.reset(game.instance_type.from_seed(0))
        state = game.env.state.game_state
        before = dict(state["player_chips"])
        for text in moves:
            assert game.step(game.to_move, text).valid
        # from one hand's ante paid to the next's: the stake won and lost
        assert sorted(state["player_chips"][s] - before[s] for s in range(2)) == [-stake, stake]


def test_kuhn_rewards_each_seats_chips_a_hand_in_the_chips_reward_mode(tmp_path):
    """`--reward-mode chips`: the same games as the match's win or loss decides, each seat rewarded with its
    chips won a hand instead; a game without chips refuses the mode."""
    base = ["--game", "textarena:KuhnPoker-v0", "--backend", "scripted", "--scripted-policy", "random"]
    base += ["-n", "24", "-k", "2", "-q"]
    pairs = played_twice(tmp_path, base, "--reward-mode", "chips")
    for outcome, chips in pairs:
        assert outcome["events"] == chips["events"] and chips["settings"]["run"]["reward_mode"] == "chips"
        won, hands = chips["outcome"]["chips"], chips["outcome"]["hands"]
        assert chips["outcome"]["rewards"] == [won[0] / hands, won[1] / hands] and sum(won) == 0
        assert set(outcome["outcome"]["rewards"]) <= {-1, 0, 1}
        assert (won[0] > won[1]) == (outcome["outcome"]["rewards"][0] > outcome["outcome"]["rewards"][1])
    assert len({tuple(c["outcome"]["rewards"]) for _, c in pairs}) > 3  # more than win, draw and loss

    refused = CliRunner().invoke(
        main, ["--game", "textarena:TicTacToe-v0", "--reward-mode", "chips", "-n", "1", "--out", str(tmp_path / "t")]
    )
    assert refused.exit_code == 2
    assert "the reward mode chips needs a game of chips (Kuhn Poker); TicTacToe-v0 keeps none" in refused.output


def test_a_boxed_move_is_the_last_boxed_answer_and_the_reasoning_before_it_is_not_a_move():
    """`move_format` boxed (SPIRAL's): the seats are asked to reason step by step at the end of what they are told
    before each move, the last \\boxed{...} of a response is its move (bracketed as TextArena brackets a bare move;
    Qwen writes \\boxed{\\text{call}}), moves named in the reasoning are not, and a response that boxes nothing is
    refused without the environment seeing it: its mover is told why, its partner sees nothing of it."""
    game = GameConfig("textarena:KuhnPoker-v0", options={"move_format": "boxed"}).new()
    start = game.reset(game.instance_type.from_seed(3))
    mover = game.to_move
    assert start.told[mover][-1] == BOXED_ASK and BOXED_ASK not in start.told[1 - mover]
    assert not any(BOXED_ASK in system for system in start.system)
    refused = game.step(mover, "I hold a card. [bet] looks strong, so I will [bet].")
    assert not refused.valid and refused.error == NO_BOXED_MOVE and game.to_move == mover
    assert refused.told[mover] == (f"[GAME] {NO_BOXED_MOVE}", BOXED_ASK) and refused.told[1 - mover] == ()
    assert game.events()[-1]["text"].startswith("I hold a card") and game.invalid_moves == 1
    made = game.step(mover, "Betting with [bet] risks a chip; [check] is safer.\n$\\boxed{\\text{check}}$")
    assert made.valid and game.events()[-1]["text"] == "[check]"  # LaTeX's \text{} taken off, as SPIRAL does
    assert f"[Player {mover}] [check]" in made.told[1 - mover]  # the partner sees the move, not the reasoning
    assert made.told[1 - mover][-1] == BOXED_ASK and BOXED_ASK not in made.told[mover]  # the partner moves next
    plain = GameConfig("textarena:KuhnPoker-v0").new()
    plain.reset(plain.instance_type.from_seed(3))
    assert plain.step(mover, "Betting with [bet] risks a chip; [check] is safer.").valid
    assert plain.events()[-1]["text"].startswith("Betting")  # plain: the environment reads the first, [bet]
    with pytest.raises(ValueError, match="unknown move format 'latex'"):
        GameConfig("textarena:KuhnPoker-v0", options={"move_format": "latex"})


def test_scripted_seats_answer_boxed_and_the_strategy_reads_the_same_games(tmp_path):
    """Scripted seats put their moves in \\boxed{} in a boxed game, so the same seeds play the same games;
    the records say their move format, and Kuhn Poker's strategy reads them as it reads plain ones."""
    base = ["--game", "textarena:KuhnPoker-v0", "--backend", "scripted", "--scripted-policy", "equilibrium"]
    base += ["-n", "16", "-k", "2", "-q"]
    pairs = played_twice(tmp_path, base, "--move-format", "boxed")
    for plain, boxed in pairs:
        assert plain["events"] == boxed["events"] and plain["outcome"]["rewards"] == boxed["outcome"]["rewards"]
        turns = [m["content"] for m in boxed["players"][0]["messages"] if m["role"] == "assistant"]
        assert turns and all(re.fullmatch(r"\\boxed\{\[\w+\]\}", t) for t in turns)
        assert boxed["outcome"]["move_format"] == "boxed" and "move_format" not in plain["outcome"]
        assert kuhn_strategy.decisions(plain) == kuhn_strategy.decisions(boxed)
    refused = CliRunner().invoke(
        main, ["--game", "negotiation", "--move-format", "boxed", "-n", "1", "--out", str(tmp_path / "m.jsonl")]
    )
    assert refused.exit_code == 2 and "does not take the options {'move_format': 'boxed'}" in refused.output


@pytest.mark.parametrize(
    ("env_id", "policies"),
    [
        ("TicTacToe-v0", ("random", "minimax")),
        ("KuhnPoker-v0", ("equilibrium", "random")),
        ("SimpleNegotiation-v0", ("random", "random")),
    ],
)
def test_spirals_games_play_convert_and_evaluate_through_the_cli(env_id, policies, tmp_path):
    name, out = f"textarena:{env_id}", tmp_path / "games.jsonl"
    args = ["--game", name, "--backend", "scripted", "--scripted-policy", policies[0], "-k", "4", "-q"]
    run(*args, "--partner-scripted-policy", policies[1], "-n", "24", "--out", str(out))
    records = list(read_games(out))
    assert len(records) == 24 and {r["game"] for r in records} == {name}
    assert all(r["outcome"]["terminated"] and r["failure"] is None for r in records)
    assert {(r["settings"]["seat0"]["policy"], r["settings"]["seat1"]["policy"]) for r in records} == {policies}
    if env_id == "TicTacToe-v0":  # minimax in seat 1 never loses
        assert all(r["outcome"]["rewards"][1] >= 0 for r in records)

    # --resume plays exactly the missing games, turn for turn the same
    part = tmp_path / "part.jsonl"
    lines = out.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:10]))
    run(*args, "--partner-scripted-policy", policies[1], "-n", "24", "--out", str(part), "--resume")

    def played(records):
        return {r["game_id"]: (r["players"], r["events"], r["outcome"]) for r in records}

    assert played(read_games(part)) == played(records)

    sft = convert(out, tmp_path / "sft", "sft")
    assert sft and {row["data_source"] for row in sft} == {f"selfplay_{name}"}
    dpo = convert(out, tmp_path / "dpo", "dpo")
    assert dpo and all(row["chosen"] != row["rejected"] for row in dpo)

    view = describe(records[0])
    assert (
        dict(view["detail"]["outcome_rows"])["environment"]
        == f"TextArena {env_id}, seed {records[0]['instance']['seed']}"
    )

    report = tmp_path / "eval"
    run(
        "eval",
        *args,
        "--partner-scripted-policy",
        policies[1],
        "--limit-instances",
        "6",
        "--out",
        str(report),
        "--bootstrap",
        "200",
    )
    metrics = json.loads((report / "metrics.json").read_text())
    a, b = (f"scripted-{p}" for p in policies)
    assert metrics["game"] == name and set(metrics["models"]) == ({a, b} if a != b else {a})
    text = (report / "report.md").read_text()
    assert f"# Evaluation: {name}" in text and "## Wins" in text
    if a != b:
        (pair,) = metrics["wins"]
        assert pair["models"] == [a, b] and pair["seat0"]["games"] == pair["seat1"]["games"] == 24
        assert set(metrics["ratings"]) == {a, b}
        # Kuhn Poker's chips a hand, where its value is read (each record keeps the seats' chips), and each
        # player's strategy: the equilibrium's is worth the game's value against itself, random play's less
        assert ("chips_per_hand" in pair["both"]) == (env_id == "KuhnPoker-v0")
        assert ("## Strategy" in text) == (env_id == "KuhnPoker-v0") == bool(metrics["strategies"])
        if env_id == "KuhnPoker-v0":
            equilibrium, played_randomly = metrics["strategies"][a], metrics["strategies"][b]
            assert equilibrium["equilibrium_first"]["mean"] == pytest.approx(-1 / 18)
            assert equilibrium["equilibrium_second"]["mean"] == pytest.approx(1 / 18)
            assert played_randomly["equilibrium_first"]["mean"] < -1 / 18 - 0.05
            assert played_randomly["best_response_second"]["mean"] < 1 / 18 - 0.2
        if env_id == "TicTacToe-v0":  # random play against minimax
            assert pair["both"]["win"]["mean"] == 0 and pair["both"]["loss"]["mean"] > 0.5
            assert metrics["ratings"][b]["rating"] > metrics["ratings"][a]["rating"]


@pytest.mark.parametrize("env_id", PLAYED)
def test_two_player_environments_play_convert_and_evaluate(env_id, tmp_path):
    name, out = f"textarena:{env_id}", tmp_path / "games.jsonl"
    run("--game", name, "--backend", "scripted", "-n", "4", "-k", "2", "--max-moves", "200", "--out", str(out), "-q")
    records = list(read_games(out))
    assert len(records) == 4 and all(r["outcome"]["terminated"] for r in records)
    assert any(r["outcome"]["termination"] == adapter.GAME_OVER for r in records)
    assert convert(out, tmp_path / "sft", "sft")
    report = tmp_path / "eval"
    run(
        "eval",
        "--game",
        name,
        "--backend",
        "scripted",
        "--limit-instances",
        "2",
        "-k",
        "1",
        "--out",
        str(report),
        "-q",
        "--bootstrap",
        "100",
    )
    assert json.loads((report / "metrics.json").read_text())["models"]["scripted-random"]["games"] == 2


@pytest.mark.parametrize(
    ("env_id", "why"),
    [
        ("Sudoku-v0", "is not a two-player environment"),
        ("Taboo-v0", "is not a two-player environment"),
        ("NoSuchGame-v0", "TextArena 0.7.4 has no environment 'NoSuchGame-v0'"),
    ],
)
def test_an_environment_that_two_cannot_play_is_refused(env_id, why):
    result = CliRunner().invoke(
        main, ["--game", f"textarena:{env_id}", "--backend", "scripted", "-n", "1", "--out", "x.jsonl"]
    )
    assert result.exit_code == 2 and why in result.output


def test_without_textarena_the_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "textarena", None)
    with pytest.raises(
        ValueError, match=r'needs TextArena, which is not installed: pip install "selfplay-gen\[textarena\]"'
    ):
        adapter.make_env("TicTacToe-v0")


def test_a_policy_the_game_has_not_is_refused(tmp_path):
    args = ["--game", "textarena:KuhnPoker-v0", "--backend", "scripted", "--partner-scripted-policy", "minimax"]
    result = CliRunner().invoke(main, [*args, "-n", "1", "--out", str(tmp_path / "g.jsonl")])
    assert result.exit_code == 2
    assert "--partner-scripted-policy: the minimax policy plays TextArena's TicTacToe environments" in result.output


def test_minimax_never_loses_to_random_play():
    results = [
        asyncio.run(play("TicTacToe-v0", seed, policies)).outcome.rewards[policies.index("minimax")]
        for seed in range(60)
        for policies in permutations(("minimax", "random"))
    ]
    assert min(results) == 0 and sum(r == 1 for r in results) > 0.8 * len(results)
    assert all(
        r == 0
        for r in (asyncio.run(play("TicTacToe-v0", s, ("minimax", "minimax"))).outcome.rewards[0] for s in range(5))
    )


def test_kuhn_equilibrium_is_worth_minus_one_eighteenth_to_the_first_to_act():
    """Exactly, by the strategy's probabilities over the six deals (`kuhn_strategy`), and as measured in
    games: every hand of 2000 games of the adapter (6000 hands), the chips the first to act won, within
    three standard errors (about 0.05) of -1/18."""
    exact = kuhn_strategy.first_to_act_chips(kuhn_strategy.EQUILIBRIUM, kuhn_strategy.EQUILIBRIUM)
    assert exact == pytest.approx(-1 / 18, abs=1e-12)

    async def hands(games_played: int) -> list[int]:
        won = []
        for seed in range(games_played):
            game = games.get("textarena:KuhnPoker-v0")()
            game.reset(game.instance_type.from_seed(seed))
            seats = [game.scripted_player(s, seed=(seed, s), policy="equilibrium") for s in range(2)]
            state = game.env.state.game_state
            first, start, hand = state["starting_player"], dict(state["player_chips"]), state["current_round"]
            while not game.done:
                game.step(game.to_move, await seats[game.to_move].act())
                if state["current_round"] != hand:  # over, and the next hand's ante paid (as the last one's was)
                    won.append(state["player_chips"][first] - start[first])
                    first, start, hand = state["starting_player"], dict(state["player_chips"]), state["current_round"]
        return won

    won = asyncio.run(hands(2000))
    mean = sum(won) / len(won)
    spread = (sum((w - mean) ** 2 for w in won) / (len(won) - 1)) ** 0.5
    assert len(won) == 6000 and abs(mean - -1 / 18) < 3 * spread / len(won) ** 0.5


def test_spirals_recipe_is_planned_by_iterate(tmp_path):
    """Online GRPO on TicTacToe from the rules alone: no warm start, every instance a row per seat
    (GRPO's groups are then per instance and seat: a per-role baseline), each model evaluated; with
    SPIRAL's boxed moves, the rollouts' rows and every evaluation play that format."""
    from selfplay_gen.iterate.cli import iterate_command

    run_dir, name = tmp_path / "run", "textarena:TicTacToe-v0"
    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(run_dir), "--tools.gen", "gen"]
    common += ["--tools.convert", "conv", "--verl.python", sys.executable]
    recipe = ["--trainer", "grpo-online", "--num_iterations", "2", "--warm.policy", "none"]
    recipe += ["--trainers.grpo_online.steps", "20"]
    result = CliRunner().invoke(iterate_command, [*common, "--game", name, *recipe])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    init = f"+ gen init --game {name} --num-train 160 --num-test 16 --seed 1000000 --out-dir {run_dir}/iter_001/gen"
    assert f"{init} --overwrite" in lines  # 20 steps x 16 rows, two rows (seats) an instance
    trains = [line for line in lines if "-m verl.trainer.main_ppo" in line]
    assert len(trains) == 2 and f"data.train_files={run_dir}/iter_001/gen/train.parquet" in trains[0]
    evals = [line for line in lines if line.startswith("+ gen eval")]
    assert evals and all(config_of(line, result.output)["game"] == name for line in evals)
    assert not any("--scripted-policy teacher" in line for line in lines)  # from the rules alone

    boxed = CliRunner().invoke(iterate_command, [*common, "--game", name, *recipe, "--move_format", "boxed"])
    assert boxed.exit_code == 0, boxed.output
    inits = [line for line in boxed.output.splitlines() if line.startswith("+ gen init")]
    assert inits and all("--move-format boxed" in line for line in inits)  # the rollouts' rows carry it
    evals = [line for line in boxed.output.splitlines() if line.startswith("+ gen eval")]
    assert evals and all(config_of(line, boxed.output)["move_format"] == "boxed" for line in evals)

    refused = CliRunner().invoke(iterate_command, [*common, "--game", "textarena:Sudoku-v0", *recipe])
    assert refused.exit_code == 2 and "is not a two-player environment" in refused.output


def test_an_invalid_move_is_refused_with_the_environments_reason_then_lost():
    """TicTacToe lets a player retry one invalid move (the mover is told why; the partner, as in
    TextArena, sees the attempt, not the reason) and ends the game at the second with a loss for
    the mover: TextArena's own rule."""
    game = games.get("textarena:TicTacToe-v0")()
    game.reset(game.instance_type.from_seed(0))
    assert game.step(0, "[4]").valid
    taken = game.step(1, "[4]")
    assert not taken.valid and taken.error is not None and "cell 4 is already occupied" in taken.error
    assert any("cell 4 is already occupied" in line for line in taken.told[1])
    assert "[Player 1] [4]" in taken.told[0] and not any("occupied" in line for line in taken.told[0])
    assert not game.done and game.to_move == 1
    ended = game.step(1, "no move")
    assert ended.done and game.outcome is not None and game.outcome.termination == adapter.INVALID_MOVE
    assert game.outcome.terminated and game.outcome.rewards == (1.0, -1.0) and game.invalid_moves == 2


@pytest.mark.parametrize("reason, rewards", [("max_new_tokens", (1.0, -1.0)), ("context_length", (0.0, 0.0))])
def test_a_seat_that_cannot_finish_a_move_loses_and_a_game_cut_short_is_a_draw(reason, rewards):
    """A move cut at the token limit is the mover's failure, scored as TextArena scores a game lost to
    invalid moves, so a model cannot draw against a stronger player by rambling; a context too long
    for the game says nothing of who would win."""
    game = games.get("textarena:TicTacToe-v0")()
    game.reset(game.instance_type.from_seed(0))
    assert game.step(0, "[4]").valid
    outcome = game.stop(reason)  # seat 1 is to move
    assert outcome.truncated and outcome.termination == reason and outcome.rewards == rewards


def test_iterate_plans_every_models_games_against_the_fixed_references(tmp_path):
    """Each model the run evaluates (base, the warm start, each iteration) also plays the game's fixed
    references in both seats: random legal play and, where the game has one, its exact player; the
    references are chosen in the configuration tree, and one the game has not is refused."""
    from selfplay_gen.iterate.cli import iterate_command

    run_dir = tmp_path / "run"
    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(run_dir), "--tools.gen", "gen"]
    common += ["--tools.convert", "conv", "--verl.python", sys.executable, "--num_iterations", "1"]
    common += ["--warm.policy", "format", "--trainer", "grpo"]

    def against(game: str, *more: str) -> list[tuple[str, str, str]]:
        result = CliRunner().invoke(iterate_command, [*common, "--game", game, *more])
        assert result.exit_code == 0, result.output
        found = []
        for line in result.output.splitlines():
            if line.startswith("+ gen eval") and "--partner-scripted-policy" in line:
                words = line.split()
                assert words[words.index("--partner-backend") + 1] == "scripted"
                policy = words[words.index("--partner-scripted-policy") + 1]
                out = Path(words[words.index("--out") + 1])
                found.append((words[words.index("--label") + 1], policy, f"{out.parent.parent.name}/{out.name}"))
        return found

    planned = against("textarena:TicTacToe-v0")
    assert planned == [
        (label, policy, f"{stage}/heldout_vs_{policy}")
        for label, stage in (("base", "base"), ("warm", "warm"), ("iter_1", "iter_001"))
        for policy in ("random", "minimax")
    ]
    assert {p for _, p, _ in against("textarena:KuhnPoker-v0")} == {"random", "equilibrium"}
    assert {p for _, p, _ in against("textarena:SimpleNegotiation-v0")} == {"random"}
    assert against("textarena:TicTacToe-v0", "--evaluation.references", "none") == []
    assert {p for _, p, _ in against("textarena:TicTacToe-v0", "evaluation.references=minimax")} == {"minimax"}
    assert against("negotiation") == []  # a game that names no references plays none

    refused = CliRunner().invoke(
        iterate_command, [*common, "--game", "textarena:KuhnPoker-v0", "--evaluation.references", "minimax"]
    )
    assert refused.exit_code == 2
    assert "the textarena:KuhnPoker-v0 game has no reference 'minimax' (its references: random, equilibrium" in (
        refused.output
    )


def test_the_run_summary_shows_each_checkpoints_wins_against_the_references(tmp_path):
    """The summary's table reads the evaluations against the references as `eval` writes them: scripted
    seats of known strength stand in for checkpoints, so minimax (iter_1, and online GRPO's saved step
    iter_1@5 before it) never loses to random play in either seat, and random play (base) never beats minimax."""
    from selfplay_gen.iterate import report

    run_dir = tmp_path / "run"
    game = ["--game", "textarena:TicTacToe-v0", "--backend", "scripted", "--instances", "heldout"]
    game += ["--num-instances", "12", "-k", "2", "--bootstrap", "200", "-q"]
    for stage, label, policy, reference in (
        ("base", "base", "random", "minimax"),
        ("iter_001", "iter_1", "minimax", "random"),
        ("iter_001/train/step_5", "iter_1@5", "minimax", "random"),
    ):
        out = run_dir / stage / "eval" / f"heldout_vs_{reference}"
        run(
            "eval", *game, "--scripted-policy", policy, "--partner-scripted-policy", reference,
            "--label", label, "--partner-label", reference, "--out", str(out),
        )  # fmt: skip
    text = report.write_summary(run_dir)
    assert "## Against fixed references and the starting model" in text
    table = [
        cells
        for line in text.splitlines()
        if line.startswith("| ") and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 8
    ]
    rows = {tuple(cells[:2]): cells for cells in table}
    assert [cells[0] for cells in table] == ["model", "base", "iter_1@5", "iter_1"]  # the run's order
    head = rows[("model", "against")]
    base, trained = rows[("base", "minimax")], rows[("iter_1", "random")]
    assert base[head.index("games")] == trained[head.index("games")] == "48"  # 12 instances x 2 games x 2 seat orders
    assert base[head.index("win [95% CI]")] == "0.0% [0.0, 0.0]"
    assert trained[head.index("loss")] == rows[("iter_1@5", "random")][head.index("loss")] == "0.0% [0.0, 0.0]"
    assert float(trained[head.index("win in seat 0")].split("%")[0]) > 50


MIX = ",".join(f"textarena:{env_id}" for env_id in SPIRAL)


def test_a_mix_of_games_plays_each_on_its_share_of_the_instances_and_converts_into_each_games_rows(tmp_path, tokenizer):
    """SPIRAL's three games at once: `--game A,B,C` splits the instances evenly, each game on seeds of
    its own; scripted and model seats (a stand-in backend through the real tokenizer) play them in one
    run, and every format's rows hold each game's, named by its data source."""
    from selfplay_gen.cli import plan_mix
    from selfplay_gen.options import games_from

    out = tmp_path / "games.jsonl"
    run("--game", MIX, "--backend", "scripted", "-n", "32", "-k", "2", "--seed", "5", "--out", str(out), "-q")
    records = list(read_games(out))
    seeds: dict[str, set[int]] = {}
    for record in records:
        seeds.setdefault(record["game"], set()).add(record["instance"]["seed"])
    # 16 instances: 6, 5 and 5, in the mix's order, on seeds of their own
    assert seeds == {
        "textarena:TicTacToe-v0": set(range(5, 11)),
        "textarena:KuhnPoker-v0": set(range(11, 16)),
        "textarena:SimpleNegotiation-v0": set(range(16, 21)),
    }
    assert all(r["outcome"]["terminated"] and r["settings"]["run"]["game"] == MIX for r in records)
    for fmt in ("sft", "dpo"):
        rows = convert(out, tmp_path / fmt, fmt)
        assert {row["data_source"] for row in rows} == {f"selfplay_textarena:{env_id}" for env_id in SPIRAL}

    mix = games_from({"game": MIX, "max_moves": 30, "max_invalid": 3})
    backend, k = MoveListBackend(tokenizer), 4

    def seat(spec, s, game, start):
        return LLMPlayer(s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}#{s}")

    specs = plan_mix(mix, "random", range(9), k, 9 * k)
    played = tmp_path / "model.jsonl"
    with GameWriter(played) as writer:
        settings = {"backend": "test", "sampling": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16}}
        asyncio.run(run_games(specs, (seat, seat), mix[0], writer, 8, settings, progress=False))
    grpo = [str(played), "--val-fraction", "0", "--keep-constant-groups", "--out-dir", str(tmp_path / "grpo")]
    result = CliRunner().invoke(convert_main, grpo)
    assert result.exit_code == 0, result.output
    rows = pq.read_table(tmp_path / "grpo" / "train.parquet").to_pylist()
    by_game: dict[str, set[str]] = {}
    for row in rows:
        instances = {g.split("/")[0] for g in row["extra_info"]["game_ids"]}
        assert len(instances) == 1  # a group is one instance of one game
        by_game.setdefault(row["data_source"], set()).update(instances)
    assert by_game == {
        "selfplay_textarena:TicTacToe-v0": {f"seed-{s}" for s in range(3)},
        "selfplay_textarena:KuhnPoker-v0": {f"seed-{s}" for s in range(3, 6)},
        "selfplay_textarena:SimpleNegotiation-v0": {f"seed-{s}" for s in range(6, 9)},
    }
    summary = json.loads((tmp_path / "grpo" / "convert_summary.json").read_text())
    assert summary["game"] == MIX and summary["games_of_each"] == {f"textarena:{e}": 3 * k for e in SPIRAL}

    init = tmp_path / "init"
    run("init", "--game", MIX, "--num-train", "7", "--num-test", "3", "--out-dir", str(init))
    train = pq.read_table(init / "train.parquet").to_pylist()
    assert [row["data_source"] for row in train] == [
        f"selfplay_textarena:{e}" for e, n in zip(SPIRAL, (3, 2, 2)) for _ in range(2 * n)
    ]
    assert sorted(row["extra_info"]["index"] for row in train) == list(range(14))


def test_a_command_that_plays_one_game_refuses_a_mix(tmp_path):
    result = CliRunner().invoke(main, ["eval", "--game", MIX, "--backend", "scripted", "--out", str(tmp_path / "e")])
    assert result.exit_code == 2 and "this command plays one game at a time" in result.output
    twice = CliRunner().invoke(
        main, ["--game", "textarena:TicTacToe-v0,textarena:TicTacToe-v0", "--backend", "scripted"]
    )
    assert twice.exit_code == 2 and "names each game once" in twice.output


def test_iterate_plans_a_mix_played_as_one_and_evaluated_game_by_game(tmp_path):
    """SPIRAL's three games together: the warm start, the training games and online GRPO's rows are one mix;
    every model is evaluated on each game apart (its own report, its own references, its own cross-play),
    with the capability-retention check beside; a league plays one game and refuses a mix."""
    from selfplay_gen.iterate.cli import iterate_command

    run_dir = tmp_path / "run"
    common = ["--dry-run", "--initial_model", "/m0", "--run_dir", str(run_dir), "--tools.gen", "gen"]
    common += ["--tools.convert", "conv", "--verl.python", sys.executable, "--game", MIX]
    recipe = ["--num_iterations", "1", "--warm.policy", "format", "--evaluation.retention", "true"]
    result = CliRunner().invoke(iterate_command, [*common, *recipe, "--trainer", "grpo-online"])
    assert result.exit_code == 0, result.output
    lines = [line.replace("\\,", ",") for line in result.output.splitlines()]
    played = [line for line in lines if line.startswith("+ gen --config")]
    assert played and all(config_of(line, result.output)["game"] == MIX for line in played)  # the warm start's games
    inits = [line for line in lines if line.startswith("+ gen init")]
    assert len(inits) == 1 and f"--game {MIX} " in inits[0]
    eval_lines = [line for line in lines if line.startswith("+ gen eval")]
    evals = [line.split() for line in eval_lines]
    for line, words in zip(eval_lines, evals):  # each game evaluated apart, reading a file of its game alone
        game = config_of(line, result.output)["game"]
        assert game in games.mixture(MIX) and game.replace(":", "_") in words[words.index("--out") + 1]
    outs = {Path(words[words.index("--out") + 1]).relative_to(run_dir).as_posix() for words in evals}
    for env_id, references in zip(SPIRAL, (("random", "minimax"), ("random", "equilibrium"), ("random",))):
        where = f"textarena_{env_id}"
        for stage in ("base", "warm", "iter_001"):
            assert f"{stage}/eval/heldout/{where}" in outs
            assert {f"{stage}/eval/heldout_vs_{r}/{where}" for r in references} <= outs
        assert f"report/crossplay/{where}" in outs and f"iter_001/eval/test/{where}" in outs
    assert sum(line.startswith("+ gen retention") for line in lines) == 3

    league = CliRunner().invoke(iterate_command, [*common, *recipe, "--league_size", "2"])
    assert league.exit_code == 2 and "a league (league_size, league.promotion) plays one game" in league.output
