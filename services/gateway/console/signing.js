// Signed seats (dice scheme 3, docs/dice.md) in the TypeScript client: the one place in this package that says
// which bytes a player signs (events/signing.py is the server's: every byte is in docs/bundle-format.md), and the
// player's Ed25519 key through WebCrypto (crypto.subtle: browsers, Node 20+), exchanged in the web console's format
// (the private key as PKCS#8 DER in base64, what the console keeps under `almanac-key:<room>:<player>`).
// The web console signs and checks with this module compiled as it is (services/gateway/console/signing.js, written
// by `npm run build:console`; a test fails while the committed build differs from this source).
const encoder = new TextEncoder();
const hex = (bytes) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
const fromHex = (text) => Uint8Array.from(text.match(/../g) ?? [], (b) => parseInt(b, 16));
const toBase64 = (bytes) => btoa(String.fromCharCode(...bytes));
const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
function sortedKeys(value) {
    if (Array.isArray(value))
        return value.map(sortedKeys);
    if (value !== null && typeof value === "object") {
        return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortedKeys(value[k])]));
    }
    return value;
}
/** events.dice.canonical_json: keys sorted at every depth, no spaces, UTF-8 (command schemas carry no floats). */
export const canonicalJson = (value) => JSON.stringify(sortedKeys(value));
/** The id the engine records for a client's command id: the one a signature covers. */
export const recordedCommandId = (room, player, clientId) => `${room}:${player}:${clientId}`;
/** events.signing.command_bytes, the v2 form: what a signed seat signs for one command over the version it saw. */
export function commandBytes(room, player, commandId, body, seenVersion) {
    if (!Number.isSafeInteger(seenVersion) || seenVersion < 0)
        throw new RangeError(`seen version ${seenVersion}`);
    return encoder.encode(["almanac-command-v2", room, player, commandId, String(seenVersion), canonicalJson(body)].join("|"));
}
/** events.signing.join_bytes: the join's proof that the joining player holds the key it registers. */
export function joinBytes(room, player, publicKey, nonceCommitment) {
    return encoder.encode(["almanac-join-v1", room, player, publicKey, nonceCommitment ?? ""].join("|"));
}
/** The sha256 hex of a join's nonce (64 hex digits), which a signed join covers; null without a nonce. */
export async function nonceCommitment(nonce) {
    if (nonce == null)
        return null;
    return hex(await crypto.subtle.digest("SHA-256", fromHex(nonce)));
}
// A raw 32-byte Ed25519 private key (an `almanac player-key` file) wrapped as PKCS#8 (RFC 8410).
const PKCS8_ED25519_PREFIX = fromHex("302e020100300506032b657004220420");
/** A player's Ed25519 key for one signed seat: its public half is registered at join, and every later command of
 *  the seat carries its signature. Keep `export()` with the seat key: without it the seat cannot act. */
export class PlayerKey {
    privateKey;
    publicKey;
    pkcs8;
    constructor(privateKey, publicKey, pkcs8) {
        this.privateKey = privateKey;
        this.publicKey = publicKey;
        this.pkcs8 = pkcs8;
    }
    static async generate() {
        const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
        return PlayerKey.importKey(toBase64(new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey))));
    }
    /** A key from `export()` or the web console (base64 PKCS#8), or an `almanac player-key` file (64 hex digits). */
    static async importKey(text) {
        const trimmed = text.trim();
        let der;
        if (/^[0-9a-fA-F]{64}$/.test(trimmed)) {
            der = new Uint8Array([...PKCS8_ED25519_PREFIX, ...fromHex(trimmed.toLowerCase())]);
        }
        else {
            try {
                der = fromBase64(trimmed);
            }
            catch {
                throw new TypeError("not a player key: base64 PKCS#8 (as exported) or 64 hex digits");
            }
        }
        const privateKey = await crypto.subtle.importKey("pkcs8", der, { name: "Ed25519" }, true, ["sign"]);
        const jwk = await crypto.subtle.exportKey("jwk", privateKey);
        const publicKey = hex(fromBase64((jwk.x ?? "").replace(/-/g, "+").replace(/_/g, "/").padEnd(44, "=")));
        return new PlayerKey(privateKey, publicKey, der);
    }
    /** The private key as the web console keeps it (PKCS#8 DER, base64). Secret: whoever holds it signs as you. */
    export() {
        return toBase64(this.pkcs8);
    }
    async sign(message) {
        return hex(await crypto.subtle.sign({ name: "Ed25519" }, this.privateKey, message));
    }
    signJoin(room, player, commitment) {
        return this.sign(joinBytes(room, player, this.publicKey, commitment));
    }
    signCommand(room, player, clientId, body, seenVersion) {
        return this.sign(commandBytes(room, player, recordedCommandId(room, player, clientId), body, seenVersion));
    }
    toJSON() {
        return `PlayerKey(${this.publicKey})`;
    }
}
