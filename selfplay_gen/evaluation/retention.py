"""Capability retention: does self-play training on one game cost a model its general abilities?

Each iteration trains only on games, and a model can get better at the game while it forgets how
to write ordinary text or answer plain questions. So a model directory is measured before and
after every iteration on two fixed things shipped with the package (`selfplay_gen/data/retention/`,
whose README gives their source and licence; nothing is downloaded):

- the perplexity of a general English text written for this repository (so no model was
  pretrained on it), in windows of `window` tokens, at most `max_tokens` tokens in all, so that a
  135M model takes seconds on a CPU;
- the accuracy on 80 multiple-choice questions of basic knowledge and reasoning, each choice
  scored by the log-likelihood the model gives it after the question (as lm-evaluation-harness
  scores multiple choice), the highest being the model's answer.

`measure(model_dir)` returns both as a dict (what `selfplay-gen retention --out` writes);
`compare(before, after)` says how they changed and flags a drop beyond the thresholds
(`Thresholds`: perplexity up by more than 10% relative, or accuracy down by more than 5 points).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click

DATA = Path(__file__).resolve().parent.parent / "data" / "retention"
TEXT = DATA / "general_text.txt"
QUESTIONS = DATA / "questions.jsonl"
PROMPT = "Question: {question}\nAnswer:"  # a choice follows it after a space


@dataclass(frozen=True)
class Thresholds:
    """The largest changes not flagged: perplexity may rise by `perplexity_rise` (relative, 0.10:
    +10%) and accuracy fall by `accuracy_drop` (absolute, 0.05: 5 points, 4 of the 80 questions;
    a fifth question lost is flagged). Both are well inside what a real loss of ability looks like:
    the embedded warm start, a LoRA trained only on teacher games, rose 24.78 -> 32.48 (+31%) and
    fell 0.713 -> 0.637 (-7.5 points) from the raw model (bench/results/retention/)."""

    perplexity_rise: float = 0.10
    accuracy_drop: float = 0.05


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    choices: tuple[str, ...]
    answer: int


class RetentionError(ValueError):
    """Retention data or measurements that cannot be used; the message says which and why."""


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    """The questions of a JSONL file, each line checked: an error names the file, line, field and value."""
    questions, seen = [], set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise RetentionError(f"{where}: not JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise RetentionError(f"{where}: expected an object, got {row!r}")
        for field, kind in (("id", str), ("question", str), ("choices", list), ("answer", int)):
            if not isinstance(row.get(field), kind) or isinstance(row.get(field), bool):
                raise RetentionError(f"{where}: field {field!r} must be a {kind.__name__}, got {row.get(field)!r}")
        choices = row["choices"]
        if len(choices) < 2 or not all(isinstance(c, str) and c.strip() for c in choices):
            raise RetentionError(f"{where}: field 'choices' must be at least 2 non-empty strings, got {choices!r}")
        if not 0 <= row["answer"] < len(choices):
            raise RetentionError(f"{where}: field 'answer' must index the {len(choices)} choices, got {row['answer']}")
        if row["id"] in seen:
            raise RetentionError(f"{where}: field 'id' repeats {row['id']!r}")
        seen.add(row["id"])
        questions.append(Question(row["id"], row["question"], tuple(choices), row["answer"]))
    if not questions:
        raise RetentionError(f"{path}: no questions")
    return questions


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _device(device: str | None) -> str:
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _token_logprobs(model, sequences: list[list[int]], pad_id: int, device: str):
    """For each sequence, the log-probability of each token after the first given those before
    it (a float tensor per sequence, one value fewer than its tokens), from one padded batch."""
    import torch

    width = max(map(len, sequences))
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.tensor(sequence)
        mask[row, : len(sequence)] = 1
    with torch.inference_mode():
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
        picked = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:].to(device).unsqueeze(-1))
    picked = picked.squeeze(-1).cpu()
    return [picked[row, : len(sequence) - 1] for row, sequence in enumerate(sequences)]


def _batches(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def perplexity(model, tokenizer, text: str, *, max_tokens: int, window: int, batch_size: int, device: str, bar) -> dict:
    """exp(mean negative log-likelihood) of the text's first `max_tokens` tokens, cut into windows
    of `window` tokens that the model reads one at a time (the first token of each is context)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens]
    windows = [w for w in _batches(ids, window) if len(w) > 1]
    total, count = 0.0, 0
    for batch in _batches(windows, batch_size):
        for logprobs in _token_logprobs(model, batch, tokenizer.pad_token_id or 0, device):
            total -= float(logprobs.sum())
            count += len(logprobs)
        bar.update(len(batch))
    return {"value": math.exp(total / count), "tokens": count, "window": window, "max_tokens": max_tokens}


