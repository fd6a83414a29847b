import type { DataSource, EntityManager } from "typeorm";
import { holderGone, holderOf } from "../db/liveness.js";
import type { Scope } from "../db/scope.js";
import type { KeyAnswer } from "../db/unit-of-work.js";
import { type ApiError, idempotencyConflict } from "../errors.js";
import { idBody, randomBase62 } from "../ids.js";
import { idempotencyClaimMs } from "../leases.js";

/** How long a key is kept (interface §8). */
export const keyLifetimeMs = 24 * 60 * 60 * 1000;

/**
 * How long a claim holds a key before another request may take it over. A claim older than this, or
 * one whose instance is gone (db/liveness.ts), belongs to a request that can no longer commit: its
 * effect never committed (effect and completion commit together), so running the request again is safe.
 */
export const claimLeaseMs = idempotencyClaimMs;

/** What claiming a key found. */
export type Claim =
  /**
   * `effectSeed` names the objects the request creates (db/unit-of-work.ts): that of an earlier try
   * of the request with this key that never completed, so a retry names the object it recorded;
   * `retried` says whether there was such a try.
   */
  | { readonly kind: "claimed"; readonly effectSeed: string; readonly retried: boolean }
  | { readonly kind: "replay"; readonly response: Uint8Array }
  | { readonly kind: "in_flight" }
  | { readonly kind: "mismatch" };

/**
 * A request's fingerprint (a keyed hash of it, under API_KEY_HASH_SECRET), and while that secret is
 * rotated its fingerprints under the previous or next secret: a key claimed under the other secret
 * (before the rotation, or by an instance already switched) still recognises its request.
 */
export interface Fingerprints {
  readonly current: Buffer;
  readonly previous: Buffer | undefined;
  readonly next: Buffer | undefined;
}

/** The fingerprints besides the current one that identify the same request. */
function alternates(fingerprints: Fingerprints): Buffer[] {
  return [fingerprints.previous, fingerprints.next].filter((f): f is Buffer => f !== undefined);
}

/** One merchant's key in one environment. */
export interface KeyRef extends Scope {
  readonly key: string;
}

/**
 * Claims the key for a request with this fingerprint, in one statement: a new key, an expired one, or
 * one whose claim outlived its lease or its instance (same fingerprint) becomes this request's. Otherwise the key's
 * state decides: a completed response to replay, a request still in flight, or another request.
 * The claim is made under `token` (newClaimToken), which the caller knows even when the answer is
 * lost: the claim may have committed, and only that token can release it.
 */
export async function claimKey(dataSource: DataSource, ref: KeyRef, fingerprints: Fingerprints, now: Date, token: string): Promise<Claim> {
  for (;;) {
    const seed = idBody();
    const claimed = (await dataSource.query(
      `INSERT INTO idempotency_keys AS k
         (merchant_id, livemode, idempotency_key, fingerprint, state, claim_token, locked_until, response, created, expires_at, claimed_by, effect_seed)
       VALUES ($1, $2, $3, $4, 'in_flight', $5, $6, NULL, $7, $8, $9::integer, $11)
       ON CONFLICT (merchant_id, livemode, idempotency_key) DO UPDATE
         SET fingerprint = EXCLUDED.fingerprint, state = 'in_flight', claim_token = EXCLUDED.claim_token,
             locked_until = EXCLUDED.locked_until, response = NULL, created = EXCLUDED.created, expires_at = EXCLUDED.expires_at,
             claimed_by = EXCLUDED.claimed_by,
             effect_seed = CASE WHEN k.expires_at <= $7 OR k.effect_seed IS NULL THEN EXCLUDED.effect_seed ELSE k.effect_seed END
         WHERE k.expires_at <= $7
            OR (k.state = 'in_flight' AND (k.locked_until <= $7 OR ${holderGone("k.claimed_by")})
                AND (k.fingerprint = EXCLUDED.fingerprint OR k.fingerprint = ANY ($10::bytea[])))
       RETURNING effect_seed`,
      [
        ref.merchantId,
        ref.livemode,
        ref.key,
        fingerprints.current,
        token,
        new Date(now.getTime() + claimLeaseMs),
        now,
        new Date(now.getTime() + keyLifetimeMs),
        holderOf(dataSource),
        alternates(fingerprints),
        seed,
      ],
    )) as { effect_seed: string }[];
    if (claimed.length === 1) return { kind: "claimed", effectSeed: claimed[0]!.effect_seed, retried: claimed[0]!.effect_seed !== seed };
    const [existing] = (await dataSource.query(
      `SELECT fingerprint, state, response FROM idempotency_keys WHERE merchant_id = $1 AND livemode = $2 AND idempotency_key = $3`,
      [ref.merchantId, ref.livemode, ref.key],
    )) as { fingerprint: Buffer; state: string; response: Buffer | null }[];
    // Released between the two statements (the request it belonged to failed): claim again.
    if (existing === undefined) continue;
    const same = [fingerprints.current, ...alternates(fingerprints)].some((f) => f.equals(existing.fingerprint));
    if (!same) return { kind: "mismatch" };
    if (existing.state === "completed") return { kind: "replay", response: new Uint8Array(existing.response!) };
    return { kind: "in_flight" };
  }
}

