/*
 * The leases that cover a processor call, named once. An instance that dies holding one is seen gone
 * at once (db/liveness.ts) and its lease ends then; these are the bounds for an instance that is
 * alive but stalled, derived from one another so that they cannot drift apart.
 */

/** How long a processor call may take: longer than any processor's own timeout. */
export const processorCallMs = 60_000;

/** A claim on a payment or refund (db/claims.ts) lasts one processor call. */
export const objectClaimMs = processorCallMs;

/**
 * A claim on an idempotency key lasts its request, which holds an object's claim across its
 * processor call: as long as that claim.
 */
export const idempotencyClaimMs = objectClaimMs;

/**
 * A job that claims its object to call a processor (a scheduled capture, a refund, a payout send) is
 * leased as long as that claim; so is a job run in a transaction, whose lease only covers its wait
 * for a slot.
 */
export const jobLeaseMs = objectClaimMs;
