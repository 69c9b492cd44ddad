"""What players may see: the `Hidden` marker, a rule-set's declared secrets, and redaction by that declaration.

A rule-set declares its hidden information as data on its Decider:

- ``secrets``: per event type, `Secret` entries naming the fields (``"amount"``, or a dotted path into a
  nested Struct such as ``"setup.deck"``) that only some players may see, and who those are;
- ``public_scores(state)``: the scores anyone may see now, which never change in a way that reveals a
  hidden amount.

`redact` applies the declaration. A hidden field is replaced by `HIDDEN`, which encodes as
``{"hidden": true}``: never a plausible value (``0``, ``[]``), so a client can tell "not shown" from a
real zero. Redaction shapes what players receive; the stored events are never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import msgspec


class Hidden(msgspec.Struct, frozen=True, kw_only=True):
    """The value of a field the receiving player may not see; encodes as ``{"hidden": true}``."""

    hidden: Literal[True] = True


HIDDEN = Hidden()


def nobody(event: Any) -> tuple[str, ...]:
    """For secrets no player sees while the room runs (e.g. the order of a shuffled deck)."""
    return ()


class Secret(msgspec.Struct, frozen=True):
    """Fields of one event type that only ``seen_by(event)`` may see; everyone else gets `HIDDEN`."""

    fields: tuple[str, ...]
    seen_by: Callable[[Any], Iterable[str]] = nobody


Secrets = Mapping[type, tuple[Secret, ...]]


def hidden_fields(secrets: Secrets, event: Any, player: str) -> tuple[str, ...]:
    """The (possibly dotted) field names of ``event`` that ``player`` may not see, in declaration order."""
    names: list[str] = []
    for secret in secrets.get(type(event), ()):
        if player not in tuple(secret.seen_by(event)):
            names += [name for name in secret.fields if name not in names]
    return tuple(names)


def redact(secrets: Secrets, event: Any, player: str) -> Any:
    """``event`` as ``player`` may see it: the same Struct with every field hidden from them set to `HIDDEN`.

    The result is for encoding (``codec.to_builtins``) only: its hidden fields no longer hold their type.
    """
    names = hidden_fields(secrets, event, player)
    if not names:
        return event
    return _hide(event, [name.split(".") for name in names])


def _hide(value: Any, paths: list[list[str]]) -> Any:
    changes: dict[str, Any] = {}
    nested: dict[str, list[list[str]]] = {}
    for head, *rest in paths:
        if rest:
            nested.setdefault(head, []).append(rest)
        else:
            changes[head] = HIDDEN
    for head, rests in nested.items():
        if head not in changes:
            changes[head] = _hide(getattr(value, head), rests)
    return msgspec.structs.replace(value, **changes)


def is_hidden(value: Any) -> bool:
    return isinstance(value, Hidden)
