import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import type { MandateService } from "../../gen/paymentservice/v1/mandate_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { notFound } from "../errors.js";
import { findObject } from "../objects/resource.js";
import { envelope, pageOf } from "../validation/list.js";
import { MandateRow } from "./mandate.entity.js";
import { mandateResource, revokeMandate } from "./store.js";
import { toMandate } from "./view.js";

/** What the mandates API needs: the database, its transactions and time. */
export interface MandateDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
}

/**
 * Mandates (decisions §10, docs/payment-methods.md): made by off-session setups, never by a call of
 * their own; retrieved, revoked, and listed per customer.
 */
export function mandateService(deps: MandateDependencies): ServiceImpl<typeof MandateService> {
  const { dataSource, clock, units } = deps;

  return {
    async retrieveMandate(req, ctx) {
      return toMandate(await findObject(dataSource.manager, mandateResource, merchantOf(ctx), req.mandateId));
    },

    async revokeMandate(req, ctx) {
      const caller = merchantOf(ctx);
      return units.commit(ctx, async (em) => toMandate(await revokeMandate(em, clock, caller, req.mandateId)));
    },

    async listCustomerMandates(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const customer = (await dataSource.query(
        "SELECT 1 FROM customers WHERE merchant_id = $1 AND livemode = $2 AND customer_id = $3 AND deleted_at IS NULL",
        [caller.merchantId, caller.livemode, req.customerId],
      )) as unknown[];
      if (customer.length === 0) throw notFound("Customer", req.customerId, "customer_id");
      const query = scopedQuery(dataSource, MandateRow, "m", caller).andWhere("m.customer_id = :customerId", {
        customerId: req.customerId,
      });
      const [rows, total] = await fetchPage(query, ["created", "mandate_id"], page);
      return envelope(rows.map(toMandate), total, page);
    },
  };
}
