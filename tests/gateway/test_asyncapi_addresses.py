"""The AsyncAPI document's channel addresses are the Redis keys and channels the services use, read as templates."""

from __future__ import annotations

import re

from almanac.services.gateway.asyncapi import asyncapi_document
from almanac.storage.keys import Keys, outcome_channel, reply_channel, shard_tag

PARAMETER = re.compile(r"\{([A-Za-z_]\w*)\}")


def filled(address: str, values: dict[str, str]) -> str:
    """The address with each ``{parameter}`` replaced, as AsyncAPI reads a template (one pair of braces each)."""
    return PARAMETER.sub(lambda match: values[match.group(1)], address)


def test_every_channel_address_is_a_template_of_its_own_parameters_with_no_stray_braces() -> None:
    # Given the AsyncAPI document
    channels = asyncapi_document()["channels"]
    for name, channel in channels.items():
        address = channel["address"]
        # When its parameter expressions are taken out
        named = PARAMETER.findall(address)
        rest = PARAMETER.sub("", address)
        # Then every one is a declared parameter, every parameter is used, and no brace is left over
        assert set(named) == set(channel.get("parameters", {})), name
        assert "{" not in rest and "}" not in rest, (name, address)


def test_the_redis_addresses_filled_in_are_the_keys_the_services_use() -> None:
    # Given shard 7's hash tag, a room on it and the key layout the services use (storage/keys.py)
    keys = Keys(shard_count=16)
    room = next(f"r{n}" for n in range(1000) if keys.shard(f"r{n}") == 7)
    channels = asyncapi_document()["channels"]
    values = {"shard": shard_tag(7), "room": room, "submitter": "gw1", "command_id": "r1:alice:c1"}
    # When each Redis channel's address is filled in
    address = {name: filled(channel["address"], values) for name, channel in channels.items()}
    # Then each reads as the key or channel itself
    assert address["shardCommands"] == keys.command_stream(7)
    assert address["shardFeed"] == keys.feed(7)
    assert address["deadLetters"] == keys.dead_letters(7)
    assert address["roomEvents"] == keys.events(room)
    assert address["replies"] == reply_channel("gw1")
    assert address["outcomes"] == outcome_channel("r1:alice:c1")
    # and the shard parameter says what a client fills in: the tag, braces included
    assert "{sNN}" in channels["shardCommands"]["parameters"]["shard"]["description"]
