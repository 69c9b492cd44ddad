// The Almanac console: rooms, time travel, verify and audit, charts and play, over the gateway's own API.
// Preact + htm as ES modules from the package (see vendor/README.md); no build step.
import { h, render } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import htm from "htm";
import {
  checkpointProblem, equivocation, equivocationDetail, keySetProblem, receiptProblem, receiptSignatureValid, seatsLine,
  signatureValid, trustedKeys, verifyBundle,
  verifyPlayerBundle,
} from "./verify.js";
// The TypeScript client's signing module (clients/typescript/src/signing.ts) compiled as it is: the one place in
// JavaScript that says which bytes a player signs (`npm run build:console` writes it; a test keeps it current).
import { PlayerKey, nonceCommitment } from "./signing.js";

const html = htm.bind(h);

// "?a=1&b=2" of the parameters that are set ("" when none is)
const query = (params) => {
  const text = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== "")).toString();
  return text ? `?${text}` : "";
};

// Rooms a page of the rooms table holds: the first page is polled, older ones are asked for with "more rooms".
const ROOMS_PAGE = 50;

// --- the API's URLs: each in one place ------------------------------------------------------------
const URLS = {
  rulesets: () => "/rulesets",
  schema: (ruleset) => `/rulesets/${enc(ruleset)}/schema`,
  rooms: () => "/rooms",
  // A page of the rooms with their activity (newest first; ``cursor``: the page after the one that handed it out).
  roomsActivity: (ruleset, cursor) => "/status/rooms" + query({ ruleset, cursor, limit: ROOMS_PAGE }),
  status: () => "/status",
  room: (room) => `/rooms/${enc(room)}`,
  join: (room) => `/rooms/${enc(room)}/join`,
  seat: (room) => `/rooms/${enc(room)}/seat`,
  commands: (room) => `/rooms/${enc(room)}/commands`,
  events: (room, from) => `/rooms/${enc(room)}/events?from_version=${from}&limit=5000`,
  // ``since``: the answer also holds what changed from that version (the server's one tree-diff)
  at: (room, version, player, since) => `/rooms/${enc(room)}/at/${version}` + query({ player, since }),
  series: (room) => `/rooms/${enc(room)}/series`,
  verification: (room) => `/rooms/${enc(room)}/verification`,
  // An audit view of the room's rule-set: the ids it follows, and one of them told step by step.
  auditIds: (room, view) => `/rooms/${enc(room)}/audit/${enc(view)}`,
  auditStory: (room, view, item) => `/rooms/${enc(room)}/audit/${enc(view)}/${enc(item)}`,
  // Forensics (auditors, docs/forensics.md): explain a value, bisect, fork, a dispute bundle.
  explain: (room, path, at) => `/rooms/${enc(room)}/explain?path=${enc(path)}&at=${at}`,
  bisect: (room, where) => `/rooms/${enc(room)}/bisect?where=${enc(where)}`,
  fork: (room) => `/rooms/${enc(room)}/fork`,
  dispute: (room, last) => `/rooms/${enc(room)}/dispute?from=1&to=${last}`,
  playerBundle: (room) => `/rooms/${enc(room)}/player-bundle`,
  bots: (room) => `/rooms/${enc(room)}/bots`,
  live: (room, from, token) =>
    `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/rooms/${enc(room)}/live` +
    `?from_version=${from}&token=${enc(token)}`,
};
const enc = encodeURIComponent;

// --- tokens: the auditor's for the session, a player's per room ------------------------------------
const store = window.sessionStorage;
const auditorToken = () => store.getItem("almanac.auditor") || "";
const setAuditorToken = (t) => (t ? store.setItem("almanac.auditor", t) : store.removeItem("almanac.auditor"));
const seatOf = (room) => JSON.parse(store.getItem(`almanac.seat.${room}`) || "null");
const setSeat = (room, seat) => store.setItem(`almanac.seat.${room}`, JSON.stringify(seat));
// A seat key outlives the tab (local storage): it gets a fresh token for the same seat (POST /rooms/{room}/seat).
const keys = window.localStorage;
const seatKeyOf = (room) => JSON.parse(keys.getItem(`almanac.seatkey.${room}`) || "null");
const keepSeatKey = (room, answer) => answer.seat_key &&
  keys.setItem(`almanac.seatkey.${room}`, JSON.stringify({ player: answer.player, seat_key: answer.seat_key }));
async function reclaimSeat(room, kept) {
  const a = await api(URLS.seat(room), { method: "POST", body: { player: kept.player, seat_key: kept.seat_key } });
  if (!a.ok) return a;
  keys.setItem(`almanac.seatkey.${room}`, JSON.stringify(kept));
  const s = { player: a.data.player, token: a.data.token };
  setSeat(room, s);
  return { ...a, seat: s };
}

// --- checkpoints: every answer about a room carries one, signed by the deployment (docs/bundle-format.md). They are
// kept in this browser's local storage (they outlive the session: they are the player's evidence) and exported.
// Each is checked on receipt against the key set pinned at first contact (below): only valid ones are kept, and two
// valid ones for one version with different heads (the deployment equivocating) raise a warning, both kept as proof.
const CHECKPOINTS_KEPT = 5000;  // per room; the newest are kept
const checkpointsKey = (room) => `almanac-checkpoints:${room}`;
const heldCheckpoints = (room) => JSON.parse(localStorage.getItem(checkpointsKey(room)) || "[]");

// The key set, pinned per deployment (this origin) at first contact: a later set that adds keys is a rotation and is
// pinned too (docs/forensics.md, key rotation: old keys stay listed as retired); one that drops a pinned key is
// flagged and the dropped key stays trusted here, since the checkpoints it signed are still the player's evidence.
const PINNED = `almanac-keys-pinned:${location.host}`;
const WARNINGS = `almanac-warnings:${location.host}`;
const WARNINGS_KEPT = 50;
const warnings = () => JSON.parse(localStorage.getItem(WARNINGS) || "[]");
function warn(kind, detail) {
  const kept = warnings();
  if (kept.some((w) => w.detail === detail)) return;
  kept.push({ kind, detail });
  try { localStorage.setItem(WARNINGS, JSON.stringify(kept.slice(-WARNINGS_KEPT))); } catch { /* full */ }
  window.dispatchEvent(new Event("almanac-warning"));
}
let pinning = null;  // one look at the published key set per page load
async function pinnedKeySet() {
  pinning = pinning || (async () => {
    const pinned = JSON.parse(localStorage.getItem(PINNED) || "null");
    let published = null;
    try { published = await (await fetch("/.well-known/almanac-keys.json")).json(); } catch { /* offline: the pin */ }
    if (published && await keySetProblem(published)) {
      warn("key set", `the deployment's published key set is not usable: ${await keySetProblem(published)}`);
      published = null;
    }
    if (!pinned) {
      if (published) localStorage.setItem(PINNED, JSON.stringify(published));
      return published;
    }
    if (!published) return pinned;
    const now = new Set(published.keys.map((k) => k.kid));
    const dropped = pinned.keys.filter((k) => !now.has(k.kid)).map((k) => k.kid);
    if (dropped.length) {
      warn("key set", `the deployment's key set no longer lists key(s) ${dropped.join(", ")} pinned in this browser ` +
           "at first contact: a rotation keeps old keys as retired, so ask the operator why (they are still trusted here)");
    }
    const known = new Set(pinned.keys.map((k) => k.kid));
    const merged = { ...published, keys: [...pinned.keys, ...published.keys.filter((k) => !known.has(k.kid))] };
    localStorage.setItem(PINNED, JSON.stringify(merged));
    return merged;
  })();
  return pinning;
}
let keeping = Promise.resolve();  // one checkpoint at a time: each reads, checks and rewrites the room's list
function keepCheckpoint(c) {
  keeping = keeping.then(() => keepOne(c)).catch((error) =>
    warn("signature", `this browser cannot check the deployment's signatures (${error && error.message}): no checkpoint is kept`));
  return keeping;
}
async function keepOne(c) {
  if (!c || typeof c.room !== "string" || !Number.isInteger(c.version)) return;
  const doc = await pinnedKeySet();
  if (!doc) return;  // no key set at all: nothing to check against, nothing kept as evidence
  const trusted = trustedKeys(doc);
  const problem = checkpointProblem(c);
  if (problem || !trusted.has(c.kid) || !(await signatureValid(trusted.get(c.kid), c))) {
    warn("signature", `an answer carried a checkpoint of ${c.room} at version ${c.version} whose signature does not ` +
         `verify under the key set pinned in this browser (${problem || (trusted.has(c.kid) ? "forged or altered" : `unknown key ${c.kid}`)}): it was not kept`);
    return;
  }
  const held = heldCheckpoints(c.room);
  // One already held is nothing new (an equivocation it is part of was shown when it came, and stays in the export)
  if (held.some((x) => x.version === c.version && x.head === c.head && x.kid === c.kid)) return;
  const pair = await equivocation([...held.filter((x) => x.version === c.version), c], trusted);
  if (pair) warn("two heads signed for one version", equivocationDetail(...pair));
  held.push(c);
  held.sort((a, b) => a.version - b.version);
  try { localStorage.setItem(checkpointsKey(c.room), JSON.stringify(held.slice(-CHECKPOINTS_KEPT))); } catch { /* full */ }
  window.dispatchEvent(new Event("almanac-checkpoints"));  // checked after the answer is shown: the panel re-reads
}

