"""bench/analysis/turn_likelihood.py on the raw SmolLM2-135M-Instruct: a turn scored again equals what the model
gave its tokens while sampling them, and a turn the model did not write scores far below one it did."""

import copy
import json
from pathlib import Path

import bench_modules
import pytest
import torch
from click.testing import CliRunner
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parents[1]
turn_likelihood = bench_modules.load("analysis/turn_likelihood.py", "turn_likelihood")


@pytest.fixture(scope="module")
def model(local_model_dir):
    return AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def hf_tokenizer(local_model_dir):
    return AutoTokenizer.from_pretrained(local_model_dir)


@pytest.fixture(scope="module")
def written(model, hf_tokenizer):
    """A prompt and up to 24 tokens the model sampled after it, with the log-probabilities it gave them then."""
    prompt = hf_tokenizer.apply_chat_template(
        [{"role": "user", "content": "Name three papers on question answering."}],
        add_generation_prompt=True,
        return_dict=False,
    )
    torch.manual_seed(0)
    out = model.generate(
        torch.tensor([prompt]),
        do_sample=True,
        temperature=0.7,
        top_k=0,
        max_new_tokens=24,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=hf_tokenizer.eos_token_id,
    )
    output = out.sequences[0, len(prompt) :].tolist()
    sampled = torch.stack([torch.log_softmax(s[0].float(), -1)[t] for s, t in zip(out.scores, output)])
    return prompt, output, sampled


def test_scores_again_what_the_model_gave_while_sampling(model, written):
    prompt, output, sampled = written
    again = turn_scores(model, prompt, output)
    assert len(output) > 5 and again.shape == (len(output),)
    assert torch.allclose(again, sampled, atol=1e-3)


def test_a_turn_the_model_did_not_write_scores_far_lower(model, written, hf_tokenizer):
    prompt, output, _ = written
    foreign = torch.randint(1000, hf_tokenizer.vocab_size, (len(output),), generator=torch.Generator().manual_seed(1))
    own, other = turn_scores(model, prompt, output), turn_scores(model, prompt, foreign.tolist())
    assert own.mean() > -1.5 and other.mean() < own.mean() - 5


def turn_scores(model, prompt, output):
    return turn_likelihood.turn_scores(model, prompt + output, len(prompt), output, 0.7)


def test_command_lists_failed_and_clean_games_turn_by_turn(tmp_path, local_model_dir, written):
    prompt, output, sampled = written
    golden = [json.loads(line) for line in (REPO / "tests" / "data" / "golden_matching.jsonl").read_text().splitlines()]
    played = next(g for g in golden if g["players"][1]["kind"] == "llm" and g["outcome"]["termination"] == "accepted")

    def record(game_id, termination, invalid):
        game = copy.deepcopy(played)
        game["game_id"], game["settings"]["sampling"] = game_id, {"temperature": 0.7}
        game["outcome"]["termination"], game["stats"]["invalid_moves"] = termination, invalid
        game["players"][1]["token_ids"] = prompt + output
        game["players"][1]["turns"] = [{"prompt_len": len(prompt), "output_ids": output}]
        return game

    games = tmp_path / "games.jsonl"
    rows = [record("a/0", "max_invalid", 3), record("b/0", "accepted", 1), record("c/0", "accepted", 0)]
    games.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(turn_likelihood.main, [local_model_dir, str(games), "--games", "2"])
    assert result.exit_code == 0, result.output
    lines = [line.split("\t") for line in result.output.splitlines() if line.count("\t") == 7][1:]
    # the game with an invalid move that still ended accepted is neither kind
    assert [(kind, game, turn, int(n)) for kind, game, turn, n, *_ in lines] == [
        ("failed", "a/0", "0", len(output)),
        ("clean", "c/0", "0", len(output)),
    ]
    assert float(lines[0][4]) == pytest.approx(sampled.mean().item(), abs=2e-3)
