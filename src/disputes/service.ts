import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import { DisputeStatusSchema, type DisputeEvidence, type DisputeService } from "../../gen/paymentservice/v1/dispute_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { sentWord } from "../enum-words.js";
import { missingField } from "../errors.js";
import { findObject } from "../objects/resource.js";
import { text } from "../validation/fields.js";
import { envelope, pageOf } from "../validation/list.js";
import { DisputeRow, type StoredEvidence } from "./dispute.entity.js";
import { runLocked } from "../objects/locked-operation.js";
import { acceptOperation } from "./operations/accept.js";
import { submitEvidenceOperation } from "./operations/submit-evidence.js";
import { disputeResource } from "./store.js";
import { toDispute } from "./view.js";

/** Longest text of one evidence field. */
const maxEvidenceLength = 20_000;

/** Checks evidence: at least one field, each within bounds; returns what to store. */
function evidenceToStore(evidence: DisputeEvidence | undefined): StoredEvidence {
  if (evidence === undefined) throw missingField("evidence");
  const field = (name: keyof StoredEvidence, value: string | undefined) =>
    text(`evidence.${name}`, value === "" ? undefined : value, maxEvidenceLength);
  const stored: StoredEvidence = {
    uncategorized_text: field("uncategorized_text", evidence.uncategorizedText),
    customer_communication: field("customer_communication", evidence.customerCommunication),
    receipt: field("receipt", evidence.receipt),
    shipping_documentation: field("shipping_documentation", evidence.shippingDocumentation),
    product_description: field("product_description", evidence.productDescription),
    refund_policy: field("refund_policy", evidence.refundPolicy),
  };
  const present = Object.fromEntries(Object.entries(stored).filter(([, v]) => v !== undefined)) as StoredEvidence;
  if (Object.keys(present).length === 0) throw missingField("evidence (at least one of its fields)");
  return present;
}

/** What the disputes API needs: the database and time. */
export interface DisputeDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
}

/** Disputes (interface §4 accept, decisions §9): retrieve, list, and the operations accept and submit evidence (operations/). */
export function disputeService(deps: DisputeDependencies): ServiceImpl<typeof DisputeService> {
  const { dataSource, clock, units } = deps;

  return {
    async retrieveDispute(req, ctx) {
      const caller = merchantOf(ctx);
      return toDispute(await findObject(dataSource.manager, disputeResource, caller, req.disputeId));
    },

    async listDisputes(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const query = scopedQuery(dataSource, DisputeRow, "d", caller);
      if (req.paymentId !== undefined) query.andWhere("d.payment_id = :paymentId", { paymentId: req.paymentId });
      const status = sentWord(DisputeStatusSchema, req.status);
      if (status !== undefined) query.andWhere("d.status = :status", { status });
      const [rows, total] = await fetchPage(query, ["created", "dispute_id"], page);
      return envelope(rows.map(toDispute), total, page);
    },

    async acceptDispute(req, ctx) {
      const accept = acceptOperation(clock, merchantOf(ctx), req.disputeId);
      return units.commit(ctx, async (em) => toDispute(await runLocked(em, clock, disputeResource, accept)));
    },

    async submitDisputeEvidence(req, ctx) {
      const submit = submitEvidenceOperation(clock, merchantOf(ctx), req.disputeId, evidenceToStore(req.evidence));
      return units.commit(ctx, async (em) => toDispute(await runLocked(em, clock, disputeResource, submit)));
    },
  };
}
