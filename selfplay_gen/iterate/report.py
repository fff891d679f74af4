"""The run's own report, RUN_DIR/summary.md (and summary.tsv): one row per stage (training games,
agreement, reward, wall time), a wall-time table per step with server start-up apart from work, each
checkpoint's wins, draws and losses against the game's fixed references and the starting model, the
capability-retention rows where they were measured, and plots of verl's per-step metrics (reward,
entropy, KL, clip fraction) read from each training log."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic import write_json_atomic
from ..evaluation.retention import RetentionError, compare
from ..stats.report import format_interval, markdown_table
from ..verl import STEP_MEASURES
from .decisions import SUMMARY_HEADER
from .plays import VERSUS
from .stages import PlayedBy

if TYPE_CHECKING:
    import numpy as np

ROW_FILE = "summary_row.json"
TIMINGS_FILE = "timings.json"
RETENTION_FILE = "retention.json"
# games alike in at least this share of a stage's instances: the summary names the stage as having little to learn
ALIKE_FLAG = 0.5
TRAIN_LOG = "verl.log"
TENSORBOARD_DIR = "tensorboard"  # verl's tensorboard events, under a stage's train/
WAIT_AHEAD = "wait for the work played ahead"  # a stage's step: the loop waiting for its games played ahead

STEPS_FILE = "metrics.json"  # a stage's train/: verl's metrics per step, as read from its log
ENTROPY = "actor/entropy"
COLLAPSE = 0.25  # entropy ending below this share of its start: the summary calls the training collapsing
# verl's metric names for each curve; the first one the log has is plotted
CURVES = {
    "reward": ("critic/score/mean", "critic/rewards/mean"),
    "entropy": (ENTROPY,),
    "KL": ("actor/kl_loss", "actor/ppo_kl"),
    "clip fraction": ("actor/pg_clipfrac",),
}
# what the games did, from each game's evaluation row: as verl logs the means of each validation's games
# (val-core/<data source>/reward/mean@1 and val-aux/<data source>/<measure>/mean@1) and, online, of each
# training step's games (games/<measure>/mean, selfplay_gen.verl.online_trainer): a panel each, a line for the
# training games and one per validation data source
MEASURES = ("reward", "agreed", "invalid", "stated_cells", "proposals", "own_plan_share")
PER_GAME = "(mean a game)"  # the title's end of a measure's panel
PANELS_A_ROW = 4  # verl's own curves fill the first row, the games' measures the rows below


@dataclass(frozen=True)
class Timing:
    """One step of a stage: seconds a server or trainer spent starting (where known) and working, and
    how busy the GPUs were meanwhile (`gpu_usage`; None without nvidia-smi)."""

    step: str
    startup_s: float | None  # None: not known
    work_s: float
    gpu_percent: float | None = None  # the GPUs' mean utilization while working
    during: str | None = None  # the stage whose training it ran beside (`overlap` one-step), by label


def stage_order(name: str) -> tuple[int, str]:
    """base, warm, iter_001, ..., then anything else (crossplay), as the run makes them."""
    ranks = {"base": 0, "warm": 1}
    return (ranks.get(name, 2 if name.startswith("iter_") else 3), name)


def add_timing(stage_dir: Path, timing: Timing) -> None:
    """Append `timing` to the stage's timings.json (kept across a resumed run)."""
    path = stage_dir / TIMINGS_FILE
    rows = [*timings(stage_dir), timing]
    write_json_atomic(path, {"steps": [asdict(t) for t in rows]})


def timings(stage_dir: Path) -> list[Timing]:
    """The steps a stage has timed so far."""
    path = stage_dir / TIMINGS_FILE
    return [Timing(**t) for t in json.loads(path.read_text())["steps"]] if path.exists() else []


def write_row(stage_dir: Path, row: tuple[str, ...]) -> None:
    write_json_atomic(stage_dir / ROW_FILE, {"row": list(row)})


