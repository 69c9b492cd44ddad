// The schedule of `almanac bench e2e` offered to the peer: RATE moves/s for SECONDS, open loop, over
// ceil(total / 17) matches (one player and one socket.io client each), a match's moves in order. Latency is
// measured from each move's scheduled send time to the server's state update; the server's CPU (user + system,
// /proc/<pid>/stat) over the load only. Prints one JSON line.
// Usage: node load.js RATE SECONDS SERVER_PID PORT
const fs = require('fs');
const { Client } = require('boardgame.io/client');
const { SocketIO } = require('boardgame.io/multiplayer');
const { Game, MOVES } = require('./game');

const [RATE, SECONDS, SERVER_PID, PORT] = process.argv.slice(2).map(Number);
const BASE = `http://127.0.0.1:${PORT}`;
const TIMEOUT_MS = 5000;
const TICKS_PER_S = 100;

function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S; // utime + stime
}

async function post(path, body) {
  const answer = await fetch(BASE + path, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  if (!answer.ok) throw new Error(`${path} answered ${answer.status}`);
  return answer.json();
}

async function openMatch() {
  const { matchID } = await post('/games/place/create', { numPlayers: 1 });
  const { playerCredentials } = await post(`/games/place/${matchID}/join`, { playerID: '0', playerName: 'p' });
  const client = Client({
    game: Game, multiplayer: SocketIO({ server: BASE }), matchID, playerID: '0', credentials: playerCredentials,
    debug: false,
  });
  const match = { client, stateID: null, waiting: null, done: 0, busy: Promise.resolve() };
  client.subscribe((state) => {
    if (!state) return;
    if (match.stateID !== null && state._stateID !== match.stateID && match.waiting) {
      const resolve = match.waiting;
      match.waiting = null;
      resolve('answered');
    }
    match.stateID = state._stateID;
  });
  client.start();
  return match;
}

function move(match) {
  return new Promise((resolve) => {
    match.waiting = resolve;
    setTimeout(() => resolve('timeout'), TIMEOUT_MS);
    match.client.moves.place((match.done * 7) % 121); // a free cell for each of the game's moves
  });
}

(async () => {
  const total = RATE * SECONDS;
  const matches = [];
  for (let i = 0; i < Math.ceil(total / MOVES); i++) matches.push(await openMatch());
  while (!matches.every((match) => match.stateID !== null)) await new Promise((r) => setTimeout(r, 20));

  const latencies = [];
  let timeouts = 0;
  const send = (match, due) => {
    match.busy = match.busy.then(async () => { // a match's moves in order, as one player sends them
      const result = await move(match);
      match.waiting = null;
      if (result === 'timeout') timeouts += 1;
      else { match.done += 1; latencies.push(performance.now() - due); }
    });
    return match.busy;
  };
  const cpuBefore = cpuSeconds(SERVER_PID);
  const started = performance.now();
  const sends = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / RATE;
    const delay = due - performance.now();
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    sends.push(send(matches[i % matches.length], due));
  }
  await Promise.all(sends);
  const elapsed = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(SERVER_PID) - cpuBefore;
  latencies.sort((a, b) => a - b);
  const quantile = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  console.log(JSON.stringify({
    matches: matches.length, answered: latencies.length, timeouts, achieved_per_s: latencies.length / elapsed,
    p50_ms: quantile(0.5), p99_ms: quantile(0.99), server_cpu_s: cpu,
    server_cpu_ms_per_move: latencies.length ? (cpu * 1000) / latencies.length : null,
  }));
  process.exit(0);
})().catch((error) => { console.error(error); process.exit(1); });
