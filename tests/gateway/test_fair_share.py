"""The in-flight limit's fair share between clients (``overload.FairShare``), on a fake clock.

Given a limit of 4: a client alone may hold every slot (a load balancer or a benchmark is one client); once
another client is refused, the first is refused past half the slots until the other comes back or 2 s pass; a
client holding nothing is never refused by its share; and the clients remembered as waiting are bounded.
"""

from __future__ import annotations

from almanac.services.gateway.overload import FAIR_WINDOW_S, FairShare


def _holding(share: FairShare, address: str, slots: int) -> None:
    for _ in range(slots):
        share.hold(address)


def test_a_client_alone_holds_every_slot() -> None:
    share = FairShare(4)
    _holding(share, "a", 4)
    assert share.refusal("a", 0.0) is None  # the in-flight limit refuses its fifth, not its share


def test_a_refused_client_is_owed_its_share_until_it_comes_back_or_the_window_passes() -> None:
    share = FairShare(4)
    _holding(share, "attacker", 2)
    share.refused("player", 0.0)  # refused by the in-flight limit: now competing
    assert share.refusal("attacker", 0.5) == share.over_share  # holds 2 of 4 with two competing
    share.release("attacker")
    assert share.refusal("attacker", 0.5) is None  # 1 of its 2
    assert share.refusal("player", 0.5) is None  # holds none: never refused by its share
    share.hold("player")  # it came back: no longer waiting, holding
    share.release("player")
    assert share.refusal("attacker", 0.6) is None and not share.waiting
    share.hold("attacker")
    share.refused("player", 1.0)
    assert share.refusal("attacker", 1.0 + FAIR_WINDOW_S - 0.01) == share.over_share
    assert share.refusal("attacker", 1.0 + FAIR_WINDOW_S) is None  # it did not come back: forgotten


def test_a_client_refused_while_holding_slots_is_not_held_back_by_its_own_refusal() -> None:
    share = FairShare(4)
    _holding(share, "attacker", 4)
    share.refused("attacker", 0.0)
    assert share.refusal("attacker", 0.0) is None


def test_clients_holding_slots_side_by_side_with_nobody_refused_fill_the_limit_between_them() -> None:
    """Given two load balancers (not trusted proxies) holding 3 and 1 of 4 slots, and nobody refused, then neither
    is refused by its share (only the in-flight limit refuses)."""
    share = FairShare(4)
    _holding(share, "balancer-a", 3)
    _holding(share, "balancer-b", 1)
    assert share.refusal("balancer-a", 0.0) is None and share.refusal("balancer-b", 0.0) is None


def test_a_player_refused_while_holding_one_slot_is_owed_its_share() -> None:
    """Given an attacker holding 3 of 4 slots and a player holding 1 whose next command was refused, then the
    attacker is refused past its half."""
    share = FairShare(4)
    _holding(share, "attacker", 3)
    _holding(share, "player", 1)
    share.refused("player", 0.0)
    assert share.refusal("attacker", 0.1) == share.over_share


def test_the_waiting_clients_remembered_are_bounded_oldest_forgotten_first() -> None:
    share = FairShare(4, tracked=3)
    for number in range(5):
        share.refused(f"client-{number}", float(number) / 100)
    assert list(share.waiting) == ["client-2", "client-3", "client-4"]