/**
 * Stores the response of the request holding the claim, in the transaction of its effect. Throws
 * IK_01 when the claim was taken over meanwhile (its lease ran out), which rolls the effect back:
 * only one request's effect ever commits per key.
 */
export async function completeKey(manager: EntityManager, ref: KeyRef, token: string, response: Uint8Array): Promise<void> {
  const [, affected] = (await manager.query(
    `UPDATE idempotency_keys SET state = 'completed', response = $5
     WHERE merchant_id = $1 AND livemode = $2 AND idempotency_key = $3 AND claim_token = $4 AND state = 'in_flight'`,
    [ref.merchantId, ref.livemode, ref.key, token, Buffer.from(response)],
  )) as [unknown, number];
  // This request outlived its claim's lease and a retry with the key has taken it over: its effect
  // is rolled back with this throw, and the retry's is the one that counts.
  if (affected !== 1) throw keyTakenOver();
}

/**
 * IK_01 for a request that outlived its claim's lease while a retry with the key took it over: what
 * this request did or failed on is not its key's answer, the retry's is.
 */
export function keyTakenOver(): ApiError {
  return idempotencyConflict(
    "This request ran longer than its idempotency key's claim, and a retry with the key took it over; its outcome was not kept. Retry to learn the outcome.",
  );
}

/** A token for one request's claim on a key. */
export function newClaimToken(): string {
  return randomBase62(32);
}

/** Frees the key of a request that failed, so a corrected retry with the same key runs (decisions §6). */
export async function releaseKey(dataSource: DataSource, ref: KeyRef, token: string): Promise<"released" | "taken_over"> {
  const [, deleted] = (await dataSource.query(
    `DELETE FROM idempotency_keys WHERE merchant_id = $1 AND livemode = $2 AND idempotency_key = $3 AND claim_token = $4 AND state = 'in_flight'`,
    [ref.merchantId, ref.livemode, ref.key, token],
  )) as [unknown, number];
  return deleted === 1 ? "released" : "taken_over";
}

/**
 * Ends the claim of a request that failed after it recorded something its retry must find (a
 * payment recorded before its processor was asked): the key stays with its request, whose next try
 * takes it over at once and names the same objects, while another request with the key is IK_02.
 */
export async function unlockKey(dataSource: DataSource, ref: KeyRef, token: string, now: Date): Promise<"released" | "taken_over"> {
  const [, updated] = (await dataSource.query(
    `UPDATE idempotency_keys SET locked_until = $5
     WHERE merchant_id = $1 AND livemode = $2 AND idempotency_key = $3 AND claim_token = $4 AND state = 'in_flight'`,
    [ref.merchantId, ref.livemode, ref.key, token, now],
  )) as [unknown, number];
  return updated === 1 ? "released" : "taken_over";
}

