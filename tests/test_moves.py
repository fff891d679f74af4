"""The move parser: what is accepted, and that every rejection says exactly what is wrong."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfplay_gen.games.matching.instance import PAPER_TITLES, PAPERS, REVIEWERS
from selfplay_gen.games.matching.moves import InvalidMove, parse_move, proposal_line_spans, render_proposal

DIAGONAL = tuple((i, i) for i in range(8))  # reviewer i reviews paper i
LINES = [f"{PAPERS[i]}: {REVIEWERS[i]}" for i in range(8)]


def proposal(lines, head="Proposal:", sep="\n") -> str:
    return f"[propose] {head}{sep}" + sep.join(lines)


def rejected(text: str) -> str:
    with pytest.raises(InvalidMove) as err:
        parse_move(text)
    return str(err.value)


# --- accepted forms ----------------------------------------------------------------------------


def test_canonical_proposal():
    move = parse_move(proposal(LINES))
    assert (move.kind, move.pairs) == ("propose", DIAGONAL)
    assert move.public == "[propose] " + render_proposal(list(DIAGONAL))


@pytest.mark.parametrize(
    "text",
    [
        proposal([line.upper() for line in LINES], head="PROPOSAL:"),  # case
        proposal([f"  {PAPERS[i].lower()} :  {REVIEWERS[i].lower()}  " for i in range(8)]),  # spaces
        proposal(LINES, sep="<br/>"),  # <br/>
        proposal(LINES, sep="<BR>") + "\n",  # <br>, trailing newline
        proposal([f"&emsp; - {line}" for line in LINES], sep="<br/>"),  # the web interface's form
        proposal([f"* {line}" for line in LINES]),  # * bullets
        proposal([f"- {line}" for line in LINES], sep="\n\n"),  # - bullets, blank lines
        proposal([f"{PAPER_TITLES[PAPERS[i]]}: {REVIEWERS[i]}" for i in range(8)]),  # full titles
        proposal(LINES[::-1]),  # any order
        "[Propose]\nProposal: " + "\n".join(LINES),  # first line after the head
    ],
)
def test_proposal_variants_parse_to_the_same_pairs(text):
    assert parse_move(text).pairs == DIAGONAL


def test_message_keeps_every_line_and_hides_private_text():
    move = parse_move("I should share my best cells first.\n[message] Ava is great on BLEU.\nAnd Noah on SWAG.")
    assert (move.kind, move.text) == ("message", "Ava is great on BLEU.\nAnd Noah on SWAG.")
    assert move.public == "[message] Ava is great on BLEU.\nAnd Noah on SWAG."
    assert "share my best" not in move.public


@pytest.mark.parametrize(
    "text, kind", [("[accept]", "accept"), ("[REJECT]", "reject"), ("private thought [Accept] sounds good", "accept")]
)
def test_responses_ignore_surrounding_text(text, kind):
    move = parse_move(text)
    assert (move.kind, move.public) == (kind, f"[{kind}]")


def test_private_text_before_a_proposal():
    move = parse_move("My plan maximises what I see.\n" + proposal(LINES))
    assert move.pairs == DIAGONAL and move.public.startswith("[propose] Proposal:\nBLEU: Ava Li")


@given(st.permutations(range(8)))
def test_render_then_parse_is_the_identity(papers):
    pairs = [(reviewer, paper) for reviewer, paper in enumerate(papers)]
    move = parse_move("[propose] " + render_proposal(pairs))
    assert move.pairs == tuple(sorted(pairs))


@pytest.mark.parametrize(
    "text",
    [
        proposal(LINES),
        "I propose this.\n" + proposal([f"&emsp; - {line}  " for line in LINES[::-1]], sep="<br/>"),
        proposal([f"* {line}" for line in LINES], sep="\n\n") + "\n",
    ],
)
def test_a_proposals_line_spans_hold_its_lines_and_their_pairs(text):
    spans = proposal_line_spans(text)
    assert sorted((r, p) for *_, r, p in spans) == list(parse_move(text).pairs)
    assert sorted(text[start:end] for start, end, *_ in spans) == sorted(LINES)


@pytest.mark.parametrize("text", ["[message] BLEU: Ava Li", "[accept]", proposal(LINES[:7]), "Proposal:\n" + LINES[0]])
def test_other_turns_have_no_line_spans(text):
    assert proposal_line_spans(text) == []


# --- rejections --------------------------------------------------------------------------------


def test_duplicate_paper_names_it_and_both_lines():
    lines = LINES[:4] + [f"BLEU: {REVIEWERS[4]}"] + LINES[5:]
    error = rejected(proposal(lines))
    assert "paper BLEU is assigned twice" in error and "lines 1 and 5" in error


def test_duplicate_reviewer_names_it_and_both_lines():
    lines = LINES[:2] + [f"{PAPERS[2]}: Daniel Nguyen"] + LINES[3:]
    error = rejected(proposal(lines))
    assert "reviewer Daniel Nguyen is assigned twice" in error and "lines 2 and 3" in error


def test_unknown_paper():
    error = rejected(proposal(LINES[:7] + ["BERT: Noah Wilson"]))
    assert "line 8" in error and "unknown paper 'BERT'" in error and "SWAG" in error


def test_unknown_reviewer():
    error = rejected(proposal(["BLEU: Ava Lee"] + LINES[1:]))
    assert "line 1" in error and "unknown reviewer 'Ava Lee'" in error and "Ava Li" in error


@pytest.mark.parametrize("lines, found", [(LINES[:7], 7), (LINES + ["BLEU: Ava Li"], 9), ([], 0)])
def test_wrong_number_of_lines(lines, found):
    error = rejected(proposal(lines))
    assert "needs 8 lines" in error and f"found {found}" in error


def test_missing_colon():
    error = rejected(proposal(LINES[:2] + ["GloVe Sofia Patel"] + LINES[3:]))
    assert "line 3 'GloVe Sofia Patel' has no ':'" in error


def test_missing_proposal_head():
    assert "must start with 'Proposal:'" in rejected("[propose] " + "\n".join(LINES))
    assert "must start with 'Proposal:'" in rejected(proposal(LINES, head="My proposal:"))


def test_unknown_tag():
    error = rejected("[offer] Proposal: ...")
    assert "unknown tag [offer]" in error and "[message]" in error


def test_no_tag():
    assert "no move tag found" in rejected("Let us assign Ava to BLEU.")
    assert "no move tag found" in rejected("")


@pytest.mark.parametrize("text", ["[message]", "[message]   \n  ", "thinking... [MESSAGE] "])
def test_empty_message(text):
    assert "empty message" in rejected(text)


def test_two_tags():
    error = rejected("[message] Fine by me. [accept]")
    assert "exactly one tag, found 2: [message], [accept]" in error
    assert "found 2" in rejected(proposal(LINES) + "\n[propose] " + render_proposal(list(DIAGONAL)))
