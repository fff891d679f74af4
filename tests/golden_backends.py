"""A stand-in model that plays a fixed script of turns, so golden records hold invalid moves,
rejections and a turn cut by its token budget."""

from __future__ import annotations

from selfplay_gen.backends.base import Backend, Generation
from selfplay_gen.games.matching.moves import render_proposal

PROPOSAL = "[propose] " + render_proposal([(i, (i + 3) % 8) for i in range(8)])
# per seat: its turns in order; "<cut>" is a turn that does not end within its token budget
SCRIPT = (
    ["no tag here", "[message] Ava Li - GLUE: 40", PROPOSAL, "[message] again", "<cut>"],
    ["[accept]", "[reject]", "[message] I see Ava Li - BLEU: 12", "[reject]", "[message] more"],
)


class ScriptBackend(Backend):
    name = model = "script"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids, params, *, session, messages=None) -> Generation:
        seat = int(session[-1])
        turn = sum(m["role"] == "assistant" for m in messages or ())
        text = SCRIPT[seat][min(turn, len(SCRIPT[seat]) - 1)]
        if text == "<cut>":
            ids = self.tokenizer.encode("[message] and so on and on", add_special_tokens=False)
            return Generation(ids, [-0.25] * len(ids), "length", len(prompt_ids))
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [
            self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        return Generation(ids, [-0.5] * len(ids), "stop", len(prompt_ids))