/** The types of `keyAnswersSql`'s parameters, in order. */
const keyAnswerTypes = ["varchar", "boolean", "varchar", "varchar", "bytea", "bigint"];

/** How many parameters `keyAnswersSql` takes, so that a statement can number what follows them. */
export const keyAnswerParamCount = keyAnswerTypes.length;

/**
 * The CTEs that give a statement writing calls' effects (objects/change.ts) their keys' answers, from
 * six arrays from parameter `firstParam` on (merchant, environment, key, claim token, response, and
 * the position in the batch of the effect each answers): `answer`, their rows; `key_lost`, the
 * positions whose request no longer holds its key (a retry took it over), whose effects must not be
 * written. The keys still held are locked until the statement commits, so no retry takes one over
 * between the check and the completion (`completedKeysSql`).
 */
export function keyAnswersSql(firstParam: number): string {
  const arrays = keyAnswerTypes.map((type, i) => `$${firstParam + i}::${type}[]`);
  return (
    `answer AS (SELECT * FROM unnest(${arrays.join(", ")}) AS answer(merchant_id, livemode, idempotency_key, claim_token, response, position)),\n` +
    `held_key AS (SELECT a.position FROM answer AS a JOIN idempotency_keys AS k ON k.merchant_id = a.merchant_id AND k.livemode = a.livemode ` +
    `AND k.idempotency_key = a.idempotency_key WHERE k.claim_token = a.claim_token AND k.state = 'in_flight' FOR UPDATE OF k),\n` +
    `key_lost AS (SELECT position FROM answer WHERE claim_token IS NOT NULL AND position NOT IN (SELECT position FROM held_key))`
  );
}

/**
 * The CTE completing the keys of `keyAnswersSql` whose effects the CTE `written` (of positions)
 * wrote. A key answered without a claim token (recovery's, for a request that is gone) is completed
 * only while it is in flight: a completed or expired key is left as it is.
 */
export function completedKeysSql(written: string): string {
  return (
    `UPDATE idempotency_keys AS k SET state = 'completed', response = a.response FROM answer AS a JOIN ${written} USING (position) ` +
    `WHERE k.merchant_id = a.merchant_id AND k.livemode = a.livemode AND k.idempotency_key = a.idempotency_key AND k.state = 'in_flight' ` +
    `AND (a.claim_token IS NULL OR k.claim_token = a.claim_token)`
  );
}

/** The parameters of `keyAnswersSql` for `answers`, each answering the effect at its position (from 1). */
export function keyAnswerArrays(answers: readonly { readonly answer: KeyAnswer; readonly position: number }[]): unknown[][] {
  return [
    answers.map(({ answer }) => answer.merchantId),
    answers.map(({ answer }) => answer.livemode),
    answers.map(({ answer }) => answer.key),
    answers.map(({ answer }) => answer.claimToken),
    answers.map(({ answer }) => Buffer.from(answer.response)),
    answers.map(({ position }) => position),
  ];
}

/** Keys deleted per statement: short statements, so the reaper never holds many row locks for long. */
const reapBatch = 2000;

/**
 * Deletes every expired key, a batch at a time until none is left, and returns how many went. The
 * table must stay as small as a day of keys however fast they are created (issue 19: the benchmark
 * creates thousands a second), so one run takes all that expired, not a fixed number. Instances
 * reaping at once skip each other's batches rather than wait on them.
 */
export async function reapExpiredKeys(dataSource: DataSource, now: Date): Promise<number> {
  let deleted = 0;
  for (;;) {
    const [, count] = (await dataSource.query(
      `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(SELECT ctid FROM idempotency_keys WHERE expires_at <= $1 LIMIT ${reapBatch} FOR UPDATE SKIP LOCKED))`,
      [now],
    )) as [unknown, number];
    deleted += count;
    if (count < reapBatch) return deleted;
  }
}
