"""The engine: a process that owns shards by lease and turns their commands into events."""

from almanac.services.engine.worker import Engine, EngineConfig

__all__ = ["Engine", "EngineConfig"]
