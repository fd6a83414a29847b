import { getOption, type DescMethod } from "@bufbuild/protobuf";
import { Access, access } from "../../gen/paymentservice/v1/options_pb.js";
import type { KeyRecord } from "./key-record.js";
import type { Clock } from "../clock.js";
import { ApiError, forbidden, unauthenticated } from "../errors.js";
import type { AuthFailureLimiter } from "../rate-limits/auth-failures.js";
import { type ApiKeyHasher, type PresentedKeyHashes, parseKeyType, secretsEqual } from "./api-key-secret.js";
import type { Caller, MerchantCaller } from "./caller.js";

/** What authentication needs from the rest of the service. */
export interface AuthDependencies {
  readonly adminApiKey: string | undefined;
  readonly hasher: ApiKeyHasher;
  readonly clock: Clock;
  /** Counts failed authentications per client address and refuses an address that used its failures up. */
  readonly failures: Pick<AuthFailureLimiter, "check" | "failed">;
  /**
   * Looks a key up by its keyed hash; a revoked key must fail on the very next request on every
   * instance (KeyLookup). `beforeDatabase` runs only if the database must be asked.
   */
  findKey(hashes: PresentedKeyHashes, beforeDatabase: () => Promise<void>): Promise<KeyRecord | null>;
}

/** The request headers authentication reads; a Headers object or a view of Node's headers. */
export type HeaderLookup = Pick<Headers, "get">;

/**
 * Establishes who calls a method from `client` (its address, ClientAddresses), or refuses the call
 * (IR_01, IR_22, or RL_01 as a LimitExceeded once the address used up its failed authentications).
 */
export type Authenticate = (method: DescMethod, header: HeaderLookup, client: string) => Promise<Caller>;

/**
 * Authenticates a call by the access rule its method declares in the protos (`(access)` option),
 * from its headers alone, so that the transport can refuse a key before reading any of the body:
 * a key that may not call a method gets IR_22 whatever the body holds. The same for every protocol.
 * Every 401 counts against the client address; once it is over its limit, whatever would need the
 * database or the admin key to authenticate is refused before either is consulted (docs/rate-limits.md).
 */
export function createAuthenticator(deps: AuthDependencies): Authenticate {
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
  return async (method, header, client) => {
    try {
      return await authenticate(ruleOf(method), header, { ...deps, client });
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== "IR_01") throw error;
      throw (await deps.failures.failed(client)) ?? error;
    }
  };
}

/** The dependencies of one call: the service's, and the address the call comes from. */
interface CallDependencies extends AuthDependencies {
  readonly client: string;
}

/**
 * Whether a publishable key may call a method (health, and retrieving or confirming a payment with
 * its client_secret): what a browser page, which holds no secret, may call, so CORS opens only these.
 */
export function publishableKeyMayCall(method: DescMethod): boolean {
  const rule = getOption(method, access);
  return rule === Access.ANY_KEY || rule === Access.CLIENT_SECRET;
}

async function authenticate(rule: Access, header: HeaderLookup, deps: CallDependencies): Promise<Caller> {
  const adminKey = header.get("admin-api-key");
  switch (rule) {
    case Access.ADMIN:
      return admin(adminKey, deps);
    case Access.ADMIN_OR_SECRET_KEY:
      return adminKey !== null ? await admin(adminKey, deps) : secretOnly(await merchant(header, deps));
    case Access.ANY_KEY:
    case Access.CLIENT_SECRET:
      return merchant(header, deps);
    case Access.SANDBOX_SECRET_KEY:
      return sandboxOnly(secretOnly(await merchant(header, deps)));
    default:
      return secretOnly(await merchant(header, deps));
  }
}

/** An address over its failure limit is refused before the comparison, so it cannot go on guessing the admin key. */
async function admin(presented: string | null, deps: CallDependencies): Promise<Caller> {
  if (deps.adminApiKey === undefined) {
    throw unauthenticated("The admin API is disabled on this server (ADMIN_API_KEY is not set)");
  }
  if (presented === null || presented === "") {
    throw unauthenticated("Admin API key not provided: send it in the admin-api-key header");
  }
  await deps.failures.check(deps.client);
  if (!secretsEqual(presented, deps.adminApiKey)) {
    throw unauthenticated("Invalid admin API key");
  }
  return { kind: "admin" };
}

function secretOnly(caller: MerchantCaller): MerchantCaller {
  if (caller.publishable) {
    throw forbidden("A publishable key is not allowed to perform this operation; use a secret key");
  }
  return caller;
}

/** Sandbox endpoints act as the card network does in production, so production keys may not use them. */
function sandboxOnly(caller: MerchantCaller): MerchantCaller {
  if (caller.livemode) throw forbidden("Sandbox endpoints need a sandbox key");
  return caller;
}

async function merchant(header: HeaderLookup, deps: CallDependencies): Promise<MerchantCaller> {
  const presented = header.get("api-key");
  if (presented === null || presented === "") {
    throw unauthenticated("API key not provided: send it in the api-key header");
  }
  if (parseKeyType(presented) === undefined) {
    throw unauthenticated("Invalid API key provided");
  }
  const row = await deps.findKey(deps.hasher.hashes(presented), () => deps.failures.check(deps.client));
  if (row === null) {
    throw unauthenticated("Invalid API key provided");
  }
  if (row.revokedAt !== null) {
    throw unauthenticated("This API key has been revoked");
  }
  if (row.expiresAt !== null && row.expiresAt.getTime() <= deps.clock.now().getTime()) {
    throw unauthenticated("This API key has expired");
  }
  return { kind: "merchant", merchantId: row.merchantId, livemode: row.livemode, publishable: row.publishable, keyId: row.keyId };
}
