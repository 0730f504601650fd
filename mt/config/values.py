"""Values from YAML or flags turned into a config field's type, with one-line errors naming the field.

A choice field is a `Literal[...]`, or `int | Literal["auto"]` for a number or a word; numbers come
as YAML numbers or as text from `--set`; a list as a YAML list, "[a, b]" or "a,b". No field takes
NaN or an infinity: each would fail later, or worse.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, get_args, get_origin

import yaml

from mt.errors import ConfigError


def literal_choices(hint: Any) -> tuple[str, ...]:
    """The values a Literal[...] type allows (also as Optional[Literal[...]]); () for other types."""
    return tuple(value for h in (hint, *get_args(hint)) if get_origin(h) is Literal for value in get_args(h))


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Check/convert one value against its field type (recipes are YAML: ints for floats etc.); a
    value outside a Literal's choices is a one-line error naming `where` and the choices."""
    text = str(hint)
    if text.startswith("list"):
        return _coerce_list(value, where)
    if value is None:
        if "None" in text or type(None) in get_args(hint):
            return None
        raise ConfigError(f"{where}: must not be empty")
    present = [h for h in get_args(hint) if h is not type(None)]
    if len(present) == 1 and len(get_args(hint)) == 2:  # Optional[X] with a value: an X
        hint, text = present[0], str(present[0])
    choices = literal_choices(hint)
    numbers = [h for h in get_args(hint) if h in (int, float)]  # int | Literal["auto"]: a number or a word
    if choices and numbers:
        if str(value) in choices:
            return str(value)
        try:
            return coerce(value, numbers[0], where)
        except ConfigError:
            kind = "an integer" if numbers[0] is int else "a number"
            raise ConfigError(f"{where} must be {kind} or {' or '.join(choices)}, not {value!r}") from None
    if choices:
        if str(value) not in choices:
            either = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
            raise ConfigError(f"{where} must be {either}, not {value!r}")
        return str(value)
    if "dict" in text:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if text.startswith("float") or "float" in text.split("|")[0]:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        try:
            number = float(value)
        except (ValueError, OverflowError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
        if not math.isfinite(number):  # no field takes NaN or an infinity: each would fail later, or worse
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return number
    if hint is bool or text == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if hint is int or text == "int":
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"\s*[-+]?[0-9]{1,4000}\s*", value):
            return int(value)  # exactly, however large: a range check names the field
        try:
            as_float = float(value)  # "1e3", 3.0
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return int(as_float)
    if isinstance(value, bool):  # `tgt_lang: no` (Norwegian) in a recipe is YAML's false, not "False"
        raise ConfigError(
            f"{where}: expected text, got the YAML boolean {str(value).lower()} (unquoted no, yes, on, off, "
            "true and false are ones): quote it, e.g. 'no'"
        )
    return str(value)


# "en-de", as a ~ suffix lists them; the last may carry the spec's weight ("de-en*2"): parse_source checks it
_DIRECTION = re.compile(r"[A-Za-z][\w]*-[A-Za-z][\w]*(?:\s*\*[^,~]*)?")


def _coerce_list(value: Any, where: str) -> list[str]:
    """A list of strings: a YAML list, or from a flag "[a, b]" (YAML) or "a,b"; empty for null."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = yaml.safe_load(text)
            except yaml.YAMLError:
                raise ConfigError(f"{where}: expected a list like [a, b], got {value!r}") from None
        else:
            value = [item.strip() for item in text.split(",") if item.strip()]
    if not isinstance(value, list) or any(isinstance(v, (dict, list)) or v is None for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    items: list[str] = []
    for item in map(str, value):
        # A source's "~en-de,de-en" suffix, split at its comma by YAML's [a, b] or by "a,b": joined again.
        suffix = items[-1].rpartition("~")[2] if items and "~" in items[-1] else None
        if suffix is not None and "*" not in suffix and _DIRECTION.fullmatch(item.strip()):
            items[-1] += f",{item.strip()}"
        else:
            items.append(item)
    return items


def parse_duration(text: str | float | int) -> float:
    """'90', '90s', '12m', '1.5h' -> seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", str(text))
    if not match:
        raise ConfigError(f"max_time: expected a duration like 90s, 12m or 2h, got {text!r}")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
