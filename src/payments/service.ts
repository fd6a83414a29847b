import { timestampToDate } from "../validation/time.js";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { IsNull, type EntityManager } from "typeorm";
import {
  type CaptureMethod,
  CaptureMethodSchema,
  type PaymentMethod,
  PaymentMethodSchema,
  PaymentStatusSchema,
  type PaymentMethodDataInput,
  type PaymentService,
  type SetupFutureUsage,
  SetupFutureUsageSchema,
} from "../../gen/paymentservice/v1/payment_pb.js";
import { merchantOf, type MerchantCaller } from "../auth/caller.js";
import { secretsEqual } from "../auth/api-key-secret.js";
import { CustomerRow } from "../customers/customer.entity.js";
import { sentWord } from "../enum-words.js";
import { forbidden, invalidField, invalidRequest, missingField, notFound } from "../errors.js";
import type { Clock } from "../clock.js";
import { waitingForClaims } from "../objects/claims.js";
import { runLocked } from "../objects/locked-operation.js";
import { idempotentCallKey, type UnitOfWork } from "../db/unit-of-work.js";
import { callerIdProblem, createdId, randomBase62 } from "../ids.js";
import { payingCustomer, savedCard } from "../payment-methods/pay-with.js";
import type { CardSavingDependencies } from "../payment-methods/setup.js";
import { mandateToCharge } from "../mandates/charge.js";
import { readCard } from "../processors/card.js";
import type { CardDetails, Processor } from "../processors/processor.js";
import { email, text, url } from "../validation/fields.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { envelope, pageOf } from "../validation/list.js";
import { mergeMetadata, newMetadata } from "../validation/metadata.js";
import { amount, currency, positiveAmount } from "../validation/money.js";
import { PaymentRow, type CaptureMethodWord, type SetupFutureUsageWord } from "./payment.entity.js";
import { applySetup, assertOffSession, assertSetupCustomer, cardToSave, recordAlongside } from "./future-usage.js";
import { findObject } from "../objects/resource.js";
import { paymentResource } from "./store.js";
import { operateOnPayment, type ApiCall, type PaymentOperation, type PaymentOperationDependencies } from "./operation.js";
import { cancelOperation } from "./operations/cancel.js";
import { captureOperation } from "./operations/capture.js";
import { authorization, confirmOperation } from "./operations/confirm.js";
import { createConfirmed } from "./operations/create.js";
import { updateOperation } from "./operations/update.js";
import { toPayment } from "./view.js";

/** What the payments API needs: what its operations need, the transactions of an update, and what saved cards need. */
export interface PaymentDependencies extends PaymentOperationDependencies, CardSavingDependencies {
  readonly units: UnitOfWork;
}

/** IR_06: a payment is paid with the card sent or with a saved one, never both. */
function bothPaymentMethods() {
  return invalidRequest("Send payment_method_data or payment_method_id, not both");
}

/** Card details from a request, checked by the processor that will see them. */
function requestedCard(clock: Clock, processor: Processor, data: PaymentMethodDataInput | undefined): CardDetails | undefined {
  if (data?.card === undefined) return undefined;
  const field = "payment_method_data.card";
  const card = readCard(data.card, field, clock.now());
  processor.checkCard(card, field);
  return card;
}

/** Only cards are processed today; other methods are accepted by the API but not yet by a processor. */
function paymentMethodWord(method: PaymentMethod | undefined, paysWithCard: boolean): string | undefined {
  const word = sentWord(PaymentMethodSchema, method);
  if (word !== undefined && word !== "card") throw invalidField("payment_method", `${word} is not supported yet; use card`);
  return word === undefined && !paysWithCard ? undefined : "card";
}

/** The amount of a new payment: 0 only for a setup, which saves the card without charging it. */
function paymentAmount(value: bigint | undefined, setup: SetupFutureUsageWord | undefined): bigint {
  if (value !== 0n) return amount("amount", value);
  if (setup === undefined) {
    throw invalidField("amount", "expected an integer from 1 (smallest currency unit); 0 only saves a card, with setup_future_usage");
  }
  return 0n;
}

function setupFutureUsageWord(value: SetupFutureUsage | undefined): SetupFutureUsageWord | undefined {
  return sentWord(SetupFutureUsageSchema, value) as SetupFutureUsageWord | undefined;
}

function captureMethodWord(method: CaptureMethod | undefined): CaptureMethodWord {
  return (sentWord(CaptureMethodSchema, method) ?? "automatic") as CaptureMethodWord;
}

