"""games/board/RULES.md agrees with the code: the deck, the cards in pool order, event fields (refusal codes:
tests/rules/test_rulebooks.py, for every rulebook)."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
from game_modules import game_module, game_names

from almanac.events.decider import event_tag

(BASE_MISSIONS, DECK, EXTENDED_MISSIONS) = game_names(
    "board@1", "data", "BASE_MISSIONS", "DECK", "EXTENDED_MISSIONS")
EVENT_TYPES = game_module("board@1", "events").EVENT_TYPES
MISSIONS = game_module("board@1", "missions").MISSIONS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "games" / "board" / "RULES.md").read_text()


def table_rows(first_cell: str) -> list[list[str]]:
    """The cells of every markdown table row whose first cell matches ``first_cell`` (a regex)."""
    rows = []
    for line in DOC.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if re.fullmatch(first_cell, cells[0]):
                rows.append(cells)
    return rows


def test_the_docs_deck_table_is_the_deck():
    printed = [(int(n), int(t), terrain, tuple(shape.split())) for n, t, terrain, shape in table_rows(r"\d+")]
    assert printed == [(e.number, e.time, e.terrain, e.shape) for e in DECK]


def test_the_docs_card_tables_give_every_cards_key_and_exact_text_in_pool_order():
    titles = {card.title for card in MISSIONS.values()}
    documented = [tuple(cells) for cells in table_rows(r"[A-Z][a-z' ]+") if cells[0] in titles]
    assert documented == [
        (MISSIONS[key].title, f"`{key}`", MISSIONS[key].text) for key in BASE_MISSIONS + EXTENDED_MISSIONS
    ]


def test_the_docs_event_table_names_every_event_and_its_fields():
    documented = {
        cells[0].strip("`"): re.findall(r"`([a-z_]+)`", cells[1]) for cells in table_rows(r"`board\.[a-z_]+`")
    }
    for kind in EVENT_TYPES:
        names = [field.name for field in msgspec.structs.fields(kind)]
        listed = [name for name in documented[event_tag(kind)] if name in names]
        assert listed == names, event_tag(kind)
