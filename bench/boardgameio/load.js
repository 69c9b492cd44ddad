// `almanac bench e2e`'s schedule offered to the peer. Reads one JSON plan on stdin, the run's own schedule
// (bench e2e's RoomSlots): {rate, seconds, port, serverPid, ticksPerSecond, moves, slots, playedBefore}, where
// slots[j] lists slot j's matches in play order and playedBefore[m] is how many moves match m plays before the
// clock. Command i goes to slot i % slots.length, open loop; a slot plays its first match whose game is not
// over, one move at a time. Latency is measured from each move's scheduled send time to the server's state
// showing it placed; the server's CPU (/proc/<pid>/stat) over the load only. Prints one JSON line.
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

// One move, answered once the server's state shows it placed: an update without it (a refusal) is no answer.
// A match whose move goes unanswered is retired, so that a late answer is never taken for a later move's.
function move(match) {
  return new Promise((resolve) => {
    let timer = null;
    const finish = (answered) => {
      clearTimeout(timer);
      match.waiting = null;
      if (!answered) match.retired = true;
      resolve(answered);
    };
    timer = setTimeout(() => finish(false), TIMEOUT_MS);
    match.waiting = { target: match.placed + 1, finish };
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
      if (!(await move(match))) throw new Error('a move before the clock went unanswered');
    }
  }));

  const total = plan.rate * plan.seconds;
  const slots = plan.slots.map((rooms) => ({ matches: rooms.map((m) => matches[m]), chain: Promise.resolve() }));
  const latencies = [];
  const late = [];
  let unanswered = 0;
  const send = (slot, due) => {
    slot.chain = slot.chain.then(async () => { // a slot's moves in order, as one player sends them
      const match = slot.matches.find((candidate) => candidate.placed < plan.moves);
      if (!match) throw new Error('a slot ran out of matches');
      if (match.retired) { unanswered += 1; return; }
      if (await move(match)) latencies.push(performance.now() - due);
      else unanswered += 1;
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
    const delay = due - performance.now();
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    late.push(performance.now() - due);
    sends.push(send(slots[i % slots.length], due));
  }
  await Promise.all(sends);
  const elapsed = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(plan.serverPid) - cpuBefore;
  const self = process.cpuUsage(selfBefore);
  const applied = matches.reduce((sum, match) => sum + match.placed, 0) - placedBefore; // moves the server made
  latencies.sort((a, b) => a - b);
  late.sort((a, b) => a - b);
  console.log(JSON.stringify({
    version, matches: matches.length, answered: latencies.length, unanswered, applied,
    achieved_per_s: latencies.length / elapsed, p50_ms: quantile(latencies, 0.5), p99_ms: quantile(latencies, 0.99),
    late_p99_ms: quantile(late, 0.99), server_cpu_s: cpu, server_cpu_ms_per_move: applied ? (cpu * 1000) / applied : null,
    load_generator_cpu_s: (self.user + self.system) / 1e6,
  }));
  process.exit(0);
})().catch((error) => { console.error(error); process.exit(1); });
