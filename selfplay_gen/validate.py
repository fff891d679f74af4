"""Checks parsed JSON against TypedDict declarations, so that one declaration serves mypy and the
reader alike. A TypedDict is an object with its required keys (other keys pass), `list[X]` a list
of X, `X | None` an X or null, `Literal[...]` one of its values, `int` a 64-bit integer (never a
bool), `float` a finite number, `str` and `bool` themselves, `dict[...]` any object.
`Annotated[X, rule, ...]` checks X, then calls each rule on the value (see `within`, `lengths`,
`Whole`); a rule raises `Invalid`.

A failure names the path to the bad value and the value itself, e.g. `field
'players[1].token_ids[17]': -3 is not a token id`. The path is built only while a failure unwinds,
and lists of numbers are checked in bulk first, so a valid record costs little.
"""

from __future__ import annotations

import math
import types
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

Check = Callable[[Any], None]
SHOWN = 80  # characters of a bad value quoted in a message
_MISSING = object()


class Invalid(ValueError):
    """A value that breaks its declaration; `path` grows outward while the check unwinds."""

    def __init__(self, value: object, problem: str):
        super().__init__(problem)
        self.value, self.problem = value, problem
        self.path: list[str] = []

    def at(self, step: str) -> Invalid:
        self.path.append(step)
        return self

    def __str__(self) -> str:
        field = "".join(reversed(self.path)).lstrip(".")
        if self.value is _MISSING:
            return f"missing field '{field}'"
        shown = repr(self.value)
        shown = shown if len(shown) <= SHOWN else shown[: SHOWN - 3] + "..."
        return f"field '{field}': {shown} {self.problem}" if field else f"{shown} {self.problem}"


def check(value: object, kind: Any) -> None:
    """Raise `Invalid` unless `value` is what `kind` declares."""
    _compile(kind)(value)


def each(values: Iterable, rule: Check) -> None:
    """`rule` on every item, naming the index of the first that fails."""
    for i, value in enumerate(values):
        try:
            rule(value)
        except Invalid as err:
            raise err.at(f"[{i}]") from None


def missing(name: str) -> Invalid:
    return Invalid(_MISSING, "").at(f".{name}")


@dataclass(frozen=True)
class Whole:
    """`Annotated` metadata: a rule that checks the value by itself, type included, in place of
    the declared type's check (for bulk data, which would cost twice as much checked twice)."""

    rule: Check


def within(low: float, high: float = math.inf, open_low: bool = False) -> Check:
    """A rule: a number in [low, high], or (low, high] with `open_low`."""
    left = "(" if open_low else "["
    wanted = f"in {left}{low:g}, {high:g}]" if high < math.inf else f"{'>' if open_low else '>='} {low:g}"

    def rule(value: float) -> None:
        if value < low or value > high or open_low and value == low:
            raise Invalid(value, f"is not {wanted}")

    return rule


def lengths(outer: int, *inner: int) -> Check:
    """A rule: nested lists of these lengths, outermost first (an 8x8 table: `lengths(8, 8)`)."""
    items = lengths(*inner) if inner else None

    def rule(value: list) -> None:
        if len(value) != outer:
            raise Invalid(value, f"has {len(value)} items, not {outer}")
        if items:
            each(value, items)

    return rule


def _integer(value: object) -> None:
    if type(value) is not int or not -(2**63) <= value < 2**63:
        raise Invalid(value, "is not an integer")


def _number(value: object) -> None:
    if type(value) is int:
        return
    if type(value) is not float or not math.isfinite(value):
        raise Invalid(value, "is not a finite number")


def _exactly(kind: type, problem: str) -> Check:
    def check(value: object) -> None:
        if type(value) is not kind:
            raise Invalid(value, problem)

    return check


_mapping = _exactly(dict, "is not a JSON object")


def as_list(value: object) -> list:
    if type(value) is not list:
        raise Invalid(value, "is not a list")
    return value


def no_booleans(values: list) -> bool:
    """array() takes true and false as 1 and 0: a list it converted may still hold them."""
    return bool not in set(map(type, values))


def _integers(value: object) -> None:
    """Lists of ids are long: array() converts them in C and refuses what is not an integer of
    its kind (unsigned 32-bit first, the usual case and the fastest to convert)."""
    for kind in "Iq":
        try:
            array(kind, as_list(value))
            if no_booleans(as_list(value)):
                return
            break
        except (TypeError, OverflowError):
            pass
    each(as_list(value), _integer)


def _numbers(value: object) -> None:
    """A finite sum means every term is finite; only a list that fails is looked at item by item."""
    try:
        finite = math.isfinite(sum(as_list(value)))
    except (TypeError, OverflowError):
        finite = False
    if not finite:
        each(as_list(value), _number)


SCALARS: dict[Any, Check] = {
    int: _integer,
    float: _number,
    str: _exactly(str, "is not a string"),
    bool: _exactly(bool, "is not true or false"),
}
BULK: dict[Any, Check] = {int: _integers, float: _numbers}


@cache
def _compile(kind: Any) -> Check:
    origin, args = get_origin(kind), get_args(kind)
    if origin is Annotated:
        if isinstance(args[1], Whole):
            return args[1].rule
        return _annotated(_compile(args[0]), args[1:])
    if is_typeddict(kind):
        return _object(kind)
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return _optional(_compile(inner))
    if origin is Literal:
        return _one_of(args)
    if origin is list:
        return BULK.get(args[0]) or _items(_compile(args[0]))
    if origin is dict:
        return _mapping
    return SCALARS[kind]


def _annotated(base: Check, rules: tuple[Check, ...]) -> Check:
    def check(value: object) -> None:
        base(value)
        for rule in rules:
            rule(value)

    return check


def _object(kind: Any) -> Check:
    fields = [
        (name, _compile(declared), name in kind.__required_keys__)
        for name, declared in get_type_hints(kind, include_extras=True).items()
    ]

    def check(value: Any) -> None:
        _mapping(value)
        for name, field, required in fields:
            if name in value:
                try:
                    field(value[name])
                except Invalid as err:
                    raise err.at(f".{name}") from None
            elif required:
                raise missing(name)

    return check


def _optional(inner: Check) -> Check:
    def check(value: object) -> None:
        if value is not None:
            inner(value)

    return check


def _one_of(allowed: tuple) -> Check:
    kinds = {type(a) for a in allowed}  # so that neither True nor 1.0 passes for 1

    def check(value: object) -> None:
        if type(value) not in kinds or value not in allowed:
            raise Invalid(value, f"is not one of {', '.join(map(repr, allowed))}")

    return check


def _items(item: Check) -> Check:
    def check(value: object) -> None:
        each(as_list(value), item)

    return check
