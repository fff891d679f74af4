"""A command's settings as one typed tree of frozen dataclasses, as verl declares its trainer
configuration: each knob is a field with ONE default and one help text (`knob`), each part of a
run a section (a nested dataclass). Everything else is generated from the tree:

- its path is its one name: `sampling.temperature` in a config file (YAML), in a dotted override
  (`sampling.temperature=0.7`), as a flag (`--sampling.temperature 0.7`) and, upper-cased under
  one prefix with `__` between levels, as an environment variable (`SELFPLAY_SAMPLING__TEMPERATURE`;
  `__` because single underscores sit inside names such as `max_new_tokens`). A tree whose root sets
  `NAMED_FLAGS` (the commands that play games, whose flags users have always typed so) spells each
  flag by the knob's own name instead (`--temperature`, `--max-new-tokens`), its names unique in the
  tree; a knob may add a short flag or an older spelling of its own (`-n`, `--limit-instances`);
- a tuple's flag may be repeated (`--base-url A --base-url B`) or given a list (`A,B`);
- its type (the annotation, or a click type a knob names) converts and checks every value, from
  whichever source, so a boolean is `true` or `false` everywhere;
- `Alias`es are the variables the run_selfplay_*.sh scripts document (PORT, TEMPERATURE, ...):
  read only where a command is asked to (`--script-env`, which the scripts pass), never by
  the Python commands on their own, so a generic name such as PORT or LR set for something else
  changes nothing.

Sources, lowest first: the defaults, a config file, the scripts' aliases, the prefixed variables,
flags, dotted overrides.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

PREFIX = "SELFPLAY_"
NULL = "null"  # an optional knob set to None, in an override, a flag or a variable
T = TypeVar("T")


@dataclass(frozen=True)
class Alias:
    """A variable a run_selfplay_*.sh script documents for a knob. `spelling`: a boolean's
    (true, false) as this variable has always been written (e.g. ("on", "off")); a boolean without
    one reads as a click flag's variable always did (1/0, true/false, yes/no, on/off); other values
    are converted by the knob's type."""

    name: str
    spelling: tuple[str, str] | None = None


def knob(
    default: T,
    help: str = "",
    *,
    type: click.ParamType | None = None,
    alias: str | Alias | None = None,
    show_default: str | None = None,
    cli: bool = True,
    flags: tuple[str, ...] = (),
) -> T:
    """A setting: its one default, what it does (help), optionally a click type that checks it beyond
    its annotation, the script variable that also sets it, and how --help shows a default worked out
    later. `cli=False`: set in a config file or an override only (no flag, no variable). `flags`: a
    short flag or an older spelling its command also takes (`-n`)."""
    aliases = (Alias(alias) if isinstance(alias, str) else alias,) if alias else ()
    meta = {"help": help, "type": type, "aliases": aliases, "show_default": show_default, "cli": cli, "flags": flags}
    return dataclasses.field(default=default, metadata=meta)


def section(cls: Callable[[], T]) -> T:
    """A nested part of the tree, with its own defaults."""
    return dataclasses.field(default_factory=cls)


def outside(default: T) -> T:
    """A field of the dataclass that is no setting (e.g. a dry run's flag): never written, never read."""
    return dataclasses.field(default=default, metadata={"outside": True})


class Bool(click.ParamType):
    """true or false (any case); YAML's own booleans pass as they are."""

    name = "true|false"

    def convert(self, value, param, ctx):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        self.fail(f"{value!r} is not true or false", param, ctx)


class Switch(click.Choice):
    """A choice among words that include off (and maybe on): YAML reads an unquoted off and on as false
    and true, which this takes back as the words."""

    def convert(self, value, param, ctx):
        if isinstance(value, bool):
            value = "on" if value else "off"
        return super().convert(value, param, ctx)


