"""Capability retention: the shipped data, the comparison and its flags, and the measurement on the
real embedded model (perplexity against transformers' own loss, scores independent of batching,
a damaged copy of the model flagged by `selfplay-gen retention --baseline`)."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from selfplay_gen.cli import main
from selfplay_gen.evaluation import retention
from selfplay_gen.evaluation.retention import RetentionError, Thresholds, compare, load_questions


def measurement(ppl: float, right: list[str], *, questions: int = 10, tokens: int = 3000, data=None) -> dict:
    return {
        "model": f"ppl{ppl}",
        "data": data or {"text": {"sha256": "a"}, "questions": {"sha256": "b", "used": questions}},
        "perplexity": {"value": ppl, "tokens": tokens, "window": 512, "max_tokens": 4096},
        "multiple_choice": {"accuracy": len(right) / questions, "right": right, "questions": questions},
    }


def test_the_shipped_questions_load_with_their_answers_spread_over_the_positions():
    questions = load_questions()
    assert len(questions) == 80 and len({q.id for q in questions}) == 80
    positions = [sum(q.answer == i for q in questions) for i in range(4)]
    assert all(12 <= n <= 28 for n in positions), positions  # no position a model could learn to prefer
    assert len(retention.TEXT.read_text().split()) > 2500


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not JSON"),
        (
            '{"id": "x", "question": "q", "choices": ["a", "b"], "answer": 2}',
            "field 'answer' must index the 2 choices, got 2",
        ),
        ('{"id": "x", "question": "q", "choices": ["a"], "answer": 0}', "field 'choices' must be at least 2"),
        ('{"id": "x", "question": 3, "choices": ["a", "b"], "answer": 0}', "field 'question' must be a str, got 3"),
        ('{"id": "q1", "question": "q", "choices": ["a", "b"], "answer": 0}', "field 'id' repeats 'q1'"),
    ],
)
def test_bad_question_lines_are_refused_with_file_line_field_and_value(tmp_path, line, message):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"id": "q1", "question": "q", "choices": ["a", "b"], "answer": 1}\n' + line + "\n")
    with pytest.raises(RetentionError) as err:
        load_questions(path)
    assert str(err.value).startswith(f"{path}:2: ") and message in str(err.value)


def test_compare_flags_a_perplexity_rise_past_ten_percent_and_an_accuracy_fall_past_five_points():
    base = measurement(20.0, [f"q{i}" for i in range(8)], questions=20)
    slight = compare(base, measurement(21.9, [f"q{i}" for i in range(1, 8)], questions=20))
    assert not slight["flagged"] and slight["accuracy"]["lost"] == ["q0"] and slight["flags"] == []
    assert slight["perplexity"]["relative_change"] == pytest.approx(0.095)
    worse = compare(base, measurement(23.0, ["q0", "q1", "q2", "q3", "q4", "q9"], questions=20))
    assert worse["flagged"] and len(worse["flags"]) == 2
    assert worse["accuracy"]["lost"] == ["q5", "q6", "q7"] and worse["accuracy"]["gained"] == ["q9"]
    assert "perplexity rose 20.00 -> 23.00 (+15.0%" in worse["flags"][0]
    assert "-10.0 points" in worse["flags"][1]
    lenient = compare(base, measurement(23.0, ["q0"], questions=20), Thresholds(perplexity_rise=0.2, accuracy_drop=0.5))
    assert not lenient["flagged"]


def test_compare_refuses_measurements_that_do_not_compare():
    base = measurement(20.0, ["q0"])
    with pytest.raises(RetentionError, match="different retention data"):
        compare(base, measurement(20.0, ["q0"], data={"text": {"sha256": "other"}, "questions": {}}))
    with pytest.raises(RetentionError, match="tokens 3000 and 2900"):
        compare(base, measurement(20.0, ["q0"], tokens=2900))  # another tokenizer


def test_a_measurement_from_before_the_used_count_compares_as_all_questions_asked():
    old = measurement(20.0, ["q0"], questions=20)
    old["data"] = {**old["data"], "questions": {k: v for k, v in old["data"]["questions"].items() if k != "used"}}
    assert compare(old, measurement(20.0, ["q0"], questions=20))["flagged"] is False
    with pytest.raises(RetentionError, match="different retention data"):  # 20 asked is not 10 asked
        compare(old, measurement(20.0, ["q0"], questions=10))


@pytest.fixture(scope="module")
def raw_model(local_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(local_model_dir)


class Bar:
    def update(self, n):
        pass


@pytest.mark.slow
def test_perplexity_is_the_exponent_of_transformers_own_loss(raw_model):
    import torch

    model, tokenizer = raw_model
    text = retention.TEXT.read_text()
    ours = retention.perplexity(model, tokenizer, text, max_tokens=96, window=48, batch_size=2, device="cpu", bar=Bar())
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"][:96]).view(2, 48)
    with torch.inference_mode():
        losses = [float(model(input_ids=w[None], labels=w[None]).loss) for w in ids]  # mean over 47 tokens each
    assert ours["tokens"] == 94
    assert ours["value"] == pytest.approx(math.exp(sum(losses) / 2), rel=1e-4)


@pytest.mark.slow
def test_choices_score_the_same_however_they_are_batched_and_beat_chance(raw_model):
    model, tokenizer = raw_model
    questions = load_questions()[:12]
    # 7 rows a batch: choices of one question padded beside other questions' (of other lengths)
    mixed = retention.multiple_choice(model, tokenizer, questions, batch_size=7, device="cpu", bar=Bar())
    whole = retention.multiple_choice(model, tokenizer, questions, batch_size=48, device="cpu", bar=Bar())
    assert mixed["right"] == whole["right"]
    assert mixed["accuracy"] >= 0.5 > mixed["chance"]  # SmolLM2-135M-Instruct knows these (0.71 on all 80)


@pytest.mark.slow
def test_a_damaged_model_is_flagged_against_its_baseline(tmp_path, local_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    damaged = tmp_path / "damaged"
    model = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "mlp" in name:  # a fine-tuning gone wrong: noise of half the weights' own spread
                weight.add_(torch.randn(weight.shape, generator=generator) * weight.std() * 0.5)
    model.save_pretrained(damaged)
    AutoTokenizer.from_pretrained(local_model_dir).save_pretrained(damaged)

    size = ["--max-tokens", "128", "--max-questions", "8", "-q"]
    base = tmp_path / "base.json"
    first = CliRunner().invoke(main, ["retention", "--model", local_model_dir, "--out", str(base), *size])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(
        main,
        ["retention", "--model", str(damaged), "--out", str(tmp_path / "after.json"), "--baseline", str(base), *size],
    )
    assert again.exit_code == 0, again.output
    after = json.loads((tmp_path / "after.json").read_text())
    assert after["retention"]["flagged"] and after["retention"]["before"] == local_model_dir
    assert after["perplexity"]["value"] > 1.1 * json.loads(base.read_text())["perplexity"]["value"]
    assert "retention FLAGGED: perplexity rose" in again.output
    other = CliRunner().invoke(
        main,
        [
            "retention",
            "--model",
            str(damaged),
            "--out",
            str(tmp_path / "x.json"),
            "--baseline",
            str(base),
            "--max-tokens",
            "64",
            "--max-questions",
            "8",
            "-q",
        ],
    )
    assert other.exit_code == 1 and "cover different tokens" in other.output
