import { createHash } from "node:crypto";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import type { Interceptor, UnaryResponse } from "@connectrpc/connect";
import type { App } from "../app.js";
import { callerKey } from "../auth/caller.js";
import { withUnitOfWork } from "../db/unit-of-work.js";
import { ApiError, invalidField } from "../errors.js";
import { claimKey, completeKey, releaseKey, type KeyRef } from "./store.js";

/** Header names a key may come in (decisions §6), first match wins. */
const keyHeaders = ["x-idempotency-key", "idempotency-key"];

/** The header marking a response as the stored answer of an earlier request with the same key. */
const replayedHeader = "idempotent-replayed";

/**
 * Idempotency keys (decisions §6, docs/idempotency.md) for every call that can change something,
 * on every protocol. The first request with a key claims it; its effect and its response are written
 * in one transaction (a unit of work every database access of the handler joins), so a crash can
 * never leave an effect without the response that a retry would replay. A failed request frees the
 * key. Reads (methods marked NO_SIDE_EFFECTS) ignore keys.
 */
export function createIdempotencyInterceptor(app: App): Interceptor {
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
    const fingerprint = app.hasher.hash(digest);
    const claim = await claimKey(app.dataSource, ref, fingerprint, app.clock.now());
    switch (claim.kind) {
      case "in_flight":
        throw new ApiError("IK_01", "A request with this idempotency key is still being processed; retry once it has completed");
      case "mismatch":
        throw new ApiError("IK_02", "This idempotency key was already used for a different request (another operation, path or body)");
      case "replay": {
        const header = new Headers({ [replayedHeader]: "true" });
        return {
          stream: false,
          service: req.service,
          method: req.method,
          header,
          trailer: new Headers(),
          message: fromBinary(req.method.output, claim.response),
        } as UnaryResponse;
      }
    }
    try {
      return await withUnitOfWork(app.dataSource, async (manager) => {
        const res = await next(req);
        if (res.stream) throw new Error(`${req.method.name}: idempotency keys apply to unary calls only`);
        await completeKey(manager, ref, claim.token, toBinary(req.method.output, res.message));
        return res;
      });
    } catch (error) {
      await releaseKey(app.dataSource, ref, claim.token);
      throw error;
    }
  };
}
