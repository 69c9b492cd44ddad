"""The realm rule-set's manifest: its Decider, the random-legal policy, the trade ledger and the trade audit."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import (
    AuditView,
    BenchScenario,
    Deadline,
    Dice,
    Envelope,
    ReadModel,
    RuleSet,
    to_builtins,
)
from almanac.games.realm.v1 import audit
from almanac.games.realm.v1.game import DECIDER
from almanac.games.realm.v1.policy import choose_command

BENCH_PLAYERS = ("alice", "bob", "carol")


def policy(state: object, player: str, dice: Dice, now_ms: int) -> object:
    return choose_command(state, player, dice)  # type: ignore[arg-type]


def deadlines(state: Any, seated: tuple[str, ...]) -> tuple[Deadline, ...]:
    """The season's timeout: once it has passed, the clock forces the season to end (``end_season``) as the
    first seated player of the realm, as any player could. A timeout of 0 ("any time") sets no deadline:
    the clock would end every season the moment it began."""
    if state.over or state.season_timeout_ms <= 0:
        return ()
    player = next((seat for seat in seated if seat in state.players), None)
    if player is None:
        return ()
    return (
        Deadline(
            key=f"season:{state.season_index}",
            due_ms=state.season_started_ms + state.season_timeout_ms,
            player=player,
            command={"kind": "end_season"},
        ),
    )


def ledger_rows(envelope: Envelope, event: Any) -> list[dict[str, Any]]:
    """Trade ledger rows: one per event that carries a trade id, with everything that event records."""
    trade_id = getattr(event, "trade_id", None)
    if trade_id is None:
        return []
    tag_field = event.__struct_config__.tag_field
    detail = {k: v for k, v in to_builtins(event).items() if k != tag_field}
    return [
        {
            "room": envelope.room,
            "version": envelope.version,
            "trade": trade_id,
            "type": envelope.type,
            "player": envelope.player,
            "time_ms": envelope.server_time_ms,
            "summary": DECIDER.summary(event),
            # Dice, stars, phantom goods, transfers, holdings after: whatever the step's event names.
            "detail": detail,
        }
    ]


MANIFEST = RuleSet(
    decider=DECIDER,
    # The version a bare name means: it plays seed 003 as written (a skull in mining finds only stone,
    # at -50%); realm@2 is opt-in by its full name (docs/design-rulings.md).
    default=True,
    policy=policy,
    deadlines=deadlines,
    bench=BenchScenario(
        description="three players, two villages, three years of random legal play",
        options={"players": list(BENCH_PLAYERS), "villages": 2, "years": 3},
        players=BENCH_PLAYERS,
        seconds=5,
    ),
    read_models=(
        ReadModel(
            name="trades",
            description="the trade ledger: one row per trade step (dice, stars, transfers, holdings after)",
            event_rows=ledger_rows,
            order_by=("room", "version"),
            filters=("trade",),
            columns=("room", "version", "trade", "type", "player", "summary"),
            # Each step's detail names both cities' holdings: secrets. Players see their trades in their view.
            auditors_only=True,
        ),
    ),
    audit_views=(
        AuditView(
            name="trade",
            description="every step of one trade: dice, stars, phantom amounts, transfers, holdings",
            steps=audit.trade_steps,
            ids=audit.trade_ids_of,
        ),
    ),
    # One picture draws every version: the cities and holdings are the same shape in both.
    console_picture="almanac.games.realm:picture.js",
    rulebook="docs/rules/realm.md",
    examples=("examples/realm.jsonl",),
    demo_moves=40,
)
