"""Forensics over a store: verify a room, write a dispute bundle, fork, diff, explain a value, bisect.

- ``verify``       ``almanac verify`` and ``GET /rooms/{room}/verification``: the hash chain, every command
                   re-decided, the seed and nonces against their commitments;
- ``bundle``       writes the dispute bundle ``almanac.events.forensics.bundle_check`` verifies offline;
- ``player_bundle`` writes a player-safe bundle (one seat's view of a live room) that
                   ``almanac.events.forensics.player_check`` verifies offline;
- ``investigate``  fork (what-if), diff of two rooms, explain a value, bisect a predicate or a rule version;
- ``audit``        one thing's story told by the rule-set's audit view (``almanac audit``, the audit routes,
                   a bundle's subject), and the refusals around it;
- ``errors``       ``ForensicsError``: what cannot be answered, as the CLI's one line and the HTTP 4xx;
- ``pauses``       the heavy reads' pause every few hundred versions, where a client's leaving stops them.

The pure half (the re-decide loop, the bundle verifier, the path language, the tree-diff) is
``almanac.events.forensics``. Entry points stay with their kind: ``services/cli/verify_commands.py``,
``dispute_commands.py``, ``fork_diff_commands.py``, ``explain_bisect_commands.py``, ``audit_commands.py`` and
``services/gateway/api_forensics.py``, ``api_dispute.py``; docs/forensics.md tells the whole story.
"""
