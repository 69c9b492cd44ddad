"""Forensics, the pure part: re-deciding a log, the offline bundle verifier, the state path language, the tree-diff.

Everything an auditor's question needs that does no I/O lives here, so that a dispute bundle can be
checked on a stranger's machine with this package alone (no Redis, no server):

- ``redecide``      the one loop that decides recorded commands again and compares the events (verify,
                    the bundle verifier and ``bisect --against`` all run it), the refusal re-check, and
                    the seed and nonces a log reveals at its end;
- ``bundle_check``  the offline verifier of a dispute bundle (``almanac verify-bundle``);
- ``checkpoint_check`` its commitment-chain step: every head recomputed, the signed checkpoints and refusal
                    receipts a player holds found on it;
- ``player_check``  the offline verifier of a player-safe bundle (``almanac verify-player-bundle``);
- ``signers``       who signed in a room (its dice scheme, the seats with and without a key), for verify and
                    the bundle verifier alike;
- ``state_paths``   paths into a room's state and the small predicate language of explain and bisect;
- ``tree_diff``     the one diff of two JSON trees (``state --diff``, ``diff``, the console, verify's
                    failures).

The tools that read a store (verify, the bundle writer, fork, diff, explain, bisect) are the other half:
``almanac.services.forensics``; the CLI commands and HTTP routes are thin adapters over both.
"""