// --- refusal receipts (docs/bundle-format.md section 8): a refusal by the rules carries the deployment's signature on
// it; kept like checkpoints (checked against the pinned key set first), exported as an almanac-receipts file and handed
// to the bundle check here: with them a bundle that shows the refusal otherwise fails, and `verify-bundle --receipts`
// proves a false one (deciding the command again needs the rules: the Python verifier).
const RECEIPTS_KEPT = 1000;  // per room; the newest are kept
const receiptsKey = (room) => `almanac-receipts:${room}`;
const heldReceipts = (room) => JSON.parse(localStorage.getItem(receiptsKey(room)) || "[]");
function keepReceipt(r) {
  keeping = keeping.then(() => keepOneReceipt(r)).catch((error) =>
    warn("signature", `this browser cannot check the deployment's signatures (${error && error.message}): no receipt is kept`));
  return keeping;
}
async function keepOneReceipt(r) {
  if (!r || typeof r.room !== "string") return;
  const doc = await pinnedKeySet();
  if (!doc) return;
  const trusted = trustedKeys(doc);
  const problem = receiptProblem(r);
  if (problem || !trusted.has(r.kid) || !(await receiptSignatureValid(trusted.get(r.kid), r))) {
    warn("signature", `a refusal carried a receipt of ${r.room} at version ${r.version} whose signature does not verify ` +
         `under the key set pinned in this browser (${problem || (trusted.has(r.kid) ? "forged or altered" : `unknown key ${r.kid}`)}): it was not kept`);
    return;
  }
  const held = heldReceipts(r.room);
  if (held.some((x) => x.command_id === r.command_id && x.sig === r.sig)) return;  // a resend's answer: the same one
  held.push(r);
  try { localStorage.setItem(receiptsKey(r.room), JSON.stringify(held.slice(-RECEIPTS_KEPT))); } catch { /* full */ }
  window.dispatchEvent(new Event("almanac-checkpoints"));
}

// What this browser caught: shown on every page until the player dismisses it (the evidence stays kept).
function Warnings() {
  const [shown, setShown] = useState(warnings());
  useEffect(() => { const on = () => setShown(warnings()); window.addEventListener("almanac-warning", on); return () => window.removeEventListener("almanac-warning", on); }, []);
  if (!shown.length) return "";
  const dismiss = () => { localStorage.removeItem(WARNINGS); setShown([]); };
  return html`<div class="alert" role="alert" data-testid="checkpoint-warning"><strong>The deployment's signatures do not add up</strong>
    <ul>${shown.map((w) => html`<li><strong>${w.kind}</strong>: ${w.detail}</li>`)}</ul>
    <p>Export your checkpoints (they hold the proof) before dismissing. <button onClick=${dismiss}>Dismiss</button></p></div>`;
}

async function api(path, { token, method = "GET", body } = {}) {
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    const answer = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await answer.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = { code: "not_json", message: text }; }
    if (answer.ok && data && data.checkpoint) keepCheckpoint(data.checkpoint);
    if (!answer.ok && data && data.receipt) keepReceipt(data.receipt);
    return { ok: answer.ok, status: answer.status, data };
  } catch (error) {
    return { ok: false, status: 0, data: { code: "network", message: String(error) } };
  }
}

// A create or a join the engine has not decided within the gateway's wait is answered 202 (outcome_pending): it is
// resent under the same command_id (idempotent by id) until it is decided, so the answer seats the player with the
// join's own token; still pending after the tries, it is an error to show, never a seat with no player.
async function answered(path, body, tries = 6) {
  const sent = { ...body, command_id: body.command_id || hex(crypto.getRandomValues(new Uint8Array(12))) };
  let a = await api(path, { method: "POST", body: sent });
  for (let i = 0; a.status === 202 && i < tries; i += 1) {
    await new Promise((done) => setTimeout(done, Math.min(250 * 2 ** i, 2000)));
    a = await api(path, { method: "POST", body: sent });
  }
  if (a.status !== 202) return { ...a, sent };
  return { ok: false, status: 202, sent, data: { code: "outcome_pending", field: null,
    message: `the server has not decided this yet (command ${sent.command_id}); send it again in a moment: the same `
      + "request goes again, under the same id" } };
}

function usePoll(load, ms, deps) {
  useEffect(() => {
    let alive = true;
    const tick = async () => { if (alive) await load(); };
    tick();
    const timer = setInterval(tick, ms);
    return () => { alive = false; clearInterval(timer); };
  }, deps);
}

const when = (ms) => (ms ? new Date(ms).toLocaleTimeString() : "–");
const errorText = (data) => data ? `${data.code}: ${data.message}` + (data.field ? ` (field ${data.field})` : "") : "";

// Docstrings and messages mark code as ``name`` (reStructuredText) or `name` (Markdown): shown as code.
const INLINE_CODE = /``(.+?)``|`([^`]+)`/g;

function Prose({ text }) {
  const parts = String(text ?? "").split(new RegExp(INLINE_CODE.source));  // text, code, code, text, ...
  const out = [];
  for (let i = 0; i < parts.length; i += 3) {
    if (parts[i]) out.push(parts[i]);
    const code = parts[i + 1] ?? parts[i + 2];
    if (code !== undefined) out.push(html`<code>${code}</code>`);
  }
  return out;
}

const plain = (text) => String(text ?? "").replace(INLINE_CODE, (_, double, single) => double ?? single);

// An event type as people read it: "board.element_placed" -> "board element placed".
const eventName = (type) => String(type || "").replace(/[._]/g, " ");

function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="alert" role="alert"><strong>${error.code}</strong>: <${Prose} text=${error.message} />
    ${error.field ? html` <span class="muted">(field <code>${error.field}</code>)</span>` : ""}
    ${error.allowed ? html`<div class="muted">allowed: ${JSON.stringify(error.allowed)}</div>` : ""}</div>`;
}

// --- forms generated from JSON Schema --------------------------------------------------------------
function resolve(schema, defs) {
  while (schema && schema.$ref) schema = defs[schema.$ref.split("/").pop()];
  return schema || {};
}

function fieldKind(schema, defs) {
  schema = resolve(schema, defs);
  if (schema.anyOf) {
    const others = schema.anyOf.filter((s) => s.type !== "null");
    if (others.length === 1) return { ...fieldKind(others[0], defs), nullable: true };
    return { type: "json" };
  }
  if (schema.enum) return { type: "enum", values: schema.enum };
  if (schema.type === "integer" || schema.type === "number") return { type: schema.type, min: schema.minimum, max: schema.maximum };
  if (schema.type === "boolean") return { type: "boolean" };
  if (schema.type === "string") return { type: "string", pattern: schema.pattern, maxLength: schema.maxLength };
  return { type: "json" };
}

