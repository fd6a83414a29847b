import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  BalanceTransactionStatus,
  BalanceTransactionTypeSchema,
  type BalanceReport,
  type BalanceReportSchema,
  type BalanceSchema,
  type BalanceTransactionSchema,
} from "../../gen/paymentservice/v1/balance_pb.js";
import { enumNumber, enumWord } from "../enum-words.js";
import type { CurrencyBalance } from "./balance.js";
import type { BalanceTransactionRow, BalanceTransactionTypeWord } from "./balance-transaction.entity.js";
import type { CurrencyReport } from "./report.js";

/** The API view of a balance transaction at `now`: pending until its available_on. */
export function toBalanceTransaction(row: BalanceTransactionRow, now: Date): MessageInitShape<typeof BalanceTransactionSchema> {
  return {
    balanceTransactionId: row.balanceTransactionId,
    merchantId: row.merchantId,
    type: enumNumber(BalanceTransactionTypeSchema, row.type),
    amount: row.amount,
    fee: row.fee,
    net: row.net,
    currency: row.currency,
    sourceId: row.sourceId,
    status: row.availableOn <= now ? BalanceTransactionStatus.AVAILABLE : BalanceTransactionStatus.PENDING,
    availableOn: timestampFromDate(row.availableOn),
    created: timestampFromDate(row.created),
    description: descriptionOf(row),
  };
}

const reversals: Partial<Record<BalanceTransactionTypeWord, string>> = { dispute_reversal: "won", payout_reversal: "reversed" };

/**
 * "Payment pay_…", "Dispute dis_… won": what a finance team reads in a report's line, derived from
 * the type and the source rather than stored with every transaction.
 */
function descriptionOf({ type, sourceId }: BalanceTransactionRow): string {
  const resource = type.split("_")[0]!;
  const suffix = reversals[type];
  return `${resource[0]!.toUpperCase()}${resource.slice(1)} ${sourceId}${suffix === undefined ? "" : ` ${suffix}`}`;
}

/** The API view of a balance. */
export function toBalance(balances: readonly CurrencyBalance[]): MessageInitShape<typeof BalanceSchema> {
  return {
    available: balances.map(({ currency, available }) => ({ currency, amount: available })),
    pending: balances.map(({ currency, pending }) => ({ currency, amount: pending })),
  };
}

/** The API view of a balance report. */
export function toBalanceReport(from: Date, to: Date, report: readonly CurrencyReport[]): MessageInitShape<typeof BalanceReportSchema> {
  return {
    from: timestampFromDate(from),
    to: timestampFromDate(to),
    currencies: report.map((currency) => ({
      ...currency,
      activity: currency.activity.map((line) => ({ ...line, type: enumNumber(BalanceTransactionTypeSchema, line.type) })),
    })),
  };
}

/** The media type of `reportCsv`'s text. */
export const csvMediaType = "text/csv; charset=utf-8";

/**
 * A report as CSV (RFC 4180, CRLF line ends), for a spreadsheet: per currency its opening balance,
 * a line per type and its closing balance; a balance line has only its net.
 */
export function reportCsv(report: BalanceReport): string {
  const lines = ["currency,line,count,amount,fee,net"];
  for (const { currency, openingBalance, activity, closingBalance } of report.currencies) {
    lines.push(`${currency},opening_balance,,,,${openingBalance}`);
    for (const line of activity) {
      lines.push(`${currency},${enumWord(BalanceTransactionTypeSchema, line.type)},${line.count},${line.amount},${line.fee},${line.net}`);
    }
    lines.push(`${currency},closing_balance,,,,${closingBalance}`);
  }
  return `${lines.join("\r\n")}\r\n`;
}
