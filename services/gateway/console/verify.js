// The second verifier: a dispute bundle's envelope chain, its commitment chain, and the signed checkpoints a
// player holds, checked in the browser with WebCrypto (SHA-256, HMAC-SHA256, Ed25519) from docs/bundle-format.md
// alone, written apart from the Python one (events/forensics/bundle_check.py, checkpoint_check.py). It does not
// re-decide commands (that needs the rules): its steps are format, chain and checkpoints, named as Python names them;
// and its verdict states, as Python's does, the room's dice scheme and which seats signed (``seats``, seatsOf below).
// The bytes a player signs come from the TypeScript client's signing module (signing.js, compiled from
// clients/typescript/src/signing.ts, also written apart from Python): the console signs and checks the same bytes,
// said once.
import { commandBytes, joinBytes } from "./signing.js";

const te = new TextEncoder();
const td = new TextDecoder("utf-8", { fatal: true });
const HEX = /^[0-9a-f]*$/;
const GENESIS = "0".repeat(64);
const FIELDS = ["room", "version", "head", "kid", "sig"];
const FORMAT_VERSION = 2;  // almanac-dispute-bundle (events/forensics/bundle_check.py BUNDLE_FORMAT_VERSION)
const MAX_CHAIN = 1_000_000;  // bundle_check.MAX_CHAIN

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
function unhex(text) {
  if (typeof text !== "string" || text.length % 2 || !HEX.test(text)) throw new Error("not lowercase hex");
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}
function unbase64(text) {
  if (typeof text !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4) throw new Error("not base64");
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}
function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}
function be(value, bytes) { // unsigned big-endian of a safe integer
  const out = new Uint8Array(bytes);
  let v = BigInt(value);
  for (let i = bytes - 1; i >= 0; i--) { out[i] = Number(v & 0xffn); v >>= 8n; }
  return out;
}
const sha256 = async (bytes) => new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
async function hmac(key, message) {
  const k = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", k, message));
}

// --- msgpack: read a stored envelope (a map of strings, integers and bytes), write the body (section 1.1) -------
function readMsgpack(bytes) {
  let pos = 0;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const need = (n) => { if (pos + n > bytes.length) throw new Error("msgpack ends early"); };
  const u = (n) => {
    need(n);
    let v = 0n;
    for (let i = 0; i < n; i++) v = (v << 8n) | BigInt(bytes[pos++]);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error("integer too large");
    return Number(v);
  };
  const s = (n) => { need(n); const t = td.decode(bytes.subarray(pos, pos + n)); pos += n; return t; };
  const b = (n) => { need(n); const t = bytes.slice(pos, pos + n); pos += n; return t; };
  const list = (n) => Array.from({ length: n }, () => read());
  const map = (n) => {
    const out = {};
    for (let i = 0; i < n; i++) {
      const key = read();
      if (typeof key !== "string" || key in out) throw new Error("msgpack map key");
      out[key] = read();
    }
    return out;
  };
  function read() {
    need(1);
    const t = bytes[pos++];
    if (t <= 0x7f) return t;
    if (t >= 0xe0) return t - 256;
    if (t >= 0x80 && t <= 0x8f) return map(t & 0x0f);
    if (t >= 0x90 && t <= 0x9f) return list(t & 0x0f);
    if (t >= 0xa0 && t <= 0xbf) return s(t & 0x1f);
    switch (t) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: return b(u(1));
      case 0xc5: return b(u(2));
      case 0xc6: return b(u(4));
      case 0xcc: return u(1);
      case 0xcd: return u(2);
      case 0xce: return u(4);
      case 0xcf: return u(8);
      case 0xd0: { need(1); return view.getInt8(pos++); }
      case 0xd1: { need(2); const v = view.getInt16(pos); pos += 2; return v; }
      case 0xd2: { need(4); const v = view.getInt32(pos); pos += 4; return v; }
      case 0xd9: return s(u(1));
      case 0xda: return s(u(2));
      case 0xdb: return s(u(4));
      case 0xdc: return list(u(2));
      case 0xdd: return list(u(4));
      case 0xde: return map(u(2));
      case 0xdf: return map(u(4));
      default: throw new Error(`msgpack type 0x${t.toString(16)} is not one an envelope holds`);
    }
  }
  const value = read();
  if (pos !== bytes.length) throw new Error("bytes after the envelope");
  return value;
}

function packStr(text) {
  const bytes = te.encode(text);
  const n = bytes.length;
  const head = n < 32 ? [0xa0 | n] : n < 256 ? [0xd9, n] : n < 65536 ? [0xda, ...be(n, 2)] : [0xdb, ...be(n, 4)];
  return concat(Uint8Array.from(head), bytes);
}
function packInt(i) {
  if (!Number.isSafeInteger(i) || i < 0) throw new Error("not a non-negative integer");
  if (i < 128) return Uint8Array.of(i);
  if (i < 2 ** 8) return Uint8Array.of(0xcc, i);
  if (i < 2 ** 16) return concat(Uint8Array.of(0xcd), be(i, 2));
  if (i < 2 ** 32) return concat(Uint8Array.of(0xce), be(i, 4));
  return concat(Uint8Array.of(0xcf), be(i, 8));
}
function packBin(bytes) {
  const n = bytes.length;
  const head = n < 256 ? [0xc4, n] : n < 65536 ? [0xc5, ...be(n, 2)] : [0xc6, ...be(n, 4)];
  return concat(Uint8Array.from(head), bytes);
}

const ENVELOPE = { room: "string", version: "number", ruleset: "string", type: "string", payload: "bytes",
                   command_id: "string", player: "string", server_time_ms: "number", previous_hash: "string",
                   hash: "string" };
