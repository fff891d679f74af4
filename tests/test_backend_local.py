"""The embedded local backend: batching across concurrent requests, stops, budgets, logprobs."""

import asyncio
import math

import pytest

from selfplay_gen.backends.base import BackendOptions, SamplingParams, backend_class
from selfplay_gen.backends.local import _Request

pytestmark = pytest.mark.slow


def prompt(tokenizer, text):
    return list(
        tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)[
            "input_ids"
        ]
    )


async def test_concurrent_requests_share_one_batch(tokenizer, local_model_dir):
    eot = tokenizer.eos_token_id
    long_turn = SamplingParams(0.0, 1.0, 16, (eot,))
    short_turn = SamplingParams(0.0, 1.0, 3, (eot,))
    async with backend_class("local")(BackendOptions(model=local_model_dir, max_batch=4), tokenizer) as backend:
        assert backend.context_length == 8192 and backend.max_concurrency == 4
        said_hello, cut_short = await asyncio.gather(
            backend.generate(prompt(tokenizer, "Reply with one word: yes or no?"), long_turn, session="a"),
            backend.generate(prompt(tokenizer, "Write a story."), short_turn, session="b"),
        )
        assert (backend.batches, backend.largest_batch) == (1, 2)
        alone = await backend.generate(prompt(tokenizer, "Reply with one word: yes or no?"), long_turn, session="a")
    assert said_hello.finish_reason == "stop" and said_hello.output_ids[-1] == eot
    assert eot not in said_hello.output_ids[:-1]
    assert alone.output_ids == said_hello.output_ids  # greedy: batching and padding change nothing
    assert cut_short.finish_reason == "length" and len(cut_short.output_ids) == 3
    for gen in (said_hello, cut_short):
        assert len(gen.logprobs) == len(gen.output_ids) and all(math.isfinite(lp) and lp <= 0 for lp in gen.logprobs)
        assert gen.prompt_tokens > 0 and not gen.retokenized


async def test_sampling_settings_split_batches_and_seed_repeats(tokenizer, local_model_dir):
    eot = tokenizer.eos_token_id
    options = BackendOptions(model=local_model_dir, max_batch=4, seed=7)
    ids = prompt(tokenizer, "Name a colour.")
    runs = []
    for _ in range(2):
        async with backend_class("local")(options, tokenizer) as backend:
            runs.append(
                await asyncio.gather(
                    backend.generate(ids, SamplingParams(1.0, 0.9, 6, (eot,)), session="a"),
                    backend.generate(ids, SamplingParams(0.0, 1.0, 6, (eot,)), session="b"),
                )
            )
            assert (backend.batches, backend.largest_batch) == (2, 1)
    assert [g.output_ids for g in runs[0]] == [g.output_ids for g in runs[1]]


async def test_closing_stops_a_generation_in_flight(tokenizer, local_model_dir):
    """A thread cannot be cancelled: closing the backend makes a running `model.generate` stop at its
    next token, so Ctrl-C does not wait for a long turn to run to its budget."""
    never = tokenizer.convert_tokens_to_ids("<|endoftext|>")  # a stop id this prompt does not produce
    request = _Request(
        prompt(tokenizer, "Write a long story."),
        SamplingParams(1.0, 1.0, 4000, (never,)),
        asyncio.get_running_loop().create_future(),
    )
    backend = backend_class("local")(BackendOptions(model=local_model_dir, seed=0), tokenizer)
    await backend.start()
    running = asyncio.create_task(asyncio.to_thread(backend._run, [request], 0))
    await asyncio.sleep(2)  # generating, in its thread
    await backend.close()
    (generation,) = await running
    assert 0 < len(generation.output_ids) < 4000 and generation.finish_reason == "length"