// A form for one object schema; calls onSubmit(values) with the fields the user filled in.
function SchemaForm({ schema, defs, idPrefix, submitLabel, onSubmit, busy, fixed = {}, onDraft, preset }) {
  const object = resolve(schema, defs);
  const properties = Object.entries(object.properties || {}).filter(([name]) => !(name in fixed));
  const required = new Set(object.required || []);
  const [values, setValues] = useState({});
  const [problem, setProblem] = useState(null);
  useEffect(() => { setValues({}); setProblem(null); }, [schema]);
  useEffect(() => { if (onDraft) onDraft({ ...fixed, ...values }); }, [values, schema]);
  // Fields proposed from elsewhere (a click on the game picture), for the fields this form has.
  useEffect(() => {
    if (!preset) return;
    const known = Object.entries(preset).filter(([name]) => properties.some(([field]) => field === name));
    setValues((current) => ({ ...current, ...Object.fromEntries(known.map(([name, v]) => [name, String(v)])) }));
  }, [preset]);
  const submit = (event) => {
    event.preventDefault();
    const out = { ...fixed };
    for (const [name, property] of properties) {
      const kind = fieldKind(property, defs);
      const raw = values[name];
      if (kind.type === "boolean") { if (raw !== undefined) out[name] = raw; continue; }
      if (raw === undefined || raw === "") continue;
      if (kind.type === "integer" || kind.type === "number") out[name] = Number(raw);
      else if (kind.type === "json") {
        try { out[name] = JSON.parse(raw); } catch { setProblem(`${name}: not valid JSON`); return; }
      } else out[name] = raw;
    }
    setProblem(null);
    onSubmit(out);
  };
  return html`<form class="generated" onSubmit=${submit} aria-label=${submitLabel}>
    ${properties.map(([name, property]) => {
      const kind = fieldKind(property, defs);
      const id = `${idPrefix}-${name}`;
      const label = `${name}${required.has(name) ? " *" : ""}`;
      const set = (v) => setValues({ ...values, [name]: v });
      const hint = plain(resolve(property, defs).description);
      let input;
      if (kind.type === "boolean") {
        input = html`<input id=${id} type="checkbox" checked=${values[name] ?? resolve(property, defs).default ?? false}
          onChange=${(e) => set(e.target.checked)} />`;
      } else if (kind.type === "enum") {
        input = html`<select id=${id} value=${values[name] ?? ""} onChange=${(e) => set(e.target.value)}>
          <option value="">${kind.nullable || !required.has(name) ? "(default)" : "choose…"}</option>
          ${kind.values.map((v) => html`<option value=${v}>${v}</option>`)}</select>`;
      } else if (kind.type === "json") {
        input = html`<textarea id=${id} rows="1" cols="24" placeholder="JSON" value=${values[name] ?? ""}
          onInput=${(e) => set(e.target.value)}></textarea>`;
      } else {
        const numeric = kind.type === "integer" || kind.type === "number";
        const fallback = resolve(property, defs).default;
        input = html`<input id=${id} type=${numeric ? "number" : "text"} value=${values[name] ?? ""}
          min=${kind.min} max=${kind.max} step=${kind.type === "integer" ? 1 : "any"} required=${required.has(name)}
          placeholder=${fallback === undefined || fallback === null ? "" : String(fallback)}
          onInput=${(e) => set(e.target.value)} size="8" />`;
      }
      return html`<label class="field" for=${id} title=${hint}>${label}${input}</label>`;
    })}
    <button class="primary" type="submit" disabled=${busy}>${submitLabel}</button>
    ${problem ? html`<span class="bad" role="alert">${problem}</span>` : ""}
  </form>`;
}

// --- the rooms page -------------------------------------------------------------------------------
function SystemPanel() {
  const [status, setStatus] = useState(null);
  const [rate, setRate] = useState(null);
  const last = useRef(null);
  usePoll(async () => {
    const answer = await api(URLS.status());
    if (!answer.ok) return;
    const s = answer.data;
    if (last.current) {
      const seconds = (s.time_ms - last.current.time_ms) / 1000;
      if (seconds > 0) setRate(Math.max(0, (s.commands_total - last.current.commands_total) / seconds));
    }
    last.current = s;
    setStatus(s);
  }, 2000, []);
  if (!status) return html`<section class="panel" aria-label="System"><h2>System</h2><p class="muted">loading…</p></section>`;
  const { engine, projector, dead_letters: dead } = status;
  const lagging = (projector.shards || []).filter((s) => s.lag_ms > 0);
  return html`<section class="panel" aria-label="System"><h2>System</h2>
    <div class="row">
      <div class="grow"><h3>Engines <span class=${engine.ok ? "ok" : "bad"}>${engine.ok ? "ok" : "degraded"}</span></h3>
        <p>${engine.shards_held} of ${engine.shard_count} shards leased</p>
        <table><thead><tr><th>engine</th><th>shards held</th><th>heartbeat age</th></tr></thead><tbody>
        ${engine.engines.map((e) => html`<tr><td>${e.name}</td><td>${(e.shards_held || []).join(", ")}</td><td>${e.age_s} s</td></tr>`)}
        </tbody></table></div>
      <div class="grow"><h3>Projector <span class=${projector.ok ? "ok" : "bad"}>${projector.ok ? "ok" : "down"}</span></h3>
        <p>max lag ${Math.max(0, ...(projector.shards || []).map((s) => s.lag_ms))} ms; ${lagging.length} shards behind</p>
        <details><summary>checkpoints per shard</summary><table><thead><tr><th>shard</th><th>checkpoint</th><th>feed head</th><th>lag</th></tr></thead><tbody>
        ${(projector.shards || []).map((s) => html`<tr><td>${s.shard}</td><td>${s.checkpoint}</td><td>${s.head}</td><td>${s.lag_ms} ms</td></tr>`)}
        </tbody></table></details></div>
      <div class="grow"><h3>Traffic</h3>
        <p>accepted commands: <strong data-testid="command-rate">${rate === null ? "…" : rate.toFixed(1)}</strong> /s (${status.commands_total} total; refusals are counted for auditors only)</p>
        <p>dead letters: <strong class=${dead.total ? "bad" : ""}>${dead.total}</strong></p></div>
    </div></section>`;
}

// A rule-set's bare name creates its default version (the seed as written); every other installed
// version is an opt-in variant, chosen by its full name (docs/architecture.md, "Rule-set versions").
function rulesetChoices(r) {
  const preferred = `${r.ruleset}@${r.version}`;
  return [[r.ruleset, `${r.ruleset} (${preferred})`],
    ...r.versions.filter((ref) => ref !== preferred).map((ref) => [ref, `${ref} (opt-in variant)`])];
}

function CreateRoom({ rulesets }) {
  const [ruleset, setRuleset] = useState("");
  const [player, setPlayer] = useState("");
  const [seatBots, setSeatBots] = useState(false);
  const [schema, setSchema] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!ruleset) { setSchema(null); return; }
    api(URLS.schema(ruleset)).then((a) => a.ok && setSchema(a.data));
  }, [ruleset]);
  const create = async (options) => {
    setBusy(true); setError(null);
    const key = await newSigningKey();  // the creator's seat signs its commands when this browser can
    // The browser picks the room's id as the server would: a signed join names its room (the signature covers it),
    // and a create answered 202 is resent under the same id for the same room (command ids are per room: a resend
    // that let the server draw another id would create another room).
    const named = `${ruleset.split("@")[0]}-${hex(crypto.getRandomValues(new Uint8Array(5)))}`;
    const signing = key ? { public_key: key.publicKey, join_signature: await key.signJoin(named, player, null) } : {};
    // seat_bots: the room records a bot policy, without which no player may ever leave their seat to a bot
    const answer = await answered(URLS.rooms(), { ruleset, player, options, room: named, ...signing,
      ...(seatBots ? { seat_bots: true } : {}) });
    setBusy(false);
    if (!answer.ok) { setError(answer.data); return; }
    if (key && (answer.data.events || []).some((e) => e.event && e.event.public_key === key.publicKey)) {
      keepSigningKey(answer.data.room, answer.data.player, key);
    } else if (key && joinedWithAnotherKey(answer.data.events, answer.data.player, key.publicKey)) {
      // the creator's join answered with another key: shown on the room's Play panel
      localStorage.setItem(`almanac-key-warning:${answer.data.room}`, keySubstituted(key.publicKey, answer.data.player));
    }
    setSeat(answer.data.room, { player: answer.data.player, token: answer.data.token });
    keepSeatKey(answer.data.room, answer.data);
    location.hash = `#/room/${enc(answer.data.room)}`;
  };
  return html`<section class="panel" aria-label="Create a room"><h2>Create a room</h2>
    <div class="row">
      <label class="field" for="create-ruleset">rule-set
        <select id="create-ruleset" value=${ruleset} onChange=${(e) => setRuleset(e.target.value)}>
          <option value="">choose…</option>${rulesets.flatMap(rulesetChoices).map(([value, label]) =>
            html`<option value=${value}>${label}</option>`)}
        </select></label>
      <label class="field" for="create-player">your player name
        <input id="create-player" value=${player} onInput=${(e) => setPlayer(e.target.value)} /></label>
      <label class="field" for="create-seat-bots"><span><input id="create-seat-bots" type="checkbox"
        checked=${seatBots} onChange=${(e) => setSeatBots(e.target.checked)} /> players may leave their seats to a
        bot</span></label>
    </div>
    ${schema ? html`<p class="muted">Options of ${ruleset} (all optional):</p>
      <${SchemaForm} schema=${schema.options} defs=${schema.$defs} idPrefix="option" submitLabel="Create room"
        busy=${busy || !player} onSubmit=${create} />` : ""}
    <${ErrorBox} error=${error} /></section>`;
}

