"""bench/analysis/proposal_likelihood.py on the raw SmolLM2-135M-Instruct: candidates read after the prompt's
cache score as the whole sequence read at once does, and the command reports each measure and each
instance's row."""

import bench_modules
import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from transformers import AutoModelForCausalLM, AutoTokenizer

from selfplay_gen.evaluation.splits import split_seeds
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.token_context import token_context

proposal_likelihood = bench_modules.load("analysis/proposal_likelihood.py", "proposal_likelihood")


@pytest.fixture(scope="module")
def model_and_tokenizer(local_model_dir):
    model = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(local_model_dir)


def test_candidates_scored_from_the_prompts_cache_score_as_whole_sequences(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    chat = [{"role": "user", "content": "Propose a matching of reviewers to papers."}]
    prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=False)
    texts = ["[propose] Proposal:\nBLEU: Ava Li", "[message] Hello there, partner.", "[accept]"]
    scored = proposal_likelihood.proposal_logprobs(model, tokenizer, prompt, texts)
    end = token_context(tokenizer).end_of_turn_id
    for text, score in zip(texts, scored, strict=True):
        output = tokenizer.encode(text, add_special_tokens=False) + [end]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + output])).logits[0, len(prompt) - 1 : -1].float()
        whole = torch.log_softmax(logits, -1)[torch.arange(len(output)), torch.tensor(output)].sum()
        assert score == pytest.approx(float(whole), abs=1e-3)
    assert len(set(scored)) == 3


def test_candidates_are_the_seats_own_plan_random_matchings_and_the_identity():
    instance = Instance.from_seed(1_000_000_000)
    scored = proposal_likelihood.candidates(instance, 5, np.random.default_rng(0))
    assert [kind for kind, _ in scored] == ["own plan", *["random"] * 5, "identity"]
    for _, pairs in scored:
        assert sorted(r for r, _ in pairs) == list(range(8)) and sorted(p for _, p in pairs) == list(range(8))
    shares = [instance.own_plan_share(0, pairs) for _, pairs in scored]
    assert shares[0] == pytest.approx(1.0) and max(shares[1:]) < 1


def test_command_reports_each_measure_and_writes_each_instances_row(local_model_dir, tmp_path):
    args = [local_model_dir, "--instances", "2", "--random", "4", "--rows", str(tmp_path / "rows.tsv")]
    result = CliRunner().invoke(proposal_likelihood.main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = dict(line.split("\t", 1) for line in result.output.splitlines() if "\t" in line)
    assert list(rows) == ["measure", "r", "own plan above", "own plan", "random", "identity"]
    means = {name: float(value.split("\t")[0]) for name, value in rows.items() if name != "measure"}
    assert -1 <= means["r"] <= 1 and 0 <= means["own plan above"] <= 1
    assert all(means[kind] < 0 for kind in ("own plan", "random", "identity"))
    table = pd.read_csv(tmp_path / "rows.tsv", sep="\t", index_col="seed")
    assert list(table.index) == list(split_seeds("dev", 2))
    assert table["r"].mean() == pytest.approx(means["r"], abs=1e-3)
    assert table["own plan"].mean() == pytest.approx(means["own plan"], abs=1e-3)
