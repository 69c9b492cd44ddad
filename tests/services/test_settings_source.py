"""Settings come from the process environment through pydantic-settings, under the documented names."""

from __future__ import annotations

import pytest

from almanac.services.settings import Settings, SettingsError, load_settings


def test_the_process_environment_is_read_by_variable_name_and_options_override_it(monkeypatch) -> None:
    monkeypatch.setenv("ALMANAC_SHARDS", "8")
    monkeypatch.setenv("ALMANAC_HTTP_PORT", "")  # empty = unset: the default stands
    monkeypatch.setenv("shard_count", "3")  # a field's own name is not a variable Almanac reads
    assert load_settings().shard_count == 8 and load_settings().http_port == 8000
    assert load_settings(shard_count=4).shard_count == 4
    assert Settings().shard_count == 8


def test_a_bad_option_is_named_by_its_variable_and_the_secret_never_shows() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({}, batch_size=0, secret="too-short")
    assert sorted(refused.value.problems) == [
        "ALMANAC_BATCH_SIZE=0 is not valid: must be a positive whole number",
        "ALMANAC_SECRET is not valid: it must be at least 32 bytes (an HS256 key, RFC 7518 3.2), e.g. openssl "
        "rand -hex 32; or leave it unset to generate one",
    ]
    secret = "s" * 40
    settings = load_settings({"ALMANAC_SECRET": secret})
    assert settings.secret == secret and secret not in repr(settings)


def test_settings_are_frozen() -> None:
    settings = load_settings({})
    with pytest.raises(ValueError):
        settings.shard_count = 3  # type: ignore[misc]
    assert settings.model_copy(update={"shard_count": 3}).shard_count == 3 and settings.shard_count == 16