// The rooms table pages GET /status/rooms (rooms in play and recently over newest first, then archived ones): its
// first page is polled every 2 s, so a poll costs one page however many rooms ever finished; "more rooms" asks for
// the next pages once (their rows are older, they change little), and the filter is the server's.
function RoomsPage() {
  const [first, setFirst] = useState({ rooms: [], next: null });
  const [older, setOlder] = useState({ rooms: [], next: null, loaded: false });
  const [rulesets, setRulesets] = useState([]);
  const [query, setQuery] = useState("");
  const [only, setOnly] = useState("");
  useEffect(() => { api(URLS.rulesets()).then((a) => a.ok && setRulesets(a.data.rulesets)); }, []);
  useEffect(() => setOlder({ rooms: [], next: null, loaded: false }), [only]);
  usePoll(async () => {
    const a = await api(URLS.roomsActivity(only));
    if (a.ok) setFirst({ rooms: a.data.rooms, next: a.data.next_cursor });
  }, 2000, [only]);
  const next = older.loaded ? older.next : first.next;
  const more = async () => {
    const a = await api(URLS.roomsActivity(only, next));
    if (a.ok) setOlder({ rooms: [...older.rooms, ...a.data.rooms], next: a.data.next_cursor, loaded: true });
  };
  const polled = new Set(first.rooms.map((r) => r.room));
  const rooms = [...first.rooms, ...older.rooms.filter((r) => !polled.has(r.room))];
  const shown = rooms.filter((r) => (!only || r.ruleset === only) &&
    (!query || `${r.room} ${(r.players || []).join(" ")}`.toLowerCase().includes(query.toLowerCase())));
  return html`<${SystemPanel} /><${CreateRoom} rulesets=${rulesets} />
    <section class="panel" aria-label="Rooms"><h2>Rooms (${shown.length} of ${rooms.length}${next ? "+" : ""})</h2>
      <div class="row">
        <label class="field" for="room-search">search rooms and players
          <input id="room-search" type="search" value=${query} onInput=${(e) => setQuery(e.target.value)} /></label>
        <label class="field" for="room-filter">rule-set
          <select id="room-filter" value=${only} onChange=${(e) => setOnly(e.target.value)}>
            <option value="">all</option>${rulesets.map((r) => html`<option value=${r.ruleset}>${r.ruleset}</option>`)}
          </select></label>
      </div>
      <table><thead><tr><th>room</th><th>rule-set</th><th>players</th><th>version</th><th>status</th>
        <th>last activity</th><th>projector lag</th></tr></thead><tbody>
      ${shown.map((r) => html`<tr>
        <td><a href=${`#/room/${enc(r.room)}`}>${r.room}</a></td><td>${r.ruleset}</td><td>${(r.players || []).join(", ")}</td>
        <td>${r.latest_version}</td>
        <td><span class=${`badge ${r.over || r.ended ? "over" : "live"}`}>${r.ended ? "ended" : r.over ? "over" : "live"}</span></td>
        <td>${when(r.last_activity_ms)}</td><td>${r.projector_lag_versions} versions</td></tr>`)}
      </tbody></table>
      ${next ? html`<button onClick=${more}>more rooms</button>` : ""}</section>`;
}

// --- the changes from one version to another ---------------------------------------------------------
// Computed by the server's one tree-diff (events/forensics/tree_diff.py, ``/at/{version}?since=``), as the CLI's
// ``state --diff`` prints them: maps key by key, lists element by element (a list that grew or shrank by
// content: only what left, at its index before, and what came: null on the side where it is absent).
function Change({ change }) {
  return html`<li>${change.path || "(all)"}:${" "}<span class="old">${JSON.stringify(change.before)}</span> → <span class="new">${JSON.stringify(change.after)}</span></li>`;
}

// Paths as the tree-diff writes them: ``key.key`` into maps, ``[i]`` into lists (explain reads the same).
const childPath = (path, key, inList) => (inList ? `${path}[${key}]` : path ? `${path}.${key}` : String(key));

function Tree({ value, path = "", changed, label = "state" }) {
  const isChanged = (p) => changed.has(p) || [...changed].some((c) => c.startsWith(p + ".") || c.startsWith(p + "["));
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    return html`<details open=${path === "" || isChanged(path)} class=${isChanged(path) ? "changed" : ""}>
      <summary>${label} <span class="muted">${Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`}</span></summary>
      ${entries.map(([k, v]) => html`<${Tree} value=${v} path=${childPath(path, k, Array.isArray(value))} changed=${changed} label=${k} />`)}
    </details>`;
  }
  return html`<div class=${`leaf ${changed.has(path) ? "changed" : ""}`}>${label}: <span class="v">${JSON.stringify(value)}</span></div>`;
}

// --- game pictures: each rule-set ships its own (its manifest's console_picture) -------------------
// A picture module exports a default component ({picture, before, html}); it may export pictureOf(at)
// (what to draw of the auditor's full state) and AuditStep ({step, html}) for its audit views' steps.
// A game without one (a plugin that ships none) is shown as its state tree only.
function usePictureModule(url) {
  const [module, setModule] = useState(null);
  useEffect(() => {
    setModule(null);
    if (url) import(url).then(setModule, () => setModule(null));
  }, [url]);
  return module;
}

// The picture of a version: a player's view, or for the auditor what the module draws of the full
// state (its pictureOf), else the first seat's view.
function pictureOf(at, module) {
  if (!at) return null;
  if (at.view) return at.view;
  const drawn = module && module.pictureOf ? module.pictureOf(at) : null;
  if (drawn) return drawn;
  const views = Object.values(at.views || {});
  return views[0] || null;
}

// --- the room page --------------------------------------------------------------------------------
// One audit view of the room's rule-set (e.g. realm's trade), its steps one at a time.
function AuditStory({ room, view, token, module }) {
  const [ids, setIds] = useState([]);
  const [item, setItem] = useState("");
  const [story, setStory] = useState(null);
  const [step, setStep] = useState(0);
  const [error, setError] = useState(null);
  useEffect(() => {
    api(URLS.auditIds(room, view), { token }).then((a) => {
      if (a.ok) { setIds(a.data.ids); setItem((current) => current || a.data.ids[0] || ""); } else setError(a.data);
    });
  }, [room, view, token]);
  useEffect(() => {
    if (!item) return;
    api(URLS.auditStory(room, view, item), { token }).then((a) => {
      if (a.ok) { setStory(a.data.story); setStep(0); setError(null); } else { setStory(null); setError(a.data); }
    });
  }, [item, token]);
  if (!ids.length && !error) return "";
  const current = story && story[step];
  const Step = module && module.AuditStep;
  const title = `${view[0].toUpperCase()}${view.slice(1)} story`;
  return html`<section class="panel" aria-label=${title}><h2>${title}</h2>
    <label class="field" for=${`audit-${view}`}>${view}
      <select id=${`audit-${view}`} value=${item} onChange=${(e) => setItem(e.target.value)}>
        ${ids.map((t) => html`<option value=${t}>${t}</option>`)}</select></label>
    <${ErrorBox} error=${error} />
    ${current ? html`<div class="slider">
        <button onClick=${() => setStep(Math.max(0, step - 1))} disabled=${step === 0}>◀ previous step</button>
        <span data-testid="story-step">step ${current.step ?? step + 1} of ${story.length}</span>
        <button onClick=${() => setStep(Math.min(story.length - 1, step + 1))} disabled=${step === story.length - 1}>next step ▶</button></div>
      <p data-testid="story-text">${current.text}</p>
      ${Step ? html`<${Step} step=${current} html=${html} />` : ""}
      <details><summary>the step's event</summary><pre>${JSON.stringify(current, null, 1)}</pre></details>` : ""}
  </section>`;
}

// Auditors' forensics on the room: why a value is what it is, when something first held, a sandbox
// fork at the chosen version (ended rooms only), and a dispute bundle anyone can verify offline.
function Forensics({ room, token, version, onJump }) {
  const [path, setPath] = useState("");
  const [where, setWhere] = useState("");
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const run = async (url, method = "GET", body = undefined) => {
    const answer = await api(url, { token, method, body });
    if (answer.ok) { setError(null); return answer.data; }
    setError(answer.data); setResult(null); return null;
  };
  const explain = async () => {
    const data = await run(URLS.explain(room, path, version));
    if (data) setResult({ kind: "explain", data });
  };
  const bisect = async () => {
    const data = await run(URLS.bisect(room, where));
    if (data) setResult({ kind: "bisect", data });
  };
  const fork = async () => {
    const data = await run(URLS.fork(room), "POST", { at: version });
    if (data) setResult({ kind: "fork", data });
  };
  const bundle = async () => {
    const data = await run(URLS.dispute(room, version));
    if (!data) return;
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([JSON.stringify(data, null, 1)], { type: "application/json" }));
    link.download = `${room}-v1-${version}.bundle.json`;
    link.click();
    setResult({ kind: "bundle", data: { events: (data.events || []).length, file: link.download } });
  };
  return html`<section class="panel" aria-label="Forensics"><h2>Forensics</h2>
    <div class="row">
      <label class="field" for="explain-path">explain the value at
        <input id="explain-path" placeholder="e.g. time, scores.alice" value=${path} onInput=${(e) => setPath(e.target.value)} /></label>
      <button type="button" onClick=${explain} disabled=${!path}>explain</button>
      <label class="field" for="bisect-where">first version where
        <input id="bisect-where" placeholder="e.g. time >= 3" value=${where} onInput=${(e) => setWhere(e.target.value)} /></label>
      <button type="button" onClick=${bisect} disabled=${!where}>bisect</button>
    </div>
    <div class="row">
      <button type="button" onClick=${fork}>fork at version ${version}</button>
      <button type="button" onClick=${bundle}>dispute bundle of versions 1..${version}</button>
    </div>
    <${ErrorBox} error=${error} />
    <div data-testid="forensics-result">
      ${result && result.kind === "explain" ? html`<p>${result.data.path} = ${JSON.stringify(result.data.value)} at version ${result.data.at};
          changed ${result.data.changes.length} time(s):</p>
        <ul>${result.data.changes.map((c) => html`<li><button type="button" class="link" onClick=${() => onJump(c.version)}>v${c.version}</button>${" "}
          ${c.summary}: <span class="old">${JSON.stringify(c.before)}</span> → <span class="new">${JSON.stringify(c.after)}</span></li>`)}</ul>` : ""}
      ${result && result.kind === "bisect" ? html`<p>${result.data.version ? html`first holds at${" "}
          <button type="button" class="link" onClick=${() => onJump(result.data.version)}>version ${result.data.version}</button>` : "never holds"}
          <span class="muted"> ${result.data.note}</span></p>` : ""}
      ${result && result.kind === "fork" ? html`<p>forked as <a href=${`#/room/${enc(result.data.room)}`}>${result.data.room}</a>${" "}
          (from version ${result.data.at}; its own dice; off leaderboards)</p>` : ""}
      ${result && result.kind === "bundle" ? html`<p>saved ${result.data.file}: ${result.data.events} events; check it with${" "}
          <code>almanac verify-bundle</code></p>` : ""}
    </div>
  </section>`;
}

