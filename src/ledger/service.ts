import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import { BalanceTransactionStatus, BalanceTransactionTypeSchema, type BalanceService } from "../../gen/paymentservice/v1/balance_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { findByKey } from "../db/batched-reads.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { sentWord } from "../enum-words.js";
import { invalidField, missingField, notFound } from "../errors.js";
import { text } from "../validation/fields.js";
import { envelope, pageOf } from "../validation/list.js";
import { currency } from "../validation/money.js";
import { timestampToDate } from "../validation/time.js";
import { readBalance } from "./balance.js";
import { BalanceTransactionRow } from "./balance-transaction.entity.js";
import { balanceReport } from "./report.js";
import { toBalance, toBalanceReport, toBalanceTransaction } from "./view.js";

/** What the balance API needs: the database, and the service's clock that decides what is available. */
export interface BalanceDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
}

/**
 * Balances and the ledger (decisions §11, docs/ledger.md): read-only, since every balance
 * transaction is written by the change that moves the money (ledger/entries.ts).
 */
export function balanceService(deps: BalanceDependencies): ServiceImpl<typeof BalanceService> {
  const { dataSource, clock } = deps;

  return {
    async retrieveBalance(_req, ctx) {
      return toBalance(await readBalance(dataSource.manager, merchantOf(ctx), clock.now()));
    },

    async retrieveBalanceTransaction(req, ctx) {
      const caller = merchantOf(ctx);
      const row = await findByKey(dataSource.manager, BalanceTransactionRow, "balanceTransactionId", caller, req.balanceTransactionId);
      if (row === undefined) throw notFound("Balance transaction", req.balanceTransactionId);
      return toBalanceTransaction(row, clock.now());
    },

    async listBalanceTransactions(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const now = clock.now();
      const query = scopedQuery(dataSource, BalanceTransactionRow, "t", caller);
      const type = sentWord(BalanceTransactionTypeSchema, req.type);
      if (type !== undefined) query.andWhere("t.type = :type", { type });
      const sourceId = text("source_id", req.sourceId, 64);
      if (sourceId !== undefined) query.andWhere("t.source_id = :sourceId", { sourceId });
      if (req.currency !== undefined) query.andWhere("t.currency = :currency", { currency: currency("currency", req.currency) });
      if (req.status === BalanceTransactionStatus.PENDING) query.andWhere("t.available_on > :now", { now });
      if (req.status === BalanceTransactionStatus.AVAILABLE) query.andWhere("t.available_on <= :now", { now });
      const [rows, total] = await fetchPage(query, ["created", "balance_transaction_id"], page);
      return envelope(
        rows.map((row) => toBalanceTransaction(row, now)),
        total,
        page,
      );
    },

    async retrieveBalanceReport(req, ctx) {
      const caller = merchantOf(ctx);
      if (req.from === undefined) throw missingField("from");
      if (req.to === undefined) throw missingField("to");
      const from = timestampToDate(req.from);
      const to = timestampToDate(req.to);
      if (to <= from) throw invalidField("to", "must be after from");
      const only = req.currency === undefined ? undefined : currency("currency", req.currency);
      return toBalanceReport(from, to, await balanceReport(dataSource, caller, { from, to, currency: only }));
    },
  };
}
