"""Which spec fields follow another that a `--set` changes. A field whose value only makes sense
beside another (pooling `cls` needs a class token, a position row for it needs one too) follows
that field when the user changes it and leaves the follower alone: `--set class_token=false` on a
class-token spec gives mean pooling and a position table without a class row, where the user
would otherwise get a one-line refusal for a field they never set. An explicit `--set` of the
follower always wins (it is then validated as written), and a follower whose current value can
stand beside the change is kept. `ModelSpec.with_overrides` applies `FOLLOWS`; `follow_notes` says
what followed, one line each; `settle` reads a weight file written before a rule whose follower
has no effect there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Follow:
    """When `leader` is set to one of `when`, `follower` at one of `stale` becomes `value`."""

    leader: str
    when: tuple[Any, ...]
    follower: str
    stale: tuple[Any, ...]
    value: Any
    why: str
    # The stale value has no effect beside the leader's (one function, another hash): a stored spec
    # written before the rule is read with it settled (`settle`), never refused.
    inert: bool = False


FOLLOWS = (
    Follow("class_token", (False,), "pooling", ("cls",), "mean",
           "no class token to read: the patch tokens' mean, big_vision's gap"),
    Follow("class_token", (False,), "pos_embed_class_row", (True,), False, "no class token to position"),
    Follow("class_token", (False,), "distill_token", (True,), False,
           "DeiT puts its distillation token after the class token"),
    Follow("registers", (0,), "pos_embed_register_rows", (True,), False, "no registers to position"),
    Follow("pos_embed", ("sincos", "none"), "pos_embed_register_rows", (True,), False,
           "only a learned table positions the registers"),
    Follow("pos_embed", ("sincos", "none"), "pos_embed_class_row", (True,), False,
           "only a learned table has a row for the class token", inert=True),
    Follow("pos_embed", ("sincos", "none"), "pos_rows", (), None, "only a learned table has rows"),
    Follow("final_norm", ("none",), "final_norm_eps", (), None, "no final norm"),
    Follow("pooling", ("cls", "mean", "mean_all", "flatten"), "pool_norm_eps", (), None,
           "no map pool's norm"),
    Follow("pooling", ("cls", "mean", "mean_all", "flatten"), "pool_qkv_bias", (False,), True,
           "no map pool's query, key and value", inert=True),
    Follow("qk_norm", (False,), "qk_norm_eps", (), None, "no query and key norms"),
    Follow("norm_before_blocks", (False,), "pre_norm_eps", (), None, "no norm before the blocks"),
)


def _stale(row: Follow, value: Any) -> bool:
    """Whether the follower's value cannot stand beside the leader's (an empty `stale`: any
    value but the one it follows to)."""
    if not row.stale:
        return value != row.value
    return any(value is s or (type(value) is type(s) and value == s) for s in row.stale)


def followers(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """{follower: (its new value, the note that says why)} for the `changes` a `--set` makes to a
    spec whose fields are `current`; the followers `changes` names itself are left as set."""
    state = {**current, **changes}
    out: dict[str, tuple[Any, str]] = {}
    for row in FOLLOWS:
        led = row.leader in changes or row.leader in out
        if not led or row.follower in changes or state[row.leader] not in row.when \
                or not _stale(row, state[row.follower]):
            continue
        note = (f"{row.leader}={_shown(state[row.leader])}: {row.follower} follows "
                f"({_shown(state[row.follower])} -> {_shown(row.value)}: {row.why}; --set "
                f"{row.follower}=... states it)")
        state[row.follower] = row.value
        out[row.follower] = (row.value, note)
    return out


def settle(stored: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A stored spec (a weight file's, as `to_dict` wrote it) with each field a later rule holds to
    its leader, where its value there has no effect (`inert` rows), settled to the value that rule
    wants, and one note for each: the file computes the same function and still reads."""
    out, notes = dict(stored), []
    for row in FOLLOWS:
        if row.inert and row.leader in out and row.follower in out and out[row.leader] in row.when \
                and _stale(row, out[row.follower]):
            notes.append(f"{row.follower}={_shown(out[row.follower])} read as {_shown(row.value)} "
                         f"({row.leader}={_shown(out[row.leader])}: {row.why}; the same function)")
            out[row.follower] = row.value
    return out, notes


def follow_notes(spec: Any, assignments: list[str]) -> list[str]:
    """One line for each field that followed when `assignments` (`--set`) were applied to `spec`."""
    changes = spec.parse_assignments(assignments)
    return [note for _, note in followers(spec.to_dict(), changes).values()]


def _shown(value: Any) -> str:
    """A value as `--set` spells it."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)