function envelopeOf(bytes) {
  const e = readMsgpack(bytes);
  if (!e || typeof e !== "object" || Array.isArray(e)) throw new Error("not an envelope");
  for (const [name, kind] of Object.entries(ENVELOPE)) {
    const ok = kind === "bytes" ? e[name] instanceof Uint8Array : typeof e[name] === kind;
    if (!ok) throw new Error(`field ${name} is not ${kind}`);
  }
  return e;
}
export const eventBody = (e) => concat(Uint8Array.of(0x98), packStr(e.room), packInt(e.version), packStr(e.ruleset),
  packStr(e.type), packBin(e.payload), packStr(e.command_id), packStr(e.player), packInt(e.server_time_ms));

// --- the commitment chain and checkpoints (sections 1.2, 1.3, 2, 3) ------------------------------------------
const TAG = (text) => te.encode(`almanac/${text}\0`);
export const salt = (roomKey, v) => hmac(roomKey, concat(TAG("salt/v1"), be(v, 8)));
export const commitment = (saltV, body) => sha256(concat(TAG("event/v1"), saltV, body));
export const nextHead = (head, c) => sha256(concat(TAG("head/v1"), head, c));
// almanac-commit-v2 (section 6): a salted leaf per audience, their root per event, chained like v1 under its own tags.
export const FULL = "*";
export const PUBLIC = "";
const labelBytes = (label) => { const b = te.encode(label); return concat(be(b.length, 2), b); };
export const leafSalt = (roomKey, v, label) => hmac(roomKey, concat(TAG("salt/v2"), be(v, 8), te.encode(label)));
export const leaf = (label, saltV, view) => sha256(concat(TAG("leaf/v2"), labelBytes(label), saltV, view));
function byteOrder(a, b) {
  const x = te.encode(a), y = te.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}
export function root(leaves) { // leaves: Map label -> 32 bytes
  const labels = [...leaves.keys()].sort(byteOrder);
  return sha256(concat(TAG("event/v2"), be(labels.length, 2), ...labels.map((l) => concat(labelBytes(l), leaves.get(l)))));
}
export const nextHeadV2 = (head, c) => sha256(concat(TAG("head/v2"), head, c));
export const keyId = async (publicKey) => hex(await sha256(publicKey)).slice(0, 16);
export function checkpointMessage(room, version, head) {
  const name = te.encode(room);
  return concat(TAG("checkpoint/v1"), be(name.length, 2), name, be(version, 8), head);
}
const isHex = (v, n) => typeof v === "string" && v.length === n && HEX.test(v);

function checkpointProblem(c) {
  if (!c || typeof c !== "object" || Array.isArray(c)) return "a checkpoint is an object";
  const unknown = Object.keys(c).filter((k) => !FIELDS.includes(k)).sort();
  if (unknown.length) return `unknown fields ${unknown}`;
  const missing = FIELDS.filter((k) => !(k in c));
  if (missing.length) return `missing ${missing}`;
  const roomBytes = typeof c.room === "string" ? te.encode(c.room).length : 0;
  if (!(roomBytes > 0 && roomBytes < 65536)) return "room is not a room id";
  if (!Number.isSafeInteger(c.version) || c.version < 1) return "version is not a positive integer";
  for (const [name, n] of [["head", 64], ["kid", 16], ["sig", 128]]) {
    if (!isHex(c[name], n)) return `${name} is not ${n} lowercase hex characters`;
  }
  return null;
}

async function keySetProblem(doc) {
  if (!doc || typeof doc !== "object" || doc.format !== "almanac-keys") return "not an almanac-keys document";
  if (doc.format_version !== 1) return "key set format_version is not 1";
  if (!Array.isArray(doc.keys) || !doc.keys.length) return "the key set has no keys";
  for (const k of doc.keys) {
    if (!k || k.alg !== "Ed25519" || !isHex(k.public_key, 64)) return "a key is not {kid, alg: Ed25519, public_key}";
    if (k.kid !== await keyId(unhex(k.public_key))) return `key ${k.kid} is not the id of its public key`;
  }
  return null;
}

async function signatureValid(publicKey, c) {
  try {
    const key = await crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
    return await crypto.subtle.verify({ name: "Ed25519" }, key, unhex(c.sig),
                                      checkpointMessage(c.room, c.version, unhex(c.head)));
  } catch (error) {
    if (error && error.name === "NotSupportedError") throw error; // a browser without Ed25519: say so, not "forged"
    return false;
  }
}

class Failure extends Error {
  constructor(name, detail, version = null) { super(detail); this.step = name; this.version = version; }
}
const label = (c) => (c && typeof c === "object" ? `${c.room}@${c.version} kid ${c.kid}` : String(c).slice(0, 60));

async function commitmentHeads(bundle, chain) {
  const section = bundle.commitments;
  if (section === undefined || section === null) return null;
  const v2 = section && section.scheme === "almanac-commit-v2";
  if (typeof section !== "object" || (section.scheme !== "almanac-commit-v1" && !v2)) {
    throw new Failure("checkpoints", "the commitments section is not scheme almanac-commit-v1 or almanac-commit-v2");
  }
  if (v2) return viewHeads(section, chain);
  let roomKey = null;
  const given = new Map();
  if (section.room_key !== undefined && section.room_key !== null) {
    if (!isHex(section.room_key, 64)) throw new Failure("checkpoints", "room_key is not 64 hex characters");
    roomKey = unhex(section.room_key);
  } else {
    const entries = section.events;
    if (!Array.isArray(entries) || entries.length !== chain.length) {
      throw new Failure("checkpoints", "without room_key, commitments.events must list every version of the chain");
    }
    entries.forEach((entry, i) => {
      const v = i + 1;
      const kind = entry && "salt" in entry ? "salt" : "commitment";
      if (!entry || entry.version !== v || Object.keys(entry).length !== 2 || !isHex(entry[kind], 64)) {
        throw new Failure("checkpoints", `commitments.events entry ${v} is malformed`, v);
      }
      given.set(v, [kind, unhex(entry[kind])]);
    });
  }
  let head = new Uint8Array(32);
  const heads = [];
  for (let i = 0; i < chain.length; i++) {
    const v = i + 1;
    const e = chain[i];
    let c;
    if (roomKey) {
      if (!e) throw new Failure("checkpoints", "an event is missing from the chain", v);
      c = await commitment(await salt(roomKey, v), e.body);
    } else {
      const [kind, value] = given.get(v);
      if (!e && kind === "commitment") c = value;
      else if (e && kind === "salt") c = await commitment(value, e.body);
      else throw new Failure("checkpoints", "a shown event needs its salt and a hidden one its commitment", v);
    }
    head = await nextHead(head, c);
    heads.push(head);
  }
  return heads;
}

