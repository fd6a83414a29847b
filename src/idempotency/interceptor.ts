import { createHash } from "node:crypto";
import {
  clearField,
  clone,
  create,
  fromBinary,
  getOption,
  toBinary,
  type DescField,
  type DescMessage,
  type Message,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import type { ApiKeyHasher } from "../auth/api-key-secret.js";
import { callerKey } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { isDatabaseUnavailable } from "../db/errors.js";
import { ReleaseRetries } from "../db/release-retries.js";
import { idempotentCallKey, responseRecorderKey } from "../db/unit-of-work.js";
import { idempotencyConflict, idempotencyKeyReused, invalidField } from "../errors.js";
import { shown_once as shownOnce } from "../../gen/paymentservice/v1/options_pb.js";
import {
  type Claim,
  claimKey,
  claimLeaseMs,
  completeKey,
  keyTakenOver,
  newClaimToken,
  releaseKey,
  unlockKey,
  type KeyRef,
} from "./store.js";

/** Header names a key may come in (decisions §6), first match wins. */
const keyHeaders = ["x-idempotency-key", "idempotency-key"];

/** The header marking a response as the stored answer of an earlier request with the same key. */
const replayedHeader = "idempotent-replayed";

/** The stored response a replayed call answers with instead of running its handler. */
const replayKey = createContextKey<Message | undefined>(undefined);

/**
 * A service implementation whose every method, when the idempotency interceptor replays the call,
 * answers the stored response from inside the call's handler context without running the handler.
 */
export function replayable<T extends object>(impl: T): T {
  const wrapped = Object.entries(impl).map(([name, handler]) => [
    name,
    (req: unknown, ctx: HandlerContext) =>
      ctx.values.get(replayKey) ?? (handler as (req: unknown, ctx: HandlerContext) => unknown)(req, ctx),
  ]);
  return Object.fromEntries(wrapped) as T;
}

/** What idempotency needs: the key table's database, time, and the hasher that keeps request fingerprints opaque. */
export interface IdempotencyDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly hasher: ApiKeyHasher;
}

/**
 * Idempotency keys (decisions §6, docs/idempotency.md) for every call that can change something,
 * on every protocol. The first request with a key claims it; the handler commits its effect with the
 * response (the recorder set here): in `UnitOfWork.commit`'s transaction, or in the object writer's
 * statement, so a crash can never leave an effect without the response that a retry would replay. A failed request frees
 * the key, unless it recorded something first (a payment before its processor is asked) or the
 * database failed under it (what it wrote may have committed): then the key waits for that request's
 * retry, which finishes what the first try recorded. Reads (methods
 * marked NO_SIDE_EFFECTS) ignore keys.
 */
export function createIdempotencyInterceptor(deps: IdempotencyDependencies): Interceptor {
  const releases = new ReleaseRetries();
  return (next) => async (req) => {
    const caller = req.contextValues.get(callerKey);
    if (req.stream || caller === undefined || caller.kind !== "merchant") return next(req);
    if (req.method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS) return next(req);
    const key = keyHeaders.map((name) => req.header.get(name)).find((value) => value !== null);
    if (key === undefined || key === null) return next(req);
    if (key.length < 1 || key.length > 255) throw invalidField("X-Idempotency-Key", "expected 1-255 characters");

    const ref: KeyRef = { merchantId: caller.merchantId, livemode: caller.livemode, key };
    const digest = createHash("sha256")
      .update(`${req.service.typeName}/${req.method.name}\n`)
      .update(toBinary(req.method.input, req.message))
      .digest("hex");
    const fingerprints = deps.hasher.hashes(digest);
    const token = newClaimToken();
    const release = () => releaseKey(deps.dataSource, ref, token);
    // When the database fails under the call, what the call wrote may have committed with its answer
    // lost (a primary gone between its commit and its reply; the claim itself, taking over a key an
    // earlier try had written effects under). The key is not deleted then but left to the call's
    // retry, once the database is back: it keeps its effect seed, so the retry finds what committed
    // rather than making it a second time.
    const leaveForRetry = () => releases.add(token, () => unlockKey(deps.dataSource, ref, token, deps.clock.now()), claimLeaseMs);
    let claim: Claim;
    try {
      claim = await claimKey(deps.dataSource, ref, fingerprints, deps.clock.now(), token);
    } catch (error) {
      if (isDatabaseUnavailable(error)) leaveForRetry();
      throw error;
    }
    switch (claim.kind) {
      case "in_flight":
        throw idempotencyConflict("A request with this idempotency key is still being processed; retry once it has completed");
      case "mismatch":
        throw idempotencyKeyReused();
      case "replay": {
        // Answered by the handler wrapper (replayable), so the response keeps the headers the
        // protocol set for this call (content type, compression): a response built here would not.
        req.contextValues.set(replayKey, fromBinary(req.method.output, claim.response));
        const res = await next(req);
        res.header.set(replayedHeader, "true");
        return res;
      }
    }
    req.contextValues.set(idempotentCallKey, { key, effectSeed: claim.effectSeed, retried: claim.retried });
    const responseOf = (response: unknown) =>
      toBinary(req.method.output, storable(req.method.output, create(req.method.output, response as MessageInitShape<DescMessage>)));
    let recorded = false;
    let keptForRetry = false;
    const free = () => (keptForRetry ? unlockKey(deps.dataSource, ref, token, deps.clock.now()) : release());
    req.contextValues.set(responseRecorderKey, {
      async record(em, response) {
        if (recorded) throw new Error(`${req.method.name}: a call commits its effect once`);
        recorded = true;
        await completeKey(em, ref, token, responseOf(response));
      },
      answer(response) {
        // The statement it goes into completes the key with the effect, or writes neither (a failed
        // batch is tried again, item by item): the key is not completed again after the call.
        recorded = true;
        return { ...ref, claimToken: token, response: responseOf(response) };
      },
      keepForRetry() {
        keptForRetry = true;
      },
    });
    try {
      const res = await next(req);
      if (res.stream) throw new Error(`${req.method.name}: idempotency keys apply to unary calls only`);
      // A call with no effect in the database (moving the sandbox clock) stores its response alone.
      if (!recorded) await completeKey(deps.dataSource.manager, ref, token, responseOf(res.message));
      return res;
    } catch (error) {
      // The caller hears of the failure that ended its call at once.
      if (isDatabaseUnavailable(error)) {
        leaveForRetry();
        throw error;
      }
      const released = await free().catch(() => {
        releases.add(token, free, claimLeaseMs);
        return "later" as const;
      });
      // A retry took the key over while this request ran: the key's answer is the retry's, so this
      // request answers IK_01 whatever it failed on (the retry may have moved the object first).
      if (released === "taken_over") throw keyTakenOver();
      throw error;
    }
  };
}

/** Each response schema's `(shown_once)` fields: an option is decoded anew on every read, and never changes. */
const shownOnceFields = new WeakMap<DescMessage, DescField[]>();

/**
 * The part of a response the key table may keep: fields marked `(shown_once)` in the protos are
 * secrets shown once (a new API key's plaintext, decisions §2), so a replay answers without them.
 */
function storable(schema: DescMessage, message: Message): Message {
  let secrets = shownOnceFields.get(schema);
  if (secrets === undefined) {
    secrets = schema.fields.filter((field) => getOption(field, shownOnce));
    shownOnceFields.set(schema, secrets);
  }
  if (secrets.length === 0) return message;
  const kept = clone(schema, message);
  for (const field of secrets) clearField(kept, field);
  return kept;
}
