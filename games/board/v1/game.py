"""The board's Decider: one seat, the owner's map; what it hides, shows and counts."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events.manifest import Context, RoomCreated, RuleError, Secret, event_tag, is_hidden, redact
from almanac.games.board.v1.commands import PlaceElement, SkipElement
from almanac.games.board.v1.data import (
    BASE_MISSIONS,
    CARD_LETTERS,
    DECK_NUMBERS,
    ELEMENTS,
    EXTENDED_MISSIONS,
    GAME_LENGTH,
    SEASON_CARDS,
    SEASON_ENDS,
    SEASON_NAMES,
)
from almanac.games.board.v1.events import (
    EVENT_TYPES,
    DeckShuffled,
    ElementPlaced,
    ElementSkipped,
    GameEnded,
    SeasonEnded,
)
from almanac.games.board.v1.missions import MISSIONS
from almanac.games.board.v1.rules import DECIDE, EVOLVE, mission_totals
from almanac.games.board.v1.state import STARTING_BOARD, BoardOptions, BoardSetup, BoardState

# What is hidden on the board (docs/rules/board.md, "What is public"): the deck order, from everyone,
# the owner included, until each card is turned up (the view shows the current element only).
SECRETS: dict[type, tuple[Secret, ...]] = {
    RoomCreated: (Secret(("setup.deck",)),),
    DeckShuffled: (Secret(("order",)),),
}


class BoardDecider:
    """The board rule-set as a Decider: a single seat, the owner's map."""

    name = "board"
    options_type = BoardOptions
    setup_type = BoardSetup
    state_type = BoardState
    command_types: tuple[type, ...] = (PlaceElement, SkipElement)
    event_types: tuple[type, ...] = EVENT_TYPES
    secrets = SECRETS

    def setup(self, options: BoardOptions, ctx: Context) -> BoardSetup:
        """Shuffle the deck, then deal cards A-D from a shuffle of the pool (both with the room's dice)."""
        deck = ctx.dice.shuffle(DECK_NUMBERS)
        pool = BASE_MISSIONS + EXTENDED_MISSIONS if options.extended_pool else BASE_MISSIONS
        missions = ctx.dice.shuffle(pool)[: len(CARD_LETTERS)]
        return BoardSetup(
            player=options.player or ctx.player,
            mountain_bonus=options.mountain_bonus,
            extended_pool=options.extended_pool,
            deck=deck,
            missions=missions,
        )

    def initial_state(self, setup: BoardSetup) -> BoardState:
        return BoardState(
            player=setup.player,
            mountain_bonus=setup.mountain_bonus,
            extended_pool=setup.extended_pool,
            missions=setup.missions,
            board=STARTING_BOARD,
            deck=setup.deck,
        )

    def decide(self, state: BoardState, command: Any, ctx: Context) -> list[Any]:
        handler = DECIDE.get(type(command))
        if handler is None:
            raise RuleError(
                "unknown_command",
                f"the board does not know the command {type(command).__name__}; use place_element or skip_element",
                field="kind",
                allowed=["place_element", "skip_element"],
            )
        if state.over:
            raise RuleError("game_over", "the game is over; no more moves are accepted")
        return handler(state, command, ctx)

    def evolve(self, state: BoardState, event: Any) -> BoardState:
        return EVOLVE[type(event)](state, event)

    def is_over(self, state: BoardState) -> bool:
        return state.over

    def seats(self, state: BoardState) -> tuple[str, ...]:
        return (state.player,)

    def view(self, state: BoardState, player: str) -> dict[str, Any]:
        """The map, time, the current element only (never the rest of the deck order), season, cards, scores."""
        current = None
        if state.deck and not state.over:
            element = ELEMENTS[state.deck[0]]
            current = {
                "number": element.number,
                "time": element.time,
                "terrain": element.terrain,
                "shape": list(element.shape),
            }
        season = min(state.season, len(SEASON_ENDS) - 1)
        return {
            "player": state.player,
            "board": [list(line) for line in state.board],
            "time": state.time,
            "time_remaining": max(0, GAME_LENGTH - state.time),
            "season": SEASON_NAMES[season] if not state.over else None,
            "season_time_remaining": 0 if state.over else max(0, SEASON_ENDS[season] - state.time),
            "current_element": current,
            "missions": [
                {
                    "card": letter,
                    "mission": key,
                    "title": MISSIONS[key].title,
                    "text": MISSIONS[key].text,
                    "scored_in": [SEASON_NAMES[s] for s, pair in enumerate(SEASON_CARDS) if index in pair],
                }
                for index, (letter, key) in enumerate(zip(CARD_LETTERS, state.missions, strict=True))
            ],
            "mountain_bonus": state.mountain_bonus,
            "scores": self._score_table(state),
            "over": state.over,
        }

    def redact(self, event: Any, player: str) -> Any | None:
        """Events as a player sees them: shuffles and the setup lose their deck order (``SECRETS``)."""
        shown = redact(SECRETS, event, player)
        if isinstance(event, DeckShuffled) and shown is not event:
            return msgspec.structs.replace(shown, hidden=True)
        return shown

    def scores(self, state: BoardState) -> dict[str, int]:
        return {state.player: state.total}

    def public_scores(self, state: BoardState) -> dict[str, int]:
        """Public: the total moves only at a season's end, from the map and cards everyone sees."""
        return self.scores(state)

    def resources(self, state: BoardState) -> dict[str, Any]:
        return {
            "time": state.time,
            "time_remaining": max(0, GAME_LENGTH - state.time),
            "placed": state.placed,
            "skipped": state.skipped,
            "shuffles": state.shuffles,
            **self._score_table(state),
        }

    def summary(self, event: Any) -> str:
        if isinstance(event, ElementPlaced):
            return (
                f"placed element {event.element} ({event.terrain}) at row {event.row}, column {event.column}, "
                f"rotation {event.rotation}{', mirrored' if event.mirror else ''}; time {event.time_after}"
            )
        if isinstance(event, ElementSkipped):
            return f"skipped element {event.element} (fits nowhere); time {event.time_after}"
        if isinstance(event, SeasonEnded):
            parts = ", ".join(f"{m.card} {MISSIONS[m.mission].title} {m.points}" for m in event.missions)
            bonus = f", mountains {event.mountain_bonus}" if event.mountain_bonus else ""
            return f"{event.name} ended at time {event.time}: {parts}{bonus}; {event.total} points"
        if isinstance(event, DeckShuffled):
            if event.hidden or is_hidden(event.order) or not event.order:
                return f"deck of {event.size} elements shuffled (order hidden)"
            return f"deck of {event.size} elements shuffled: {', '.join(map(str, event.order))}"
        if isinstance(event, GameEnded):
            parts = ", ".join(f"{m.card} {m.points}" for m in event.missions)
            return f"game over at time {event.time}: {parts}; total {event.total}"
        return f"{event_tag(event)} at time {getattr(event, 'time', '?')}"

    def _score_table(self, state: BoardState) -> dict[str, Any]:
        return {
            "total": state.total,
            "per_season": [
                {
                    "season": season.name,
                    "missions": {m.card: m.points for m in season.missions},
                    "mountain_bonus": season.mountain_bonus,
                    "total": season.total,
                }
                for season in state.seasons
            ],
            "per_mission": {
                m.card: {"mission": m.mission, "points": m.points} for m in mission_totals(state)
            },
        }


DECIDER = BoardDecider()
