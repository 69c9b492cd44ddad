"""Verify a player-safe bundle (docs/bundle-format.md section 6) offline, as the player it was issued to can.

    almanac verify-player-bundle bundle.json --checkpoints mine.json --keys almanac-keys.json [--compare theirs.json]

A player-safe bundle of a room on scheme ``almanac-commit-v2`` opens, for every event, the public part and the
reader's own view (bytes and salt) and gives every other audience's view (the whole event, other seats' views)
only as a salted leaf hash. Steps, stopping at the first failure:

1. format      the file is a player bundle this verifier reads, with nothing no step reads.
2. views       every version 1..head is there in order; each opened view is of this room and version; the public
               part is always opened, the reader's own view is opened whenever the event has one, nothing else
               is opened (the whole event never).
3. checkpoints the commitment heads recomputed from the opened views and the leaf hashes pass through every signed
               checkpoint given (the reader's, any player's) and the server's own on the head, each signed by a
               key of the key set given from outside. Skipped without a key set.
4. anchor      a checkpoint the reader holds (not the bundle's own signature) on the head was checked: the history
               is the one the deployment signed to them during play. Skipped without, or short of the head.
5. redaction   the public part of each event is the reader's view with some fields hidden (never more, never
               another value); where the reader saw an event whole, the rule-set's own redaction of it is
               re-run and must give exactly the opened views.

What it cannot prove, and says in its verdict: that the commands were decided by the rules. Every decision of a
live room with hidden values reads values hidden from the reader (another seat's holdings, dice from the secret
seed), so no step here re-decides a command; the auditor's bundle, or the room's bundle once it has ended, does.
A verdict of VERIFIED means the steps above passed, nothing more.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import msgspec

from almanac.events import codec, commitments as cm
from almanac.events.envelope import Envelope
from almanac.events.forensics.bundle_check import INCOMPLETE, NOT_VERIFIED, VERIFIED, Step, Verdict
from almanac.events.forensics.checkpoint_check import CheckpointFailure, check_checkpoints, trusted
from almanac.events.hashing import canonical_bytes
from almanac.events.shown import Shown

PLAYER_BUNDLE_FORMAT = "almanac-player-bundle"
PLAYER_BUNDLE_FORMAT_VERSION = 1
MAX_EVENTS = 1_000_000
PLAYER_BUNDLE_LIMITS = (
    "A player-safe bundle proves that what you saw of every event, and its public part, lie on the history the "
    "deployment signed (through your checkpoints), that the public part is your view with fields hidden (never "
    "another value), and that every other view was fixed when it was signed (an edit after signing fails at your "
    "checkpoints). It cannot re-decide any command: the rules read values hidden from you (other seats' holdings, "
    "dice from the unrevealed seed). Compare it with another player's bundle to catch an operator who showed "
    "the two of you different public parts.")
def player_audience(player: str) -> dict[str, Any]:
    """A player bundle's first line: whose it is (the verifier rebuilds it: a word nobody checks is a forger's)."""
    return {"who": "player", "player": player, "hidden_values": False,
            "note": f"for {player!r}: every event as {player!r} and the public see it; values hidden from {player!r} "
                    "appear only as salted hashes"}


_FIELDS = frozenset({"audience", "format", "format_version", "room", "player", "exported_at_ms", "scheme", "limits",
                     "events", "checkpoint", "keys"})
_HIDDEN_MARK = {"hidden": True}


class _Failed(Exception):
    def __init__(self, name: str, detail: str, version: int | None = None) -> None:
        super().__init__(detail)
        self.step = Step(name=name, status="failed", detail=detail, version=version)


class PlayerVerdict(Verdict, kw_only=True):
    """A verdict that always says what a player-safe bundle cannot prove."""

    player: str = ""

    def text(self) -> str:
        lines = super().text().split("\n")
        lines[0] = lines[0].replace("bundle of room", f"player-safe bundle for {self.player!r} of room", 1)
        return "\n".join([*lines, "  NOT PROVABLE from a player-safe bundle: that the commands were decided by the "
                          "rules (hidden steps cannot be re-decided: they read values hidden from you); an auditor's "
                          "bundle, or this room's bundle once it has ended, re-decides them"])


def _hex(value: Any, length: int) -> bytes | None:
    if not isinstance(value, str) or len(value) != length or value != value.lower():
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None


def _view(room: str, version: int, text: Any) -> tuple[bytes, list]:
    """An opened view's bytes and decoded array, or _Failed."""
    try:
        data = base64.b64decode(text, validate=True) if isinstance(text, str) else None
    except (binascii.Error, ValueError):
        data = None
    if data is None:
        raise _Failed("views", "an opened view is not base64", version)
    try:
        decoded = msgspec.msgpack.decode(data)
    except msgspec.DecodeError:
        raise _Failed("views", "an opened view is not msgpack", version) from None
    # type(): 1.0 and True equal 1 in Python, and a view spelt with them would still pass as version 1's
    if not isinstance(decoded, list) or len(decoded) not in (2, 7) or decoded[:2] != [room, version] \
            or type(decoded[1]) is not int:
        raise _Failed("views", f"an opened view is not a view of room {room!r} at version {version}", version)
    if data != canonical_bytes(decoded):
        raise _Failed("views", "an opened view is not in canonical form", version)
    return data, decoded


