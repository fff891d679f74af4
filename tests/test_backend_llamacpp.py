"""The llamacpp backend: the embedded model through llama.cpp, token ids in and out, many games in
one context. The model is the real embedded one (its float32 GGUF export, checked against the
weights transformers plays, and the q8_0 and q4_0 files llama.cpp quantizes from it on request);
sampling is checked on logits whose distribution is known."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from selfplay_gen import gguf_export, models
from selfplay_gen.backends.base import BackendError, BackendOptions, SamplingParams, backend_class
from selfplay_gen.backends.llama_binding import import_llama_cpp
from selfplay_gen.backends.llamacpp import native_weights, sample
from selfplay_gen.cli import main

try:
    import llama_cpp
except ImportError:  # the tests that need it are skipped; the missing-package error is still checked
    llama_cpp = None
needs_llama_cpp = pytest.mark.skipif(llama_cpp is None, reason="llama-cpp-python is not installed")


def test_a_missing_llama_cpp_python_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what `import` sees when the package is absent
    with pytest.raises(BackendError, match=r"needs llama-cpp-python.*pip install llama-cpp-python.*--backend local"):
        import_llama_cpp()


def test_greedy_takes_the_argmax_with_its_logprob_under_the_raw_distribution():
    logits = np.log(np.array([0.2, 0.5, 0.3], dtype=np.float32))
    token, logprob = sample(logits, SamplingParams(0.0, 1.0), np.random.default_rng(0))
    assert token == 1 and logprob == pytest.approx(math.log(0.5), abs=1e-6)


def test_top_p_draws_from_the_smallest_set_that_holds_p_with_renormalized_logprobs():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    rng = np.random.default_rng(0)
    drawn = [sample(logits, SamplingParams(1.0, 0.75), rng) for _ in range(2000)]
    counts = np.bincount([t for t, _ in drawn], minlength=4)
    assert counts[2] == counts[3] == 0  # 0.5 + 0.3 already hold 0.75
    assert counts[0] / 2000 == pytest.approx(0.5 / 0.8, abs=0.04)
    assert {t: round(lp, 6) for t, lp in drawn} == {0: round(math.log(0.5 / 0.8), 6), 1: round(math.log(0.3 / 0.8), 6)}


def test_temperature_sharpens_the_distribution_it_reports():
    logits = np.log(np.array([0.6, 0.4], dtype=np.float32))
    rng = np.random.default_rng(1)
    drawn = [sample(logits, SamplingParams(0.5, 1.0), rng) for _ in range(2000)]
    p0 = 0.36 / (0.36 + 0.16)  # probabilities squared, renormalized
    assert sum(t == 0 for t, _ in drawn) / 2000 == pytest.approx(p0, abs=0.04)
    assert dict(drawn)[0] == pytest.approx(math.log(p0), abs=1e-6)


@pytest.mark.slow
def test_the_export_holds_exactly_the_weights_transformers_reads_from_the_embedded_gguf(local_model_dir):
    import gguf

    template = gguf.GGUFReader(models.gguf_file())
    exported = gguf_export.gguf_tensors(Path(local_model_dir), template)
    for tensor in template.tensors:  # q and k permuted back into llama.cpp's layout included
        original = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(exported[tensor.name].shape)
        assert np.array_equal(original, exported[tensor.name]), tensor.name


@pytest.mark.slow
@needs_llama_cpp
@pytest.mark.parametrize("dtype, tolerance, same_argmax", [("f32", 0.05, 0.97), ("bf16", 0.08, 0.95)])
def test_llama_cpp_reads_the_prompt_ids_the_players_build_and_computes_the_logits_transformers_does(
    tokenizer, dtype, tolerance, same_argmax
):
    import torch
    from transformers import AutoModelForCausalLM

    from selfplay_gen.token_context import token_context

    messages = [{"role": "system", "content": "You match reviewers."}, {"role": "user", "content": "My scores: 3, 7"}]
    ids = token_context(tokenizer).prompt(messages)
    path = str(gguf_export.gguf_for(None, dtype))
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, logits_all=True, verbose=False)
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert llm.tokenize(text.encode(), add_bos=False, special=True) == ids  # one vocabulary
    llm.eval(ids)
    ours = np.array(llm.scores[: len(ids)])
    model = AutoModelForCausalLM.from_pretrained(models.resolve(None), dtype=torch.float32).eval()
    with torch.inference_mode():
        theirs = model(torch.tensor([ids])).logits[0].numpy()
    # kernels differ; bf16 rounds the weights and the activations its dot products read
    assert np.abs(ours - theirs).max() < tolerance * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).mean() > same_argmax


@pytest.mark.slow
@needs_llama_cpp
async def test_outputs_are_verbatim_ids_with_logprobs_and_prefixes_come_from_the_cache(tokenizer):
    from selfplay_gen.token_context import token_context

    context = token_context(tokenizer)
    prompt = context.prompt([{"role": "user", "content": "Here are my scores: 3, 7, 1, 9. " * 12 + "Say hello."}])
    assert len(prompt) > 100
    params = SamplingParams(1.0, 1.0, 16, (context.end_of_turn_id,))
    async with backend_class("llamacpp")(BackendOptions(max_batch=2, seed=0), tokenizer) as backend:
        assert backend.context_length == 4096
        first = await backend.generate(prompt, params, session="g#0")
        assert 0 < len(first.output_ids) == len(first.logprobs) <= 16
        assert all(lp <= 0 for lp in first.logprobs) and first.cached_tokens == 0
        assert first.finish_reason == ("stop" if first.output_ids[-1] == context.end_of_turn_id else "length")
        follow = [*prompt, *first.output_ids, *context.delta({"role": "user", "content": "Again."})]
        second = await backend.generate(follow, params, session="g#0")
        # everything but the id sampled last was decoded into the seat's sequence already
        assert second.cached_tokens == len(prompt) + len(first.output_ids) - 1
        # the same seat of another game (the same first prompt) copies it from that cache
        other = await backend.generate(prompt, params, session="h#0")
        assert other.cached_tokens == len(prompt) - 1 and other.output_ids
        with pytest.raises(BackendError, match="pass the 4096 tokens a sequence holds"):
            await backend.generate([1] * 4090, params, session="g#1")


@pytest.mark.slow
@needs_llama_cpp
async def test_seats_whose_turn_it_is_sample_in_the_first_sequences_and_waiting_seats_keep_their_cache(tokenizer):
    """Two games' seats take turns. Whatever seat asks, it samples in one of the first `games` sequences,
    so a step's sequences sit together (no filler ids); a seat that waited finds its cache where it was
    parked and reads only what is new."""
    from selfplay_gen.token_context import token_context

    context = token_context(tokenizer)
    greedy = SamplingParams(0.0, 1.0, 8, (context.end_of_turn_id,))

    def first(session: str) -> list[int]:  # a prompt no other seat's shares
        return context.prompt([{"role": "user", "content": f"{session} here. " + "My scores: 3, 7, 1, 9. " * 12}])

    async with backend_class("llamacpp")(BackendOptions(max_batch=2, seed=0), tokenizer) as backend:
        engine = backend.engine
        assert engine.games == 2 and len(engine.slots) == 5
        asked, seen = [], {}
        for game in ("g", "h"):  # each game's two seats take a turn, in turn
            for seat in ("a", "b"):
                session = f"{game}#{seat}"
                done = await backend.generate(first(session), greedy, session=session)
                seen[session] = [*first(session), *done.output_ids]
                asked.append(next(i for i, slot in enumerate(engine.slots) if slot.session == session))
        for session in ("g#a", "g#b", "h#a"):  # the next turns: each seat's cache waited somewhere
            follow = [*seen[session], *context.delta({"role": "user", "content": "Your turn."})]
            again = await backend.generate(follow, greedy, session=session)
            assert again.cached_tokens == len(seen[session]) - 1  # only the new ids were read
            asked.append(next(i for i, slot in enumerate(engine.slots) if slot.session == session and slot.tokens))
        assert all(slot < engine.games for slot in asked)
        assert engine.parked >= 3 and engine.fillers == 0


@pytest.mark.slow
@needs_llama_cpp
def test_selfplay_gen_plays_token_exact_games_with_llama_cpp_by_default(tmp_path):
    out = tmp_path / "games.jsonl"
    args = ["--num-games", "4", "-k", "2", "--max-moves", "4", "--max-new-tokens", "64", "--out", str(out), "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "playing 4 games with" in result.output and "llama.cpp" in result.output  # the cost, said first
    # auto: bf16 where llama.cpp computes in it natively, else the float32 export (the local backend's weights)
    assert f".{native_weights()}.gguf" in result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4
    for record in records:
        for seat in record["players"]:
            # the context check of token_context ran on every turn of the game and held
            assert seat["invariant_ok"] and seat["backend"] == "llamacpp"
            for turn in seat["turns"]:
                at = turn["prompt_len"]
                assert seat["token_ids"][at : at + len(turn["output_ids"])] == turn["output_ids"]
                assert len(turn["logprobs"]) == len(turn["output_ids"])


def test_llama_cpp_keeps_32_games_in_flight_unless_max_batch_says_otherwise():
    llamacpp = backend_class("llamacpp")
    assert llamacpp(BackendOptions(), None).max_concurrency == 32
    assert llamacpp(BackendOptions(max_batch=5), None).max_concurrency == 5


def test_an_unknown_gguf_precision_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"unknown GGUF dtype 'q3_k'.*'f32'.*'q4_0'"):
        gguf_export.gguf_for(None, "q3_k")


@pytest.mark.slow
@needs_llama_cpp
def test_quantized_weights_are_made_once_from_the_float32_export_by_llama_cpp():
    import gguf

    f32 = gguf_export.gguf_for(None, "f32")
    for dtype, file_type, shrink in (
        ("bf16", gguf.LlamaFileType.MOSTLY_BF16, 1.9),
        ("q8_0", gguf.LlamaFileType.MOSTLY_Q8_0, 3),
        ("q4_0", gguf.LlamaFileType.MOSTLY_Q4_0, 3),
    ):
        path = gguf_export.gguf_for(None, dtype)
        assert path.parent == f32.parent and path.name.endswith(f".{dtype}.gguf")
        reader = gguf.GGUFReader(path)
        assert reader.fields[gguf.Keys.General.FILE_TYPE].contents() == file_type
        assert path.stat().st_size < f32.stat().st_size / shrink
        made = path.stat().st_mtime_ns
        assert gguf_export.gguf_for(None, dtype) == path and path.stat().st_mtime_ns == made  # cached
    assert gguf_export.gguf_for(str(f32), "q4_0") == f32  # a .gguf file is played as given


@pytest.mark.slow
@needs_llama_cpp
def test_gguf_weights_q4_0_plays_the_quantized_export_token_exact(tmp_path):
    out = tmp_path / "games.jsonl"
    args = ["--num-games", "2", "-k", "2", "--max-moves", "2", "--max-new-tokens", "32", "--out", str(out), "-q"]
    result = CliRunner().invoke(main, [*args, "--gguf-weights", "q4_0", "--max-batch", "2"])
    assert result.exit_code == 0, result.output
    assert ".q4_0.gguf" in result.output and "2 games at once" in result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and all(seat["invariant_ok"] for r in records for seat in r["players"])


@pytest.mark.slow
@needs_llama_cpp
async def test_the_estimate_measures_at_a_games_context_and_leaves_the_cache_as_it_was(tokenizer):
    from selfplay_gen.token_context import token_context

    context = token_context(tokenizer)
    prompt = context.prompt([{"role": "user", "content": "Name three colours."}])
    greedy = SamplingParams(0.0, 1.0, 12, (context.end_of_turn_id,))
    async with backend_class("llamacpp")(BackendOptions(max_batch=2, seed=0), tokenizer) as backend:
        before = await backend.generate(prompt, greedy, session="g#0")
        engine = backend.engine
        held = [list(slot.tokens) for slot in engine.slots]
        speed = engine.measure(2, seconds=0.5)
        assert speed["prompt_tokens_per_s"] > 0 and speed["output_tokens_per_s"] > 0
        memory = engine.llama_cpp.llama_get_memory(engine._ctx)
        # the sequences it filled to TYPICAL_CONTEXT are emptied; the seat's own still holds its turn
        assert [list(slot.tokens) for slot in engine.slots] == held
        assert [engine.llama_cpp.llama_memory_seq_pos_max(memory, i) for i in range(len(held))] == [
            len(tokens) - 1 for tokens in held
        ]
        again = await backend.generate(prompt, greedy, session="g#0")
        assert again.output_ids == before.output_ids and again.cached_tokens == len(prompt) - 1
        assert "minutes" in backend.estimate(200)
