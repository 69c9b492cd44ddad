"""The board game (seed 002): version 1 in ``v1/`` (the seed as written, the default), version 2 in ``v2/``.

How a version is kept (docs/architecture.md, "Rule-set versions"): the rules as first published
live in ``v1/`` and decide and fold the same forever; a later version imports them and overrides only
what changed, so an old room is decided and folded by exactly the rules it was played under. Each
version's ``fingerprints.toml`` lists the fingerprints its code has had, each proved by its golden log.
"""
