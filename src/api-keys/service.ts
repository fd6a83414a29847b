import { timestampToDate } from "../validation/time.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { IsNull, type DataSource, type EntityManager } from "typeorm";
import { ApiKeyKind, ApiKeyKindSchema, type ApiKeySchema, type ApiKeyService } from "../../gen/paymentservice/v1/api_key_pb.js";
import { Environment, EnvironmentSchema } from "../../gen/paymentservice/v1/common_pb.js";
import { generateApiKey, keyPrefixLength, type ApiKeyHasher } from "../auth/api-key-secret.js";
import { callerOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { sentWord } from "../enum-words.js";
import { forbidden, invalidField, missingField, notFound } from "../errors.js";
import { newId } from "../ids.js";
import { MerchantRow } from "../merchants/merchant.entity.js";
import { text } from "../validation/fields.js";
import { fetchPage } from "../db/list-query.js";
import { envelope, pageOf } from "../validation/list.js";
import { ApiKeyRow } from "./api-key.entity.js";
import type { KeyLookup } from "./lookup.js";

/** A stored key together with its plaintext, which exists only until the creation response is sent. */
export interface IssuedApiKey {
  readonly row: ApiKeyRow;
  readonly plaintext: string;
}

/** Issues a key in the caller's transaction (API and bootstrap); only its keyed hash is stored. */
export async function issueApiKey(
  em: EntityManager,
  deps: { hasher: ApiKeyHasher; clock: Clock },
  fields: { merchantId: string; livemode: boolean; publishable: boolean; name: string | null; expiresAt: Date | null },
): Promise<IssuedApiKey> {
  const plaintext = generateApiKey(fields.livemode, fields.publishable);
  const row = Object.assign(new ApiKeyRow(), {
    ...fields,
    keyId: newId("key"),
    prefix: plaintext.slice(0, keyPrefixLength),
    keyHash: deps.hasher.hash(plaintext),
    hashSecretId: deps.hasher.secretId,
    created: deps.clock.now(),
    revokedAt: null,
  });
  await em.insert(ApiKeyRow, row);
  return { row, plaintext };
}

/** The API view of a key; the plaintext only when it was just issued. */
export function toApiKey(row: ApiKeyRow, plaintext?: string): MessageInitShape<typeof ApiKeySchema> {
  return {
    keyId: row.keyId,
    merchantId: row.merchantId,
    name: row.name ?? undefined,
    environment: row.livemode ? Environment.PRODUCTION : Environment.SANDBOX,
    kind: row.publishable ? ApiKeyKind.PUBLISHABLE : ApiKeyKind.SECRET,
    prefix: row.prefix,
    apiKey: plaintext,
    created: timestampFromDate(row.created),
    expiresAt: row.expiresAt === null ? undefined : timestampFromDate(row.expiresAt),
  };
}

/**
 * Which keys a call may see: the admin names a merchant, a merchant's secret key sees the keys of
 * its own merchant and environment only (a sandbox key cannot touch production keys).
 */
function scopeOf(ctx: HandlerContext, sentMerchantId: string | undefined): { merchantId: string; livemode?: boolean } {
  const caller = callerOf(ctx);
  if (caller.kind === "admin") {
    if (sentMerchantId === undefined || sentMerchantId === "") throw missingField("merchant_id");
    return { merchantId: sentMerchantId };
  }
  if (sentMerchantId !== undefined && sentMerchantId !== caller.merchantId) {
    throw notFound("Merchant", sentMerchantId);
  }
  return { merchantId: caller.merchantId, livemode: caller.livemode };
}

/** API keys: issue, look at, list and revoke (decisions §2). */
/** What the API keys API needs: the database, time, the key hasher, and the key lookup whose cache a revocation waits on. */
export interface ApiKeyDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly hasher: ApiKeyHasher;
  readonly keys: KeyLookup;
  readonly units: UnitOfWork;
}

export function apiKeyService(deps: ApiKeyDependencies): ServiceImpl<typeof ApiKeyService> {
  const { dataSource, clock, units } = deps;

  async function loadActive(ctx: HandlerContext, keyId: string): Promise<ApiKeyRow> {
    const caller = callerOf(ctx);
    const row = await dataSource.getRepository(ApiKeyRow).findOneBy({ keyId, revokedAt: IsNull() });
    const visible = row !== null && (caller.kind === "admin" || (row.merchantId === caller.merchantId && row.livemode === caller.livemode));
    if (!visible) throw notFound("API key", keyId);
    return row;
  }

  return {
    async createApiKey(req, ctx) {
      const scope = scopeOf(ctx, req.merchantId);
      const environment = sentWord(EnvironmentSchema, req.environment);
      const kind = sentWord(ApiKeyKindSchema, req.kind);
      if (environment === undefined && scope.livemode === undefined) throw missingField("environment");
      const livemode = environment === undefined ? scope.livemode! : environment === "production";
      if (scope.livemode !== undefined && scope.livemode !== livemode) {
        throw forbidden("A sandbox key cannot issue production keys, nor the other way round");
      }
      const name = text("name", req.name, 200) ?? null;
      const expiresAt = req.expiresAt === undefined ? null : timestampToDate(req.expiresAt);
      if (expiresAt !== null && expiresAt.getTime() <= clock.now().getTime()) {
        throw invalidField("expires_at", "must be in the future");
      }
      return units.commit(ctx, async (em) => {
        if (!(await em.existsBy(MerchantRow, { merchantId: scope.merchantId }))) {
          throw notFound("Merchant", scope.merchantId);
        }
        const issued = await issueApiKey(em, deps, {
          merchantId: scope.merchantId,
          livemode,
          publishable: kind === "publishable",
          name,
          expiresAt,
        });
        return toApiKey(issued.row, issued.plaintext);
      });
    },

    async retrieveApiKey(req, ctx) {
      return toApiKey(await loadActive(ctx, req.keyId));
    },

    async listApiKeys(req, ctx) {
      const scope = scopeOf(ctx, req.merchantId);
      const page = pageOf(req);
      const query = dataSource
        .getRepository(ApiKeyRow)
        .createQueryBuilder("k")
        .where("k.merchant_id = :merchantId", { merchantId: scope.merchantId })
        .andWhere("k.revoked_at IS NULL");
      if (scope.livemode !== undefined) query.andWhere("k.livemode = :livemode", { livemode: scope.livemode });
      const [rows, total] = await fetchPage(query, ["created", "key_id"], page);
      return envelope(
        rows.map((row) => toApiKey(row)),
        total,
        page,
      );
    },

    async revokeApiKey(req, ctx) {
      const row = await loadActive(ctx, req.keyId);
      const revoked = await units.commit(ctx, async (em) => {
        const result = await em.update(ApiKeyRow, { keyId: row.keyId, revokedAt: IsNull() }, { revokedAt: clock.now() });
        if (result.affected === 0) throw notFound("API key", req.keyId);
        return { keyId: row.keyId, deleted: true };
      });
      // The response waits until no instance accepts the key any more, which the commit starts.
      await deps.keys.settled();
      return revoked;
    },
  };
}
