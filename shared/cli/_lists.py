"""Reading a comma-separated option's value at run time, when the command knows what it offers:
frameworks, modes, presets, rungs, seeds, sweep points and the plateau experiment's shapes are each
read by `comma_list`, so an empty list, an empty item, a bad item and a repeated one are refused in
the same words everywhere. (The options table's `listed` type already refuses an empty item as
argparse parses, in argparse's words; the Python API's frameworks are read here with no argparse.)"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from shared.errors import FrameworkUnavailable, InputError, PortbenchError

Item = TypeVar("Item")


def comma_list(text: str, option: str, expected: str, read: Callable[[str], Item] = str) -> list[Item]:
    """The items of a comma-separated option, stripped and each read by `read`: the one reading
    every list option shares (frameworks, modes, presets, rungs, seeds, sweep points, shapes). A
    list of nothing, an empty item (`0,,1`: never read as a shorter list), an item `read` refuses
    (a ValueError; another PortbenchError is its own line) and an item given twice (it would run,
    and be shown, twice) are each one line naming the option and what was `expected`."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise InputError(f"{option} is empty; expected {expected}")
    if not all(items):
        raise InputError(f"{option} {text!r} has an empty item; expected {expected}")
    values = []
    for item in items:
        try:
            values.append(read(item))
        except ValueError:
            raise InputError(f"{option} has {item!r}; expected {expected}") from None
    twice = next((items[i] for i, value in enumerate(values) if value in values[:i]), None)
    if twice is not None:
        raise InputError(f"{option} {text!r} names {twice!r} twice; name each once")
    return values


def whole_number(minimum: int) -> Callable[[str], int]:
    """A list item read as a whole number >= `minimum` (a sign, a point or a letter: ValueError)."""
    def read(item: str) -> int:
        if not item.isdigit() or int(item) < minimum:
            raise ValueError(item)
        return int(item)

    return read


def parse_list(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The names a `--{what}s` list gives (time's modes, tolerances' presets and rungs), read at run
    time, when the command knows what it offers: an unknown name is refused naming them."""
    def known(item: str) -> str:
        if item not in allowed:
            raise PortbenchError(f"unknown {what} {item!r}; expected one of: {', '.join(allowed)}")
        return item

    return tuple(comma_list(text, f"--{what}s", f"some of: {', '.join(allowed)}", known))


def parse_frameworks(text: str | None, default: Sequence[str] | None = None,
                     offered: Sequence[str] | None = None, reference: bool = False) -> list[str]:
    """The frameworks a `--frameworks` value names: the one reading every command shares.

    Not given (None): `default`, as the command computed it (None: the native ports). 'all': every
    installed one of `offered` (None: every registered port). Otherwise comma-separated names: a
    name that is not registered is `ports.unknown_framework`'s line, the same in every command; a
    registered one the command does not offer, and 'reference' (the float64 oracle alone) unless
    `reference` allows it, is refused naming what it offers."""
    from ports import NATIVE, NOTHING_INSTALLED, PORTS, missing_requirement, unknown_framework

    offered = tuple(PORTS) if offered is None else tuple(offered)
    choices = ("reference", *offered) if reference else offered
    if text is None:
        return list(NATIVE if default is None else default)
    if text.strip() == "all":
        names = [n for n in offered if missing_requirement(n) is None]
        if not names:
            raise FrameworkUnavailable(NOTHING_INSTALLED)
        return names

    def offered_name(name: str) -> str:
        if name not in PORTS and name != "reference":
            raise FrameworkUnavailable(unknown_framework(name))
        if name not in choices:
            raise FrameworkUnavailable(f"framework {name!r} is not one this command runs; expected some of: "
                                       f"{', '.join(choices)}")
        return name

    return comma_list(text, "--frameworks", f"some of: {', '.join(choices)}", offered_name)