class FiniteRange(click.FloatRange):
    """A FloatRange that also refuses nan and inf: nan passes every bound, and either would be
    written into every record of a run."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class ListOf(click.ParamType):
    """Several values: a YAML list, or one string separated by commas or spaces (a,b or 'a b')."""

    def __init__(self, item: click.ParamType):
        self.item = item
        self.name = f"{item.name},..."

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        parts = value if isinstance(value, list) else str(value).replace(",", " ").split()
        return tuple(self.item.convert(part, param, ctx) for part in parts)


class PathType(click.ParamType):
    name = "path"

    def convert(self, value, param, ctx):
        return value if isinstance(value, Path) else Path(str(value))


class Number(click.ParamType):
    """A number kept as written (1e-5, as verl's command line shows it), checked to be one."""

    name = "number"

    def convert(self, value, param, ctx):
        text = str(value)
        try:
            float(text)
        except ValueError:
            self.fail(f"{text!r} is not a number", param, ctx)
        return text


BASIC: dict[Any, click.ParamType] = {
    int: click.INT,
    float: click.FLOAT,
    str: click.STRING,
    bool: Bool(),
    Path: PathType(),
}


@dataclass(frozen=True)
class Knob:
    """One setting of a tree, found by walking it."""

    path: str  # sampling.temperature
    default: Any
    type: click.ParamType
    optional: bool  # None is a value (it means what the help says)
    help: str
    aliases: tuple[Alias, ...]
    show_default: str | None
    cli: bool
    flags: tuple[str, ...] = ()  # its short flag or older spelling, beside `flag`
    named: bool = False  # its flag and click parameter are its name's, not its path's (`NAMED_FLAGS`)

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]

    @property
    def env(self) -> str:
        return PREFIX + self.path.upper().replace(".", "__")

    @property
    def flag(self) -> str:
        return "--" + (self.name.replace("_", "-") if self.named else self.path)

    @property
    def param(self) -> str:
        """click's parameter name: the name in a tree of named flags, else the path with `__` between levels."""
        return self.name if self.named else self.path.replace(".", "__")

    def convert(self, value: Any, where: str) -> Any:
        """`value` as this knob holds it; a ConfigError naming `where`, the knob and the value if it is none."""
        if value is None or (self.optional and isinstance(value, str) and value.strip().lower() == NULL):
            if self.optional:
                return None
            raise ConfigError(f"{where}: {self.path} may not be empty ({self.help or 'no default of None'})")
        try:
            return self.type.convert(value, None, None)
        except click.BadParameter as error:
            raise ConfigError(f"{where}: {self.path}={value!r}: {error.format_message()}") from None


class ConfigError(click.UsageError):
    """A setting that cannot be read: says where (file and line, variable, flag) and which knob."""


def _annotation(hint: Any) -> tuple[Any, bool]:
    """(the type, whether None is allowed) of an annotation such as `int | None`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"{hint}: a knob holds one type, or it and None")
        return args[0], True
    return hint, False


def _click_type(hint: Any, given: click.ParamType | None, where: str) -> click.ParamType:
    if given is not None:
        return given
    if typing.get_origin(hint) is tuple:
        return ListOf(BASIC[typing.get_args(hint)[0]])
    if hint not in BASIC:
        raise TypeError(f"{where}: no type for {hint}; give the knob a click type")
    return BASIC[hint]


def _inherited(cls: type, name: str, key: str) -> Any:
    """A field's metadata `key` from the first class in `cls`'s MRO that declares it (a section that
    only changes a base's defaults keeps the base's help and aliases)."""
    for base in cls.__mro__:
        for f in dataclasses.fields(base) if dataclasses.is_dataclass(base) else ():
            if f.name == name and f.metadata.get(key):
                return f.metadata[key]
    return None


def knobs(cls: type, prefix: str = "", named: bool | None = None) -> Iterator[Knob]:
    """Every knob of the tree rooted at dataclass `cls`, depth first, in declaration order; spelled by
    name where the root says `NAMED_FLAGS = True`."""
    named = bool(getattr(cls, "NAMED_FLAGS", False)) if named is None else named
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("outside"):
            continue
        path = prefix + f.name
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            yield from knobs(hint, path + ".", named)  # type: ignore[arg-type]
            continue
        if f.default is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a knob needs its default")
        kind, optional = _annotation(hint)
        yield Knob(
            path=path,
            default=f.default,
            type=_click_type(kind, _inherited(cls, f.name, "type"), path),
            optional=optional,
            help=_inherited(cls, f.name, "help") or "",
            aliases=_inherited(cls, f.name, "aliases") or (),
            show_default=f.metadata.get("show_default"),
            cli=f.metadata.get("cli", True),
            flags=_inherited(cls, f.name, "flags") or (),
            named=named,
        )


def build(cls: type[T], values: Mapping[str, Any], prefix: str = "") -> T:
    """The tree `cls` with `values` ({path: value}, converted) over its defaults."""
    hints = typing.get_type_hints(cls)
    given: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        path = prefix + f.name
        if dataclasses.is_dataclass(hints[f.name]):
            given[f.name] = build(hints[f.name], values, path + ".")
        elif path in values and not f.metadata.get("outside"):
            given[f.name] = values[path]
    try:
        return cls(**given)
    except ValueError as error:  # a section's own check (__post_init__)
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: {error}") from None


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{path: value} of every knob of `tree`."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(tree):
        if f.metadata.get("outside"):
            continue
        value = getattr(tree, f.name)
        if dataclasses.is_dataclass(value):
            out.update(flat(value, prefix + f.name + "."))
        else:
            out[prefix + f.name] = value
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value


def to_yaml(tree: Any) -> str:
    """The tree as nested YAML mappings, in declaration order; what `read` reads back."""

    def nested(node: Any) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(node):
            if not f.metadata.get("outside"):
                value = getattr(node, f.name)
                out[f.name] = nested(value) if dataclasses.is_dataclass(value) else _plain(value)
        return out

    return yaml.safe_dump(nested(tree), sort_keys=False, default_flow_style=False)


def _unknown(path: str, known: Mapping[str, Knob]) -> str:
    """No setting `path`, and the knob it most likely meant: one of the same name in another section, else the
    closest spelling."""
    leaf = path.rpartition(".")[2]
    close = [k for k in known if k.rpartition(".")[2] == leaf] or difflib.get_close_matches(path, list(known), n=1)
    return f"no setting {path!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def _is_section(name: str, known: Mapping[str, Knob]) -> bool:
    """Whether `name` is a section of the tree: some knob's path lies under it."""
    return any(path.startswith(name + ".") for path in known)


