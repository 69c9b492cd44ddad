// `almanac bench e2e`'s schedule offered to the peer. Reads one JSON plan on stdin, the run's own schedule
// (bench e2e's RoomSlots): {rate, seconds, port, serverPid, ticksPerSecond, moves, slots, playedBefore}, where
// slots[j] lists slot j's matches in play order and playedBefore[m] is how many moves match m plays before the
// clock. Command i goes to slot i % slots.length, open loop; a slot plays its first match whose game is not
// over, one move at a time. Latency is measured from each move's scheduled send time to the server's state
// showing it placed (as bench e2e measures Almanac's), and apart from the move's own send (the round trip); no move
// is sent before its scheduled time (``until``). The server's CPU (/proc/<pid>/stat) over the load only. Prints one
// JSON line.
const fs = require('fs');
const { Client } = require('boardgame.io/client');
const { SocketIO } = require('boardgame.io/multiplayer');
const { version } = require('boardgame.io/package.json');
const { Game, cellOfMove, MAX_MOVES } = require('./game');

const plan = JSON.parse(fs.readFileSync(0, 'utf8'));
const BASE = `http://127.0.0.1:${plan.port}`;
const TIMEOUT_MS = 5000;

function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / plan.ticksPerSecond; // utime + stime
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
  const match = { client, placed: null, waiting: null, retired: false };
  client.subscribe((state) => {
    if (!state || !state.G) return;
    match.placed = state.G.placed;
    if (match.waiting && match.placed >= match.waiting.target) match.waiting.finish(true);
  });
  client.start();
  return match;
}

// Resolves once performance.now() has reached ``due``. A timer alone fires early: Node counts it from the loop's
// cached time, which a loop busy with answers leaves behind the clock (a 2.5 ms timer set after 5 ms of work fired
// 0.3-1.3 ms early here), and moves sent before their scheduled time were measured as answered before it (issue 28:
// the peer's p50 printed as -0.10 ms).
async function until(due) {
  for (let delay = due - performance.now(); delay > 0; delay = due - performance.now()) {
    await new Promise((r) => setTimeout(r, delay));
  }
}

// One move, answered once the server's state shows it placed: an update without it (a refusal) is no answer.
// A match whose move goes unanswered is retired, so that a late answer is never taken for a later move's.
// Resolves with the round trip (ms from the send to the answer), or null when unanswered.
function move(match) {
  return new Promise((resolve) => {
    let timer = null;
    let sent = null;
    const finish = (answered) => {
      clearTimeout(timer);
      match.waiting = null;
      if (!answered) match.retired = true;
      resolve(answered ? performance.now() - sent : null);
    };
    timer = setTimeout(() => finish(false), TIMEOUT_MS);
    match.waiting = { target: match.placed + 1, finish };
    sent = performance.now();
    match.client.moves.place(cellOfMove(match.placed));
  });
}

const quantile = (sorted, q) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : null);

(async () => {
  if (plan.moves > MAX_MOVES) throw new Error(`a game of ${plan.moves} moves does not fit the grid`);
  const matches = [];
  for (let m = 0; m < plan.playedBefore.length; m++) matches.push(await openMatch());
  while (!matches.every((match) => match.placed !== null)) await new Promise((r) => setTimeout(r, 20));
  await Promise.all(matches.map(async (match, m) => {
    for (let n = 0; n < plan.playedBefore[m]; n++) {
      if ((await move(match)) === null) throw new Error('a move before the clock went unanswered');
    }
  }));

  const total = plan.rate * plan.seconds;
  const slots = plan.slots.map((rooms) => ({ matches: rooms.map((m) => matches[m]), chain: Promise.resolve() }));
  const latencies = [];
  const roundTrips = [];
  const late = [];
  let unanswered = 0;
  const send = (slot, due) => {
    slot.chain = slot.chain.then(async () => { // a slot's moves in order, as one player sends them
      const match = slot.matches.find((candidate) => candidate.placed < plan.moves);
      if (!match) throw new Error('a slot ran out of matches');
      if (match.retired) { unanswered += 1; return; }
      const roundTrip = await move(match);
      if (roundTrip === null) {
        unanswered += 1;
      } else {
        latencies.push(performance.now() - due);
        roundTrips.push(roundTrip);
      }
    });
    return slot.chain;
  };
  const placedBefore = matches.reduce((sum, match) => sum + match.placed, 0);
  const cpuBefore = cpuSeconds(plan.serverPid);
  const selfBefore = process.cpuUsage();
  const started = performance.now();
  const sends = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / plan.rate;
    await until(due);
    late.push(performance.now() - due);
    sends.push(send(slots[i % slots.length], due));
  }
  await Promise.all(sends);
  const elapsed = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(plan.serverPid) - cpuBefore;
  const self = process.cpuUsage(selfBefore);
  const applied = matches.reduce((sum, match) => sum + match.placed, 0) - placedBefore; // moves the server made
  latencies.sort((a, b) => a - b);
  roundTrips.sort((a, b) => a - b);
  late.sort((a, b) => a - b);
  console.log(JSON.stringify({
    version, matches: matches.length, answered: latencies.length, unanswered, applied,
    achieved_per_s: latencies.length / elapsed, p50_ms: quantile(latencies, 0.5), p99_ms: quantile(latencies, 0.99),
    round_trip_p50_ms: quantile(roundTrips, 0.5), round_trip_p99_ms: quantile(roundTrips, 0.99),
    late_p99_ms: quantile(late, 0.99), server_cpu_s: cpu, server_cpu_ms_per_move: applied ? (cpu * 1000) / applied : null,
    load_generator_cpu_s: (self.user + self.system) / 1e6,
  }));
  process.exit(0);
})().catch((error) => { console.error(error); process.exit(1); });
