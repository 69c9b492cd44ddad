"""The realm rule-set (seed 003). Version 2 lives in ``v2.py``; version 1 is frozen in ``v1/`` and never edited.

How a version is kept (docs/architecture.md, "Rule-set versions"): the rules as first published were
moved unchanged into ``v1/``; a later version imports them and overrides only what changed, so an
old room is decided and folded by exactly the code it was played under.
"""
