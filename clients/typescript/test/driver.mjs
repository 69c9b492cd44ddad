// A JSON-lines driver of the TypeScript client for the Python test suite (tests/gateway/test_typescript_client.py):
// each line on stdin is one operation the client performs against the gateway, each answer one line on stdout.
// The test decides the moves (the rule-set's bot reads the room); every call goes through this client.
import { createInterface } from "node:readline";
import { AlmanacError, createRoom, joinRoom } from "../dist/index.js";

const base = process.argv[2];
const seats = new Map();
const key = (room, player) => `${room}/${player}`;

async function perform(op) {
  switch (op.op) {
    case "create": {
      const seat = await createRoom(base, op.ruleset, op.player, op.extra ?? {});
      seats.set(key(seat.room, op.player), seat);
      return { room: seat.room, token: seat.token };
    }
    case "join": {
      const seat = await joinRoom(base, op.room, op.player);
      seats.set(key(op.room, op.player), seat);
      return { room: op.room, token: seat.token };
    }
    case "command": {
      const answer = await seats.get(key(op.room, op.player)).command(op.command);
      return { version: answer.version, events: answer.events };
    }
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
    process.stdout.write(JSON.stringify({ ok: false, status: refused ? error.status : 0,
                                          code: refused ? error.code : String(error) }) + "\n");
  }
}
