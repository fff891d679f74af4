"""Model-free negotiators: one with a strength knob, for tests, warm starts and opponent pools, and one
that plays random valid offers and replies, the grammar of the game without its strategy."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ..base import ChatSeat, StepResult
from .instance import TOTAL_VALUE, Instance, Share, below, render_share
from .moves import stated_offer


class Negotiator(ChatSeat):
    """A model-free seat that reads its partner's moves: a proposal obliges it to propose, and an offer
    stated in the scripted words ("I take ...") goes to `partner_offered` as what the partner takes."""

    def __init__(self, instance: Instance, seat: int, system: str):
        super().__init__(seat, system)
        self.instance = instance
        self.table: Share | None = None  # its side of the latest offer made by either seat
        self.must_propose = False

    def observe(self, told: Sequence[str], step: StepResult[Any] | None) -> None:
        super().observe(told, step)
        if step is None or step.seat == self.seat or step.move is None:
            return
        if step.move.kind == "propose":
            self.must_propose = True
        elif (offer := stated_offer(step.move.text, self.instance.counts)) is not None:
            self.table = self.instance.rest(offer)
            self.partner_offered(offer)

    def partner_offered(self, offer: Share) -> None:
        """The partner stated an offer in which it takes `offer`."""


class ScriptedNegotiator(Negotiator):
    """Negotiates with offers in messages ("I take 2 books, 0 hats, 1 ball; you take ...") and
    proposes the last offer on the table once a partner has proposed or it accepts an offer.

    `strength` in [0, 1] sets its aspiration: it first asks for `strength` x 10 points and gives
    up `concession` points with each counter-offer, down to 0. It accepts a partner's offer
    (proposes its side of it) when that is worth its current aspiration. Its own offers keep its
    aspiration and give the partner what it believes the partner values most: items worth 0 to
    itself (every item is worth something to one seat), then items the partner asked for. So
    strength 0 accepts any split and offers everything away; strength 1 starts by keeping all it
    values. Two of them always make a deal: after 10 counter-offers each, aspiration is 0.
    It reads offers a partner states in the same words, and only ever makes valid moves. `rng`
    breaks ties between equally good offers only."""

    def __init__(
        self,
        instance: Instance,
        seat: int,
        system: str,
        strength: float = 1.0,
        rng: random.Random | None = None,
        concession: float = 1.0,
    ):
        if not 0 <= strength <= 1 or concession <= 0:
            raise ValueError(f"strength must lie in [0, 1] and concession be positive, got {strength}, {concession}")
        super().__init__(instance, seat, system)
        self.strength, self.concession = strength, concession
        self.rng = rng or random.Random()
        self.aspiration = strength * TOTAL_VALUE
        self.offered: Share | None = None  # its side of the partner's latest offer, until answered
        self.asked: Share = (0, 0, 0)  # what the partner took in its latest offer

    def partner_offered(self, offer: Share) -> None:
        self.asked, self.offered = offer, self.instance.rest(offer)

    async def respond(self) -> str:
        if self.must_propose:
            return self._propose(self.table if self.table is not None else self._offer())
        if self.offered is not None and self.instance.value(self.seat, self.offered) >= self.aspiration:
            return self._propose(self.offered)
        share = self._offer()
        self.table, self.offered = share, None
        self.aspiration = max(0.0, self.aspiration - self.concession)
        rest = self.instance.rest(share)
        return f"[message] I propose: I take {render_share(share)}; you take {render_share(rest)}."

    def _propose(self, share: Share) -> str:
        return f"[propose] {render_share(share)}"

    def _offer(self) -> Share:
        """Its side of the best split for the partner (as it guesses the partner's values) among
        those worth its aspiration to itself; ties go to its own value, then to `rng`."""
        counts, values = self.instance.counts, self.instance.values[self.seat]
        scale = math.lcm(*counts)  # integer weights: equal guesses tie exactly
        weights = [scale * (1 + (v == 0)) + scale * asked // n for v, asked, n in zip(values, self.asked, counts)]

        def key(share: Share) -> tuple[int, int]:
            rest = self.instance.rest(share)
            return sum(w * k for w, k in zip(weights, rest)), self.instance.value(self.seat, share)

        fair = [s for s in self.instance.shares() if self.instance.value(self.seat, s) >= self.aspiration]
        best = max(map(key, fair))
        ties = [s for s in fair if key(s) == best]
        return ties[below(self.rng, len(ties))]

    def log(self) -> dict[str, Any]:
        return {**super().log(), "policy": "negotiator", "strength": self.strength}


class RandomNegotiator(Negotiator):
    """Random valid offers and replies, in the scripted negotiator's words: each turn it states a
    uniformly random split as an offer ("I propose: I take ...; you take ..."), or, with probability
    `propose`, proposes. A proposal, its own or the reply a partner's proposal asks for, is at even
    odds its side of the last offer stated by either seat or a random split: so two of them make a
    deal now and then, and a format warm start on their games learns how offers, replies and
    proposals are written and nothing of which splits to ask for."""

    def __init__(self, instance: Instance, seat: int, system: str, rng: random.Random, propose: float = 0.3):
        super().__init__(instance, seat, system)
        self.rng, self.propose = rng, propose

    async def respond(self) -> str:
        if self.must_propose or self.rng.random() < self.propose:
            keep = self.table is not None and self.rng.random() < 0.5
            return f"[propose] {render_share(self.table if keep and self.table else self._random_share())}"
        share = self.table = self._random_share()
        return f"[message] I propose: I take {render_share(share)}; you take {render_share(self.instance.rest(share))}."

    def _random_share(self) -> Share:
        shares = self.instance.shares()
        return shares[below(self.rng, len(shares))]

    def log(self) -> dict[str, Any]:
        return {**super().log(), "policy": "random"}
