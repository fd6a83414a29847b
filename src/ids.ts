import { randomBytes } from "node:crypto";

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** CSPRNG bytes fetched a few KiB at a time: one call into OpenSSL per ~100 ids instead of per id. */
let pool = randomBytes(4096);
let used = 0;

function randomByte(): number {
  if (used === pool.length) {
    pool = randomBytes(4096);
    used = 0;
  }
  return pool[used++]!;
}

/**
 * Random base62 text from a CSPRNG. Rejection sampling keeps every character equally likely, which
 * matters for API keys and client secrets whose strength is their entropy.
 */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += alphabet[byte % 62];
  }
  return out;
}

/** Object id prefixes of interface §1, and `req` for the id every response carries in X-Request-Id. */
export type IdPrefix = "pay" | "cus" | "mer" | "pro" | "ref" | "po" | "att" | "dis" | "key" | "evt" | "req" | "pm" | "man" | "txn";

/** How many characters of an id tell when it was made: 62^7 milliseconds from 1970 last until 2081. */
const timeLength = 7;

/** `ms` in base62, `timeLength` characters, most significant first, so that later is greater byte by byte. */
function timeBase62(ms: number): string {
  let out = "";
  for (let rest = ms, i = 0; i < timeLength; i++, rest = Math.floor(rest / 62)) out = alphabet[rest % 62]! + out;
  return out;
}

/**
 * The 24 characters after an id's prefix: the millisecond `madeAt` (7) and 17 random ones (101 bits:
 * unguessable). Ids made one after another sort together, so each index keyed by an id grows at its
 * end, as it does for UUIDv7, rather than touching a random page of the whole index per new row
 * (docs/architecture.md, "Ids").
 */
export function idBody(madeAt: number = Date.now()): string {
  return `${timeBase62(madeAt)}${randomBase62(24 - timeLength)}`;
}

/** A new object id such as `cus_VcU1HsH4fQ1…`: the prefix tells what the object is (`idBody` the rest). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${idBody()}`;
}

/**
 * The id of the object a call creates: from the call's effect seed when it has one (its idempotency
 * key's, the same for every retry of the request), else new.
 */
export function createdId(prefix: IdPrefix, effectSeed: string | undefined): string {
  return effectSeed === undefined ? newId(prefix) : `${prefix}_${effectSeed}`;
}

/** Caller-chosen ids (payment_id, customer_id) must be safe in a URL path and bounded. */
const callerIdPattern = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Literal path segments that sit where an id would (`/customers/list`, `/payouts/create`): an object
 * with such an id could never be retrieved over REST, so no caller may choose one.
 */
const reservedIds = new Set(["list", "create"]);

/** Why a caller-chosen id is unacceptable, or undefined when it is fine. */
export function callerIdProblem(id: string): string | undefined {
  if (!callerIdPattern.test(id)) return "1-64 letters, digits, '_' or '-'";
  if (reservedIds.has(id)) return `"${id}" is reserved because it is a path segment of the API`;
  return undefined;
}
