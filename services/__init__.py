"""Everything that does I/O: the Redis event store, the engine, the gateway, the CLI, settings and logs."""
