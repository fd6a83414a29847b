import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import {
  PayoutPrioritySchema,
  PayoutStatusSchema,
  PayoutTypeSchema,
  type BillingDetails,
  type PayoutService,
} from "../../gen/paymentservice/v1/payout_pb.js";
import { merchantOf } from "../auth/caller.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { sentWord } from "../enum-words.js";
import { invalidField, invalidRequest, missingField } from "../errors.js";
import type { NewJob } from "../jobs/runner.js";
import { runLocked, type LockedOperation } from "../objects/locked-operation.js";
import { findObject } from "../objects/resource.js";
import type { ProcessorRegistry } from "../processors/registry.js";
import { addressToStore } from "../validation/address.js";
import { email, phone, text } from "../validation/fields.js";
import { envelope, pageOf } from "../validation/list.js";
import { newMetadata } from "../validation/metadata.js";
import { amount, currency } from "../validation/money.js";
import { readDestination } from "./destination.js";
import { cancelOperation } from "./operations/cancel.js";
import { createPayout, type PayoutCreateDependencies } from "./operations/create.js";
import { fulfillOperation } from "./operations/fulfill.js";
import { updateOperation } from "./operations/update.js";
import { PayoutRow, type StoredBilling } from "./payout.entity.js";
import { route } from "./routing.js";
import { payoutResource } from "./store.js";
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

/** What the payouts API needs: what a create needs, the database, the payout processors, and the transactions of the other operations. */
export interface PayoutDependencies extends PayoutCreateDependencies {
  readonly dataSource: DataSource;
  readonly units: UnitOfWork;
  readonly processors: ProcessorRegistry;
}

/**
 * Payouts (interface §4, decisions §9): each call validates its request and runs its operation
 * (operations/). Create validates the destination and picks the processors that can send it
 * (routing.ts) before operations/create.ts writes the payout; the sending job (operations/send.ts)
 * sends it.
 */
export function payoutService(deps: PayoutDependencies): ServiceImpl<typeof PayoutService> {
  const { dataSource, clock } = deps;

  /** Runs an operation on a payout in the transaction that commits the call. */
  function changePayout(ctx: HandlerContext, operation: LockedOperation<PayoutRow, readonly NewJob[]>) {
    return deps.units.commit(ctx, async (em) => toPayout(await runLocked(em, clock, payoutResource, operation)));
  }

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
      return createPayout(deps, ctx, caller, {
        profileId: req.profileId,
        customerId: req.customerId === undefined || req.customerId === "" ? null : req.customerId,
        amount: payoutAmount,
        currency: payoutCurrency,
        payoutType,
        priority,
        email: email("email", req.email) ?? null,
        name: text("name", req.name, 200) ?? null,
        phone: phone("phone", req.phone) ?? null,
        destination,
        billing: billingOf(req.billing),
        preferredProcessor: preferred ?? null,
        processor: candidates[0]!.name,
        confirm: req.confirm ?? true,
        metadata: newMetadata("metadata", req.metadata),
      });
    },

    async updatePayout(req, ctx) {
      const caller = merchantOf(ctx);
      for (const [property, field] of notUpdatable) {
        if (req[property] !== undefined) {
          throw invalidRequest(`The field ${field} of a payout cannot be updated; only metadata can, create a new payout instead`);
        }
      }
      return changePayout(ctx, updateOperation(clock, caller, req.payoutId, req.metadata));
    },

    async retrievePayout(req, ctx) {
      const caller = merchantOf(ctx);
      return toPayout(await findObject(dataSource.manager, payoutResource, caller, req.payoutId));
    },

    async fulfillPayout(req, ctx) {
      const payout = await changePayout(ctx, fulfillOperation(clock, merchantOf(ctx), req.payoutId));
      deps.jobs.wake();
      return payout;
    },

    async cancelPayout(req, ctx) {
      return changePayout(ctx, cancelOperation(clock, merchantOf(ctx), req.payoutId));
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
