"""realm@2's Decider: version 1's (``games/realm/v1/``) with version 2's command table (``rules.py``)."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Context, RuleError
from almanac.games.realm.v1.commands import COMMAND_TYPES
from almanac.games.realm.v1.game import RealmDecider as RealmDeciderV1
from almanac.games.realm.v1.state import RealmState
from almanac.games.realm.v2.rules import DECIDE


class RealmDecider(RealmDeciderV1):
    """Version 1's Decider with version 2's command table."""

    def decide(self, state: RealmState, command: Any, ctx: Context) -> list[Any]:
        handler = DECIDE.get(type(command))
        if handler is None:
            kinds = [kind.__struct_config__.tag for kind in COMMAND_TYPES]
            raise RuleError("unknown_command", f"the realm has no command {type(command).__name__}",
                            field="kind", allowed=kinds)
        return handler(state, command, ctx)


DECIDER = RealmDecider()


DECIDER = RealmDecider()
