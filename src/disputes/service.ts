import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import { DisputeStatusSchema, type DisputeEvidence, type DisputeService } from "../../gen/paymentservice/v1/dispute_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { sentWord } from "../enum-words.js";
import { missingField, preconditionFailed } from "../errors.js";
import { findObject } from "../objects/resource.js";
import { text } from "../validation/fields.js";
import { envelope, pageOf } from "../validation/list.js";
import { DisputeRow, type StoredEvidence } from "./dispute.entity.js";
import { disputeStates } from "./states.js";
import { disputeResource, lockDispute, lockDisputeWithPayment, writeDisputeChange } from "./store.js";
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

/** Disputes (interface §4 accept, decisions §9): retrieve, list, accept, submit evidence. */
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
      const caller = merchantOf(ctx);
      return units.commit(ctx, async (em) => {
        const row = await lockDisputeWithPayment(em, caller, req.disputeId);
        disputeStates.guard("accept", row.status);
        const previous = row.status;
        disputeStates.move(row, "accept", "accepted");
        row.evidence = null;
        row.updated = clock.now();
        await writeDisputeChange(em, clock, row, previous);
        return toDispute(row);
      });
    },

    async submitDisputeEvidence(req, ctx) {
      const caller = merchantOf(ctx);
      const evidence = evidenceToStore(req.evidence);
      return units.commit(ctx, async (em) => {
        const row = await lockDispute(em, caller, req.disputeId);
        disputeStates.guard("submitEvidence", row.status);
        // Evidence counts only if it arrives by evidence_due_by; the expiry job may not have run yet.
        if (row.status === "opened" && clock.now() > row.evidenceDueBy) {
          throw preconditionFailed(
            `This dispute can no longer be given evidence: evidence_due_by ${row.evidenceDueBy.toISOString()} has passed and it expires`,
          );
        }
        const previous = row.status;
        disputeStates.move(row, "submitEvidence", "challenged");
        row.evidence = evidence;
        row.updated = clock.now();
        await writeDisputeChange(em, clock, row, previous);
        return toDispute(row);
      });
    },
  };
}
