"""The engine: a process that owns shards by lease and turns their commands into events."""

from almanac.services.engine.shard_engine import Engine, EngineConfig

__all__ = ["Engine", "EngineConfig"]
