// A JSON-lines driver of the TypeScript client for the Python test suite (tests/gateway/test_typescript_client.py):
// each line on stdin is one operation the client performs against the gateway, each answer one line on stdout.
// The test decides the moves (the rule-set's bot reads the room); every call goes through this client.
import { createInterface } from "node:readline";
import { AlmanacError, KeySubstituted, PlayerKey, commandBytes, createRoom, joinRoom, reclaimSeat } from "../dist/index.js";

const base = process.argv[2];
const seats = new Map();
const key = (room, player) => `${room}/${player}`;

// A signed seat's key: `sign: true` makes one, `key` imports one exported earlier (the console's format).
const playerKey = async (op) => (op.key ? PlayerKey.importKey(op.key) : op.sign ? PlayerKey.generate() : undefined);
const seated = (seat) => ({ room: seat.room, token: seat.token, seen: seat.seenVersion, seat_key: seat.seatKey ?? null,
                            public_key: seat.playerKey?.publicKey ?? null });
const hex = (bytes) => [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");

async function perform(op) {
  switch (op.op) {
    case "create": {
      const seat = await createRoom(base, op.ruleset, op.player, op.extra ?? {}, { playerKey: await playerKey(op) });
      seats.set(key(seat.room, op.player), seat);
      return seated(seat);
    }
    case "join": {
      const seat = await joinRoom(base, op.room, op.player, { playerKey: await playerKey(op), nonce: op.nonce });
      seats.set(key(op.room, op.player), seat);
      return seated(seat);
    }
    case "reclaim": {
      const seat = await reclaimSeat(base, op.room, op.player, op.seat_key, { playerKey: await playerKey(op) });
      seats.set(key(op.room, op.player), seat);
      return seated(seat);
    }
    case "held":  // the seat's checkpoint file and receipt file, as `verify-bundle --checkpoints/--receipts` read
      return await seats.get(key(op.room, op.player)).exportHeld();
    case "export_key":
      return { key: seats.get(key(op.room, op.player)).playerKey.export() };
    case "command": {
      const seat = seats.get(key(op.room, op.player));
      const answer = await seat.command(op.command, op.command_id);
      return { version: answer.version, events: answer.events, seen: seat.seenVersion };
    }
    case "reveal": {
      const answer = await seats.get(key(op.room, op.player)).revealNonce(op.nonce);
      return { version: answer.version, events: answer.events };
    }
    case "hand_to_bot": {
      const answer = await seats.get(key(op.room, op.player)).handToBot();
      return { how: answer.how, version: answer.handed?.version ?? null };
    }
    case "signed": {  // a signed body made by the seat's key, not sent (the test plays the attacker with it)
      const seat = seats.get(key(op.room, op.player));
      const signature = await seat.playerKey.signCommand(op.room, op.player, op.command_id, op.command, op.seen);
      return { body: { command: op.command, command_id: op.command_id, seen_version: op.seen, signature } };
    }
    case "bytes":
      return { hex: hex(commandBytes(op.room, op.player, op.command_id, op.body, op.seen)) };
    case "seen":
      return { seen: seats.get(key(op.room, op.player)).seenVersion };
    case "end":
      return { version: (await seats.get(key(op.room, op.player)).end(op.reason)).version };
    case "view":
      return await seats.get(key(op.room, op.player)).view();
    case "events":
      return await seats.get(key(op.room, op.player)).events(1);
    case "follow": {
      const seen = [];
      const following = seats.get(key(op.room, op.player)).follow((event) => seen.push(event.version));
      const deadline = Date.now() + 15_000;
      while (following.lastVersion < op.until && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      following.close();
      return { versions: seen };
    }
    default:
      throw new Error(`unknown op ${op.op}`);
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  try {
    process.stdout.write(JSON.stringify({ ok: true, ...(await perform(JSON.parse(line))) }) + "\n");
  } catch (error) {
    const refused = error instanceof AlmanacError;
    const code = refused ? error.code : error instanceof KeySubstituted ? "key_substituted" : String(error);
    process.stdout.write(JSON.stringify({ ok: false, status: refused ? error.status : 0, code,
                                          allowed: refused ? error.body.allowed ?? null : null }) + "\n");
  }
}