def multiple_choice(model, tokenizer, questions: list[Question], *, batch_size: int, device: str, bar) -> dict:
    """Each question's answer: the choice with the highest log-likelihood after the question."""
    rows = []  # (question index, choice index, prompt tokens, prompt + choice tokens)
    for index, q in enumerate(questions):
        prompt = tokenizer(PROMPT.format(question=q.question), add_special_tokens=False)["input_ids"]
        for number, choice in enumerate(q.choices):
            choice_ids = tokenizer(" " + choice, add_special_tokens=False)["input_ids"]
            rows.append((index, number, len(prompt), prompt + choice_ids))
    rows.sort(key=lambda row: len(row[3]))  # batches of similar lengths: little padding to compute
    scores = [[0.0] * len(q.choices) for q in questions]
    for batch in _batches(rows, batch_size):
        logprobs = _token_logprobs(model, [row[3] for row in batch], tokenizer.pad_token_id or 0, device)
        for (index, number, prompt_len, _), values in zip(batch, logprobs):
            scores[index][number] = float(values[prompt_len - 1 :].sum())  # the choice's tokens only
        bar.update(len(batch))
    right = [q.id for q, s in zip(questions, scores) if max(range(len(s)), key=s.__getitem__) == q.answer]
    return {
        "accuracy": len(right) / len(questions),
        "correct": len(right),
        "questions": len(questions),
        "chance": sum(1 / len(q.choices) for q in questions) / len(questions),
        "right": right,
    }