/**
 * capture_on belongs to scheduled capture only, and must lie ahead, when the request is first tried:
 * a retry with the key of a try that recorded the payment (a database failover, a crash) may come
 * after capture_on, and refusing it would leave that payment without its key's answer (the job
 * captures it once due, at once if it is past).
 */
function captureOn(clock: Clock, method: CaptureMethodWord, value: Timestamp | undefined, retried: boolean): Date | null {
  if (method !== "scheduled") {
    if (value !== undefined) throw invalidField("capture_on", "only applies when capture_method is scheduled");
    return null;
  }
  if (value === undefined) throw missingField("capture_on");
  const at = timestampToDate(value);
  if (at <= clock.now() && !retried) throw invalidField("capture_on", "must be in the future");
  return at;
}

/** A publishable key may act on a payment only with that payment's client_secret (decisions §2). */
function assertClientSecret(caller: MerchantCaller, row: PaymentRow, clientSecret: string | undefined): void {
  if (!caller.publishable) return;
  if (clientSecret === undefined || clientSecret === "") throw missingField("client_secret");
  if (!secretsEqual(clientSecret, row.clientSecret)) {
    throw forbidden("The client_secret does not match this payment");
  }
}

async function assertCustomer(em: EntityManager, caller: MerchantCaller, customerId: string): Promise<void> {
  const exists = await em.existsBy(CustomerRow, {
    merchantId: caller.merchantId,
    livemode: caller.livemode,
    customerId,
    deletedAt: IsNull(),
  });
  if (!exists) throw notFound("Customer", customerId, "customer_id");
}

/**
 * Payments (interface §4, decisions §4). Each call validates its request, then runs its operation
 * (operation.ts): claim the payment, record the processor call, make it with no transaction open,
 * write the outcome with its event and jobs as the call's effect. An update, which calls no
 * processor, locks the payment in the transaction that commits it.
 */
