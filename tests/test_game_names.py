"""No module outside a game's own folder names a game: `selfplay_gen/` and `convert/` reach games
through the registry and the `Game` protocol only, so adding a game touches its folder and a
registry line, and a game's parts (metrics, views, options) cannot drift into shared code.

The scan reads Python tokens: an identifier naming a shipped game (whole, or as a part between
underscores, as in `games.matching` or `random_matching_reward`), and a string or comment using
its name as a word; in the viewer page's scripts and styles, any line using it as a word. The
registry (`selfplay_gen/games/__init__.py`) is the one place that names them all."""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

from selfplay_gen import games

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("selfplay_gen", "convert")
REGISTRY = ROOT / "selfplay_gen" / "games" / "__init__.py"
# Words that use a game's name in its ordinary sense ("prefix matching" is not the matching game).
ORDINARY = re.compile(r"\b(prefix|pattern|exact|fuzzy|string|substring|name|token)\s+matching\b", re.IGNORECASE)
PAGES = (".js", ".css", ".html")  # the viewer's page
TEXT_TOKENS = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def shipped_games() -> dict[str, Path]:
    """Each game the package registers (not one a test adds) and the folder of its package."""
    found = {}
    for name in games.names():
        module = sys.modules[games.get(name).__module__]
        if module.__name__.startswith("selfplay_gen.games.") and module.__file__:
            found[name] = Path(module.__file__).resolve().parent
    return found


def namings(source: str, names: list[str]) -> list[tuple[int, str]]:
    """(line, what) for each token of `source` that names one of `names`."""
    words = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b", re.IGNORECASE)
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME:
            parts = token.string.lower().split("_")
            hit = next((n for n in names if n in parts), None)
            if hit:
                found.append((token.start[0], f"identifier {token.string!r} names the {hit} game"))
        elif token.type in TEXT_TOKENS:
            text = ORDINARY.sub("", token.string)
            for match in words.finditer(text):
                line = token.start[0] + text[: match.start()].count("\n")
                found.append((line, f"text names the {match.group(1).lower()} game: {token.string.strip()[:60]!r}"))
    return found


def page_namings(source: str, names: list[str]) -> list[tuple[int, str]]:
    """(line, what) for each line of a page's script or style that uses a game's name as a word."""
    words = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b", re.IGNORECASE)
    return [
        (number, f"names the {match.group(1).lower()} game: {text.strip()[:60]!r}")
        for number, text in enumerate(source.splitlines(), 1)
        for match in words.finditer(ORDINARY.sub("", text))
    ]


def scan(root: Path, folders: tuple[str, ...], names: list[str], exempt: list[Path]) -> list[str]:
    """'file:line: what' for every naming of a game in the Python files (and the viewer page's
    scripts and styles) under `folders`, outside the `exempt` files and folders."""
    problems = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            resolved = path.resolve()
            if path.suffix not in PAGES + (".py",) or any(resolved == e or e in resolved.parents for e in exempt):
                continue
            read = namings if path.suffix == ".py" else page_namings
            for line, what in read(path.read_text(), names):
                problems.append(f"{path.relative_to(root)}:{line}: {what}")
    return problems


def test_no_module_outside_a_games_folder_names_a_game():
    shipped = shipped_games()
    assert {"matching", "negotiation"} <= set(shipped)
    problems = scan(ROOT, SCANNED, sorted(shipped), [REGISTRY, *shipped.values()])
    assert not problems, "game names outside their game's folder:\n" + "\n".join(problems)


def test_the_scan_finds_names_in_code_strings_and_comments(tmp_path):
    (tmp_path / "pkg" / "games" / "chess").mkdir(parents=True)
    (tmp_path / "pkg" / "games" / "chess" / "rules.py").write_text('NAME = "chess"\n')
    (tmp_path / "pkg" / "other.py").write_text(
        "from .games.chess import rules\n"
        "def chess_rating(x):  # only for Chess\n"
        '    """Prefix matching of the chessboard is fine."""\n'
        '    return f"{x} chess"\n'
    )
    (tmp_path / "pkg" / "app.js").write_text('const board = 1;\nif (view.game === "chess") draw();\n')
    problems = scan(tmp_path, ("pkg",), ["chess"], [tmp_path / "pkg" / "games" / "chess"])
    where = [p.split(": ")[0] for p in problems]
    assert where == ["pkg/app.js:2", "pkg/other.py:1", "pkg/other.py:2", "pkg/other.py:2", "pkg/other.py:4"]
    assert "identifier 'chess_rating'" in problems[2] and "the chess game" in problems[3]


def test_ordinary_words_are_not_a_game():
    assert namings('"""prefix matching of token ids"""\n', ["matching"]) == []
    assert len(namings('"""the matching game"""\n', ["matching"])) == 1