def read(path: Path, known: Mapping[str, Knob]) -> dict[str, Any]:
    """{knob path: value} from a YAML config file, each value checked by its knob; a ConfigError
    names the file, the line, the knob and the value of anything it cannot take."""
    try:
        text = path.read_text()
        root = yaml.compose(text)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not YAML: {error}") from None
    out: dict[str, Any] = {}

    def walk(node: yaml.Node | None, prefix: str) -> None:
        if node is None:
            return
        if not isinstance(node, yaml.MappingNode):
            raise ConfigError(f"{path}, line {node.start_mark.line + 1}: {prefix or 'the file'} is not a mapping")
        for key_node, value_node in node.value:
            name = prefix + str(key_node.value)
            where = f"{path}, line {key_node.start_mark.line + 1}"
            if isinstance(value_node, yaml.MappingNode):
                if not _is_section(name, known):
                    raise ConfigError(f"{where}: {_unknown(name, known)}")
                walk(value_node, name + ".")
                continue
            if name not in known:
                raise ConfigError(f"{where}: {_unknown(name, known)}")
            value = yaml.safe_load(yaml.serialize(value_node))
            out[name] = known[name].convert(value, where)

    walk(root, "")
    return out


def override(text: str, known: Mapping[str, Knob]) -> tuple[str, Any] | None:
    """(path, value) of a dotted override `path=value` that names a knob; None for anything else: a verl
    Hydra override, whose key lies outside the tree's sections (`trainer.test_freq`, `+actor_rollout_ref.x`,
    a config group such as `critic=...`). A key in one of the tree's sections that names no knob, or a bare
    word spelled like one of its knobs, is a typo, refused here rather than by verl's Hydra after the stages
    before training have run."""
    name, sep, value = text.partition("=")
    where = f"override {text!r}"
    if not sep or name.startswith(("+", "~")):
        return None
    if name in known:
        return name, known[name].convert(value, where)
    section = name.partition(".")[0]
    typo = difflib.get_close_matches(name, list(known), n=1) if "." not in name else []
    if typo or _is_section(section, known):
        raise ConfigError(f"{where}: {_unknown(name, known)}")
    return None


def env_value(k: Knob, environ: Mapping[str, str], aliases: bool) -> tuple[str, Any] | None:
    """(variable, value) of the variable that sets `k`: its own, else (with `aliases`) a script's."""
    if k.env in environ and k.cli:
        return k.env, k.convert(environ[k.env], f"environment variable {k.env}")
    for alias in k.aliases if aliases else ():
        if alias.name not in environ:
            continue
        raw = environ[alias.name]
        if alias.spelling is not None:
            if raw not in alias.spelling:
                raise ConfigError(f"environment variable {alias.name}={raw!r}: give {' or '.join(alias.spelling)}")
            return alias.name, raw == alias.spelling[0]
        if isinstance(k.type, Bool):
            try:
                return alias.name, click.BOOL.convert(raw, None, None)
            except click.BadParameter as error:
                raise ConfigError(f"environment variable {alias.name}={raw!r}: {error.format_message()}") from None
        return alias.name, k.convert(raw, f"environment variable {alias.name}")
    return None