export function paymentService(deps: PaymentDependencies): ServiceImpl<typeof PaymentService> {
  const { dataSource, clock, units } = deps;

  /** Runs an operation on the payment as the API call `ctx`, answering the payment as the operation left it. */
  async function operate(ctx: HandlerContext, paymentId: string, operation: PaymentOperation) {
    const operated = await operateOnPayment(deps, merchantOf(ctx), paymentId, operation, apiCall(ctx));
    return toPayment(operated!.row);
  }

  /**
   * The saved card a confirm pays with, read before the payment is claimed (its card is needed for
   * the move): checked against the payment's customer, and the caller's right to confirm it first, so
   * a token is never taken for a payment the caller may not confirm.
   */
  async function savedCardToConfirm(caller: MerchantCaller, paymentId: string, paymentMethodId: string, clientSecret: string | undefined) {
    const payment = await findObject(dataSource.manager, paymentResource, caller, paymentId);
    assertClientSecret(caller, payment, clientSecret);
    return savedCard(deps, caller, paymentMethodId, payment);
  }

  return {
    async createPayment(req, ctx) {
      const caller = merchantOf(ctx);
      const processor = deps.processors.forNewPayment(caller.livemode);
      const setupFutureUsage = setupFutureUsageWord(req.setupFutureUsage);
      const amountToCharge = paymentAmount(req.amount, setupFutureUsage);
      const paymentCurrency = currency("currency", req.currency);
      if (req.profileId === undefined || req.profileId === "") throw missingField("profile_id");
      const idProblem = req.paymentId === undefined ? undefined : callerIdProblem(req.paymentId);
      if (idProblem !== undefined) throw invalidField("payment_id", idProblem);
      const sent = requestedCard(clock, processor, req.paymentMethodData);
      if (sent !== undefined && req.paymentMethodId !== undefined) throw bothPaymentMethods();
      const paysWithCard = sent !== undefined || req.paymentMethodId !== undefined;
      const offSession = req.offSession === true;
      if (offSession) assertOffSession(req.confirm === true, setupFutureUsage, sent, req.paymentMethodId);
      else if (req.mandateId !== undefined) throw invalidField("mandate_id", "only applies to off_session payments");
      if (req.confirm === true && !paysWithCard) throw missingField("payment_method_data.card");
      if (req.confirm !== true && sent !== undefined) {
        throw invalidField(
          "payment_method_data",
          "card details are never stored, so send them with confirm: true or to /payments/:payment_id/confirm",
        );
      }
      if (req.confirm !== true && req.paymentMethodId !== undefined) {
        throw invalidField("payment_method_id", "a saved payment method pays with confirm: true, or sent to /payments/:payment_id/confirm");
      }
      const method = captureMethodWord(req.captureMethod);
      if (amountToCharge === 0n && method !== "automatic") {
        throw invalidField("capture_method", "a zero-amount setup captures nothing; leave capture_method out");
      }
      const now = clock.now();
      // Only a create that records the payment before its processor is asked can be retried into its own record.
      const effectSeed = req.paymentId === undefined && paysWithCard ? ctx.values.get(idempotentCallKey)?.effectSeed : undefined;
      const paymentId = req.paymentId ?? createdId("pay", effectSeed);
      const fields: PaymentRow = {
        merchantId: caller.merchantId,
        livemode: caller.livemode,
        paymentId,
        profileId: req.profileId,
        status: "requires_payment_method",
        amount: amountToCharge,
        currency: paymentCurrency,
        amountCapturable: 0n,
        amountReceived: null,
        captureMethod: method,
        captureOn: captureOn(clock, method, req.captureOn, ctx.values.get(idempotentCallKey)?.retried === true),
        paymentMethod: paymentMethodWord(req.paymentMethod, paysWithCard) ?? null,
        paymentMethodType: text("payment_method_type", req.paymentMethodType, 32) ?? null,
        paymentMethodId: null,
        card: null,
        customerId: req.customerId ?? null,
        setupFutureUsage: null,
        offSession,
        mandateId: null,
        mandateRequest: null,
        email: email("email", req.email) ?? null,
        description: text("description", req.description, 1000) ?? null,
        statementDescriptor: text("statement_descriptor", req.statementDescriptor, 22) ?? null,
        returnUrl: url("return_url", req.returnUrl) ?? null,
        clientSecret: `${paymentId}_secret_${randomBase62(24)}`,
        nextAction: null,
        errorCode: null,
        errorMessage: null,
        cancellationReason: null,
        metadata: newMetadata("metadata", req.metadata),
        processor: null,
        processorReference: null,
        authenticationToken: null,
        created: now,
        modifiedAt: now,
        claimToken: null,
        claimedUntil: null,
        claimedBy: null,
        attempt: null,
      };
      const row = Object.assign(new PaymentRow(), fields);
      applySetup(row, { setupFutureUsage, customerAcceptance: req.customerAcceptance, mandateData: req.mandateData }, now);
      // Taken for the payment once every field of the request is known to be valid.
      const saved =
        req.paymentMethodId === undefined ? undefined : await savedCard(deps, caller, req.paymentMethodId, { ...row, offSession });
      if (saved !== undefined)
        Object.assign(row, { customerId: payingCustomer(saved, row.customerId), paymentMethodId: saved.paymentMethodId });
      assertSetupCustomer(row);
      const mandate = offSession
        ? await mandateToCharge(
            dataSource,
            caller,
            { paymentId, paymentMethodId: saved!.paymentMethodId, amount: row.amount, currency: row.currency },
            req.mandateId,
          )
        : undefined;
      if (mandate !== undefined) row.mandateId = mandate.mandateId;
      const card = sent ?? saved?.card;
      if (card === undefined) return deps.writer.create(ctx, paymentResource, row, []);
      const authorize = authorization(deps, row, processor.name, card);
      const attempt = mandate?.type === "single_use" ? { ...authorize, singleUseMandate: mandate.mandateId } : authorize;
      const save = row.setupFutureUsage === null ? undefined : cardToSave(sent, saved);
      const alongside = recordAlongside(deps, row, { save, mandate });
      const created = await createConfirmed(deps, row, attempt, card, apiCall(ctx), effectSeed !== undefined, alongside);
      return toPayment(created.row);
    },

    async updatePayment(req, ctx) {
      const caller = merchantOf(ctx);
      const newAmount = req.amount === undefined ? undefined : positiveAmount("amount", req.amount);
      const newCurrency = req.currency === undefined ? undefined : currency("currency", req.currency);
      const changes: Partial<PaymentRow> = {};
      if (req.description !== undefined) changes.description = text("description", req.description, 1000) || null;
      if (req.email !== undefined) changes.email = email("email", req.email || undefined) ?? null;
      if (req.returnUrl !== undefined) changes.returnUrl = url("return_url", req.returnUrl || undefined) ?? null;
      if (req.statementDescriptor !== undefined) {
        changes.statementDescriptor = text("statement_descriptor", req.statementDescriptor, 22) || null;
      }
      const update = updateOperation(clock, caller, req.paymentId, {
        amount: newAmount,
        async apply(row, em) {
          if (req.customerId !== undefined) {
            if (req.customerId !== "") await assertCustomer(em, caller, req.customerId);
            changes.customerId = req.customerId || null;
          }
          if (req.captureMethod !== undefined || req.captureOn !== undefined) {
            changes.captureMethod = req.captureMethod === undefined ? row.captureMethod : captureMethodWord(req.captureMethod);
            changes.captureOn = captureOn(clock, changes.captureMethod, req.captureOn ?? undefined, false);
          }
          Object.assign(row, changes);
          if (newCurrency !== undefined) row.currency = newCurrency;
          row.metadata = mergeMetadata("metadata", row.metadata, req.metadata);
        },
      });
      const commit = () => units.commit(ctx, async (em) => toPayment(await runLocked(em, clock, paymentResource, update)));
      return waitingForClaims(commit, ctx.signal);
    },

    async retrievePayment(req, ctx) {
      const caller = merchantOf(ctx);
      const row = await findObject(dataSource.manager, paymentResource, caller, req.paymentId);
      assertClientSecret(caller, row, req.clientSecret);
      return toPayment(row);
    },

    async confirmPayment(req, ctx) {
      const caller = merchantOf(ctx);
      const processor = deps.processors.forNewPayment(caller.livemode);
      const sent = requestedCard(clock, processor, req.paymentMethodData);
      if (sent !== undefined && req.paymentMethodId !== undefined) throw bothPaymentMethods();
      if (sent === undefined && req.paymentMethodId === undefined) throw missingField("payment_method_data.card");
      paymentMethodWord(req.paymentMethod, true);
      // What is saved, and what a mandate allows, is the merchant's to decide (decisions §10: a publishable key makes tokens, nothing more).
      if (caller.publishable && (req.setupFutureUsage !== undefined || req.mandateData !== undefined)) {
        throw forbidden(
          "A publishable key cannot ask that a card be saved: set setup_future_usage (and mandate_data) when the payment is created with a secret key",
        );
      }
      const saved =
        req.paymentMethodId === undefined
          ? undefined
          : await savedCardToConfirm(caller, req.paymentId, req.paymentMethodId, req.clientSecret);
      const paymentMethodType = text("payment_method_type", req.paymentMethodType, 32);
      const returnUrl = url("return_url", req.returnUrl);
      return operate(
        ctx,
        req.paymentId,
        confirmOperation(deps, {
          card: sent ?? saved!.card,
          saved,
          processor: processor.name,
          checkCaller: (row) => assertClientSecret(caller, row, req.clientSecret),
          paymentMethodType,
          returnUrl,
          setup: {
            setupFutureUsage: setupFutureUsageWord(req.setupFutureUsage),
            customerAcceptance: req.customerAcceptance,
            mandateData: req.mandateData,
          },
        }),
      );
    },

    async capturePayment(req, ctx) {
      const requested = req.amountToCapture === undefined ? undefined : positiveAmount("amount_to_capture", req.amountToCapture);
      return operate(ctx, req.paymentId, captureOperation(requested));
    },

    async cancelPayment(req, ctx) {
      const reason = text("cancellation_reason", req.cancellationReason, 255);
      return operate(ctx, req.paymentId, cancelOperation(deps, reason ?? "requested_by_customer"));
    },

    async listPayments(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const query = scopedQuery(dataSource, PaymentRow, "p", caller);
      const status = sentWord(PaymentStatusSchema, req.status);
      if (status !== undefined) query.andWhere("p.status = :status", { status });
      if (req.customerId !== undefined) query.andWhere("p.customer_id = :customerId", { customerId: req.customerId });
      if (req.currency !== undefined) query.andWhere("p.currency = :currency", { currency: currency("currency", req.currency) });
      const method = sentWord(PaymentMethodSchema, req.paymentMethod);
      if (method !== undefined) query.andWhere("p.payment_method = :method", { method });
      const byStatusAlone = req.customerId === undefined && req.currency === undefined && method === undefined;
      const kept = byStatusAlone ? { list: "payments" as const, scope: caller, key: status } : undefined;
      const [rows, total] = await fetchPage(query, ["created", "payment_id"], page, kept);
      return envelope(rows.map(toPayment), total, page);
    },
  };
}

/** The API call `ctx` as its operation answers it: its idempotency key names it across its retries. */
function apiCall(ctx: HandlerContext): ApiCall {
  return { ctx, requestKey: ctx.values.get(idempotentCallKey)?.key };
}