def _leaves(room: str, player: str, entries: Any) -> list[tuple[dict[str, bytes], dict[str, list]]]:
    """Per version: every audience's leaf (opened ones recomputed) and the opened views, decoded."""
    if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_EVENTS:
        raise _Failed("format", "events is not a list of 1 or more versions")
    result = []
    for version, entry in enumerate(entries, start=1):
        if not isinstance(entry, Mapping) or set(entry) != {"version", "opened", "leaves"} \
                or type(entry["version"]) is not int or entry["version"] != version:
            raise _Failed("views", f"event entry {version} is not {{version: {version}, opened, leaves}} (versions "
                          "must run 1..head in order)", version)
        opened, given = entry["opened"], entry["leaves"]
        if not isinstance(opened, Mapping) or not isinstance(given, Mapping):
            raise _Failed("views", "opened and leaves are objects", version)
        if set(opened) - {cm.PUBLIC, player} or cm.PUBLIC not in opened:
            raise _Failed("views", f"opened holds {sorted(opened)}: a player bundle opens the public part and the "
                          "reader's own view only", version)
        if player in given:
            raise _Failed("views", f"the event has a view of its own for {player!r}, and it is not opened", version)
        if cm.FULL not in given or set(given) & set(opened):
            raise _Failed("views", "the whole event's leaf is missing, or a leaf is both opened and given", version)
        leaves: dict[str, bytes] = {}
        for label, value in given.items():
            raw = _hex(value, 64)
            if raw is None or not isinstance(label, str) or len(label.encode()) >= 65_536:
                raise _Failed("views", f"leaf {label!r} is not 64 lowercase hex characters", version)
            leaves[label] = raw
        views: dict[str, list] = {}
        for label, opening in opened.items():
            if not isinstance(opening, Mapping) or set(opening) != {"salt", "view"}:
                raise _Failed("views", f"opened {label!r} is not {{salt, view}}", version)
            salt = _hex(opening["salt"], 64)
            if salt is None:
                raise _Failed("views", f"opened {label!r}: salt is not 64 lowercase hex characters", version)
            data, views[label] = _view(room, version, opening["view"])
            leaves[label] = cm.leaf(label, salt, data)
        result.append((leaves, views))
    return result


def _covers(mine: Any, public: Any, path: str = "") -> str | None:
    """Where ``public`` is not ``mine`` with some parts hidden (None when it is)."""
    if public == mine or public == _HIDDEN_MARK:
        return None
    if isinstance(mine, dict) and isinstance(public, dict) and set(mine) == set(public):
        return next((p for k in mine if (p := _covers(mine[k], public[k], f"{path}.{k}")) is not None), None)
    if isinstance(mine, list) and isinstance(public, list) and len(mine) == len(public):
        return next((p for i, (m, u) in enumerate(zip(mine, public, strict=True))
                     if (p := _covers(m, u, f"{path}[{i}]")) is not None), None)
    return path or "the event"