def options(cls: type, script_env: bool = False) -> Callable[[Callable], Callable]:
    """A click decorator adding one option per knob of `cls` (its flag, its type, its help with the
    default and the variables that set it: the scripts' too, for a command that reads them, `script_env`).
    The options default to None, so that `resolve` knows what was given; the tree's default is what --help
    shows."""

    def apply(function: Callable) -> Callable:
        for k in reversed(list(knobs(cls))):
            if not k.cli:
                continue
            shown = k.show_default or (NULL if k.default is None else _shown(k.default))
            script = "".join(f"; script: {a.name}" for a in k.aliases) if script_env else ""
            help = f"{k.help} [default: {shown}; env: {k.env}{script}]"
            repeated = isinstance(k.type, ListOf)
            function = click.option(
                k.flag, *k.flags, k.param, type=k.type, default=None, help=help, multiple=repeated,
                callback=_joined if repeated else None,
            )(function)  # fmt: skip
        return function

    return apply


def _joined(ctx, param, values: tuple[tuple, ...]) -> tuple | None:
    """A repeated list flag's values as one list; None (not given) where it was not given."""
    return tuple(v for value in values for v in value) if values else None


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or '""'
    return str(value)


def resolve(
    cls: type[T],
    given: Mapping[str, Any],
    *,
    config_file: Path | None = None,
    overrides: tuple[str, ...] = (),
    script_env: bool = False,
    environ: Mapping[str, str] | None = None,
    alias_applies: Callable[[Knob, Mapping[str, Any]], bool] = lambda k, values: True,
) -> tuple[T, tuple[str, ...]]:
    """The tree `cls` from every source (see the module's docstring), and the overrides that named no
    knob (for the stage that takes them, e.g. verl). `given`: click's values by parameter name (None
    where the flag was not given). `alias_applies(knob, values so far)` can keep a script's variable
    from a knob it does not mean (e.g. RL_LR from the trainers that do not run)."""
    environ = os.environ if environ is None else environ
    known = {k.path: k for k in knobs(cls)}
    values: dict[str, Any] = read(config_file, known) if config_file is not None else {}
    passed_on: list[str] = []
    set_by: dict[str, Any] = {}
    for text in overrides:
        found = override(text, known)
        if found is None:
            passed_on.append(text)
        else:
            set_by[found[0]] = found[1]
    for k in known.values():
        value = given.get(k.param)
        if value is not None:
            set_by.setdefault(k.path, value)
    for k in known.values():  # variables below flags and overrides; aliases may look at those
        if k.path in set_by:
            continue
        found_env = env_value(k, environ, aliases=False)
        if found_env is not None:
            values[k.path] = found_env[1]
    for k in known.values():
        if k.path in set_by or (k.cli and k.env in environ) or not script_env:
            continue
        found_alias = env_value(k, environ, aliases=True)
        if found_alias is not None and alias_applies(k, {**values, **set_by}):
            values[k.path] = found_alias[1]
    values.update(set_by)
    return build(cls, values), tuple(passed_on)


def command(
    tree: type, *more: Callable[[Callable], Callable], script_env: bool = False
) -> Callable[[Callable], Callable]:
    """The options of a command that reads `tree`: --config FILE, --print-config, one per knob, the
    command's `more` options, and the positional dotted overrides (`sampling.temperature=0.7`);
    `script_env`: it reads the scripts' variables too (see `options`)."""

    def apply(function: Callable) -> Callable:
        function = click.argument("arguments", nargs=-1, type=click.UNPROCESSED, metavar="[OVERRIDES]...")(function)
        for option in reversed(more):
            function = option(function)
        function = options(tree, script_env)(function)
        function = click.option("--print-config", is_flag=True, help="Print the whole configuration (YAML) and exit.")(
            function
        )
        return click.option(
            "--config",
            "config_file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="A YAML configuration, as --print-config prints it; variables, flags and dotted overrides "
            "(sampling.temperature=0.7) go over it.",
        )(function)

    return apply


def load(
    tree: type[T],
    given: Mapping[str, Any],
    *,
    script_env: bool = False,
    alias_applies: Callable[[Knob, Mapping[str, Any]], bool] = lambda k, values: True,
) -> tuple[T, tuple[str, ...]]:
    """The tree of a `command` from every source (its parsed options `given`), and the positional
    arguments that name no knob."""
    return resolve(
        tree,
        given,
        config_file=given["config_file"],
        overrides=tuple(given["arguments"]),
        script_env=script_env,
        alias_applies=alias_applies,
    )


def printed(cfg: Any, given: Mapping[str, Any]) -> bool:
    """--print-config: the tree printed, and nothing else done."""
    if given["print_config"]:
        click.echo(to_yaml(cfg), nl=False)
    return bool(given["print_config"])


def names(tree: Any) -> dict[str, Any]:
    """{name: value} of every knob of a tree whose names are unique (`NAMED_FLAGS`): how the code
    below a command that plays games reads its settings (`opts["temperature"]`)."""
    return {path.rpartition(".")[2]: value for path, value in flat(tree).items()}
