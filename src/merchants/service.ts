import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource, EntityManager } from "typeorm";
import type { MerchantSchema, MerchantService, ProfileSchema } from "../../gen/paymentservice/v1/merchant_pb.js";
import type { Clock } from "../clock.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { invalidField, notFound } from "../errors.js";
import { newId } from "../ids.js";
import { bounded, change, text, url } from "../validation/fields.js";
import { newWebhookSecret } from "../webhooks/signature.js";
import { refusalOfSavedUrl } from "../webhooks/target.js";
import { MerchantRow } from "./merchant.entity.js";
import { ProfileRow } from "./profile.entity.js";

/** Creates a merchant and its default profile in the caller's transaction (admin API and bootstrap). */
export async function createMerchant(
  em: EntityManager,
  clock: Clock,
  merchantName: string | undefined,
): Promise<{ merchant: MerchantRow; profile: ProfileRow }> {
  const created = clock.now();
  const merchant = em.create(MerchantRow, {
    merchantId: newId("mer"),
    merchantName: merchantName ?? null,
    defaultProfileId: newId("pro"),
    created,
  });
  const profile = newProfile(merchant.merchantId, merchant.defaultProfileId, created, { profileName: "default" });
  await em.insert(MerchantRow, merchant);
  await em.insert(ProfileRow, profile);
  return { merchant, profile };
}

/** What a profile charges and how long it holds captured money (decisions §11), as a create or update sends it. */
interface Pricing {
  processingFeeBps?: number;
  disputeFee?: bigint;
  settlementDelayDays?: number;
}

/** The pricing fields of a create or update request, each within its documented bounds. */
function pricingOf(req: Pricing): Pricing {
  return {
    processingFeeBps: bounded("processing_fee_bps", req.processingFeeBps, 0, 10_000),
    disputeFee: bounded("dispute_fee", req.disputeFee, 0n, 999_999_999_999n),
    settlementDelayDays: bounded("settlement_delay_days", req.settlementDelayDays, 0, 365),
  };
}

function newProfile(
  merchantId: string,
  profileId: string,
  created: Date,
  fields: { profileName?: string; returnUrl?: string; webhookUrl?: string } & Pricing,
): ProfileRow {
  return Object.assign(new ProfileRow(), {
    profileId,
    merchantId,
    profileName: fields.profileName ?? null,
    returnUrl: fields.returnUrl ?? null,
    webhookUrl: fields.webhookUrl ?? null,
    processingFeeBps: fields.processingFeeBps ?? 0,
    disputeFee: fields.disputeFee ?? 0n,
    settlementDelayDays: fields.settlementDelayDays ?? 2,
    webhookSecret: newWebhookSecret(),
    previousWebhookSecret: null,
    previousWebhookSecretUntil: null,
    created,
  });
}

/** The API view of a merchant row. */
export function toMerchant(row: MerchantRow): MessageInitShape<typeof MerchantSchema> {
  return {
    merchantId: row.merchantId,
    merchantName: row.merchantName ?? undefined,
    defaultProfileId: row.defaultProfileId,
    created: timestampFromDate(row.created),
  };
}

/** The API view of a profile row. */
export function toProfile(row: ProfileRow): MessageInitShape<typeof ProfileSchema> {
  return {
    profileId: row.profileId,
    merchantId: row.merchantId,
    profileName: row.profileName ?? undefined,
    returnUrl: row.returnUrl ?? undefined,
    webhookUrl: row.webhookUrl ?? undefined,
    webhookSecret: row.webhookSecret,
    processingFeeBps: row.processingFeeBps,
    disputeFee: row.disputeFee,
    settlementDelayDays: row.settlementDelayDays,
    created: timestampFromDate(row.created),
    previousWebhookSecretExpiresAt: row.previousWebhookSecretUntil === null ? undefined : timestampFromDate(row.previousWebhookSecretUntil),
  };
}

/** How long a rotated-out webhook secret still signs deliveries, so receivers can switch without losing any (as Stripe does). */
const rotationOverlapMs = 24 * 3_600_000;

/** A webhook_url as saved: an http(s) URL that never reaches a link-local or metadata address. */
async function webhookUrl(value: string): Promise<string> {
  const checked = url("webhook_url", value)!;
  const refusal = await refusalOfSavedUrl(checked);
  if (refusal !== undefined) throw invalidField("webhook_url", refusal);
  return checked;
}

/** What the merchants API needs: the database and time. */
export interface MerchantDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
}

/** Operator API for merchants and business profiles (decisions §2). */
export function merchantService(deps: MerchantDependencies): ServiceImpl<typeof MerchantService> {
  const { dataSource, clock, units } = deps;

  async function loadMerchant(merchantId: string): Promise<MerchantRow> {
    const row = await dataSource.getRepository(MerchantRow).findOneBy({ merchantId });
    if (row === null) throw notFound("Merchant", merchantId);
    return row;
  }

  async function loadProfile(merchantId: string, profileId: string): Promise<ProfileRow> {
    const row = await dataSource.getRepository(ProfileRow).findOneBy({ merchantId, profileId });
    if (row === null) throw notFound("Profile", profileId);
    return row;
  }

  return {
    async createMerchant(req, ctx) {
      const name = text("merchant_name", req.merchantName, 200);
      return units.commit(ctx, async (em) => toMerchant((await createMerchant(em, clock, name)).merchant));
    },

    async retrieveMerchant(req) {
      return toMerchant(await loadMerchant(req.merchantId));
    },

    async createProfile(req, ctx) {
      const fields = {
        profileName: text("profile_name", req.profileName, 200),
        returnUrl: url("return_url", req.returnUrl),
        webhookUrl: req.webhookUrl === undefined ? undefined : await webhookUrl(req.webhookUrl),
        ...pricingOf(req),
      };
      await loadMerchant(req.merchantId);
      const profile = newProfile(req.merchantId, newId("pro"), clock.now(), fields);
      return units.commit(ctx, async (em) => {
        await em.insert(ProfileRow, profile);
        return toProfile(profile);
      });
    },

    async retrieveProfile(req) {
      return toProfile(await loadProfile(req.merchantId, req.profileId));
    },

    async updateProfile(req, ctx) {
      const changes = {
        profileName: change(req.profileName, (v) => text("profile_name", v, 200)),
        returnUrl: change(req.returnUrl, (v) => url("return_url", v)),
        webhookUrl: req.webhookUrl === "" ? null : req.webhookUrl === undefined ? undefined : await webhookUrl(req.webhookUrl),
        ...pricingOf(req),
      };
      return units.commit(ctx, async (em) => {
        const profile = await em.findOne(ProfileRow, {
          where: { merchantId: req.merchantId, profileId: req.profileId },
          lock: { mode: "pessimistic_write" },
        });
        if (profile === null) throw notFound("Profile", req.profileId);
        for (const [key, value] of Object.entries(changes)) {
          if (value !== undefined) Object.assign(profile, { [key]: value });
        }
        if (req.rotateWebhookSecret === true) {
          profile.previousWebhookSecret = profile.webhookSecret;
          profile.previousWebhookSecretUntil = new Date(clock.now().getTime() + rotationOverlapMs);
          profile.webhookSecret = newWebhookSecret();
        }
        await em.save(profile);
        return toProfile(profile);
      });
    },
  };
}
