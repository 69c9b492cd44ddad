"""The shard engine: owns shards by lease and turns their commands into events, inside every gateway (the
deployment shape) or alone, without HTTP, as `almanac engine`."""

from almanac.services.engine.shard_engine import Engine, EngineConfig

__all__ = ["Engine", "EngineConfig"]
