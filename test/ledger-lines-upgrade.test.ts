import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyMigrations } from "../src/db/data-source.js";
import { newId } from "../src/ids.js";
import { migrations } from "../src/migrations/index.js";
import { databaseOfItsOwn, onDatabase } from "./support/database.js";

/*
 * Migration 1766700000000 on a database whose ledger lines are still a table of their own (the
 * release before it): each transaction's lines move onto its row, in the stored order (merchant
 * balance, fees, counterparty), none lost, none added, and `ledger_lines` reads as it did. Runs on
 * the database the run uses: a PostgreSQL database of its own, or an embedded DATA_DIR of its own.
 */

const linesMigration = "LedgerLinesOnTransactions1766700000000";
const before = migrations.slice(
  0,
  migrations.findIndex((Migration) => new Migration().name === linesMigration),
);

const merchantId = newId("mer");

/** A transaction of the release before, with its lines as that release wrote them (zero lines left out). */
interface OldEntry {
  readonly id: string;
  readonly type: string;
  readonly amount: number;
  readonly fee: number;
  readonly lines: Record<string, number>;
}

const entries: OldEntry[] = [
  { id: newId("txn"), type: "payment", amount: 10_000, fee: 290, lines: { merchant_balance: 9_710, fees: 290, customer_funds: -10_000 } },
  { id: newId("txn"), type: "payment", amount: 500, fee: 0, lines: { merchant_balance: 500, customer_funds: -500 } },
  {
    id: newId("txn"),
    type: "dispute",
    amount: -10_000,
    fee: 1_500,
    lines: { merchant_balance: -11_500, fees: 1_500, customer_funds: 10_000 },
  },
  {
    id: newId("txn"),
    type: "dispute_reversal",
    amount: 10_000,
    fee: -1_500,
    lines: { merchant_balance: 11_500, fees: -1_500, customer_funds: -10_000 },
  },
  { id: newId("txn"), type: "refund", amount: -200, fee: 0, lines: { merchant_balance: -200, customer_funds: 200 } },
  { id: newId("txn"), type: "payout", amount: -3_000, fee: 0, lines: { merchant_balance: -3_000, payout_clearing: 3_000 } },
  // A fee that takes the whole amount leaves the merchant's balance unmoved: no line of it.
  { id: newId("txn"), type: "payment", amount: 100, fee: 100, lines: { fees: 100, customer_funds: -100 } },
];

/** Writes `entries` as the release before wrote them: a transaction row, and a row per line. */
async function fillAsTheReleaseBefore(db: pg.Client): Promise<void> {
  for (const [i, entry] of entries.entries()) {
    await db.query(
      `INSERT INTO balance_transactions (merchant_id, livemode, balance_transaction_id, profile_id, type, amount, fee, net, currency, source_id,
                                         available_on, created)
       VALUES ($1, false, $2, 'pro_upgrade', $3, $4, $5, $4::bigint - $5::bigint, 'USD', $6, now(), now())`,
      [merchantId, entry.id, entry.type, entry.amount, entry.fee, `src_${i}`],
    );
    for (const [account, amount] of Object.entries(entry.lines)) {
      await db.query(
        `INSERT INTO ledger_lines (merchant_id, livemode, balance_transaction_id, account, currency, amount)
         VALUES ($1, false, $2, $3, 'USD', $4)`,
        [merchantId, entry.id, account, amount],
      );
    }
  }
}

describe("ledger lines move onto their transactions' rows (migration 1766700000000)", () => {
  let url: string;
  let close: () => Promise<void> = async () => {};

  beforeAll(async () => {
    ({ url, close } = await databaseOfItsOwn("ledger-lines-upgrade"));
    await applyMigrations(url, 10_000, before);
    await onDatabase(url, fillAsTheReleaseBefore);
    await applyMigrations(url, 10_000, migrations);
  }, 120_000);

  afterAll(() => close());

  it("each transaction carries exactly the lines it had, the merchant's balance first, then the fees, then the counterparty", async () => {
    const rows = await onDatabase(url, async (db) => {
      const { rows } = await db.query<{ balance_transaction_id: string; line_accounts: string[]; line_amounts: string[] }>(
        "SELECT balance_transaction_id, line_accounts, line_amounts FROM balance_transactions WHERE merchant_id = $1",
        [merchantId],
      );
      return rows;
    });
    const moved = new Map(rows.map((row) => [row.balance_transaction_id, row]));
    expect(moved.size).toBe(entries.length);
    const order = ["merchant_balance", "fees", "customer_funds", "payout_clearing"];
    for (const entry of entries) {
      const expected = Object.entries(entry.lines).sort(([a], [b]) => order.indexOf(a) - order.indexOf(b));
      const row = moved.get(entry.id)!;
      expect(row.line_accounts, entry.type).toEqual(expected.map(([account]) => account));
      expect(row.line_amounts.map(Number), entry.type).toEqual(expected.map(([, amount]) => amount));
    }
  });

  it("ledger_lines reads a row per line, as the table did", async () => {
    const lines = await onDatabase(url, async (db) => {
      const { rows } = await db.query<{ balance_transaction_id: string; account: string; currency: string; amount: string }>(
        "SELECT balance_transaction_id, account, currency, amount FROM ledger_lines WHERE merchant_id = $1 AND NOT livemode",
        [merchantId],
      );
      return rows;
    });
    const expected = entries.flatMap((entry) =>
      Object.entries(entry.lines).map(([account, amount]) => ({ balance_transaction_id: entry.id, account, currency: "USD", amount })),
    );
    const key = (line: { balance_transaction_id: string; account: string }) => `${line.balance_transaction_id} ${line.account}`;
    expect(lines.map((line) => ({ ...line, amount: Number(line.amount) })).sort((a, b) => key(a).localeCompare(key(b)))).toEqual(
      expected.sort((a, b) => key(a).localeCompare(key(b))),
    );
  });
});
