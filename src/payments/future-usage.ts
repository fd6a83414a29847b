import type { EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { settleMandate, takeMandate, type MandateTerms } from "../mandates/charge.js";
import { writeSetupMandate } from "../mandates/setup.js";
import type { Alongside } from "../objects/writer.js";
import { saveForPayment, settleSavedCard, type CardSavingDependencies } from "../payment-methods/setup.js";
import type { CardDetails } from "../processors/processor.js";
import type { CustomerAcceptance, MandateData } from "../../gen/paymentservice/v1/payment_pb.js";
import { invalidField, invalidRequest, missingField } from "../errors.js";
import { newId } from "../ids.js";
import { customerAcceptance, mandateRequest } from "../mandates/request.js";
import type { SavedCard } from "../payment-methods/pay-with.js";
import type { PaymentRow, PaymentStatusWord, SetupFutureUsageWord, StoredAttempt } from "./payment.entity.js";

/*
 * What a payment writes besides itself for its card's future use (decisions §10), in the transactions
 * of its record and of its outcome (objects/writer.ts, Alongside):
 * - a setup (setup_future_usage) saves its card for its customer with its record, pending, and its
 *   outcome settles it: the customer's once the payment succeeds or is authorized, with the mandate an
 *   off-session setup asked for; deleted, and no mandate, if it fails;
 * - a merchant-initiated payment (off_session) takes its single-use mandate with its record, and its
 *   outcome uses the mandate up, or gives it back when nothing was charged.
 */

/** What a payment's record writes besides it: the card it saves, the single-use mandate it takes. */
export interface RecordAlongside {
  /** The card to save for the payment's customer, when the payment is a setup. */
  readonly save?: { readonly card: CardDetails; readonly token?: string };
  /** The mandate an off-session payment is made under: taken with the record when single-use. */
  readonly mandate?: MandateTerms;
}

/**
 * The writes of the record of `row`'s attempt, undefined when there are none. Saving the card sets
 * the payment method the payment shows (the customer's card it has already, or the one saved now).
 */
export function recordAlongside(deps: CardSavingDependencies, row: PaymentRow, what: RecordAlongside): Alongside | undefined {
  const save = what.save;
  // A multi-use mandate is checked, not taken: its payments are recorded in batches as any.
  const mandate = what.mandate?.type === "single_use" ? what.mandate : undefined;
  if (save === undefined && mandate === undefined) return undefined;
  return async (em) => {
    if (mandate !== undefined) await takeMandate(em, row, mandate, row.paymentId);
    if (save !== undefined) {
      row.paymentMethodId = await saveForPayment(em, deps, row, {
        customerId: row.customerId!,
        paymentId: row.paymentId,
        card: save.card,
        token: save.token,
      });
    }
  };
}

/** What a create or confirm asks of the card's future use (decisions §10). */
export interface SetupRequest {
  readonly setupFutureUsage: SetupFutureUsageWord | undefined;
  readonly customerAcceptance: CustomerAcceptance | undefined;
  readonly mandateData: MandateData | undefined;
}

/**
 * Sets on `row` what a setup asks: what its card is saved for and, off-session, the mandate it asks
 * for (customer_acceptance required, IR_04), with the id the mandate will have. A confirm that asks
 * nothing keeps what the payment's create asked; mandate_data without an off-session setup is IR_05.
 */
export function applySetup(row: PaymentRow, request: SetupRequest, now: Date): void {
  const usage = request.setupFutureUsage ?? row.setupFutureUsage ?? undefined;
  if (request.mandateData !== undefined && usage !== "off_session") {
    throw invalidField("mandate_data", "only applies with setup_future_usage off_session");
  }
  if (usage === undefined) return;
  row.setupFutureUsage = usage;
  if (usage === "on_session") {
    Object.assign(row, { mandateRequest: null, mandateId: null });
    return;
  }
  const stored = row.mandateRequest;
  if (request.setupFutureUsage === undefined && request.mandateData === undefined && stored !== null) {
    // A confirm of the merchant's setup: the customer's acceptance, when it brings one, is the mandate's.
    if (request.customerAcceptance !== undefined) {
      row.mandateRequest = { ...stored, customer_acceptance: customerAcceptance(request.customerAcceptance, now) };
    }
    return;
  }
  row.mandateRequest = mandateRequest(request.customerAcceptance, request.mandateData, row.currency, now);
  row.mandateId ??= newId("man");
}

/**
 * What a merchant-initiated payment needs besides its mandate: confirmed at once (IR_05 naming
 * off_session), a saved payment method (IR_04) rather than card details (IR_05), and no setup of its
 * own (IR_06).
 */
export function assertOffSession(
  confirm: boolean,
  setupFutureUsage: SetupFutureUsageWord | undefined,
  sent: CardDetails | undefined,
  paymentMethodId: string | undefined,
): void {
  if (!confirm) throw invalidField("off_session", "a merchant-initiated payment is confirmed at once: send confirm: true");
  if (setupFutureUsage !== undefined) {
    throw invalidRequest("Send off_session to charge a saved card under its mandate, or setup_future_usage to save one, not both");
  }
  if (sent !== undefined) {
    throw invalidField("payment_method_data", "an off-session payment charges a saved card: send payment_method_id instead");
  }
  if (paymentMethodId === undefined) throw missingField("payment_method_id");
}

/** A payment that saves its card needs a customer to save it for, its own or its saved payment method's. */
export function assertSetupCustomer(row: PaymentRow): void {
  if (row.setupFutureUsage !== null && row.customerId === null) throw missingField("customer_id");
}

/** The card a setup saves with its record: one sent with the request, or the client-side token it pays with. */
export function cardToSave(sent: CardDetails | undefined, saved: SavedCard | undefined): { card: CardDetails; token?: string } | undefined {
  if (sent !== undefined) return { card: sent };
  if (saved !== undefined && saved.customerId === null) return { card: saved.card, token: saved.paymentMethodId };
  return undefined;
}

/** Statuses in which a payment has charged or holds its money: the card is good. */
const authorized: ReadonlySet<PaymentStatusWord> = new Set(["succeeded", "requires_capture"]);

/** Statuses in which a payment that was not authorized has ended, or waits for another card. */
const notAuthorized: ReadonlySet<PaymentStatusWord> = new Set(["failed", "cancelled", "requires_payment_method"]);

/**
 * The writes of the outcome of `attempt` (undefined: of a move without a processor call) moving `row`
 * from `previous`, undefined when there are none: only the outcome that first tells whether a setup,
 * or a payment that took a single-use mandate, was authorized has any; an off-session payment under
 * a multi-use mandate has none, and is written in a batch as any payment. What
 * they change of the payment itself (the mandate it shows) is changed on `row` at once, before its
 * view answers the call.
 */
export function outcomeAlongside(
  clock: Clock,
  previous: PaymentStatusWord,
  row: PaymentRow,
  attempt: StoredAttempt | undefined,
): Alongside | undefined {
  const takenMandate = attempt?.call === "authorize" ? attempt.singleUseMandate : undefined;
  if (row.setupFutureUsage === null && takenMandate === undefined) return undefined;
  if (previous === row.status || authorized.has(previous)) return undefined;
  const charged = authorized.has(row.status);
  if (!charged && !notAuthorized.has(row.status)) return undefined;
  const saved = row.setupFutureUsage === null ? null : row.paymentMethodId;
  const mandate = saved !== null && charged && row.mandateId !== null ? row.mandateRequest : null;
  // A setup's mandate is written now or never; one waiting for another card keeps its request for the confirm that brings one.
  if (row.mandateRequest !== null && (charged || row.status !== "requires_payment_method")) {
    Object.assign(row, { mandateRequest: null, mandateId: charged ? row.mandateId : null });
  }
  const card = row.card;
  const expiry = card === null ? undefined : { month: Number(card.exp_month), year: Number(card.exp_year) };
  return async (em: EntityManager) => {
    if (takenMandate !== undefined) await settleMandate(em, clock, row, takenMandate, row.paymentId, charged);
    if (saved === null) return;
    await settleSavedCard(em, clock, row, { paymentId: row.paymentId, paymentMethodId: saved, profileId: row.profileId, expiry }, charged);
    if (mandate === null) return;
    await writeSetupMandate(
      em,
      clock,
      {
        merchantId: row.merchantId,
        livemode: row.livemode,
        profileId: row.profileId,
        customerId: row.customerId!,
        paymentMethodId: saved,
        mandateId: row.mandateId!,
      },
      mandate,
    );
  };
}
