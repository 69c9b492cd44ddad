"""A read model filters only on fields its rows have: a filter that is no field of its declared row type is refused
when the rule-set declares it, so the API never offers (or documents) a filter that cannot match."""

from __future__ import annotations

import msgspec
import pytest

from almanac.events.manifest import ReadModel


class Offered(msgspec.Struct, tag="offered"):
    room: str
    trade: str


class Settled(msgspec.Struct, tag="settled"):
    room: str
    trade: str
    price: int


def rows(state):  # noqa: ANN001, ANN201 - a room_row the check never calls
    return None


def test_filters_that_are_fields_of_every_row_type_are_declared() -> None:
    model = ReadModel(name="ledger", description="trades", room_row=rows, filters=("trade",),
                      row_type=(Offered, Settled))
    assert model.filters == ("trade",)


@pytest.mark.parametrize("row_type", [Settled, (Offered, Settled)])
def test_a_filter_that_is_not_a_field_of_a_row_type_is_refused(row_type) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match=r"filters \['price'\] are not fields of its row type 'Offered'|"
                                         r"filters \['buyer'\] are not fields"):
        ReadModel(name="ledger", description="trades", room_row=rows,
                  filters=("price",) if isinstance(row_type, tuple) else ("buyer",), row_type=row_type)


def test_a_model_without_a_row_type_keeps_its_filters_unchecked() -> None:
    assert ReadModel(name="loose", description="open rows", room_row=rows, filters=("anything",)).filters