// A v2 auditor bundle lists every audience's view but the whole event's; this verifier hashes them as given (it has no
// rules to redact with: the Python verifier re-derives them) and the whole event from the envelope.
async function viewHeads(section, chain) {
  if (!isHex(section.room_key, 64)) throw new Failure("checkpoints", "a scheme v2 bundle needs room_key (64 hex)");
  const roomKey = unhex(section.room_key);
  if (!Array.isArray(section.views) || section.views.length !== chain.length) {
    throw new Failure("checkpoints", "a scheme v2 bundle lists every event's views (commitments.views)");
  }
  let head = new Uint8Array(32);
  const heads = [];
  for (let i = 0; i < chain.length; i++) {
    const v = i + 1;
    const views = section.views[i];
    if (!chain[i]) throw new Failure("checkpoints", "an event is missing from the chain", v);
    if (!views || typeof views !== "object" || Array.isArray(views) || FULL in views || !(PUBLIC in views)) {
      throw new Failure("checkpoints", `commitments.views entry ${v} is malformed`, v);
    }
    const leaves = new Map([[FULL, await leaf(FULL, await leafSalt(roomKey, v, FULL), chain[i].body)]]);
    for (const [label, text] of Object.entries(views)) {
      leaves.set(label, await leaf(label, await leafSalt(roomKey, v, label), unbase64(text)));
    }
    head = await nextHeadV2(head, await root(leaves));
    heads.push(head);
  }
  return heads;
}

// The first two checkpoints (in the order given) well formed, validly signed by a trusted key, and of one room and
// version with different heads, or null: the deployment contradicting itself, provable with no chain at all
// (checkpoint_check.equivocation). The console also calls it on the checkpoints it keeps (app.js).
export async function equivocation(checkpoints, keys) {
  const signed = new Map();
  for (const c of checkpoints) {
    if (checkpointProblem(c) || !keys.has(c.kid) || !(await signatureValid(keys.get(c.kid), c))) continue;
    const at = JSON.stringify([c.room, c.version]);
    if (!signed.has(at)) signed.set(at, c);
    else if (signed.get(at).head !== c.head) return [signed.get(at), c];
  }
  return null;
}
// Word for word as checkpoint_check.equivocation_detail says it.
export function equivocationDetail(first, second) {
  const kid = first.kid === second.kid ? first.kid : `${first.kid} and key ${second.kid}`;
  return `equivocation: the deployment signed two heads for version ${first.version}: ${first.head} and ` +
    `${second.head}, key ${kid} (room ${first.room}; both signatures are valid, so this proves the ` +
    "deployment contradicted itself whatever the bundle's chain says)";
}
// kid -> raw public key of a well-formed key set (keySetProblem null): active and retired keys both verify.
export const trustedKeys = (doc) => new Map(doc.keys.map((k) => [k.kid, unhex(k.public_key)]));
export { checkpointProblem, keySetProblem, signatureValid };

async function checkCheckpoints(room, heads, checkpoints, keys) {
  const pair = await equivocation(checkpoints, keys);
  if (pair) throw new Failure("checkpoints", equivocationDetail(...pair), pair[0].version);
  for (const c of checkpoints) {
    const problem = checkpointProblem(c);
    if (problem) throw new Failure("checkpoints", `checkpoint ${label(c)} is malformed: ${problem}`);
    if (!keys.has(c.kid)) throw new Failure("checkpoints", `checkpoint ${label(c)} is signed by key ${c.kid}, which is not in the trusted key set`, c.version);
    if (!(await signatureValid(keys.get(c.kid), c))) throw new Failure("checkpoints", `checkpoint ${label(c)}: the signature is not valid (forged or altered)`, c.version);
    if (c.room !== room) throw new Failure("checkpoints", `checkpoint ${label(c)} is of room ${c.room}, not of this bundle's room ${room}`, c.version);
    if (c.version > heads.length) throw new Failure("checkpoints", `checkpoint ${label(c)}: the bundle's chain ends at version ${heads.length}, before the checkpoint`, c.version);
    if (hex(heads[c.version - 1]) !== c.head) throw new Failure("checkpoints", `checkpoint ${label(c)}: the bundle's history does not pass through it`, c.version);
  }
}

