import { getOption, type DescMethod } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { Access, access } from "../../gen/paymentservice/v1/options_pb.js";
import type { KeyRecord } from "../api-keys/lookup.js";
import type { Clock } from "../clock.js";
import { ApiError } from "../errors.js";
import { type ApiKeyHasher, parseKeyType, secretsEqual } from "./api-key-secret.js";
import { callerKey, type Caller, type MerchantCaller } from "./caller.js";

/** What authentication needs from the rest of the service. */
export interface AuthDependencies {
  readonly adminApiKey: string | undefined;
  readonly hasher: ApiKeyHasher;
  readonly clock: Clock;
  /** Looks a key up by its keyed hash; a revoked key must fail on the very next request on every instance (KeyLookup). */
  findKey(hash: Buffer): Promise<KeyRecord | null>;
}

/**
 * Authenticates every call by the access rule its method declares in the protos (`(access)` option),
 * and leaves the caller in the context for the handler. Runs for REST, Connect and gRPC alike.
 */
export function createAuthInterceptor(deps: AuthDependencies): Interceptor {
  // Options are decoded from the descriptor on each getOption call; a method's rule never changes.
  const rules = new WeakMap<DescMethod, Access>();
  const ruleOf = (method: DescMethod): Access => {
    let rule = rules.get(method);
    if (rule === undefined) {
      rule = getOption(method, access);
      rules.set(method, rule);
    }
    return rule;
  };
  return (next) => async (req) => {
    const rule = ruleOf(req.method);
    req.contextValues.set(callerKey, await authenticate(rule, req.header, deps));
    return next(req);
  };
}

async function authenticate(rule: Access, header: Headers, deps: AuthDependencies): Promise<Caller> {
  const adminKey = header.get("admin-api-key");
  switch (rule) {
    case Access.ADMIN:
      return admin(adminKey, deps);
    case Access.ADMIN_OR_SECRET_KEY:
      return adminKey !== null ? admin(adminKey, deps) : secretOnly(await merchant(header, deps));
    case Access.ANY_KEY:
    case Access.CLIENT_SECRET:
      return merchant(header, deps);
    default:
      return secretOnly(await merchant(header, deps));
  }
}

function admin(presented: string | null, deps: AuthDependencies): Caller {
  if (deps.adminApiKey === undefined) {
    throw new ApiError("IR_01", "The admin API is disabled on this server (ADMIN_API_KEY is not set)");
  }
  if (presented === null || presented === "") {
    throw new ApiError("IR_01", "Admin API key not provided: send it in the admin-api-key header");
  }
  if (!secretsEqual(presented, deps.adminApiKey)) {
    throw new ApiError("IR_01", "Invalid admin API key");
  }
  return { kind: "admin" };
}

function secretOnly(caller: MerchantCaller): MerchantCaller {
  if (caller.publishable) {
    throw new ApiError("IR_22", "A publishable key is not allowed to perform this operation; use a secret key");
  }
  return caller;
}

async function merchant(header: Headers, deps: AuthDependencies): Promise<MerchantCaller> {
  const presented = header.get("api-key");
  if (presented === null || presented === "") {
    throw new ApiError("IR_01", "API key not provided: send it in the api-key header");
  }
  if (parseKeyType(presented) === undefined) {
    throw new ApiError("IR_01", "Invalid API key provided");
  }
  const row = await deps.findKey(deps.hasher.hash(presented));
  if (row === null) {
    throw new ApiError("IR_01", "Invalid API key provided");
  }
  if (row.revokedAt !== null) {
    throw new ApiError("IR_01", "This API key has been revoked");
  }
  if (row.expiresAt !== null && row.expiresAt.getTime() <= deps.clock.now().getTime()) {
    throw new ApiError("IR_01", "This API key has expired");
  }
  return { kind: "merchant", merchantId: row.merchantId, livemode: row.livemode, publishable: row.publishable, keyId: row.keyId };
}
