"""`python -m convert.summary convert_summary.json rollout_n`: print one field of a conversion
summary, so scripts set verl's `rollout.n` from the games per group the converter wrote
instead of repeating it. A dotted path reaches nested fields (`groups.count`)."""

from __future__ import annotations

import json
import sys


def field(path: str, name: str):
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as err:
        raise SystemExit(f"cannot read the conversion summary {path}: {err}") from None
    for key in name.split("."):
        if not isinstance(value, dict) or key not in value:
            raise SystemExit(f"{path}: no field {name!r} (missing {key!r})")
        value = value[key]
    return value


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python -m convert.summary CONVERT_SUMMARY_JSON FIELD")
    print(field(*argv))


if __name__ == "__main__":
    main(sys.argv[1:])