// --- refusal receipts (section 8): the deployment's signature on a refusal it answered. Checked as checkpoint_check
// .check_receipts does, in its order; this verifier cannot decide the command again (that needs the rules), so it
// cannot tell a false refusal from a true one: the Python verifier's "receipts" step does that. ---------------------
const RECEIPT_FIELDS = ["room", "version", "head", "player", "command_id", "code", "raw", "kid", "sig"];
const CODE = /^[a-z0-9_.]{1,100}$/;
const MAX_RAW = 100_000;
export async function refusalMessage(r) {
  const prefixed = (text) => { const b = te.encode(text); return concat(be(b.length, 2), b); };
  return concat(TAG("refusal/v1"), prefixed(r.room), be(r.version, 8), unhex(r.head), prefixed(r.player),
                prefixed(r.command_id), await sha256(unbase64(r.raw)), prefixed(r.code));
}
function receiptProblem(r) {
  if (!r || typeof r !== "object" || Array.isArray(r)) return "a receipt is an object";
  const unknown = Object.keys(r).filter((k) => !RECEIPT_FIELDS.includes(k)).sort();
  if (unknown.length) return `unknown fields ${unknown.slice(0, 5)}`;
  const missing = RECEIPT_FIELDS.filter((k) => !(k in r));
  if (missing.length) return `missing ${missing}`;
  for (const name of ["room", "player", "command_id"]) {
    const n = typeof r[name] === "string" ? te.encode(r[name]).length : 0;
    if (!(n > 0 && n < 65536)) return `${name} is not a name`;
  }
  if (typeof r.code !== "string" || !CODE.test(r.code)) return "code is not a refusal code";
  if (!Number.isSafeInteger(r.version) || r.version < 1) return "version is not a positive integer";
  if (typeof r.raw !== "string" || !r.raw.length || r.raw.length > MAX_RAW) return `raw is not 1..${MAX_RAW} characters of base64`;
  try { unbase64(r.raw); } catch { return "raw is not base64"; }
  for (const [name, n] of [["head", 64], ["kid", 16], ["sig", 128]]) {
    if (!isHex(r[name], n)) return `${name} is not ${n} lowercase hex characters`;
  }
  return null;
}
// Whether a well-formed receipt (receiptProblem null) is signed by ``publicKey`` (raw bytes), as signatureValid does
// for a checkpoint: the console checks each refusal answer's receipt before keeping it.
export async function receiptSignatureValid(publicKey, r) {
  return ed25519Valid(hex(publicKey), r.sig, () => null, await refusalMessage(r));
}
export { receiptProblem };
const receiptLabel = (r) => (r && typeof r === "object" && !Array.isArray(r)
  ? `refusal receipt ${r.room}@${r.version} command ${JSON.stringify(String(r.command_id).slice(0, 120))} kid ${r.kid}`
  : String(r).slice(0, 60));
// Each receipt well formed, signed by a trusted key, of this room, its record the command it names refused at its
// version, on this history (head_version is the signed head), its command never recorded accepted. Returns
// command id -> {receipt, raw bytes}, for the refusals step.
async function checkReceipts(room, heads, chain, receipts, keys) {
  const held = new Map();
  if (!receipts.length) return held;
  if (keys === null || keys === undefined) throw new Failure("receipts", "refusal receipts were given but no key set to check their signatures with");
  const problem = await keySetProblem(keys);
  if (problem) throw new Failure("receipts", `the key set is not usable: ${problem}`);
  const trusted = trustedKeys(keys);
  const acceptedAt = new Map();
  for (const e of chain) if (!acceptedAt.has(e.command_id)) acceptedAt.set(e.command_id, e.version);
  for (const r of receipts) {
    const name = receiptLabel(r);
    const bad = receiptProblem(r);
    if (bad) throw new Failure("receipts", `${name} is malformed: ${bad}`);
    if (!trusted.has(r.kid)) throw new Failure("receipts", `${name} is signed by key ${r.kid}, which is not in the trusted key set`, r.version);
    if (!(await ed25519Valid(hex(trusted.get(r.kid)), r.sig, () => null, await refusalMessage(r)))) {
      throw new Failure("receipts", `${name}: the signature is not valid (forged or altered)`, r.version);
    }
    if (r.room !== room) throw new Failure("receipts", `${name} is of room ${r.room}, not of this bundle's room ${room}`, r.version);
    const raw = unbase64(r.raw);
    let record;
    try { record = recordOf(raw); } catch (error) { throw new Failure("receipts", `${name}: its command record does not decode (${error.message})`, r.version); }
    if (record.room !== r.room || record.player !== r.player || record.command_id !== r.command_id
        || record.refused_at_version !== r.version) {
      throw new Failure("receipts", `${name}: its command record is not the command it names, refused at its version`, r.version);
    }
    if (r.version > chain.length) throw new Failure("receipts", `${name}: the bundle's chain ends at version ${chain.length}, before the refusal`, r.version);
    if (heads === null) throw new Failure("receipts", `${name}: the bundle carries no commitment openings`);
    if (hex(heads[r.version - 1]) !== r.head) throw new Failure("receipts", `${name}: the bundle's history does not pass through the version it was refused at`, r.version);
    if (acceptedAt.has(r.command_id)) {
      throw new Failure("receipts", `${name}: the deployment signed this command's refusal, yet the chain records it accepted at version ${acceptedAt.get(r.command_id)}`, acceptedAt.get(r.command_id));
    }
    held.set(r.command_id, { receipt: r, raw });
  }
  return held;
}

// A thrown error as the failed step (a hostile input that breaks step ``at`` fails that step), appended to ``steps``.
function failedStep(error, at, steps) {
  const failure = error instanceof Failure ? error
    : error && error.name === "NotSupportedError" ? new Failure("checkpoints", `this browser cannot check Ed25519: ${error.message}`)
    : new Failure(at, `the bundle is malformed (${at}): ${error && error.message}`);
  const failed = { name: failure.step, detail: failure.message, version: failure.version };
  steps.push({ ...failed, status: "failed" });
  return failed;
}