function Verify({ room, token, summary, events }) {
  const [report, setReport] = useState(null);
  const [busy, setBusy] = useState(false);
  const [seedCheck, setSeedCheck] = useState(null);
  const ended = events.find((e) => e.type === "room.ended" && e.event && e.event.revealed_seed);
  const run = async () => {
    setBusy(true);
    const answer = await api(URLS.verification(room), { token });
    setBusy(false);
    setReport(answer.ok ? answer.data : { ok: false, divergence: { check: answer.data.code, message: answer.data.message } });
  };
  useEffect(() => {
    if (!ended || !summary.seed_commitment || !crypto.subtle) { setSeedCheck(null); return; }
    const seed = ended.event.revealed_seed;
    const bytes = new Uint8Array(seed.match(/../g).map((b) => parseInt(b, 16)));
    crypto.subtle.digest("SHA-256", bytes).then((digest) => {
      const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
      setSeedCheck({ seed, hex, ok: hex === summary.seed_commitment });
    });
  }, [ended && ended.version, summary.seed_commitment]);
  const d = report && report.divergence;
  return html`<section class="panel" aria-label="Verify"><h2>Verify and seed</h2>
    <p>seed commitment <code>${summary.seed_commitment || "none"}</code>${summary.challenge ? html` (public challenge <code>${summary.challenge}</code>)` : ""}</p>
    ${seedCheck ? html`<p data-testid="seed-check">revealed seed <code>${seedCheck.seed.slice(0, 16)}…</code>: sha256 in this browser${" "}
        ${seedCheck.ok ? html`<span class="ok">matches the commitment ✓</span>` : html`<span class="bad">does NOT match the commitment</span>`}</p>`
      : html`<p class="muted">the seed is revealed when the room ends</p>`}
    <button class="primary" onClick=${run} disabled=${busy || !token}>${busy ? "verifying…" : "Verify"}</button>
    ${!token ? html` <span class="muted">needs a player or auditor token</span>` : ""}
    ${report ? html`<div data-testid="verify-result" class=${report.ok ? "notice" : "alert"} role="status">
      ${report.ok ? html`<span class="ok">verified ✓</span> ${report.versions} versions, chain ${report.chain_checked},${" "}
          ${report.commands_redecided} commands re-decided${report.refusals_rechecked === undefined ? "" : `, ${report.refusals_rechecked} refusals re-checked`}; seed: ${report.seed}`
        : html`<span class="bad">divergence</span> in <strong>${d.check}</strong> at version ${d.version ?? "–"}: ${d.message}`}
      </div>
      ${d && (d.recorded !== undefined || d.recomputed !== undefined) ? html`<div class="side" aria-label="first divergence">
        <div><h3>recorded</h3><pre data-testid="recorded">${JSON.stringify(d.recorded, null, 1)}</pre></div>
        <div><h3>recomputed</h3><pre data-testid="recomputed">${JSON.stringify(d.recomputed, null, 1)}</pre></div></div>` : ""}` : ""}
  </section>`;
}

// The player's checkpoints of this room: how many are held, export them, and check a bundle against them here,
// with the second verifier (verify.js: WebCrypto SHA-256 and Ed25519, independent of the server's Python).
function Checkpoints({ room, latest }) {
  const [held, setHeld] = useState([]);
  const [receipts, setReceipts] = useState([]);
  const [verdict, setVerdict] = useState(null);
  useEffect(() => {
    const on = () => { setHeld(heldCheckpoints(room)); setReceipts(heldReceipts(room)); };
    on();
    window.addEventListener("almanac-checkpoints", on);
    return () => window.removeEventListener("almanac-checkpoints", on);
  }, [room, latest]);
  const keys = pinnedKeySet;  // the set pinned at first contact, with the keys rotation added
  const exportFile = async () => {
    const file = { format: "almanac-checkpoints", format_version: 1, keys: await keys(), checkpoints: heldCheckpoints(room) };
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([JSON.stringify(file, null, 1)], { type: "application/json" }));
    link.download = `checkpoints-${room}.json`;
    link.click();
  };
  const exportReceipts = async () => {
    const file = { format: "almanac-receipts", format_version: 1, keys: await keys(), receipts: heldReceipts(room) };
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([JSON.stringify(file, null, 1)], { type: "application/json" }));
    link.download = `receipts-${room}.json`;
    link.click();
  };
  const check = async (event) => {
    const chosen = event.target.files && event.target.files[0];
    if (!chosen) return;
    let bundle;
    try { bundle = JSON.parse(await chosen.text()); } catch (error) { setVerdict({ ok: false, failed: { name: "format", detail: String(error) }, steps: [] }); return; }
    // A player-safe bundle (docs/bundle-format.md section 6.5) is checked by its own verifier
    const mine = { checkpoints: heldCheckpoints(room), keys: await keys() };
    setVerdict(bundle && bundle.format === "almanac-player-bundle" ? await verifyPlayerBundle(bundle, mine)
      : await verifyBundle(bundle, { ...mine, receipts: heldReceipts(room) }));
  };
  const last = held[held.length - 1];
  return html`<section class="panel" aria-label="Checkpoints"><h2>Checkpoints</h2>
    <p><span data-testid="checkpoints-held">${held.length}</span> signed checkpoint(s) kept in this browser${last ? html`,
      the last at version ${last.version}: head <code>${last.head.slice(0, 16)}…</code> key <code>${last.kid}</code>` : ""}</p>
    <p><span data-testid="receipts-held">${receipts.length}</span> signed refusal receipt(s) kept (the deployment's
      signature on each refusal it answered you)</p>
    <button onClick=${exportFile} disabled=${!held.length}>Export checkpoints</button>${" "}
    <button onClick=${exportReceipts} disabled=${!receipts.length}>Export receipts</button>${" "}
    <label class="field">check a bundle here <input type="file" accept="application/json" aria-label="bundle file" onChange=${check} /></label>
    ${verdict ? html`<div data-testid="bundle-verdict" class=${verdict.ok ? "notice" : "alert"} role="status">
      ${verdict.ok ? html`<span class="ok">chain and checkpoints verified in this browser ✓</span>`
        : html`<span class="bad">NOT VERIFIED</span>: <strong>${verdict.failed.name}</strong>${verdict.failed.version ? ` at version ${verdict.failed.version}` : ""}: ${verdict.failed.detail}`}
      ${verdict.ok && verdict.seats ? html`<p data-testid="bundle-seats">seats: ${seatsLine(verdict.seats)}</p>
        <ul>${verdict.seats.notes.map((note) => html`<li>note: ${note}</li>`)}</ul>` : ""}
      <ul>${verdict.steps.map((s) => html`<li>[${s.status}] ${s.name}: ${s.detail}</li>`)}</ul></div>` : ""}
  </section>`;
}

