import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource, EntityManager } from "typeorm";
import type { PaymentMethodService } from "../../gen/paymentservice/v1/payment_method_pb.js";
import { PaymentMethodSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { sentWord } from "../enum-words.js";
import { forbidden, invalidField, invalidRequest, missingField, notFound, preconditionFailed } from "../errors.js";
import { assertNotExpired, readExpiry, readSavedCard } from "../processors/card.js";
import type { ProcessorRegistry } from "../processors/registry.js";
import { addressToStore } from "../validation/address.js";
import { change, text } from "../validation/fields.js";
import { envelope, pageOf } from "../validation/list.js";
import { mergeMetadata, newMetadata } from "../validation/metadata.js";
import { writePaymentMethodEvent } from "./events.js";
import { PaymentMethodRow } from "./payment-method.entity.js";
import { assertCustomerExists, deletePaymentMethods, liveMethod, lockCustomersCard, lockPaymentMethod, tokenLifetimeMs } from "./store.js";
import { newCardPaymentMethod, type VaultSecrets } from "./vault.js";
import { toPaymentMethod } from "./view.js";

/**
 * The customer's payment method `saved` given the expiry and holder of the same card saved again
 * (`again`): the newest details the customer gave win, and a holder left out keeps the one known.
 */
function renewedBy(saved: PaymentMethodRow, again: PaymentMethodRow, now: Date): PaymentMethodRow {
  return Object.assign(saved, {
    cardExpMonth: again.cardExpMonth,
    cardExpYear: again.cardExpYear,
    cardHolderName: again.cardHolderName ?? saved.cardHolderName,
    updated: now,
  });
}

/**
 * Writes the customer's payment method `saved` renewed by the same card saved again; one still pending
 * on a payment that saves it is the customer's from now on, announced attached.
 */
async function saveAgain(em: EntityManager, clock: Clock, saved: PaymentMethodRow, again: PaymentMethodRow): Promise<PaymentMethodRow> {
  const pending = saved.pendingPaymentId !== null;
  renewedBy(saved, again, clock.now());
  if (pending) Object.assign(saved, { pendingPaymentId: null, expiresAt: null });
  await em.save(saved);
  if (pending) await writePaymentMethodEvent(em, clock, saved, "attached");
  return saved;
}

/** What the payment methods API needs: the database, time, the processors (which cards they take), the vault's secrets. */
export interface PaymentMethodDependencies extends VaultSecrets {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
  readonly processors: ProcessorRegistry;
}

/**
 * Saved payment methods (decisions §10, docs/payment-methods.md): create (a client-side token with a
 * publishable key, or a customer's card with a secret key), retrieve, update, attach, delete, and a
 * customer's list. A customer has one payment method per card: saving or attaching a card it has
 * already updates that one.
 */
export function paymentMethodService(deps: PaymentMethodDependencies): ServiceImpl<typeof PaymentMethodService> {
  const { dataSource, clock, units } = deps;

  return {
    async createPaymentMethod(req, ctx) {
      const caller = merchantOf(ctx);
      const customerId = req.customerId === undefined || req.customerId === "" ? undefined : req.customerId;
      if (caller.publishable && customerId !== undefined) {
        throw forbidden("A publishable key makes client-side tokens, attached to no customer: attach one with a secret key");
      }
      const method = sentWord(PaymentMethodSchema, req.paymentMethod);
      if (method === undefined) throw missingField("payment_method");
      if (method !== "card") throw invalidField("payment_method", `${method} cannot be saved; use card`);
      if (req.card === undefined) throw missingField("card");
      const now = clock.now();
      const card = readSavedCard(req.card, "card", now);
      deps.processors.forNewPayment(caller.livemode).checkCard(card, "card");
      const billing = req.billing === undefined ? null : addressToStore("billing", req.billing);
      const metadata = newMetadata("metadata", req.metadata);
      const { row, fingerprints } = newCardPaymentMethod(
        deps,
        caller,
        card,
        {
          customerId: customerId ?? null,
          billing,
          metadata,
          expiresAt: customerId === undefined ? new Date(now.getTime() + tokenLifetimeMs) : null,
          pendingPaymentId: null,
        },
        now,
      );
      return units.commit(ctx, async (em) => {
        if (customerId !== undefined) {
          await assertCustomerExists(em, caller, customerId, "customer_id", "lock");
          const saved = await lockCustomersCard(em, caller, customerId, fingerprints);
          if (saved !== null) return toPaymentMethod(await saveAgain(em, clock, saved, row));
        }
        await em.insert(PaymentMethodRow, row);
        if (customerId !== undefined) await writePaymentMethodEvent(em, clock, row, "attached");
        return toPaymentMethod(row);
      });
    },

    async retrievePaymentMethod(req, ctx) {
      const row = await dataSource.getRepository(PaymentMethodRow).findOneBy(liveMethod(merchantOf(ctx), req.paymentMethodId));
      if (row === null) throw notFound("Payment method", req.paymentMethodId);
      return toPaymentMethod(row);
    },

    async updatePaymentMethod(req, ctx) {
      const caller = merchantOf(ctx);
      if (req.cardNumber !== undefined) {
        throw invalidRequest("The field card_number of a payment method cannot be updated; save the new card as a payment method instead");
      }
      const holder = change(req.cardHolderName, (v) => text("card_holder_name", v, 100));
      const billing = req.billing === undefined ? undefined : addressToStore("billing", req.billing);
      return units.commit(ctx, async (em) => {
        const row = await lockPaymentMethod(em, caller, req.paymentMethodId);
        if (req.cardExpMonth !== undefined || req.cardExpYear !== undefined) {
          const expiry = readExpiry(req.cardExpMonth ?? String(row.cardExpMonth), req.cardExpYear ?? String(row.cardExpYear), {
            month: "card_exp_month",
            year: "card_exp_year",
          });
          assertNotExpired(expiry, "card", clock.now());
          row.cardExpMonth = expiry.expMonth;
          row.cardExpYear = expiry.expYear;
        }
        if (holder !== undefined) row.cardHolderName = holder ?? null;
        if (billing !== undefined) row.billing = billing;
        row.metadata = mergeMetadata("metadata", row.metadata, req.metadata);
        row.updated = clock.now();
        await em.save(row);
        return toPaymentMethod(row);
      });
    },

    async attachPaymentMethod(req, ctx) {
      const caller = merchantOf(ctx);
      if (req.customerId === "") throw missingField("customer_id");
      return units.commit(ctx, async (em) => {
        // The customer first, as every save of a card for it (store.ts).
        await assertCustomerExists(em, caller, req.customerId, "customer_id", "lock");
        const row = await lockPaymentMethod(em, caller, req.paymentMethodId);
        if (row.customerId === req.customerId) return toPaymentMethod(row);
        if (row.customerId !== null) throw preconditionFailed("This payment method is attached to another customer");
        const now = clock.now();
        const saved = await lockCustomersCard(em, caller, req.customerId, [row.cardFingerprint]);
        if (saved !== null) {
          // The customer has this card already: the token updates it and is used up.
          await saveAgain(em, clock, saved, row);
          await deletePaymentMethods(em, clock, caller, { paymentMethodId: row.paymentMethodId });
          return toPaymentMethod(saved);
        }
        Object.assign(row, { customerId: req.customerId, expiresAt: null, updated: now });
        await em.save(row);
        await writePaymentMethodEvent(em, clock, row, "attached");
        return toPaymentMethod(row);
      });
    },

    async deletePaymentMethod(req, ctx) {
      const caller = merchantOf(ctx);
      return units.commit(ctx, async (em) => {
        const deleted = await deletePaymentMethods(em, clock, caller, { paymentMethodId: req.paymentMethodId });
        if (deleted === 0) throw notFound("Payment method", req.paymentMethodId);
        return { paymentMethodId: req.paymentMethodId, deleted: true };
      });
    },

    async listCustomerPaymentMethods(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      await assertCustomerExists(dataSource.manager, caller, req.customerId, "customer_id", "read");
      const query = scopedQuery(dataSource, PaymentMethodRow, "m", caller)
        .andWhere("m.customer_id = :customerId", { customerId: req.customerId })
        .andWhere("m.deleted_at IS NULL AND m.pending_payment_id IS NULL");
      const [rows, total] = await fetchPage(query, ["created", "payment_method_id"], page);
      return envelope(rows.map(toPaymentMethod), total, page);
    },
  };
}
