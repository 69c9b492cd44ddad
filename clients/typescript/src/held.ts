// What a player holds of each room: the signed checkpoints and refusal receipts its answers carried
// (docs/bundle-format.md sections 2 and 8), exported as the files `almanac verify-bundle --checkpoints FILE` and
// `--receipts FILE` read (sections 2.1 and 8.2). As almanac.client.held.Held in Python: kept as they came, signatures
// unchecked (verify-bundle checks each against the key set it is given and names any that does not verify).
import type { components } from "./schema.js";

export type Checkpoint = components["schemas"]["Checkpoint"];
export type RefusalReceipt = components["schemas"]["RefusalReceipt"];
export type KeySet = components["schemas"]["KeySet"];

export interface CheckpointFile { format: "almanac-checkpoints"; format_version: 1; keys?: KeySet; checkpoints: Checkpoint[] }
export interface ReceiptFile { format: "almanac-receipts"; format_version: 1; keys?: KeySet; receipts: RefusalReceipt[] }

// As the console keeps them: the newest per room, a bound on a long-lived client.
export const CHECKPOINTS_KEPT = 5000;
export const RECEIPTS_KEPT = 1000;

type Loose = Record<string, unknown>;

/** Checkpoints and refusal receipts per room, each kept once (a resend's answer carries the same one). */
export class Held {
  private readonly checkpointsOf = new Map<string, Map<string, Checkpoint>>();
  private readonly receiptsOf = new Map<string, Map<string, RefusalReceipt>>();

  rooms(): string[] {
    return [...new Set([...this.checkpointsOf.keys(), ...this.receiptsOf.keys()])].sort();
  }

  /** The checkpoints held of `room`, by version (two of one version with different heads both stay: proof). */
  checkpoints(room: string): Checkpoint[] {
    return [...(this.checkpointsOf.get(room)?.values() ?? [])].sort((a, b) => a.version - b.version);
  }

  /** The refusal receipts held of `room`, in the order they came. */
  receipts(room: string): RefusalReceipt[] {
    return [...(this.receiptsOf.get(room)?.values() ?? [])];
  }

  /** Keep what `answer` (an API answer, a live-feed message, a refusal's body) carries; `answer` itself. */
  keep<T>(answer: T): T {
    if (answer && typeof answer === "object") {
      this.keepCheckpoint((answer as Loose).checkpoint);
      this.keepReceipt((answer as Loose).receipt);
    }
    return answer;
  }

  keepCheckpoint(checkpoint: unknown): void {
    const c = checkpoint as Checkpoint | undefined;
    if (!c || typeof c !== "object" || typeof c.room !== "string" || !Number.isSafeInteger(c.version)) return;
    const held = this.checkpointsOf.get(c.room) ?? new Map<string, Checkpoint>();
    this.checkpointsOf.set(c.room, held);
    const id = `${c.version}/${c.head}/${c.kid}`;
    if (!held.has(id)) held.set(id, { ...c });
    if (held.size > CHECKPOINTS_KEPT) {  // drop the oldest versions
      const oldest = [...held.entries()].sort((a, b) => a[1].version - b[1].version).slice(0, held.size - CHECKPOINTS_KEPT);
      for (const [dropped] of oldest) held.delete(dropped);
    }
  }

  keepReceipt(receipt: unknown): void {
    const r = receipt as RefusalReceipt | undefined;
    if (!r || typeof r !== "object" || typeof r.room !== "string") return;
    const held = this.receiptsOf.get(r.room) ?? new Map<string, RefusalReceipt>();
    this.receiptsOf.set(r.room, held);
    const id = `${r.command_id}/${r.sig}`;
    if (!held.has(id)) held.set(id, { ...r });
    while (held.size > RECEIPTS_KEPT) held.delete(held.keys().next().value as string);
  }

  /** An almanac-checkpoints document of `room` (`verify-bundle --checkpoints`), with the key set when given. */
  checkpointFile(room: string, keys?: KeySet): CheckpointFile {
    return { format: "almanac-checkpoints", format_version: 1, ...(keys ? { keys } : {}), checkpoints: this.checkpoints(room) };
  }

  /** An almanac-receipts document of `room` (`verify-bundle --receipts`), with the key set when given. */
  receiptFile(room: string, keys?: KeySet): ReceiptFile {
    return { format: "almanac-receipts", format_version: 1, ...(keys ? { keys } : {}), receipts: this.receipts(room) };
  }
}