// A seated player's own player-safe bundle (docs/bundle-format.md section 6): fetched with the seat's token, checked
// here against the checkpoints this browser kept (verify.js), each version shown as what it opens to the player.
function PlayerBundle({ room, seat }) {
  const [bundle, setBundle] = useState(null);
  const [verdict, setVerdict] = useState(null);
  const [error, setError] = useState(null);
  const fetchMine = async () => {
    setError(null);
    const a = await api(URLS.playerBundle(room), { token: seat.token });
    if (!a.ok) { setError(a.data); return; }
    const keys = await pinnedKeySet();
    setBundle(a.data);
    setVerdict(await verifyPlayerBundle(a.data, { checkpoints: heldCheckpoints(room), keys }));
  };
  const save = () => {
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([JSON.stringify(bundle, null, 1)], { type: "application/json" }));
    link.download = `player-bundle-${room}-${seat.player}.json`;
    link.click();
  };
  const status = verdict && verdict.status;
  return html`<section class="panel" aria-label="Player bundle"><h2>Your bundle</h2>
    <p class="muted">Every event as you and the public saw it, tied to the checkpoints this browser kept; values hidden from you appear only as salted hashes.</p>
    <button onClick=${fetchMine}>Fetch and check my bundle</button>${" "}
    ${bundle ? html`<button onClick=${save} data-testid="save-player-bundle">Save it</button>` : ""}
    ${error ? html`<${ErrorBox} error=${error} />` : ""}
    ${verdict ? html`<div data-testid="player-bundle-verdict" class=${status === "NOT VERIFIED" ? "alert" : "notice"} role="status">
      <strong class=${status === "VERIFIED" ? "ok" : status === "NOT VERIFIED" ? "bad" : ""}>${status}</strong>
      ${verdict.failed ? html`: <strong>${verdict.failed.name}</strong>${verdict.failed.version ? ` at version ${verdict.failed.version}` : ""}: ${verdict.failed.detail}` : ""}
      <ul>${verdict.steps.map((s) => html`<li>[${s.status}] ${s.name}: ${s.detail}</li>`)}</ul>
      <p class="muted" data-testid="player-bundle-limits">${verdict.limits}</p></div>` : ""}
    ${bundle ? html`<table data-testid="player-bundle-events"><thead><tr><th>version</th><th>opened to you</th><th>only as hashes</th></tr></thead><tbody>
      ${bundle.events.map((e) => html`<tr><td>${e.version}</td>
        <td>${Object.keys(e.opened).map((l) => (l === "" ? "public part" : l === seat.player ? "your view" : l)).join(", ")}</td>
        <td>${Object.keys(e.leaves).map((l) => (l === "*" ? "whole event" : l)).join(", ")}</td></tr>`)}</tbody></table>` : ""}
  </section>`;
}

function Charts({ room, token, version }) {
  const box = useRef(null);
  const [series, setSeries] = useState(null);
  const [pick, setPick] = useState("scores");
  // Scores are public: without a token the chart shows them; an auditor's token adds the resources.
  useEffect(() => { api(URLS.series(room), { token }).then((a) => a.ok && setSeries(a.data)); }, [room, token, version]);
  useEffect(() => {
    if (!series || !box.current || !window.uPlot) return;
    const lines = pick === "scores" ? series.scores : { [pick]: series.resources[pick] };
    const names = Object.keys(lines);
    const palette = ["#1f5fbf", "#b3261e", "#17743a", "#8e24aa", "#ef6c00", "#00838f"];
    const chart = new window.uPlot({
      width: Math.min(900, box.current.clientWidth || 600), height: 220, scales: { x: { time: false } },
      axes: [{ incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] }, {}],  // whole versions
      series: [{ label: "version" }, ...names.map((n, i) => ({ label: n, stroke: palette[i % palette.length], width: 2 }))],
    }, [series.versions, ...names.map((n) => lines[n])], box.current);
    return () => chart.destroy();
  }, [series, pick]);
  return html`<section class="panel" aria-label="Charts"><h2>Charts over versions</h2>
    <label class="field" for="chart-pick">series
      <select id="chart-pick" value=${pick} onChange=${(e) => setPick(e.target.value)}>
        <option value="scores">scores per player</option>
        ${series ? Object.keys(series.resources).map((k) => html`<option value=${k}>${k}</option>`) : ""}</select></label>
    <div ref=${box} data-testid="chart"></div></section>`;
}

// Signed seats (docs/dice.md): an Ed25519 key made in this browser, its public half registered at join; every
// command then carries the signature of events.signing.command_bytes in the v2 form, over the room version this
// browser saw (its newest checkpoint), so a token alone cannot act for this seat and a refusal it signed stands at
// that version only.
const hex = (bytes) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
const keyName = (room, player) => `almanac-key:${room}:${player}`;

async function newSigningKey() {
  if (!crypto.subtle) return null;
  try {
    return await PlayerKey.generate();
  } catch { return null; }  // a browser without Ed25519 joins unsigned (its verdict says so)
}

// The join an answer records for ``player`` registered another key than ``publicKey`` (the one this browser sent):
// only when the answer holds that join (a create whose join was refused or is pending, a 202, hold none).
const joinedWithAnotherKey = (events, player, publicKey) => (events || []).some((e) => e.type === "room.player_joined"
  && (e.player === player || (e.event && e.event.player === player)) && !(e.event && e.event.public_key === publicKey));
// What a player is told when the join the server answered registered another key than the one this browser sent.
const keySubstituted = (publicKey, player) => `The join the server answered did not register the key this browser `
  + `made (${publicKey.slice(0, 16)}…): whoever holds the key it registered can sign commands as ${player}. `
  + `Keep this answer and your checkpoints as evidence (verify-player-bundle --seat-key ${publicKey}).`;

// The private key as PKCS#8 DER in base64 (PlayerKey.export: the format the Python and TypeScript clients import).
const keepSigningKey = (room, player, key) => localStorage.setItem(keyName(room, player), key.export());

// The newest room version this browser holds a signed checkpoint of: the version its player saw.
const seenVersion = (room) => heldCheckpoints(room).reduce((top, c) => Math.max(top, c.version), 0);

async function signedBody(room, player, command, commandId, seen) {
  const kept = localStorage.getItem(keyName(room, player));
  if (!kept || !crypto.subtle) return { command };
  const key = await PlayerKey.importKey(kept);
  const signature = await key.signCommand(room, player, commandId, command, seen);
  return { command, command_id: commandId, seen_version: seen, signature };
}

// Send a command, signed when this seat signs; a 409 `version_moved` (the room moved on and the command would be
// refused there, nothing recorded) is signed again over the version it names and resent with the same id.
async function sendSigned(room, seat, command, post) {
  const commandId = hex(crypto.getRandomValues(new Uint8Array(12)));
  let seen = seenVersion(room);
  for (let tries = 0; ; tries += 1) {
    const a = await post(await signedBody(room, seat.player, command, commandId, seen));
    if (a.ok || tries >= 3 || !a.data || a.data.code !== "version_moved" || !Number.isInteger(a.data.allowed)) return a;
    seen = a.data.allowed;
  }
}
const sendCommand = (room, seat, command) =>
  sendSigned(room, seat, command, (body) => api(URLS.commands(room), { method: "POST", token: seat.token, body }));

// A seated player may leave their seat to the deployment's bot (POST /rooms/{room}/bots, docs/bots.md): their own
// `hand_to_bot` command, signed as any of theirs, recorded as room.seat_to_bot; the bot then plays the seat from its
// view only. Offered only in a room created with a bot policy (the summary's `bot_policy`): any other refuses it.
function LeaveToBot({ room, seat }) {
  const [answer, setAnswer] = useState(null);
  const [error, setError] = useState(null);
  const leave = async () => {
    setError(null);
    const a = await sendSigned(room, seat, { kind: "hand_to_bot" }, ({ command, ...signed }) =>
      api(URLS.bots(room), { method: "POST", token: seat.token, body: { seat: seat.player, ...signed } }));
    if (!a.ok) { setError(a.data); return; }
    setAnswer(a.data);
  };
  return html`<section class="panel" aria-label="Bot seat"><h2>Leave your seat to a bot</h2>
    <p class="muted">From then on the deployment's bot plays your seat, from your view only; the room's log records it.</p>
    <button onClick=${leave} disabled=${answer !== null}>Leave my seat to a bot</button>
    ${error ? html`<${ErrorBox} error=${error} />` : ""}
    ${answer ? html`<p class="notice" role="status" data-testid="bot-seat-answer">${answer.how === "left"
      ? `${seat.player}'s seat is now played by a bot` : `a bot already plays ${seat.player}'s seat`}</p>` : ""}
  </section>`;
}

