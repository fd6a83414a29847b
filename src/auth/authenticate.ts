import { getOption, type DescMethod } from "@bufbuild/protobuf";
import { Access, access } from "../../gen/paymentservice/v1/options_pb.js";
import type { KeyRecord } from "../api-keys/key-record.js";
import type { Clock } from "../clock.js";
import { forbidden, unauthenticated } from "../errors.js";
import { type ApiKeyHasher, parseKeyType, secretsEqual } from "./api-key-secret.js";
import type { Caller, MerchantCaller } from "./caller.js";

/** What authentication needs from the rest of the service. */
export interface AuthDependencies {
  readonly adminApiKey: string | undefined;
  readonly hasher: ApiKeyHasher;
  readonly clock: Clock;
  /** Looks a key up by its keyed hash; a revoked key must fail on the very next request on every instance (KeyLookup). */
  findKey(hash: Buffer): Promise<KeyRecord | null>;
}

/** The request headers authentication reads; a Headers object or a view of Node's headers. */
export type HeaderLookup = Pick<Headers, "get">;

/** Establishes who calls a method, or refuses the call (IR_01, IR_22). */
export type Authenticate = (method: DescMethod, header: HeaderLookup) => Promise<Caller>;

/**
 * Authenticates a call by the access rule its method declares in the protos (`(access)` option),
 * from its headers alone, so that the transport can refuse a key before reading any of the body:
 * a key that may not call a method gets IR_22 whatever the body holds. The same for every protocol.
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
  return (method, header) => authenticate(ruleOf(method), header, deps);
}

/**
 * Whether a publishable key may call a method (health, and retrieving or confirming a payment with
 * its client_secret): what a browser page, which holds no secret, may call, so CORS opens only these.
 */
export function publishableKeyMayCall(method: DescMethod): boolean {
  const rule = getOption(method, access);
  return rule === Access.ANY_KEY || rule === Access.CLIENT_SECRET;
}

async function authenticate(rule: Access, header: HeaderLookup, deps: AuthDependencies): Promise<Caller> {
  const adminKey = header.get("admin-api-key");
  switch (rule) {
    case Access.ADMIN:
      return admin(adminKey, deps);
    case Access.ADMIN_OR_SECRET_KEY:
      return adminKey !== null ? admin(adminKey, deps) : secretOnly(await merchant(header, deps));
    case Access.ANY_KEY:
    case Access.CLIENT_SECRET:
      return merchant(header, deps);
    case Access.SANDBOX_SECRET_KEY:
      return sandboxOnly(secretOnly(await merchant(header, deps)));
    default:
      return secretOnly(await merchant(header, deps));
  }
}

function admin(presented: string | null, deps: AuthDependencies): Caller {
  if (deps.adminApiKey === undefined) {
    throw unauthenticated("The admin API is disabled on this server (ADMIN_API_KEY is not set)");
  }
  if (presented === null || presented === "") {
    throw unauthenticated("Admin API key not provided: send it in the admin-api-key header");
  }
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

async function merchant(header: HeaderLookup, deps: AuthDependencies): Promise<MerchantCaller> {
  const presented = header.get("api-key");
  if (presented === null || presented === "") {
    throw unauthenticated("API key not provided: send it in the api-key header");
  }
  if (parseKeyType(presented) === undefined) {
    throw unauthenticated("Invalid API key provided");
  }
  const row = await deps.findKey(deps.hasher.hash(presented));
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
