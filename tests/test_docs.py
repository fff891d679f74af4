"""The documents quote what was measured: the README's figures for the embedded default come from the
warm start's own README, every result directory it cites exists, and bench/results/INDEX.md names every
result directory."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
WARM_START = REPO / "selfplay_gen" / "data" / "warm_start" / "README.md"

FIGURE = re.compile(r"\d+(?:\.\d+)?%|\d+\.\d+")
CITED = re.compile(r"`((?:[\w.\-]+/)+)`")


def normalized(text: str) -> str:
    return text.replace("−", "-")


def passages(markdown: str) -> list[str]:
    """Paragraphs and list items, each as one string."""
    return [p for p in re.split(r"\n\s*\n|\n(?=- )", markdown) if p.strip()]


def default_passages(readme: str) -> list[str]:
    """The README's passages that describe the embedded default model's play."""
    return [p for p in passages(readme) if "selfplay_gen/data/warm_start/" in p or "embedded warm start" in p]


def measured_test_row(warm_start: str) -> dict[str, str]:
    """The warm start's measured row on the test split, by column name."""
    lines = [line for line in warm_start.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0].startswith("test"):
            return dict(zip(header, cells, strict=True))
    raise AssertionError(f"{WARM_START}: no row for the test split")


def stale_figures(readme: str, warm_start: str) -> list[str]:
    """Figures the README quotes for the default that its warm start's README does not hold, and the
    warm start's test figures the README's quick start leaves out."""
    measured = set(FIGURE.findall(normalized(warm_start)))
    found = default_passages(normalized(readme))
    problems = [f"{figure} (in {p[:60]!r}...)" for p in found for figure in FIGURE.findall(p) if figure not in measured]
    quick = [p for p in found if "selfplay_gen/data/warm_start/" in p]
    if not quick:
        return [*problems, "no quick-start paragraph names selfplay_gen/data/warm_start/"]
    row = measured_test_row(normalized(warm_start))
    for column in ("reward [95% CI]", "random matching", "agreement", "valid moves"):
        if row[column] not in quick[0]:
            problems.append(f"the test split's {column} {row[column]} is not quoted")
    return problems


def test_the_readme_quotes_the_embedded_default_as_its_warm_start_readme_measures_it():
    readme, warm_start = (REPO / "README.md").read_text(), WARM_START.read_text()
    assert len(default_passages(readme)) >= 2
    assert stale_figures(readme, warm_start) == []


def test_a_figure_of_a_replaced_warm_start_is_caught():
    warm_start = WARM_START.read_text()
    stale = (
        "The default is the model with its adapter (`selfplay_gen/data/warm_start/`): 96% valid moves, "
        "97% agreement, 0.68 on held-out instances against 0.61 for a random matching."
    )
    problems = stale_figures(f"# x\n\n{stale}\n", warm_start)
    assert any(p.startswith("96%") for p in problems) and any(p.startswith("0.68 ") for p in problems)
    assert any("reward [95% CI]" in p for p in problems)


def test_every_result_the_readme_cites_exists():
    readme = (REPO / "README.md").read_text()
    sections = re.split(r"\n(?=#+ )", readme)
    cited = [
        path.removeprefix("bench/results/")
        for section in sections
        if section.startswith(("## What the results show", "### Several GPUs"))
        for path in CITED.findall(section)
    ]
    assert len(cited) > 10
    assert [path for path in cited if not (RESULTS / path).is_dir()] == []


def test_every_result_directory_has_a_readme_and_a_line_in_the_index():
    index = (RESULTS / "INDEX.md").read_text()
    named = set(re.findall(r"^\| `([^`]+)` \|", index, flags=re.MULTILINE))
    folders = [d for d in RESULTS.iterdir() if d.is_dir()]
    folders += [d for d in (RESULTS / "negotiation").iterdir() if d.is_dir()]
    assert [str(d.relative_to(RESULTS)) for d in folders if not (d / "README.md").exists()] == []
    expected = {f"{d.relative_to(RESULTS)}/" for d in folders if d.name != "negotiation"}
    expected |= {f.name for f in RESULTS.glob("*.md") if f.name != "INDEX.md"}
    assert sorted(expected - named) == []
    assert sorted(n for n in named if not (RESULTS / n).exists()) == []