def write_summary(run_dir: Path) -> str:
    """Rewrite RUN_DIR/summary.{md,tsv} from every stage's files; returns the markdown."""
    stages = sorted((p for p in run_dir.iterdir() if p.is_dir()), key=lambda p: stage_order(p.name))
    rows = [tuple(json.loads((p / ROW_FILE).read_text())["row"]) for p in stages if (p / ROW_FILE).exists()]
    rows = [row + ("",) * (len(SUMMARY_HEADER) - len(row)) for row in rows]  # a row of fewer cells: blanks after
    names = {p.name: row[0] for p, row in zip([p for p in stages if (p / ROW_FILE).exists()], rows)}

    def name(stage: Path) -> str:  # a stage by its row's name (iter_1, as the reports label it)
        return names.get(stage.name, stage.name)

    tsv = "\n".join("\t".join(r) for r in [SUMMARY_HEADER, *rows]) + "\n"
    parts = [markdown_table(SUMMARY_HEADER, rows) + "\n", *alike_note(rows)]
    steps = [(name(p), t) for p in stages for t in timings(p)]
    if steps:
        parts.append("\n## Wall time per step\n\n")
        parts.append(
            markdown_table(
                ("stage", "step", "start-up (s)", "work (s)", "GPU utilization while working (%)"),
                [(stage, _step(t), _whole(t.startup_s), _whole(t.work_s), _whole(t.gpu_percent)) for stage, t in steps],
            )
            + "\n"
        )
        parts += iterations_section([p for p in stages if p.name.startswith("iter_")], name)
    versus = [json.loads(path.read_text()) for path in versus_files(run_dir, stages)]
    parts += versus_section(versus)
    parts += strategy_section(versus)
    parts += retention_section(
        [(name(p), json.loads((p / RETENTION_FILE).read_text())) for p in stages if (p / RETENTION_FILE).exists()]
    )
    parts += league_sections(run_dir, stages, name)
    plots = sorted(run_dir.glob("*/train/curves.png"), key=lambda p: stage_order(p.parent.parent.name))
    if plots:
        parts.append("\n## Training curves\n\n")
        for plot in plots:
            parts.append(f"![{name(plot.parent.parent)}]({plot.relative_to(run_dir)})\n")
            logged = _read_steps(plot.parent / STEPS_FILE)
            trend = training_trend(logged)
            if trend:
                parts.append(f"\n{name(plot.parent.parent)}: {trend}\n\n")
            strategy = strategy_trend(logged)
            if strategy:
                parts.append(f"{name(plot.parent.parent)}: {strategy}\n\n")
    text = "".join(parts)
    (run_dir / "summary.tsv").write_text(tsv)
    tmp = run_dir / "summary.md.tmp"
    tmp.write_text(text)
    tmp.replace(run_dir / "summary.md")
    return text