// The verdict: {ok, failed: {name, detail, version} | null, steps: [{name, status, detail, version}]}.
export async function verifyBundle(bundle, { checkpoints = [], keys = null, receipts = [] } = {}) {
  const steps = [];
  let seats = null;  // the room's dice scheme and who signed, once the chain is linked (seatsOf)
  const pass = (name, status, detail) => steps.push({ name, status, detail, version: null });
  let at = "format";  // the step under way: a hostile input that breaks it fails that step
  try {
    if (!bundle || typeof bundle !== "object" || bundle.format !== "almanac-dispute-bundle") {
      throw new Failure("format", "not a dispute bundle");
    }
    if (bundle.format_version !== FORMAT_VERSION) throw new Failure("format", `format_version ${bundle.format_version}`);
    let raws, room, headVersion, headHash;
    try {
      room = bundle.room;
      raws = bundle.chain.envelopes.map(unbase64);
      const object = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
      const records = bundle.chain.commands;
      if (typeof room !== "string" || !Array.isArray(bundle.events) || !Array.isArray(bundle.commands)
          || !Array.isArray(bundle.refusals) || !object(bundle.seed) || !object(bundle.ruleset)
          || !(records === undefined || records === null || Array.isArray(records))) throw new Error("missing parts");
      if (![...bundle.events, ...bundle.commands, ...bundle.refusals].every(object)) throw new Error("an entry is not an object");
      headVersion = bundle.head.version;
      headHash = String(bundle.head.hash);
      if (!Number.isInteger(headVersion)) throw new Error("head.version");
    } catch (error) {
      throw new Failure("format", `a required part is missing or malformed: ${error.message}`);
    }
    if (!(headVersion >= 1 && headVersion <= MAX_CHAIN)) throw new Failure("format", `the head is version ${headVersion}`);
    pass("format", "passed", `a dispute bundle of room ${room}`);

    at = "chain";
    if (raws.length !== headVersion) throw new Failure("chain", `the chain holds ${raws.length} envelopes but the head is version ${headVersion}`);
    const chain = [];
    let previous = GENESIS;
    for (let i = 0; i < raws.length; i++) {
      const v = i + 1;
      let e;
      try {
        e = envelopeOf(raws[i]);
        e.body = eventBody(e);
      } catch (error) {
        throw new Failure("chain", `entry ${v} is not an envelope: ${error.message}`, v);
      }
      if (e.version !== v || e.room !== room) throw new Failure("chain", `entry ${v} claims room ${e.room} version ${e.version}`, v);
      if (e.previous_hash !== previous) throw new Failure("chain", "the entry does not link to the hash of the entry before it", v);
      const own = hex(await sha256(concat(te.encode(e.previous_hash), e.body)));
      if (own !== e.hash) throw new Failure("chain", "the entry's content does not match its hash", v);
      previous = e.hash;
      chain.push(e);
    }
    if (previous !== headHash) throw new Failure("chain", "the chain does not end at the stated head hash", headVersion);
    pass("chain", "passed", `versions 1..${headVersion} are linked and unaltered`);
    seats = await seatsOf(bundle, chain);

    at = "checkpoints";
    const heads = await commitmentHeads(bundle, chain);
    const given = Array.from(checkpoints || []);
    const own = bundle.checkpoint === undefined ? null : bundle.checkpoint;
    if (heads === null) {
      if (given.length) throw new Failure("checkpoints", "the bundle carries no commitment openings");
      pass("checkpoints", "skipped", "the bundle has no commitments section");
    } else if (!given.length && own === null) {
      pass("checkpoints", "skipped", "no signed checkpoint to check");
    } else if (keys === null || keys === undefined) {
      if (given.length) throw new Failure("checkpoints", "checkpoints were given but no key set to check their signatures with");
      pass("checkpoints", "skipped", `commitment head ${hex(heads[heads.length - 1]).slice(0, 16)}… recomputed, but nothing anchors it`);
    } else {
      const problem = await keySetProblem(keys);
      if (problem) throw new Failure("checkpoints", `the key set is not usable: ${problem}`);
      const trusted = new Map(keys.keys.map((k) => [k.kid, unhex(k.public_key)]));
      await checkCheckpoints(room, heads, own === null ? given : [...given, own], trusted);
      pass("checkpoints", "passed", `the history passes through ${given.length} checkpoint(s)` +
           (own === null ? "" : " and the server's signature on the bundle's head"));
    }
    at = "receipts";
    const held = Array.from(receipts || []);
    const receipted = await checkReceipts(room, heads, chain, held, keys);
    if (held.length) {
      pass("receipts", "skipped", `each of the ${held.length} refusal receipt(s) is signed by a trusted key on this ` +
           "history; whether each refusal was true needs its command decided again (the rules): not checked here");
    }
    at = "refusals";
    await checkRefusals(bundle, chain, pass, receipted);
  } catch (error) {
    return { ok: false, failed: failedStep(error, at, steps), steps, seats };
  }
  return { ok: true, failed: null, steps, seats };
}

// --- who signed (events/forensics/signers.py, the same fields and notes word for word): the room's dice scheme (its
// room.created), the seats whose join registered a key, and those that did not, whose commands the operator could
// have sent with a token it minted; a join counts as signed when its record's signature is by the key it registers.
const COMMAND_BOUND = 3;
export const schemeNote = (scheme) => `dice scheme ${scheme}: rolls are keyed by room and version and no command is ` +
  "signed, so the operator could predict rolls, choose which command lands on which version and act for a player " +
  "(docs/dice.md); scheme 3 rooms prevent that";
const byCodePoint = (list) => [...list].sort(byteOrder);
// The seats in one line, as bundle_check.Verdict.text prints them (seats_line).
export const seatsLine = (seats) => `dice scheme ${seats.dice_scheme}; seats that sign their commands: ` +
  `${seats.signing_players.join(", ") || "none"}; seats that do not: ${seats.unsigned_players.join(", ") || "none"}`;
