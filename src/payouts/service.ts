import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import {
  PayoutPrioritySchema,
  PayoutStatusSchema,
  PayoutTypeSchema,
  type BillingDetails,
  type PayoutService,
} from "../../gen/paymentservice/v1/payout_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import type { ObjectWriter } from "../objects/writer.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { findObject } from "../objects/resource.js";
import { sentWord } from "../enum-words.js";
import { invalidField, invalidRequest, missingField } from "../errors.js";
import { newId } from "../ids.js";
import type { JobWaker } from "../jobs/runner.js";
import type { ProcessorRegistry } from "../processors/registry.js";
import type { DataCipher } from "../secrets/data-cipher.js";
import { addressToStore } from "../validation/address.js";
import { email, phone, text } from "../validation/fields.js";
import { envelope, pageOf } from "../validation/list.js";
import { mergeMetadata, newMetadata } from "../validation/metadata.js";
import { amount, currency } from "../validation/money.js";
import { maskDestination, readDestination, sealDestination } from "./destination.js";
import { PayoutRow, type StoredBilling } from "./payout.entity.js";
import { route } from "./routing.js";
import { payoutStates } from "./states.js";
import { lockPayout, payoutResource, sendJobOf, writePayoutChange } from "./store.js";
import { toPayout } from "./view.js";

/** Payout types a destination can be given for: no wallet destination fields are defined (interface §2). */
function payoutTypeOf(value: number | undefined): "card" | "bank" {
  const word = sentWord(PayoutTypeSchema, value);
  if (word === undefined) throw missingField("payout_type");
  if (word !== "card" && word !== "bank") {
    throw invalidField("payout_type", "wallet payouts are not supported: no wallet destination can be given; use card or bank");
  }
  return word;
}

function billingOf(billing: BillingDetails | undefined): StoredBilling | null {
  if (billing === undefined) return null;
  const stored: StoredBilling = {};
  const address = billing.address === undefined ? null : addressToStore("billing.address", billing.address);
  if (address !== null) stored.address = address;
  const billingPhone = phone("billing.phone", billing.phone);
  if (billingPhone !== undefined && billingPhone !== "") stored.phone = billingPhone;
  const billingEmail = email("billing.email", billing.email === "" ? undefined : billing.email);
  if (billingEmail !== undefined) stored.email = billingEmail;
  return Object.keys(stored).length === 0 ? null : stored;
}

/** The fields of UpdatePayoutRequest besides metadata: sent at all, they are IR_06 naming the first. */
const notUpdatable = [
  ["amount", "amount"],
  ["currency", "currency"],
  ["profileId", "profile_id"],
  ["payoutType", "payout_type"],
  ["payoutMethodData", "payout_method_data"],
  ["priority", "priority"],
  ["customerId", "customer_id"],
  ["email", "email"],
  ["name", "name"],
  ["phone", "phone"],
  ["billing", "billing"],
  ["confirm", "confirm"],
  ["processor", "processor"],
] as const;

/** What the payouts API needs: the database, time, the payout processors, the destination cipher, the job runner to wake. */
export interface PayoutDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly writer: ObjectWriter;
  readonly units: UnitOfWork;
  readonly processors: ProcessorRegistry;
  readonly dataCipher: DataCipher;
  readonly jobs: JobWaker;
}

/**
 * Payouts (interface §4, decisions §9). Create validates the destination and picks the processors
 * that can send it (src/payouts/routing.ts), then writes the payout — its destination encrypted —
 * with its event and, when confirmed, its sending job; the job runner sends it right after the
 * commit (src/payouts/jobs.ts).
 */