def alike_note(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """What the games-alike column means, where a row has it, and which stages had little to learn from: games
    alike in at least `ALIKE_FLAG` of their instances (a policy that plays one game an instance)."""
    column = SUMMARY_HEADER.index("games alike")
    shares = [(row[0], float(row[column].rstrip("%")) / 100) for row in rows if row[column]]
    if not shares:
        return []
    note = (
        "\nGames alike: the share of a stage's training instances whose games all earned the same reward; there "
        "the best of a group is what the model already plays, and a group-relative advantage is 0.\n"
    )
    flagged = [stage for stage, share in shares if share >= ALIKE_FLAG]
    if flagged:
        note += (
            f"**{', '.join(flagged)}: games alike in {ALIKE_FLAG:.0%} or more of the instances**: the model plays "
            "nearly one game an instance, and those instances give the stage nothing to learn.\n"
        )
    return [note]


RETENTION_NOTE = (
    "Each stage's model measured by `selfplay-gen retention` (the perplexity of a general English text and the "
    "accuracy on the package's multiple-choice questions), each set against the run's first measured stage: "
    "flagged where the perplexity rose or the accuracy fell past `selfplay-gen retention`'s thresholds."
)


def retention_section(measured: list[tuple[str, dict]]) -> list[str]:
    """The capability-retention table: each stage's `selfplay-gen retention` measurement and its change from the
    first stage measured, flagged as `selfplay-gen retention --baseline` flags it."""
    if not measured:
        return []
    first = measured[0][1]
    rows = []
    for stage, measurement in measured:
        try:
            change = compare(first, measurement)
        except RetentionError as err:  # another tokenizer or data: its figures stand apart
            rows.append((stage, "", "", "", "", f"not comparable with {measured[0][0]}: {err}"))
            continue
        flags = "; ".join(change["flags"]) or "no"
        rows.append((
            stage, f"{change['perplexity']['after']:.3f}", f"{change['perplexity']['relative_change']:+.1%}",
            f"{change['accuracy']['after']:.3f}", f"{change['accuracy']['change'] * 100:+.1f}", flags,
        ))  # fmt: skip
    head = ("stage", "perplexity", "change", "multiple-choice accuracy", "change (points)", "flagged")
    return ["\n## Capability retention\n\n", markdown_table(head, rows) + "\n\n", RETENTION_NOTE + "\n"]


def _step(timing: Timing) -> str:
    return timing.step + (f" (beside {timing.during}'s training)" if timing.during else "")


def _seconds(timing: Timing) -> float:
    return (timing.startup_s or 0.0) + timing.work_s


def iterations_section(iterations: list[Path], name: Any) -> list[str]:
    """Each iteration's generation and training side by side, and its wall time (its summary row: the loop's
    own time, from its start to its end), with the iterations per hour they make: with `overlap` one-step an
    iteration's games were played beside the training before it, and its wall time holds only the wait for
    them."""
    rows, total = [], 0.0
    for stage in iterations:
        steps, row_file = timings(stage), stage / ROW_FILE
        if not steps or not row_file.exists():
            continue
        wall = float(json.loads(row_file.read_text())["row"][SUMMARY_HEADER.index("wall time (s)")] or 0)
        total += wall
        made = [t for t in steps if "generate" in t.step or t.step == "convert"]
        trained = [t for t in steps if t.step.startswith("train") or t.step == "merge"]
        beside = sorted({t.during for t in made if t.during})
        played = PlayedBy.read(stage / "gen")
        rows.append((
            name(stage), played.label if played else "", _whole(sum(map(_seconds, made))) if made else "",
            ", ".join(beside), _whole(sum(map(_seconds, trained))) if trained else "",
            _whole(sum(t.work_s for t in steps if t.step == WAIT_AHEAD)), _whole(wall),
        ))  # fmt: skip
    if not rows:
        return []
    head = (
        "iteration", "games played by", "generation (s)", "beside the training of", "training (s)",
        "waited for the work beside (s)", "wall time (s)",
    )  # fmt: skip
    rate = f"{3600 * len(rows) / total:.2f}" if total > 0 else ""
    return [
        "\n## Generation and training per iteration\n\n",
        markdown_table(head, rows) + "\n\n",
        f"{len(rows)} iterations in {total:.0f} s of their wall time: {rate} iterations per hour.\n",
    ]


VERSUS_NOTE = (
    "Each checkpoint in both seats against the game's fixed references (`evaluation.references`, on the development "
    "instances, RUN_DIR/<stage>/eval/{versus}NAME) and against the checkpoints it cross-played (the starting model "
    "among them, RUN_DIR/report/crossplay): its win, draw and loss rates over both seat orders, and its win rate "
    "(and, in a game of chips, its chips a hand) in each; means of per-instance means, 95% bootstrap intervals over "
    "instances."
)


def versus_files(run_dir: Path, stages: list[Path]) -> list[Path]:
    """The metrics.json of every evaluation against a fixed reference, stage by stage (a stage's saved
    steps before its last), then the run's cross-play report."""

    def step(path: Path) -> int:
        return int(path.name.removeprefix("step_")) if path.name.removeprefix("step_").isdigit() else 0

    found = []
    for stage in stages:
        for model in [*sorted(stage.glob("train/step_*"), key=step), stage]:
            for pattern in (f"eval/{VERSUS}*/metrics.json", f"eval/{VERSUS}*/*/metrics.json"):  # one game; a mix
                found += sorted(model.glob(pattern))
    crossplay = run_dir / "report" / "crossplay"  # a mix's games each in a directory of its own
    return [*found, *sorted(crossplay.glob("metrics.json")), *sorted(crossplay.glob("*/metrics.json"))]


def versus_rows(metrics: dict) -> list[dict]:
    """Each pairing of an evaluation's metrics whose results count wins (`stats.metrics.head_to_head`'s
    entries, under `wins` or `cross_play` as the game's evaluation names them): the first model, its
    opponent and its results."""
    entries = metrics.get("wins") or metrics.get("cross_play") or []
    return [
        {
            "game": metrics.get("game") or "",
            "model": e["models"][0],
            "opponent": e["models"][1],
            **{o: e.get(o) for o in ("both", "seat0", "seat1")},
        }
        for e in entries
        if isinstance(e.get("both"), dict) and "win" in e["both"]
    ]


def versus_section(versus: list[dict]) -> list[str]:
    """The summary's table of every checkpoint against the fixed references and the checkpoints it
    cross-played (the metrics of `versus_files`), where the run measured them."""
    rows = [row for metrics in versus for row in versus_rows(metrics)]
    if not rows:
        return []
    chips = any("chips_per_hand" in (row[o] or {}) for row in rows for o in ("seat0", "seat1"))
    mixed = len({row["game"] for row in rows}) > 1  # a mix of games: a row per game
    if mixed:
        rows.sort(key=lambda row: row["game"])  # stable: each game's checkpoints in the run's order
    head = ["game"] if mixed else []
    head += ["model", "against", "games", "win [95% CI]", "draw", "loss", "win in seat 0", "win in seat 1"]
    head += ["chips a hand in seat 0", "in seat 1"] if chips else []

    def cell(result: dict | None, key: str, percent: bool = True) -> str:
        return format_interval((result or {}).get(key), percent=percent)

    table = []
    for row in rows:
        both = row["both"]
        line = [row["game"]] if mixed else []
        line += [row["model"], row["opponent"], str(both["games"]), cell(both, "win"), cell(both, "tie")]
        line += [cell(both, "loss"), cell(row["seat0"], "win"), cell(row["seat1"], "win")]
        line += [cell(row[o], "chips_per_hand", percent=False) for o in ("seat0", "seat1")] if chips else []
        table.append(line)
    title = "\n## Against fixed references and the starting model\n\n"
    return [title, markdown_table(head, table) + "\n\n", VERSUS_NOTE.format(versus=VERSUS) + "\n"]


def strategy_section(versus: list[dict]) -> list[str]:
    """The summary's table of each checkpoint's Kuhn Poker strategy as its games against each reference
    and checkpoint show it (the metrics of `versus_files`), and its exact worth
    (`games.textarena.kuhn_strategy`), where the run measured it."""
    from ..games.textarena.kuhn_strategy import VALUES

    rows = []
    for metrics in versus:
        read = metrics.get("strategies") or {}
        for row in versus_rows(metrics):
            if row["model"] in read:
                strategy = read[row["model"]]
                cells = [format_interval(strategy[key]) for key in VALUES]
                rows.append([row["model"], row["opponent"], str(strategy["moves"]), *cells])
    if not rows:
        return []
    head = ["model", "its moves against", "moves", *VALUES.values()]
    return ["\n## Kuhn Poker strategy\n\n", markdown_table(head, rows) + "\n\n", STRATEGY_NOTE + "\n"]


STRATEGY_NOTE = (
    "Each checkpoint's share of bets and calls at each of a hand's twelve information sets, read from its moves "
    "in those games, and that strategy's chips a hand, exact over the deals: against the equilibrium, and against "
    "the best response to it (the least it can be held to). The game's value is -1/18 to the first to act; "
    "each evaluation's report.md has the shares themselves."
)


PROMOTION_FILE = "promotion.json"  # an iteration's promotion decision (`league.promotion.Promotion`)
SKILL_FILE = "skill.json"  # a model's highest skill level against its lowest (the game's `follows_levels`)
# each skill level against references outside the model (the game's `judge_levels`), and its table
SKILL_LEVELS_FILE, SKILL_LEVELS_TABLE = "skill_levels.json", "skill_levels.md"
SKILL_TEST_DIR = "skill_test"  # eval/SKILL_TEST_DIR: the final model's levels on the test split, as eval/ has them
PROGRESS_FILE = "progress.md"  # RUN_DIR/report/: progress per promoted checkpoint (`league.progress`)


def league_sections(run_dir: Path, stages: list[Path], name: Any) -> list[str]:
    """The league's part of the summary: each iteration's promotion decision, each model's skill
    match and its levels judged against the references, and the progress per promoted checkpoint (where
    the run made them)."""
    parts = []
    decisions = [
        (name(p), json.loads((p / PROMOTION_FILE).read_text())) for p in stages if (p / PROMOTION_FILE).exists()
    ]
    if decisions:
        rows: list[tuple[str, ...]] = []
        for stage, d in decisions:
            share = "" if d.get("win_share") is None else f"{d['win_share']:.1%} [{d['ci'][0]:.1%}, {d['ci'][1]:.1%}]"
            kept = "promoted" if d["promoted"] else f"kept {d.get('previous', '')}"
            rows.append((stage, kept, share, str(d.get("games", "")), str(d.get("reason", ""))))
        parts.append("\n## Promotion (decided-game win share against the previous checkpoint, 95% interval)\n\n")
        parts.append(markdown_table(("stage", "decision", "win share", "games", "why"), rows) + "\n")
    skills = [
        (name(p), json.loads((p / "eval" / SKILL_FILE).read_text()))
        for p in stages
        if (p / "eval" / SKILL_FILE).exists()
    ]
    if skills:
        rows = []
        for stage, result in skills:
            level = result.get("expert_vs_novice") or {}
            mean, ci = level.get("mean"), level.get("ci")
            cell = "" if mean is None else f"{mean:.1%}" + (f" [{ci[0]:.1%}, {ci[1]:.1%}]" if ci else "")
            rows.append((stage, cell, str(result.get("meets_target", "")), str(result.get("follows", ""))))
        parts.append("\n## Skill levels (highest against lowest, decided games; target 65%)\n\n")
        parts.append(markdown_table(("model", "win share", "meets target", "levels followed"), rows) + "\n")
    judged = [(name(p), p / "eval" / SKILL_LEVELS_TABLE) for p in stages if (p / "eval" / SKILL_LEVELS_TABLE).exists()]
    if judged:
        parts.append(
            "\n## Skill levels against references outside the model (the level in seat 0 against each scripted "
            "negotiator; both seat orders against the model unconditioned; cooperation of the same games beside; "
            "then each level against the one below it, paired over instances)\n"
        )
        parts += [f"\n### {stage}\n\n{table.read_text()}" for stage, table in judged]
    tested = [(name(p), p / "eval" / SKILL_TEST_DIR / SKILL_LEVELS_TABLE) for p in stages]
    tested = [(stage, table) for stage, table in tested if table.exists()]
    if tested:
        parts.append(
            "\n## Skill levels of the final model on the test split (each level against the full-strength "
            "scripted negotiator, the highest level against the model unconditioned, both seat orders)\n"
        )
        parts += [f"\n### {stage}\n\n{table.read_text()}" for stage, table in tested]
    progress = run_dir / "report" / PROGRESS_FILE
    if progress.exists():
        parts.append("\n" + progress.read_text())
    return parts


def _whole(value: float | None) -> str:
    """Seconds or percent, rounded to a whole number; empty when not known."""
    return "" if value is None else f"{value:.0f}"


_STEP = re.compile(r"(?:^|\s)step:(\d+)\s+-\s+(.*)$")
# a value may come wrapped as numpy prints it (`val-core/.../mean@1:np.float64(0.81)`)
_METRIC = re.compile(r"([\w/@.\-]+):(?:np\.\w+\()?([-+\d.eE]+|nan|inf)\)?(?:\s+-\s+|\s*$)")


def console_metrics(lines: Iterable[str]) -> list[dict[str, float]]:
    """verl's console logger lines (`step:3 - actor/entropy:0.41 - ...`) as one dict per step."""
    steps = []
    for line in lines:
        found = _STEP.search(line)
        if not found:
            continue
        row = {"step": float(found.group(1))}
        for name, value in _METRIC.findall(found.group(2)):
            try:
                row[name] = float(value)
            except ValueError:
                continue
        steps.append(row)
    return steps


def tensorboard_metrics(events: Path) -> list[dict[str, float]]:
    """The scalars of the tensorboard event files in `events`, as one dict per step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})  # 0: every point
    accumulator.Reload()
    steps: dict[int, dict[str, float]] = {}
    for tag in accumulator.Tags()["scalars"]:
        for event in accumulator.Scalars(tag):
            steps.setdefault(event.step, {"step": float(event.step)})[tag] = float(event.value)
    return [steps[k] for k in sorted(steps)]


def training_trend(steps: list[dict[str, float]]) -> str | None:
    """The mean reward of the training's games, its token entropy and (online) its games' agreement, from the first
    logged step to the last, and whether the entropy is collapsing (ending below `COLLAPSE` of where it began):
    whether the run learns, and whether its policy has stopped exploring (and so stopped finding better play), are
    what a run's reader looks for first, and should not have to read off a plot. None without any of them."""
    reward = first_logged(CURVES["reward"], steps)
    agreed = f"{STEP_MEASURES}/agreed/mean"
    ends = {}  # metric: its first and last (step, value)
    for metric in (reward, ENTROPY, agreed):
        points = [(s["step"], s[metric]) for s in steps if metric in s]
        if len(points) >= 2:
            ends[metric] = (points[0], points[-1])
    if not ends:
        return None
    said = {reward: ("reward of its games", ""), ENTROPY: ("token entropy", " nats"), agreed: ("agreement", "")}
    moves = ", ".join(f"{said[m][0]} {a:.3f} → {b:.3f}{said[m][1]}" for m, ((_, a), (_, b)) in ends.items())
    (first_step, _), (last_step, _) = next(iter(ends.values()))
    text = f"{moves} from step {first_step:g} to {last_step:g}"
    if ENTROPY in ends:
        (_, first), (_, last) = ends[ENTROPY]
        if first > 0 and last < COLLAPSE * first:
            return f"{text}: **collapsing** (entropy below {COLLAPSE:.0%} of its start)"
    return text


def step_strategy(step: dict[str, float]) -> np.ndarray | None:
    """The Kuhn Poker strategy of a training step's games, from the means of their information sets' counts
    (`games.textarena.kuhn_strategy.move_counts`, logged as STEP_MEASURES/<count>/mean); None where the step
    logged none."""
    from ..games.textarena.kuhn_strategy import strategy_of_means

    prefix, suffix = f"{STEP_MEASURES}/", "/mean"
    means = {k[len(prefix) : -len(suffix)]: v for k, v in step.items() if k.startswith(prefix) and k.endswith(suffix)}
    return strategy_of_means(means)


# a Kuhn Poker step's strategy worth against the equilibrium (`with_strategy`), as its curves name it
STRATEGY_CURVES = {"strategy/equilibrium_first": "first to act", "strategy/equilibrium_second": "second to act"}
STRATEGY_PANEL = "Kuhn Poker strategy vs equilibrium (dashed: the game's values)"


def with_strategy(step: dict[str, float]) -> dict[str, float]:
    """The step with what its games' Kuhn Poker strategy (`step_strategy`) is worth against the equilibrium as
    each seat (STRATEGY_CURVES), where it logged the counts and the games reached the sets that needs (a policy
    that always opens with a bet never shows, in self-play, what it does as the second after a check)."""
    from ..games.textarena.kuhn_strategy import values

    strategy = step_strategy(step)
    if strategy is None:
        return step
    worth = values(strategy)
    read = {name: float(worth[name.split("/")[1]]) for name in STRATEGY_CURVES}
    return {**step, **{name: value for name, value in read.items() if value == value}}  # NaN: not reached


def strategy_trend(steps: list[dict[str, float]]) -> str | None:
    """In Kuhn Poker, the exact worth against the equilibrium of the strategy the training's games show, at the
    first logged step and the last (`with_strategy`; – where the games did not show it): whether self-play
    moves toward the equilibrium, between the checkpoints evaluated. None where fewer than two steps logged it."""
    from ..games.textarena.kuhn_strategy import VALUE_FIRST

    read = [s for s in map(with_strategy, steps) if any(name in s for name in STRATEGY_CURVES)]
    if len(read) < 2:
        return None

    def pair(step: dict[str, float]) -> str:
        return " / ".join(f"{step[name]:+.3f}" if name in step else "–" for name in STRATEGY_CURVES)

    first, last = read[0], read[-1]
    return (
        f"strategy of its games against the equilibrium, first / second to act (value {VALUE_FIRST:+.3f} / "
        f"{-VALUE_FIRST:+.3f}), {pair(first)} at step {first['step']:g} → {pair(last)} at step {last['step']:g}"
    )


def _read_steps(path: Path) -> list[dict[str, float]]:
    try:
        steps = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return steps if isinstance(steps, list) else []


def first_logged(names: Sequence[str], steps: list[dict[str, float]]) -> str | None:
    """The first of `names` (one curve's metric as verl names it in its versions) that some step logged."""
    return next((name for name in names if any(name in s for s in steps)), None)


def curve_panels(steps: list[dict[str, float]]) -> dict[str, list[str]]:
    """The curves `plot_curves` draws: each panel's title and the logged metrics it plots."""
    found = {title: first_logged(names, steps) for title, names in CURVES.items()}
    panels = {f"{title} ({name})": [name] for title, name in found.items() if name}
    logged = {name for s in steps for name in s}
    validation = sorted(name for name in logged if name.startswith("val-"))
    for measure in MEASURES:
        training = [name] if (name := f"{STEP_MEASURES}/{measure}/mean") in logged else []
        names = training + [n for n in validation if n.endswith(f"/{measure}/mean@1")]
        if names:
            panels[f"{measure} {PER_GAME}"] = names
    if strategy := [name for name in STRATEGY_CURVES if name in logged]:
        panels[STRATEGY_PANEL] = strategy
    return panels


def series_label(name: str) -> str:
    """A curve's legend: the training games' (`STEP_MEASURES`) or a validation data source's, or a seat's
    strategy curve (STRATEGY_CURVES)."""
    if name in STRATEGY_CURVES:
        return STRATEGY_CURVES[name]
    return "training games" if name.startswith(f"{STEP_MEASURES}/") else f"validation: {name.split('/')[1]}"


def plot_curves(steps: list[dict[str, float]], out: Path) -> bool:
    """Plot reward, entropy, KL and clip fraction per step, what the training steps' and validations' games
    did (`MEASURES`) and, in Kuhn Poker, what their strategy is worth (`with_strategy`), each where the trainer
    logged it, into `out`; False when it logged none of them."""
    steps = [with_strategy(step) for step in steps]
    shown = curve_panels(steps)
    if not shown:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..games.textarena.kuhn_strategy import VALUE_FIRST

    columns = min(PANELS_A_ROW, len(shown))
    rows = -(-len(shown) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3 * rows), squeeze=False)
    for axis in axes.flat[len(shown) :]:
        axis.set_visible(False)
    for axis, (title, names) in zip(axes.flat, shown.items()):
        for name in names:
            points = [(s["step"], s[name]) for s in steps if name in s]
            axis.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=series_label(name))
        if title == STRATEGY_PANEL:  # the game's value to each seat, where the strategy should go
            for value in (VALUE_FIRST, -VALUE_FIRST):
                axis.axhline(value, color="grey", linestyle="--", linewidth=0.8)
        if title.endswith(PER_GAME) or title == STRATEGY_PANEL:  # training games or which validation; the seats
            axis.legend(fontsize=6)
        axis.set_title(title, fontsize=8)
        axis.set_xlabel("step")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return True