def measure(
    model_dir: str | Path | None = None,
    *,
    max_tokens: int = 4096,
    max_questions: int | None = None,
    window: int = 512,
    batch_size: int = 8,
    device: str | None = None,
    progress: bool = False,
) -> dict:
    """Perplexity on the general text and multiple-choice accuracy of the model in `model_dir`
    (a Hugging Face directory, or an embedded model's name; None: the embedded default), on the
    GPU when there is one. Float32 weights, so CPU and GPU figures agree. `max_tokens` and
    `max_questions` (None: all 80) bound the work; measurements to compare need the same."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..models import resolve

    started = time.monotonic()
    path = resolve(str(model_dir) if model_dir is not None else None)
    device = _device(device)
    questions = load_questions()[:max_questions]
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model = model.to(device).eval()  # type: ignore[arg-type]  # transformers types `to` as unbound
    text = TEXT.read_text(encoding="utf-8")
    windows = math.ceil(min(max_tokens, len(tokenizer(text, add_special_tokens=False)["input_ids"])) / window)
    total = windows + sum(len(q.choices) for q in questions)
    with tqdm(total=total, desc="retention", unit="seq", disable=not progress) as bar:
        ppl = perplexity(
            model, tokenizer, text, max_tokens=max_tokens, window=window, batch_size=batch_size, device=device, bar=bar
        )
        mc = multiple_choice(model, tokenizer, questions, batch_size=4 * batch_size, device=device, bar=bar)
    return {
        "model": path,
        "device": device,
        "dtype": "float32",
        "seconds": round(time.monotonic() - started, 2),
        "data": {
            "text": {"file": TEXT.name, "sha256": _sha256(TEXT)},
            "questions": {"file": QUESTIONS.name, "sha256": _sha256(QUESTIONS), "used": len(questions)},
        },
        "perplexity": ppl,
        "multiple_choice": mc,
    }


def _data(measurement: dict) -> dict:
    """A measurement's data description, where a description without the `used` count of questions
    stands for all the questions the measurement asked (its `multiple_choice.questions`)."""
    questions = dict(measurement["data"].get("questions", {}))
    if "used" not in questions:
        questions["used"] = measurement["multiple_choice"].get("questions")
    return {**measurement["data"], "questions": questions}


def compare(before: dict, after: dict, thresholds: Thresholds = Thresholds()) -> dict:
    """How `after` (a `measure` result) changed from `before`, and whether either change passes
    its threshold (`flagged`, with a sentence per flag in `flags`). Measurements of different
    data or of different tokenizations (their token counts differ) are refused: their figures
    do not compare."""
    if _data(before) != _data(after):
        raise RetentionError(f"the measurements used different retention data: {before['data']} and {after['data']}")
    keys = ("tokens", "window", "max_tokens")
    if any(before["perplexity"][k] != after["perplexity"][k] for k in keys):
        raise RetentionError(
            "the perplexities cover different tokens (another tokenizer, window or --max-tokens): "
            + ", ".join(f"{k} {before['perplexity'][k]} and {after['perplexity'][k]}" for k in keys)
        )
    ppl_before, ppl_after = before["perplexity"]["value"], after["perplexity"]["value"]
    rise = ppl_after / ppl_before - 1
    acc_before, acc_after = before["multiple_choice"]["accuracy"], after["multiple_choice"]["accuracy"]
    right_before, right_after = set(before["multiple_choice"]["right"]), set(after["multiple_choice"]["right"])
    flags = []
    if rise > thresholds.perplexity_rise:
        flags.append(
            f"perplexity rose {ppl_before:.2f} -> {ppl_after:.2f} ({rise:+.1%}; more than the "
            f"+{thresholds.perplexity_rise:.0%} allowed)"
        )
    if round(acc_before - acc_after, 9) > thresholds.accuracy_drop:  # 4 of 80 is 5 points, not 5.000001
        flags.append(
            f"multiple-choice accuracy fell {acc_before:.3f} -> {acc_after:.3f} ({(acc_after - acc_before) * 100:+.1f} "
            f"points; more than the {thresholds.accuracy_drop * 100:.1f} allowed)"
        )
    return {
        "before": before["model"],
        "after": after["model"],
        "perplexity": {"before": ppl_before, "after": ppl_after, "relative_change": rise},
        "accuracy": {
            "before": acc_before,
            "after": acc_after,
            "change": acc_after - acc_before,
            "lost": sorted(right_before - right_after),
            "gained": sorted(right_after - right_before),
        },
        "thresholds": asdict(thresholds),
        "flagged": bool(flags),
        "flags": flags,
    }


def _read_measurement(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        for key in ("model", "data", "perplexity", "multiple_choice"):
            data[key]
        return data
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        detail = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        raise click.BadParameter(f"{path}: not a retention measurement ({detail})", param_hint="--baseline") from None


@click.command("retention")
@click.option(
    "--model",
    default=None,
    help="Model directory (Hugging Face format) to measure, or an embedded model's name. "
    "Default: the embedded warm-started SmolLM2-135M-Instruct.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON file for the measurement (and, with --baseline, the comparison under 'retention').",
)
@click.option(
    "--baseline",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="An earlier --out of this command (e.g. the model before the iteration): flag a drop from it.",
)
@click.option(
    "--max-accuracy-drop",
    "--max-drop",
    "max_accuracy_drop",
    type=click.FloatRange(0, 1),
    default=Thresholds.accuracy_drop,
    show_default=True,
    help="Largest fall of multiple-choice accuracy (a fraction: 0.05 is 5 points) not flagged.",
)
@click.option(
    "--max-perplexity-rise",
    type=click.FloatRange(min=0),
    default=Thresholds.perplexity_rise,
    show_default=True,
    help="Largest relative rise of perplexity (0.10 is +10%) not flagged.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=2),
    default=4096,
    show_default=True,
    help="Tokens of the general text read (all of it is 3,115 tokens of SmolLM2's tokenizer).",
)
@click.option(
    "--max-questions",
    type=click.IntRange(min=1),
    default=None,
    help="Multiple-choice questions asked, the first N of the 80 (default: all).",
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=8, show_default=True, help="Windows per forward pass."
)
@click.option("--device", default=None, help="torch device. Default: cuda when there is one, else cpu.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def retention_command(
    model, out, baseline, max_accuracy_drop, max_perplexity_rise, max_tokens, max_questions, batch_size, device, quiet
):
    """Measure a model's general abilities, to check that self-play training keeps them:
    perplexity on a general English text and accuracy on 80 multiple-choice questions, both
    shipped with the package (selfplay_gen/data/retention/). Writes OUT as JSON; with --baseline,
    compares with it and flags (in OUT and on stderr) a perplexity rise or an accuracy fall past
    the thresholds. The exit status is 0 either way: a flag is a finding, not a failure."""
    before = _read_measurement(baseline) if baseline else None
    try:
        result = measure(
            model,
            max_tokens=max_tokens,
            max_questions=max_questions,
            batch_size=batch_size,
            device=device,
            progress=not quiet,
        )
    except (OSError, RetentionError) as err:
        raise click.ClickException(str(err)) from None
    if before is not None:
        try:
            result["retention"] = compare(before, result, Thresholds(max_perplexity_rise, max_accuracy_drop))
        except RetentionError as err:
            raise click.ClickException(f"--baseline {baseline}: {err}") from None
    from ..atomic import write_json_atomic

    write_json_atomic(out, result)
    mc = result["multiple_choice"]
    click.echo(
        f"{result['model']}: perplexity {result['perplexity']['value']:.2f} ({result['perplexity']['tokens']} tokens), "
        f"multiple choice {mc['accuracy']:.3f} ({mc['correct']}/{mc['questions']}; chance {mc['chance']:.2f}), "
        f"{result['seconds']:.1f} s on {result['device']}; wrote {out}"
    )
    for flag in result.get("retention", {}).get("flags", []):
        click.echo(f"retention FLAGGED: {flag}", err=True)
    if before is not None and not result["retention"]["flagged"]:
        click.echo(f"retention: no drop past the thresholds since {baseline}", err=True)