export function payoutService(deps: PayoutDependencies): ServiceImpl<typeof PayoutService> {
  const { dataSource, clock } = deps;

  return {
    async createPayout(req, ctx) {
      const caller = merchantOf(ctx);
      const processors = deps.processors.payoutRailsFor(caller.livemode);
      const payoutAmount = amount("amount", req.amount);
      const payoutCurrency = currency("currency", req.currency);
      if (req.profileId === undefined || req.profileId === "") throw missingField("profile_id");
      const payoutType = payoutTypeOf(req.payoutType);
      const priority = (sentWord(PayoutPrioritySchema, req.priority) ?? "regular") as PayoutRow["priority"];
      const preferred = req.processor === undefined || req.processor === "" ? undefined : req.processor;
      const candidates = route(processors, { payoutType, priority, currency: payoutCurrency, amount: payoutAmount, preferred });
      const now = clock.now();
      const destination = readDestination(req.payoutMethodData, payoutType, candidates, now);
      const confirm = req.confirm ?? true;
      const owner = { merchantId: caller.merchantId, livemode: caller.livemode, payoutId: newId("po") };
      const row = Object.assign(new PayoutRow(), {
        ...owner,
        profileId: req.profileId,
        customerId: req.customerId === undefined || req.customerId === "" ? null : req.customerId,
        status: confirm ? "pending" : "requires_fulfillment",
        amount: payoutAmount,
        currency: payoutCurrency,
        payoutType,
        priority,
        email: email("email", req.email) ?? null,
        name: text("name", req.name, 200) ?? null,
        phone: phone("phone", req.phone) ?? null,
        destination: maskDestination(destination),
        destinationCiphertext: sealDestination(deps.dataCipher, owner, destination),
        billing: billingOf(req.billing),
        preferredProcessor: preferred ?? null,
        processor: candidates[0]!.name,
        confirm,
        errorCode: null,
        errorMessage: null,
        attempts: [],
        metadata: newMetadata("metadata", req.metadata),
        created: now,
        updated: now,
      } satisfies PayoutRow);
      const payout = await deps.writer.create(ctx, payoutResource, row, confirm ? [sendJobOf(row, now)] : []);
      if (confirm) deps.jobs.wake();
      return payout;
    },

    async updatePayout(req, ctx) {
      const caller = merchantOf(ctx);
      for (const [property, field] of notUpdatable) {
        if (req[property] !== undefined) {
          throw invalidRequest(`The field ${field} of a payout cannot be updated; only metadata can, create a new payout instead`);
        }
      }
      return deps.units.commit(ctx, async (em) => {
        const row = await lockPayout(em, caller, req.payoutId);
        row.metadata = mergeMetadata("metadata", row.metadata, req.metadata);
        row.updated = clock.now();
        await writePayoutChange(em, clock, row, row.status);
        return toPayout(row);
      });
    },

    async retrievePayout(req, ctx) {
      const caller = merchantOf(ctx);
      return toPayout(await findObject(dataSource.manager, payoutResource, caller, req.payoutId));
    },

    async fulfillPayout(req, ctx) {
      const caller = merchantOf(ctx);
      const payout = await deps.units.commit(ctx, async (em) => {
        const row = await lockPayout(em, caller, req.payoutId);
        payoutStates.guard("fulfill", row.status);
        const now = clock.now();
        payoutStates.move(row, "fulfill", "pending");
        row.updated = now;
        await writePayoutChange(em, clock, row, "requires_fulfillment", [sendJobOf(row, now)]);
        return toPayout(row);
      });
      deps.jobs.wake();
      return payout;
    },

    async cancelPayout(req, ctx) {
      const caller = merchantOf(ctx);
      return deps.units.commit(ctx, async (em) => {
        const row = await lockPayout(em, caller, req.payoutId);
        payoutStates.guard("cancel", row.status);
        payoutStates.move(row, "cancel", "cancelled");
        row.updated = clock.now();
        await writePayoutChange(em, clock, row, "requires_fulfillment");
        return toPayout(row);
      });
    },

    async listPayouts(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const query = scopedQuery(dataSource, PayoutRow, "p", caller);
      const status = sentWord(PayoutStatusSchema, req.status);
      if (status !== undefined) query.andWhere("p.status = :status", { status });
      if (req.customerId !== undefined) query.andWhere("p.customer_id = :customerId", { customerId: req.customerId });
      const payoutType = sentWord(PayoutTypeSchema, req.payoutType);
      if (payoutType !== undefined) query.andWhere("p.payout_type = :payoutType", { payoutType });
      if (req.currency !== undefined) query.andWhere("p.currency = :currency", { currency: currency("currency", req.currency) });
      const [rows, total] = await fetchPage(query, ["created", "payout_id"], page);
      return envelope(rows.map(toPayout), total, page);
    },
  };
}