function Play({ room, ruleset, seat, onSeat, onPlayed, onDraft, picked }) {
  const [schema, setSchema] = useState(null);
  const [kind, setKind] = useState("");
  const [answer, setAnswer] = useState(null);
  const [busy, setBusy] = useState(false);
  const [name, setName] = useState("");
  // Kept with the room in this browser (the room page renders another Play once the seat is taken, and the warning
  // must outlive a reload: it is this player's only sight of the substitution).
  const warningName = `almanac-key-warning:${room}`;
  const [keyWarning, setKeyWarningState] = useState(() => localStorage.getItem(warningName));
  const setKeyWarning = (text) => {
    if (text) localStorage.setItem(warningName, text); else localStorage.removeItem(warningName);
    setKeyWarningState(text);
  };
  useEffect(() => { api(URLS.schema(ruleset)).then((a) => { if (a.ok) { setSchema(a.data); setKind(a.data.commands[0]?.kind || ""); } }); }, [ruleset]);
  // A join not decided within the gateway's wait (202): joining again as the same player resends it as it was (its
  // command id, nonce and key), so it can never become a second join refused `already_joined` with no seat.
  const pendingJoin = useRef(null);
  const join = async (event) => {
    event.preventDefault();
    const again = pendingJoin.current && pendingJoin.current.name === name ? pendingJoin.current : null;
    let { nonce, key, keyed } = again || {};
    let a;
    if (again) a = await answered(URLS.join(room), again.body);
    else {
      // Scheme-2 dice (docs/dice.md): a secret nonce made in this browser; the server keeps it until the end.
      nonce = [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, "0")).join("");
      key = await newSigningKey();
      const commitment = key && await nonceCommitment(nonce);
      const signing = key ? { public_key: key.publicKey, signature: await key.signJoin(room, name, commitment) } : {};
      a = await answered(URLS.join(room), { player: name, nonce, ...signing });
      keyed = Boolean(key);  // the join as sent carried this browser's key
      if (!a.ok && a.data && a.data.code === "no_player_keys") { keyed = false; a = await answered(URLS.join(room), { player: name, nonce }); }
      if (!a.ok && a.data && a.data.code === "no_player_nonces") { keyed = false; a = await answered(URLS.join(room), { player: name }); }
    }
    pendingJoin.current = a.status === 202 ? { name, nonce, key, keyed, body: a.sent } : null;
    if (a.ok && a.sent.nonce === nonce) localStorage.setItem(`almanac-nonce:${room}:${name}`, nonce);
    const registered = a.ok && (a.data.events || []).some((e) => e.event && e.event.public_key === (key && key.publicKey));
    if (registered) keepSigningKey(room, name, key);
    // A join answered with another key than the one sent (an operator's own, signed by it: valid in every other
    // respect) lets whoever holds that key act for this seat; only this player can see it, here and now.
    setKeyWarning(a.ok && keyed && !registered && joinedWithAnotherKey(a.data.events, a.data.player, key.publicKey)
      ? keySubstituted(key.publicKey, a.data.player) : null);
    if (a.ok) { const s = { player: a.data.player, token: a.data.token }; setSeat(room, s); keepSeatKey(room, a.data); onSeat(s); setAnswer(null); }
    else setAnswer(a);
  };
  const [keyText, setKeyText] = useState("");
  const [exported, setExported] = useState(null);
  const reclaim = async (event) => {
    event.preventDefault();
    let kept = null;
    try { kept = JSON.parse(keyText); } catch { setAnswer({ ok: false, data: { code: "not_json", message: "paste the exported seat key as it was exported" } }); return; }
    const a = await reclaimSeat(room, kept || {});
    if (a.seat) { onSeat(a.seat); setAnswer(null); } else setAnswer(a);
  };
  const send = async (command) => {
    setBusy(true);
    const a = await sendCommand(room, seat, command);
    setBusy(false); setAnswer(a);
    if (a.ok) onPlayed(a.data.version);
  };
  const command = schema && schema.commands.find((c) => c.kind === kind);
  return html`<section class="panel" aria-label="Play"><h2>Play</h2>
    ${seat ? html`<p>playing as <strong data-testid="seat">${seat.player}</strong></p>
      <label class="field" for="command-kind">command
        <select id="command-kind" value=${kind} onChange=${(e) => { setKind(e.target.value); setAnswer(null); }}>
          ${(schema ? schema.commands : []).map((c) => html`<option value=${c.kind}>${c.kind}</option>`)}</select></label>
      ${command ? html`<p class="muted" data-testid="command-description"><${Prose} text=${command.description} /></p>
        <${SchemaForm} schema=${command.schema} defs=${schema.$defs} idPrefix="cmd" submitLabel="Send command"
          busy=${busy} fixed=${{ kind }} onSubmit=${send} onDraft=${onDraft} preset=${picked} />` : ""}`
    : html`<form onSubmit=${join} class="row"><label class="field" for="join-player">join as player
        <input id="join-player" value=${name} onInput=${(e) => setName(e.target.value)} /></label>
        <button class="primary" type="submit">Join</button></form>
      <form onSubmit=${reclaim} class="row"><label class="field" for="seat-key-import">or take your seat back with its seat key
        <input id="seat-key-import" value=${keyText} placeholder='{"player": …, "seat_key": …}' onInput=${(e) => setKeyText(e.target.value)} /></label>
        <button type="submit">Take my seat back</button></form>`}
    ${seat && seatKeyOf(room) ? html`<p class="row"><button type="button" data-testid="export-seat-key"
        onClick=${() => setExported(JSON.stringify(seatKeyOf(room)))}>Export seat key</button>
      <span class="muted">keep it: it gives you this seat back from any browser</span></p>
      ${exported ? html`<textarea readonly data-testid="seat-key" rows="2" cols="80">${exported}</textarea>` : ""}` : ""}
    ${keyWarning ? html`<div class="alert" role="alert" data-testid="key-substituted">${keyWarning}</div>` : ""}
    ${answer && !answer.ok ? html`<div data-testid="refusal"><${ErrorBox} error=${answer.data} /></div>` : ""}
    ${answer && answer.ok && answer.data.version ? html`<div class="notice" role="status" data-testid="accepted">accepted: now at version ${answer.data.version}</div>` : ""}
  </section>`;
}