async function seatsOf(bundle, chain) {
  let created;
  try { created = chain[0].type === "room.created" ? readMsgpack(chain[0].payload) : null; } catch { return null; }
  if (!created || typeof created !== "object" || Array.isArray(created)) return null;
  const scheme = created.dice_scheme === undefined ? 1 : created.dice_scheme;
  if (!Number.isSafeInteger(scheme)) return null;
  const records = new Map();
  for (const item of Array.isArray(bundle.chain.commands) ? bundle.chain.commands : []) {
    try { const r = recordOf(unbase64(item[1])); records.set(r.command_id, r); } catch { /* the coverage step's to name */ }
  }
  const seated = new Set(), keys = new Map(), signed = new Set();
  for (const e of chain) {
    if (e.type !== "room.player_joined") continue;
    let joined;
    try { joined = readMsgpack(e.payload); } catch { return null; }
    if (!joined || typeof joined.player !== "string") return null;
    seated.add(joined.player);
    const key = typeof joined.public_key === "string" ? joined.public_key : "";
    if (!key) continue;
    keys.set(joined.player, key);
    const record = records.get(e.command_id);
    const commitment = joined.nonce_by_server === true ? "" : (joined.nonce_commitment || "");
    if (record && record.signature !== null
        && await ed25519Valid(key, record.signature, () => joinBytes(e.room, joined.player, key, commitment))) {
      signed.add(joined.player);
    }
  }
  const unsigned = byCodePoint([...seated].filter((p) => !keys.has(p)));
  const unsignedJoins = byCodePoint([...keys.keys()].filter((p) => !signed.has(p)));
  const notes = scheme === COMMAND_BOUND ? [] : [schemeNote(scheme)];
  if (unsignedJoins.length) {
    notes.push(`joins that registered a key unsigned (${unsignedJoins.join(", ")}): nothing but the join's own ` +
               "answer shows the key is that player's (the operator could have registered its own)");
  }
  if (unsigned.length) {
    notes.push(`players who do not sign (${unsigned.join(", ")}): the operator could have acted for them ` +
               "with a token it minted");
  }
  return { dice_scheme: scheme, signing_players: byCodePoint(keys.keys()), unsigned_players: unsigned,
           signed_joins: byCodePoint(signed), unsigned_joins: unsignedJoins, notes };
}

// --- refusals (section 7): which refusals their player's signature covers. Refusals write no event; this verifier
// cannot decide them again (that needs the rules), so it checks what the bytes alone show: no command id refused
// twice, a command naming the version its client saw refused only there, and the v2 signature (events.signing) by
// the key a signed join registered for that seat. "skipped" when any shown rests on the operator's word. ----------
const RECORD = { command_id: "string", room: "string", player: "string", server_time_ms: "number" };
function recordOf(bytes) {
  const r = readMsgpack(bytes);
  if (!r || typeof r !== "object" || Array.isArray(r)) throw new Error("not a command record");
  for (const [name, kind] of Object.entries(RECORD)) if (typeof r[name] !== kind) throw new Error(`field ${name} is not ${kind}`);
  if (!r.body || typeof r.body !== "object" || Array.isArray(r.body)) throw new Error("field body is not an object");
  for (const name of ["refused_at_version", "seen_version"]) {
    if (r[name] === undefined) r[name] = null;
    if (r[name] !== null && !Number.isSafeInteger(r[name])) throw new Error(`field ${name} is not an integer`);
  }
  if (r.signature === undefined) r.signature = null;
  return r;
}
async function ed25519Valid(publicHex, signatureHex, message, bytes = null) {  // message: makes the signed bytes
  if (typeof signatureHex !== "string" || signatureHex.length !== 128) return false;
  try {
    const key = await crypto.subtle.importKey("raw", unhex(publicHex), { name: "Ed25519" }, false, ["verify"]);
    return await crypto.subtle.verify({ name: "Ed25519" }, key, unhex(signatureHex), bytes || message());
  } catch { return false; }
}
async function checkRefusals(bundle, chain, pass, receipted = new Map()) {
  const shown = new Map();
  const refusals = bundle.refusals.map((entry) => {
    let r, raw;
    try { raw = unbase64(entry.raw); r = recordOf(raw); } catch (error) { throw new Failure("refusals", `a refusal entry is malformed: ${error.message}`); }
    const signed = receipted.get(r.command_id);
    const code = entry.error && typeof entry.error === "object" ? entry.error.code : undefined;
    if (signed && (hex(signed.raw) !== hex(raw) || code !== signed.receipt.code)) {
      throw new Failure("refusals", `refused command ${r.command_id} is not shown as the deployment signed its refusal (${receiptLabel(signed.receipt)}): another record or code`, r.refused_at_version);
    }
    if (r.seen_version !== null && r.seen_version !== r.refused_at_version) {
      throw new Failure("refusals", `refused command ${r.command_id} names version ${r.seen_version} but is shown refused at version ${r.refused_at_version}`, r.refused_at_version);
    }
    if (shown.has(r.command_id)) throw new Failure("refusals", `refused command ${r.command_id} is shown refused twice`, r.refused_at_version);
    shown.set(r.command_id, r.refused_at_version);
    return r;
  });
  if (!refusals.length) { pass("refusals", "passed", "the bundle claims no refused command"); return; }
  // Each seat's key by version, registered by a join its key signed (events.signing.join_bytes).
  const records = new Map();
  for (const item of Array.isArray(bundle.chain.commands) ? bundle.chain.commands : []) {
    try { const r = recordOf(unbase64(item[1])); records.set(r.command_id, r); } catch { /* the Python verifier's coverage step names it */ }
  }
  const joins = [];
  for (const e of chain) {
    if (e.type !== "room.player_joined") continue;
    let joined;
    try { joined = readMsgpack(e.payload); } catch { continue; }
    const key = typeof joined.public_key === "string" ? joined.public_key : "";
    const record = records.get(e.command_id);
    if (!key || !record || record.signature === null) continue;
    const commitment = joined.nonce_by_server === true ? "" : (joined.nonce_commitment || "");
    if (await ed25519Valid(key, record.signature, () => joinBytes(e.room, joined.player, key, commitment))) {
      joins.push({ player: joined.player, version: e.version, key });
    }
  }
  // A command the chain records accepted, shown refused too (its signed record copied to the refusals): decided once.
  const acceptedAt = new Map();
  for (const e of chain) if (!acceptedAt.has(e.command_id)) acceptedAt.set(e.command_id, e.version);
  for (const r of refusals) {
    if (acceptedAt.has(r.command_id)) {
      throw new Failure("refusals", `refused command ${r.command_id} is recorded accepted at version ${acceptedAt.get(r.command_id)} of the chain: a command id is decided once`, r.refused_at_version);
    }
  }
  let covered = 0;
  for (const r of refusals) {
    const join = joins.filter((j) => j.player === r.player && j.version <= r.refused_at_version).pop();
    // A receipt shows the deployment answered the refusal, not who sent it: it covers only a seat that does not sign
    // (as bundle_check's refusals step); a signing seat's refusal is covered by its player's signature alone.
    // (and only of a name the chain seated: a receipt for a name that never joined covers nothing either)
    const seated = chain.some((e) => (e.type === "room.created" || e.type === "room.player_joined") && e.player === r.player);
    if (receipted.has(r.command_id) && seated && !joins.some((j) => j.player === r.player)) { covered += 1; continue; }
    if (!join || r.seen_version === null) continue;  // no signed seat, or the v1 form (it names no version)
    const message = () => commandBytes(r.room, r.player, r.command_id, r.body, r.seen_version);
    if (await ed25519Valid(join.key, r.signature, message)) covered += 1;
  }
  if (covered === refusals.length) {
    pass("refusals", "passed", `each of the ${covered} refused command(s) is signed by its player over the version it is shown refused at (not decided again here)`);
  } else {
    pass("refusals", "skipped", `${refusals.length - covered} of ${refusals.length} refused command(s) not signed by their seat over the version shown: they rest on the operator's word`);
  }
}

