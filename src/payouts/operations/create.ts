import type { MessageInitShape } from "@bufbuild/protobuf";
import type { PayoutSchema } from "../../../gen/paymentservice/v1/payout_pb.js";
import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { CallValues } from "../../db/unit-of-work.js";
import { newId } from "../../ids.js";
import type { JobWaker } from "../../jobs/runner.js";
import type { ObjectWriter } from "../../objects/writer.js";
import type { PayoutDestination } from "../../processors/processor.js";
import type { DataCipher } from "../../secrets/data-cipher.js";
import { maskDestination, sealDestination } from "../destination.js";
import { PayoutRow, type StoredBilling } from "../payout.entity.js";
import { payoutResource, sendJobOf } from "../store.js";

/*
 * Create (interface §4, decisions §9): the payout is written with its destination encrypted, its
 * event and, when confirmed, its sending job, batched with other calls' payouts; the job runner
 * sends it right after the commit (operations/send.ts), so the payout is recorded before any rail is asked.
 */

/** What a create needs: its writer, time, the destination cipher, and the job runner to wake. */
export interface PayoutCreateDependencies {
  readonly clock: Clock;
  readonly writer: ObjectWriter;
  readonly dataCipher: DataCipher;
  readonly jobs: JobWaker;
}

/** A payout as the API validated it and routed it (service.ts). */
export interface PayoutRequest {
  readonly profileId: string;
  readonly customerId: string | null;
  readonly amount: bigint;
  readonly currency: string;
  readonly payoutType: PayoutRow["payoutType"];
  readonly priority: PayoutRow["priority"];
  readonly email: string | null;
  readonly name: string | null;
  readonly phone: string | null;
  readonly destination: PayoutDestination;
  readonly billing: StoredBilling | null;
  /** The processor the merchant asked for, if any. */
  readonly preferredProcessor: string | null;
  /** The first processor routing chose. */
  readonly processor: string;
  readonly confirm: boolean;
  readonly metadata: Record<string, string>;
}

/** Creates a payout as the API call `ctx`: its view, or the refusal of a profile or customer not the merchant's. */
export async function createPayout(
  deps: PayoutCreateDependencies,
  ctx: CallValues,
  scope: Scope,
  request: PayoutRequest,
): Promise<MessageInitShape<typeof PayoutSchema>> {
  const now = deps.clock.now();
  const { destination, ...fields } = request;
  const owner = { merchantId: scope.merchantId, livemode: scope.livemode, payoutId: newId("po") };
  const row = Object.assign(new PayoutRow(), {
    ...owner,
    ...fields,
    status: request.confirm ? "pending" : "requires_fulfillment",
    destination: maskDestination(destination),
    destinationCiphertext: sealDestination(deps.dataCipher, owner, destination),
    errorCode: null,
    errorMessage: null,
    attempts: [],
    created: now,
    updated: now,
  } satisfies PayoutRow);
  const payout = await deps.writer.create(ctx, payoutResource, row, request.confirm ? [sendJobOf(row, now)] : []);
  if (request.confirm) deps.jobs.wake();
  return payout;
}
