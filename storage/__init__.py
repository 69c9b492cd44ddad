"""Storage below both sides: the event-store contract, its Redis, memory and export-file stores, every key name, the loader.

Imports only ``almanac.events`` (and redis, msgspec): the write side (services) and the read side
(projections) both build on it.
"""