// --- player-safe bundles (section 6.5): format, views, checkpoints, anchor, redaction (structural: the public part
// is the player's view with fields hidden; the Python verifier also re-runs the rule-set's redaction) ---------------
const HIDDEN_MARK = (v) => v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1 && v.hidden === true;
const canonical = (v) => Array.isArray(v) ? v.map(canonical)
  : v && typeof v === "object" && !(v instanceof Uint8Array) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])])) : v;
function same(a, b) { return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b)); }
function covers(mine, pub, path = "") { // where ``pub`` is not ``mine`` with parts hidden (null when it is)
  if (same(mine, pub) || HIDDEN_MARK(pub)) return null;
  if (mine && pub && typeof mine === "object" && typeof pub === "object" && !Array.isArray(mine) && !Array.isArray(pub)) {
    const keys = Object.keys(mine).sort();
    if (same(keys, Object.keys(pub).sort())) {
      for (const k of keys) { const p = covers(mine[k], pub[k], `${path}.${k}`); if (p !== null) return p; }
      return null;
    }
  }
  if (Array.isArray(mine) && Array.isArray(pub) && mine.length === pub.length) {
    for (let i = 0; i < mine.length; i++) { const p = covers(mine[i], pub[i], `${path}[${i}]`); if (p !== null) return p; }
    return null;
  }
  return path || "the event";
}
// The issuer's statement a player bundle carries (events/forensics/player_check.py PLAYER_BUNDLE_LIMITS), checked word for word.
const ISSUED_LIMITS = "A player-safe bundle proves that what you saw of every event, and its public part, lie on the history the deployment signed (through your checkpoints), that the public part is your view with fields hidden (never another value), and that every other view was fixed when it was signed (an edit after signing fails at your checkpoints). It cannot re-decide any command: the rules read values hidden from you (other seats' holdings, dice from the unrevealed seed). Compare it with another player's bundle to catch an operator who showed the two of you different public parts.";
export const PLAYER_LIMITS = "NOT PROVABLE from a player-safe bundle: that the commands were decided by the rules " +
  "(hidden steps cannot be re-decided: they read values hidden from you)";