def _has_hidden(value: Any) -> bool:
    if value == _HIDDEN_MARK:
        return True
    if isinstance(value, dict):
        return any(_has_hidden(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_hidden(v) for v in value)
    return False


def _rerun_redaction(player: str, version: int, mine: list, public: list) -> bool:
    """When the reader saw the event whole: the rule-set's redaction of it gives exactly both views. False when
    this machine cannot (rules not installed); _Failed on a contradiction."""
    room, _, ruleset, kind, who, time_ms, event = mine
    try:
        decoder = codec._event_decoders(ruleset)[kind]
        struct = decoder.decode(msgspec.msgpack.encode(event))
        envelope = Envelope(room=room, version=version, ruleset=ruleset, type=kind, payload=b"", command_id="",
                            player=who, server_time_ms=time_ms, previous_hash="")
        shown = Shown(envelope, struct)  # (the rule-set's decider: this node may lack it)
    except Exception:  # noqa: BLE001 - rules this node lacks, or an event type it cannot read: not re-run
        return False
    for label, view in ((player, mine), (cm.PUBLIC, public)):
        again = msgspec.msgpack.decode(cm.view_bytes(envelope, shown.kept_form(label)))
        if again != view:
            raise _Failed("redaction", f"the rule-set's redaction of the event you saw whole does not give the "
                          f"{'public part' if label == cm.PUBLIC else 'view you were shown'}", version)
    return True


def _redaction(player: str, opened: list[dict[str, list]]) -> str:
    rerun = 0
    for version, views in enumerate(opened, start=1):
        public = views[cm.PUBLIC]
        mine = views.get(player, public)
        if len(mine) == 2:
            if len(public) != 2:
                raise _Failed("redaction", "the public sees this event and you do not", version)
            continue
        if len(public) == 7:
            if public[:6] != mine[:6]:
                raise _Failed("redaction", "the public part names another type, player or time than your view", version)
            where = _covers(mine[6], public[6])
            if where is not None:
                raise _Failed("redaction", f"the public part differs from your view at {where} (not a hidden field)",
                              version)
        if not _has_hidden(mine[6]):
            rerun += _rerun_redaction(player, version, mine, public)
    return (f"every public part is your view with fields hidden; the rule-set's redaction re-run on {rerun} "
            "event(s) you saw whole gives exactly the views opened")


def player_heads(bundle: Mapping) -> list[bytes]:
    """``head_1 .. head_N`` of a well-formed player bundle (for comparing two bundles)."""
    head, result = cm.HEAD_0, []
    for leaves, _ in _leaves(bundle["room"], bundle["player"], bundle["events"]):
        head = cm.next_head(head, cm.root(leaves), cm.SCHEME_V2)
        result.append(head)
    return result


def verify_player_bundle(bundle: Any, checkpoints: list[Any] | None = None, keys: Any = None,
                         seat_key: str | None = None) -> PlayerVerdict:
    """The verdict on ``bundle`` for its reader, with the checkpoints they hold and a key set from outside.

    ``seat_key``: the Ed25519 public key (hex) the reader says they registered at their join, known apart from
    the operator (``--seat-key``): step ``seat key`` checks the join the deployment signed registered exactly
    that key for their seat, and names the key it registered instead (docs/dice.md, "a join answered with the
    operator's own key")."""
    verdict = PlayerVerdict()
    steps = verdict.steps = []
    under_way = "format"  # the step a hostile input that breaks the verifier fails
    try:
        if not isinstance(bundle, Mapping) or bundle.get("format") != PLAYER_BUNDLE_FORMAT:
            raise _Failed("format", f"not an {PLAYER_BUNDLE_FORMAT} (an auditor's bundle: verify-bundle)")
        if bundle.get("format_version") != PLAYER_BUNDLE_FORMAT_VERSION or set(bundle) != _FIELDS:
            raise _Failed("format", f"format_version 1 with exactly the parts {sorted(_FIELDS)}")
        room, player = bundle["room"], bundle["player"]
        if not isinstance(room, str) or not isinstance(player, str) or player in (cm.PUBLIC, cm.FULL):
            raise _Failed("format", "room and player are names")
        verdict.room, verdict.player = room, player
        if bundle["scheme"] != cm.SCHEME_V2:
            raise _Failed("format", f"scheme is not {cm.SCHEME_V2!r}")
        if bundle["audience"] != player_audience(player):
            raise _Failed("format", f"the first line does not say the bundle is {player!r}'s, in the issuer's words")
        if bundle["limits"] != PLAYER_BUNDLE_LIMITS or type(bundle["exported_at_ms"]) is not int:
            raise _Failed("format", "limits is not the issuer's statement of what the bundle proves, or "
                          "exported_at_ms is not a whole number")
        verdict.audience = bundle["audience"]["note"]
        steps.append(Step(name="format", status="passed", detail=f"a player-safe bundle for {player!r} (scheme v2)"))
        per_version = _leaves(room, player, bundle["events"])
        own = sum(player in views for _, views in per_version)
        steps.append(Step(name="views", status="passed", detail=f"versions 1..{len(per_version)}: the public part of "
                          f"each and your own view of {own} opened; every other view only as a salted leaf hash"))
        head, heads = cm.HEAD_0, []
        for leaves, _ in per_version:
            head = cm.next_head(head, cm.root(leaves), cm.SCHEME_V2)
            heads.append(head)
        held = list(checkpoints or [])
        if keys is None:
            steps.append(Step(name="checkpoints", status="skipped", detail="no key set given (--keys, or a checkpoint "
                              "file's): the bundle's own key set proves nothing"))
        else:
            try:
                check_checkpoints(room, heads, [*held, bundle["checkpoint"]], trusted(keys))
            except CheckpointFailure as failure:
                raise _Failed("checkpoints", failure.detail, failure.version) from None
            if bundle["checkpoint"]["version"] != len(heads):
                raise _Failed("checkpoints", "the server's checkpoint is not on the bundle's head")
            steps.append(Step(name="checkpoints", status="passed", detail=f"the heads recomputed from the views and "
                              f"leaves pass through {len(held)} checkpoint(s) you hold and the server's signature on "
                              f"version {len(heads)}"))
        reach = max((c["version"] for c in held), default=0) if keys is not None else 0
        if reach == len(heads):
            steps.append(Step(name="anchor", status="passed", detail="your checkpoints, signed during play, anchor "
                              f"the whole history, up to its head (version {reach})"))
        elif reach:
            # versions after the last one the reader holds rest on the bundle's own signature, which the operator
            # makes over whatever history it exports: it could have rewritten them
            steps.append(Step(name="anchor", status="skipped", detail=f"your checkpoints anchor the history up to "
                              f"version {reach}; versions {reach + 1}..{len(heads)} rest on the signature the bundle "
                              "carries, made when it was issued"))
        else:
            steps.append(Step(name="anchor", status="skipped", detail="none of your own checkpoints was checked: "
                              "the history rests on the signature the bundle carries, made when it was issued"))
        under_way = "redaction"
        steps.append(Step(name="redaction", status="passed", detail=_redaction(player, [v for _, v in per_version])))
        if seat_key is not None:
            under_way = "seat key"
            steps.append(_seat_key(player, seat_key, per_version))
    except _Failed as failure:
        steps.append(failure.step)
    except Exception as error:  # noqa: BLE001 - a hostile bundle is a failed step, never an exception
        steps.append(Step(name=under_way, status="failed", detail=f"unreadable: {type(error).__name__}: {error}"))
    if any(step.status == "failed" for step in steps):
        verdict.status = NOT_VERIFIED
    elif any(step.status == "skipped" for step in steps):
        verdict.status = INCOMPLETE
    else:
        verdict.status, verdict.ok = VERIFIED, True
    return verdict


def _seat_key(player: str, stated: str, per_version: list[tuple[dict[str, bytes], dict[str, list]]]) -> Step:
    """The ``seat key`` step: every join of ``player`` in the history (as they were shown it, which the checkpoints
    above tie to the signed history) registered ``stated``; _Failed naming the key a join registered instead."""
    if _hex(stated, 64) is None:
        raise _Failed("seat key", "the seat key given is not 64 lowercase hex characters (an Ed25519 public key)")
    joins = []
    for version, (_, views) in enumerate(per_version, start=1):
        view = views.get(player) or views[cm.PUBLIC]
        if len(view) == 7 and view[3] == "room.player_joined" and isinstance(view[6], Mapping) \
                and view[6].get("player") == player:
            joins.append((version, view[6].get("public_key") or ""))
    if not joins:
        raise _Failed("seat key", f"the history holds no join of {player!r}: no key was registered for the seat")
    for version, registered in joins:
        if registered != stated:
            what = f"key {registered}" if registered else "no key"
            raise _Failed("seat key", f"the join the deployment signed at version {version} registered {what} for "
                          f"{player!r}, not the key {stated} they hold: the join was answered with another key "
                          "(signed by that key, it passes every other check)", version)
    return Step(name="seat key", status="passed", detail=f"the join the deployment signed at version "
                f"{joins[-1][0]} registered the key you hold for {player!r}")


def compare_player_bundles(mine: Mapping, theirs: Mapping) -> list[str]:
    """Contradictions between two players' bundles of one room (each verified on its own first): at every
    version both hold, the public part and every leaf both know must be the same; the heads too (two signed
    checkpoints of one version with different heads are the operator's own proof of showing two histories)."""
    if mine.get("room") != theirs.get("room"):
        return [f"the bundles are of two rooms ({mine.get('room')!r}, {theirs.get('room')!r})"]
    a = _leaves(mine["room"], mine["player"], mine["events"])
    b = _leaves(theirs["room"], theirs["player"], theirs["events"])
    found = []
    for version, ((leaves_a, views_a), (leaves_b, views_b)) in enumerate(zip(a, b, strict=False), start=1):
        if views_a[cm.PUBLIC] != views_b[cm.PUBLIC]:
            found.append(f"version {version}: the public part shown to {mine['player']!r} differs from the one shown "
                         f"to {theirs['player']!r}")
        for label in sorted(set(leaves_a) & set(leaves_b)):
            if leaves_a[label] != leaves_b[label]:
                found.append(f"version {version}: the leaf of {label or 'the public part'!r} differs between the bundles")
    heads_a, heads_b = player_heads(mine), player_heads(theirs)
    for version, (head_a, head_b) in enumerate(zip(heads_a, heads_b, strict=False), start=1):
        if head_a != head_b:
            found.append(f"version {version}: the signed histories diverge here (head {head_a.hex()[:16]}.. for "
                         f"{mine['player']!r}, {head_b.hex()[:16]}.. for {theirs['player']!r})")
            break
    return found
