"""The token context: the end-of-turn token read from the chat template, and the per-turn check
that a seat's ids are what the template renders around the ids the seat sampled."""

import numpy as np
import pytest
from transformers import AutoTokenizer

from selfplay_gen.backends.base import Backend, Generation, SamplingParams
from selfplay_gen.games import GameConfig
from selfplay_gen.games.base import Limits
from selfplay_gen.games.matching import prompts
from selfplay_gen.games.matching.instance import Instance
from selfplay_gen.games.matching.scripted import ScriptedPlayer
from selfplay_gen.players import GameStop, LLMPlayer
from selfplay_gen.runner import GameSpec, play_game
from selfplay_gen.token_context import TokenInvariantError, token_context

MOVE = "[message] Ava Li fits BLEU."


class MoveBackend(Backend):
    """Stands in for a model that always answers MOVE, its turn closed by the token `close`
    (None: a server that trimmed the stop token it ended on)."""

    name = model = "move"

    def __init__(self, tokenizer, close: str | None = "<|im_end|>"):
        self.tokenizer, self.close = tokenizer, close

    async def generate(self, prompt_ids, params, *, session, messages=None) -> Generation:
        ids = self.tokenizer.encode(MOVE, add_special_tokens=False)
        if self.close:
            ids.append(self.tokenizer.convert_tokens_to_ids(self.close))
        return Generation(ids, [-0.5] * len(ids), "stop", len(prompt_ids))


def llm_seat(backend, tokenizer):
    return lambda spec, s, game, start: LLMPlayer(
        s, start.system[s], backend, tokenizer, SamplingParams(), f"{spec.game_id}/{s}"
    )


def test_the_end_of_turn_token_is_the_one_the_template_closes_turns_with(tokenizer, eos_apart):
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert token_context(tokenizer).end_of_turn_id == token_context(eos_apart).end_of_turn_id == im_end
    assert eos_apart.eos_token_id != im_end


def test_a_template_that_closes_turns_without_a_special_token_is_refused_naming_the_model(eos_apart_dir):
    plain = AutoTokenizer.from_pretrained(eos_apart_dir)
    plain.chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    with pytest.raises(ValueError, match=f"chat template of '{eos_apart_dir}'.*no special token"):
        token_context(plain)


async def test_a_turn_not_closed_by_the_end_of_turn_token_fails_the_game(tokenizer):
    """Appending the next user turn after an unclosed turn gives a context no template renders."""
    instance = Instance.from_seed(1)
    seat = llm_seat(MoveBackend(tokenizer, close=None), tokenizer)
    record = await play_game(GameSpec("g/0", 0, 0, instance), (seat, seat), GameConfig(limits=Limits(max_moves=4)), {})
    assert record["failure"]["reason"] == record["outcome"]["termination"] == "token_invariant"
    assert "turn 0 does not end with the end-of-turn token '<|im_end|>'" in record["failure"]["detail"]
    assert not record["players"][0]["invariant_ok"] and record["outcome"]["normalized_reward"] == 0


@pytest.mark.parametrize("where", ["first prompt", "sampled turn", "last id"])
async def test_a_context_changed_between_turns_fails_the_next_turn(tokenizer, where):
    system = prompts.system_prompt(Instance.from_seed(1), 0)
    player = LLMPlayer(0, system, MoveBackend(tokenizer), tokenizer, SamplingParams(), "g/0")
    player.observe([prompts.FIRST_MOVE], None)
    assert await player.act() == MOVE
    if where == "first prompt":
        player.ids[3] = tokenizer.convert_tokens_to_ids("<|im_start|>")
    elif where == "sampled turn":
        player.ids[player.turns[0].prompt_len] += 1
    else:
        player.ids.pop()
    player.observe([prompts.AGAIN], None)
    with pytest.raises(GameStop) as stop:
        await player.act()
    assert stop.value.reason == "token_invariant" and not player.invariant_ok


def test_a_delta_the_template_does_not_render_is_refused(tokenizer):
    context = token_context(tokenizer)
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Move."}]
    out = [*tokenizer.encode(MOVE, add_special_tokens=False), context.end_of_turn_id]
    ids = [*context.prompt(messages), *out]
    turns = [(len(ids) - len(out), out)]
    messages += [{"role": "assistant", "content": MOVE}, {"role": "user", "content": "Again."}]
    context.check(ids + context.delta(messages[-1]), turns, messages)
    with pytest.raises(TokenInvariantError, match="template text after turn 0"):
        context.check(ids + context.delta({"role": "user", "content": "Other."}), turns, messages)


async def test_retokenized_seats_pass_the_check_at_every_turn(tokenizer):
    """Re-tokenization builds a context turn by turn; the check renders the whole conversation."""
    instance = Instance.from_seed(2)
    seat = lambda spec, s, game, start: ScriptedPlayer(spec.instance, s, rng=np.random.default_rng(s))
    record = await play_game(GameSpec("g/0", 0, 0, instance), (seat, seat), GameConfig(), {})
    context = token_context(tokenizer)
    for log in record["players"]:
        messages = log["messages"]
        ids, turns = context.retokenize(messages)
        assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        assert len(turns) == len(assistant) > 1
        for n, (prompt_len, _) in enumerate(turns):
            context.check(ids[:prompt_len], turns[:n], messages[: assistant[n]])