export async function verifyPlayerBundle(bundle, { checkpoints = [], keys = null, seatKey = null } = {}) {
  const steps = [];
  const pass = (name, status, detail) => steps.push({ name, status, detail, version: null });
  let at = "format";
  try {
    if (!bundle || typeof bundle !== "object" || bundle.format !== "almanac-player-bundle") throw new Failure("format", "not a player bundle");
    const parts = ["audience", "format", "format_version", "room", "player", "exported_at_ms", "scheme", "limits", "events", "checkpoint", "keys"];
    if (bundle.format_version !== 1 || !same(Object.keys(bundle).sort(), [...parts].sort())) throw new Failure("format", "format_version 1 with exactly its parts");
    const { room, player } = bundle;
    if (typeof room !== "string" || typeof player !== "string" || player === FULL || player === PUBLIC) throw new Failure("format", "room and player are names");
    if (bundle.scheme !== "almanac-commit-v2") throw new Failure("format", "scheme is not almanac-commit-v2");
    const note = `for '${player}': every event as '${player}' and the public see it; values hidden from '${player}' appear only as salted hashes`;
    if (!same(bundle.audience, { who: "player", player, hidden_values: false, note })) throw new Failure("format", "the first line does not say whose it is, in the issuer's words");
    if (bundle.limits !== ISSUED_LIMITS || !Number.isSafeInteger(bundle.exported_at_ms)) throw new Failure("format", "limits is not the issuer's statement, or exported_at_ms is not a whole number");
    pass("format", "passed", `a player-safe bundle for ${player}`);

    at = "views";
    const entries = bundle.events;
    if (!Array.isArray(entries) || !entries.length || entries.length > MAX_CHAIN) throw new Failure("format", "events is not a list of 1 or more versions");
    const heads = [];
    const opened = [];
    let head = new Uint8Array(32);
    for (let i = 0; i < entries.length; i++) {
      const v = i + 1;
      const entry = entries[i];
      if (!entry || typeof entry !== "object" || !same(Object.keys(entry).sort(), ["leaves", "opened", "version"]) || entry.version !== v) {
        throw new Failure("views", `event entry ${v} is not {version: ${v}, opened, leaves}`, v);
      }
      const open = entry.opened, given = entry.leaves;
      if (!open || typeof open !== "object" || !given || typeof given !== "object") throw new Failure("views", "opened and leaves are objects", v);
      const labels = Object.keys(open);
      if (!labels.includes(PUBLIC) || labels.some((l) => l !== PUBLIC && l !== player)) throw new Failure("views", "a player bundle opens the public part and the reader's own view only", v);
      if (player in given) throw new Failure("views", `the event has a view of its own for ${player}, and it is not opened`, v);
      if (!(FULL in given) || labels.some((l) => l in given)) throw new Failure("views", "the whole event's leaf is missing, or a leaf is both opened and given", v);
      const leaves = new Map();
      for (const [label, value] of Object.entries(given)) {
        if (!isHex(value, 64)) throw new Failure("views", `leaf ${label} is not 64 lowercase hex characters`, v);
        leaves.set(label, unhex(value));
      }
      const views = {};
      for (const label of labels) {
        const o = open[label];
        if (!o || typeof o !== "object" || !same(Object.keys(o).sort(), ["salt", "view"]) || !isHex(o.salt, 64)) throw new Failure("views", `opened ${label} is not {salt, view}`, v);
        let bytes, decoded;
        try { bytes = unbase64(o.view); decoded = readMsgpack(bytes); } catch (error) { throw new Failure("views", `an opened view is not msgpack: ${error.message}`, v); }
        if (!Array.isArray(decoded) || ![2, 7].includes(decoded.length) || decoded[0] !== room || decoded[1] !== v) throw new Failure("views", `an opened view is not a view of room ${room} at version ${v}`, v);
        views[label] = decoded;
        leaves.set(label, await leaf(label, unhex(o.salt), bytes));
      }
      opened.push(views);
      head = await nextHeadV2(head, await root(leaves));
      heads.push(head);
    }
    pass("views", "passed", `versions 1..${entries.length}`);

    at = "checkpoints";
    const given = Array.from(checkpoints || []);
    if (keys === null || keys === undefined) {
      pass("checkpoints", "skipped", "no key set given");
    } else {
      const problem = await keySetProblem(keys);
      if (problem) throw new Failure("checkpoints", `the key set is not usable: ${problem}`);
      const trusted = new Map(keys.keys.map((k) => [k.kid, unhex(k.public_key)]));
      await checkCheckpoints(room, heads, [...given, bundle.checkpoint], trusted);
      if (bundle.checkpoint.version !== heads.length) throw new Failure("checkpoints", "the server's checkpoint is not on the bundle's head");
      pass("checkpoints", "passed", `the history passes through ${given.length} checkpoint(s) and the server's signature`);
    }
    // Only a checkpoint the reader holds on the head anchors it all: versions after the last one held rest on the
    // bundle's own signature, which the operator makes over whatever it exports (as player_check's anchor step).
    const reach = keys ? Math.max(0, ...given.map((c) => c.version)) : 0;
    pass("anchor", reach === heads.length ? "passed" : "skipped", reach === heads.length ? "your checkpoints anchor the whole history"
      : reach ? `your checkpoints anchor versions up to ${reach} only` : "none of your own checkpoints was checked");

    at = "redaction";
    opened.forEach((views, i) => {
      const v = i + 1;
      const pub = views[PUBLIC];
      const mine = views[player] || pub;
      if (mine.length === 2) { if (pub.length !== 2) throw new Failure("redaction", "the public sees this event and you do not", v); return; }
      if (pub.length === 7) {
        if (!same(pub.slice(0, 6), mine.slice(0, 6))) throw new Failure("redaction", "the public part names another type, player or time than your view", v);
        const where = covers(mine[6], pub[6]);
        if (where !== null) throw new Failure("redaction", `the public part differs from your view at ${where} (not a hidden field)`, v);
      }
    });
    pass("redaction", "passed", "every public part is your view with fields hidden (the rule-set's redaction is re-run by the Python verifier only)");

    // The key the player holds, apart from the operator: every join of theirs the history shows must have registered
    // it (a join answered with the operator's own key, signed by that key, passes every other check).
    if (seatKey !== null && seatKey !== undefined) {
      at = "seat key";
      if (!isHex(seatKey, 64)) throw new Failure("seat key", "the seat key given is not 64 lowercase hex characters (an Ed25519 public key)");
      const joins = [];
      opened.forEach((views, i) => {
        const view = views[player] || views[PUBLIC];
        const body = view.length === 7 ? view[6] : null;
        if (view[3] === "room.player_joined" && body && typeof body === "object" && body.player === player) {
          joins.push([i + 1, typeof body.public_key === "string" ? body.public_key : ""]);
        }
      });
      if (!joins.length) throw new Failure("seat key", `the history holds no join of '${player}': no key was registered for the seat`);
      for (const [v, registered] of joins) {
        if (registered !== seatKey) {
          throw new Failure("seat key", `the join the deployment signed at version ${v} registered ${registered ? `key ${registered}` : "no key"} for '${player}', not the key ${seatKey} they hold: the join was answered with another key`, v);
        }
      }
      pass("seat key", "passed", `the join the deployment signed at version ${joins[joins.length - 1][0]} registered the key you hold for '${player}'`);
    }
  } catch (error) {
    return { ok: false, status: "NOT VERIFIED", failed: failedStep(error, at, steps), steps, limits: PLAYER_LIMITS };
  }
  const skipped = steps.some((s) => s.status === "skipped");
  return { ok: !skipped, status: skipped ? "INCOMPLETE" : "VERIFIED", failed: null, steps, limits: PLAYER_LIMITS };
}