function RoomPage({ room }) {
  const [seat, setSeatState] = useState(seatOf(room));
  const auditor = auditorToken();
  const [summary, setSummary] = useState(null);
  const [events, setEvents] = useState([]);
  const [latest, setLatest] = useState(0);
  const [version, setVersion] = useState(0);
  const [follow, setFollow] = useState(true);
  const [viewer, setViewer] = useState(auditor ? "" : seat ? seat.player : "");
  const [at, setAt] = useState(null);
  const [before, setBefore] = useState(null);
  const [base, setBase] = useState(0);  // the version the diff compares with; 0 = the previous one
  const [error, setError] = useState(null);
  const [draft, setDraft] = useState(null);  // the command being typed in Play, previewed by the picture
  const [picked, setPicked] = useState(null);  // fields a click on the picture proposes to Play (row, column)
  const request = useRef(0);
  const timeline = useRef(null);
  useEffect(() => {  // a tab closed and opened again: the seat key kept in this browser gets the seat back
    const kept = seatKeyOf(room);
    if (seat || !kept) return;
    reclaimSeat(room, kept).then((a) => { if (a.seat) { setSeatState(a.seat); if (!auditor) setViewer(a.seat.player); } });
  }, [room]);
  // A seat taken on this page (a join, a seat key pasted): the room is shown as that player sees it, the auditor's
  // page too (who just took a seat wants to see it; "view as" still offers the full state). A page opened with a
  // seat kept shows it so only without an auditor token (above).
  const takeSeat = (s) => { setSeatState(s); setViewer(s.player); };
  const token = viewer === "" ? auditor : auditor || (seat && seat.token);
  const readToken = auditor || (seat && seat.token);

  useEffect(() => { api(URLS.room(room)).then((a) => (a.ok ? setSummary(a.data) : setError(a.data))); }, [room, latest]);
  // History, then live: the WebSocket resumes after the last version read, so nothing is missed or doubled.
  useEffect(() => {
    if (!readToken) return;
    let socket = null, closed = false;
    (async () => {
      const a = await api(URLS.events(room, 1), { token: readToken });
      if (!a.ok) { setError(a.data); return; }
      let list = a.data.events;
      setEvents(list);
      const last = list.length ? list[list.length - 1].version : 0;
      setLatest(last);
      setVersion((v) => v || last);
      if (closed) return;
      socket = new WebSocket(URLS.live(room, last + 1, readToken));
      socket.onmessage = (message) => {
        const event = JSON.parse(message.data);
        if (event.version === undefined) return;
        if (event.checkpoint) keepCheckpoint(event.checkpoint);
        list = [...list, event];
        setEvents(list);
        setLatest(event.version);
      };
    })();
    return () => { closed = true; if (socket) socket.close(); };
  }, [room, readToken]);
  useEffect(() => { if (follow && latest) setVersion(latest); }, [latest, follow]);
  // The timeline keeps the selected version's row in sight (only the list scrolls, not the page).
  useEffect(() => {
    const box = timeline.current, row = box && box.querySelector("tr.selected");
    if (!row) return;
    const shown = box.getBoundingClientRect(), at = row.getBoundingClientRect();
    const header = box.querySelector("thead").getBoundingClientRect().height;
    if (at.top < shown.top + header) box.scrollTop -= shown.top + header - at.top;
    else if (at.bottom > shown.bottom) box.scrollTop += at.bottom - shown.bottom;
  }, [version, events.length]);
  useEffect(() => {
    if (!version || !token) return;
    const player = auditor ? viewer || undefined : undefined;
    const asked = ++request.current;  // answers to older questions arrive late sometimes: keep the newest only
    const other = base ? Math.min(base, latest || base) : version - 1;
    const since = other >= 1 && other !== version ? other : undefined;
    Promise.all([api(URLS.at(room, version, player, since), { token }),
                 other >= 1 && other !== version ? api(URLS.at(room, other, player), { token }) : null]).then(([now, previous]) => {
      if (asked !== request.current) return;
      if (!now.ok) { setError(now.data); return; }
      setAt({ ...now.data, viewer });
      setBefore(previous && previous.ok ? previous.data : null);
    });
  }, [room, version, viewer, token, base]);

  const ruleset = summary && summary.ruleset;
  const seats = summary ? [...new Set([...(summary.seats || []), ...(summary.players || [])])] : [];
  const tree = at && (at.view || at.state);
  const changes = useMemo(() => (at && before && at.changes ? at.changes : []), [at, before]);
  const changedPaths = useMemo(() => new Set(changes.map((c) => c.path)), [changes]);
  const module = usePictureModule(summary && summary.picture);
  const Picture = module && module.default;
  const choose = (v) => { setFollow(v >= latest); setVersion(Math.max(1, Math.min(latest, v))); };

  if (!readToken) {
    return html`<section class="panel"><h2>Room ${room}</h2>
      <p>Enter an auditor token above, or join this room as a player, to see it.</p></section>
      ${summary ? html`<${Play} room=${room} ruleset=${summary.ruleset} seat=${seat} onSeat=${takeSeat} onPlayed=${() => {}} />` : ""}
      <${ErrorBox} error=${error} />
      <${Charts} room=${room} token=${null} version=${summary ? summary.version : 0} />`;
  }
  return html`
    <section class="panel" aria-label="Room"><h2>Room <span data-testid="room-id">${room}</span>${" "}
      <span class="muted">${ruleset}</span> · version <span data-testid="latest">${latest}</span>
      ${summary ? html` · players ${summary.players.join(", ")} · <span class="badge">${summary.ended ? "ended" : summary.over ? "over" : "live"}</span>` : ""}
      ${summary && summary.fork ? html` · <span class="badge">sandbox fork of <a href=${`#/room/${enc(summary.fork.parent)}`}>${summary.fork.parent}</a> at version ${summary.fork.at}</span>` : ""}</h2>
      <label class="field" for="viewer">view as
        <select id="viewer" value=${viewer} onChange=${(e) => setViewer(e.target.value)}>
          ${auditor ? html`<option value="">auditor (full state)</option>` : ""}
          ${(auditor ? seats : seat ? [seat.player] : []).map((p) => html`<option value=${p}>player ${p}</option>`)}
        </select></label>
      <${ErrorBox} error=${error} />
    </section>
    <div class="row">
      <section class="panel grow" aria-label="Time travel"><h2>Time travel</h2>
        <div class="slider">
          <button onClick=${() => choose(1)} aria-label="first version">|◀</button>
          <button onClick=${() => choose(version - 1)} aria-label="previous version">◀</button>
          <label for="version-slider" class="sr-only">Version</label>
          <input id="version-slider" type="range" min="1" max=${latest || 1} value=${version || 1} aria-label="Version"
            aria-valuetext=${`version ${version} of ${latest}`} onInput=${(e) => choose(Number(e.target.value))} />
          <button onClick=${() => choose(version + 1)} aria-label="next version">▶</button>
          <button onClick=${() => choose(latest)} aria-label="latest version">▶|</button>
          <span>version <strong data-testid="version">${version}</strong> / ${latest}</span>
        </div>
        <div class="timeline" role="list" aria-label="Event timeline" ref=${timeline}>
          <table><thead><tr><th>v</th><th>time</th><th>player</th><th>event</th></tr></thead><tbody>
          ${events.map((e) => html`<tr role="listitem" class=${`clickable ${e.version === version ? "selected" : ""}`}
              onClick=${() => choose(e.version)}>
            <td>${e.version}</td><td>${when(e.server_time_ms)}</td><td>${e.player || ""}</td>
            <td>${e.hidden ? html`<span class="muted">hidden</span>` : e.summary || eventName(e.type)}</td></tr>`)}
          </tbody></table></div>
      </section>
      <section class="panel grow" aria-label="State at version" data-loaded=${at ? `${at.version}|${at.viewer}` : ""}><h2>State at version ${version}${" "}
          <span class="muted">${viewer ? `as ${viewer} saw it` : "(auditor: full state)"}</span></h2>
        ${Picture && at ? html`<${Picture} picture=${pictureOf(at, module)} before=${pictureOf(before, module)} html=${html}
            draft=${version === latest ? draft : null} onPick=${seat && version === latest ? (fields) => setPicked({ ...fields }) : null} />`
                        : html`<p class="muted">no picture for this rule-set: the tree below shows everything</p>`}
        <h3>Changes from version <span data-testid="diff-base">${before ? before.version : Math.max(1, version - 1)}</span>${" "}to ${version}</h3>
        <label class="field" for="diff-base">compare with version
          <input id="diff-base" type="number" min="1" max=${latest || 1} value=${base || ""}
            placeholder=${`previous (${Math.max(1, version - 1)})`}
            onChange=${(e) => setBase(Math.max(0, Math.min(latest, Number(e.target.value) || 0)))} /></label>
        ${base ? html`<button type="button" onClick=${() => setBase(0)}>compare with the previous version</button>` : ""}
        <ul class="diff" data-testid="diff">${changes.slice(0, 40).map((c) => html`<${Change} change=${c} />`)}
          ${changes.length > 40 ? html`<li>… ${changes.length - 40} more</li>` : ""}
          ${before && !changes.length ? html`<li class="muted">no change in this view</li>` : ""}</ul>
        <div class="tree" aria-label="state tree">${tree ? html`<${Tree} value=${tree} changed=${changedPaths} label=${viewer ? "view" : "state"} />` : ""}</div>
      </section>
    </div>
    <div class="row">
      <div class="grow">${summary ? html`<${Play} room=${room} ruleset=${ruleset} seat=${seat} onSeat=${takeSeat}
          onPlayed=${() => { setFollow(true); setDraft(null); }} onDraft=${setDraft} picked=${picked} />` : ""}</div>
      <div class="grow">${summary ? html`<${Verify} room=${room} token=${readToken} summary=${summary} events=${events} />` : ""}</div>
    </div>
    <${Checkpoints} room=${room} latest=${latest} />
    ${seat ? html`<${PlayerBundle} room=${room} seat=${seat} />` : ""}
    ${seat && summary && !summary.ended && summary.bot_policy ? html`<${LeaveToBot} room=${room} seat=${seat} />` : ""}
    <div class="row">
      <div class="grow">${auditor && summary ? html`<${Forensics} room=${room} token=${auditor} version=${version} onJump=${choose} />` : ""}</div>
    </div>
    ${auditor && summary ? (summary.audit_views || []).map((view) => html`<${AuditStory} room=${room} view=${view} token=${auditor} module=${module} />`) : ""}
    <${Charts} room=${room} token=${readToken} version=${latest} />`;
}

// --- the shell ------------------------------------------------------------------------------------
function App() {
  const [hash, setHash] = useState(location.hash);
  const [auditor, setAuditor] = useState(auditorToken());
  useEffect(() => { const on = () => setHash(location.hash); window.addEventListener("hashchange", on); return () => window.removeEventListener("hashchange", on); }, []);
  const room = hash.startsWith("#/room/") ? decodeURIComponent(hash.slice(7)) : null;
  return html`<header class="top"><nav aria-label="Console"><a href="#/">Almanac console</a><a href="#/">Rooms</a>
      <a href="/docs">API docs</a><a href="/redoc">ReDoc</a><a href="/asyncapi">AsyncAPI</a></nav>
    <label for="auditor-token">auditor token</label>
    <input id="auditor-token" type="password" value=${auditor} placeholder="paste once; kept for this tab"
      onChange=${(e) => { setAuditorToken(e.target.value.trim()); setAuditor(e.target.value.trim()); }} />
    </header>
    <${Warnings} />
    <main key=${`${room}|${auditor}`}>${room ? html`<${RoomPage} room=${room} />` : html`<${RoomsPage} />`}</main>`;
}

const root = document.getElementById("app");
root.textContent = "";  // the "Loading" line
render(html`<${App} />`, root);
