import type { DataSource } from "typeorm";
import type { DataCipher } from "./data-cipher.js";

/*
 * The columns that hold values sealed with DATA_ENCRYPTION_KEY (data-cipher.ts), each value bound to
 * its row, and their re-encryption under the current key: step 3 of a rotation (`npm run
 * rotate-secrets`, docs/operations.md).
 */

/** A table's column of sealed values, in rows keyed by merchant, environment and an id. */
export interface SealedColumn {
  readonly table: string;
  /** The id column that, with merchant_id and livemode, keys a row. */
  readonly idColumn: string;
  readonly column: string;
  /** The owner a row's value is sealed for (the cipher's additional data). */
  ownerOf(row: { readonly merchantId: string; readonly livemode: boolean; readonly id: string }): string;
}

/** What re-encrypting sealed columns did. */
export interface Reencryption {
  /** Values now under the current key that were not before. */
  readonly reencrypted: number;
  /** Values that no configured key opens, by table and row id, with why (never the value). */
  readonly failed: readonly { readonly table: string; readonly id: string; readonly error: string }[];
}

/** Rows re-encrypted per batch: short statements, and a run that stops keeps what it did. */
const reencryptBatch = 500;

/**
 * Re-encrypts under the current key every value of `sealed` that is under another, a batch at a
 * time in key order. Safe while instances run and to run again: each write replaces only the very
 * ciphertext it read, so a value dropped (a payout sent, a card deleted) or re-encrypted meanwhile is
 * left as it is, and values already under the current key are skipped.
 */
export async function reencryptColumn(dataSource: DataSource, cipher: DataCipher, sealed: SealedColumn): Promise<Reencryption> {
  let reencrypted = 0;
  const failed: { table: string; id: string; error: string }[] = [];
  let after = { merchantId: "", livemode: false, id: "" };
  for (;;) {
    const rows = (await dataSource.query(
      `SELECT merchant_id AS "merchantId", livemode, ${sealed.idColumn} AS id, ${sealed.column} AS ciphertext
         FROM ${sealed.table}
        WHERE ${sealed.column} IS NOT NULL AND NOT starts_with(${sealed.column}, $4)
          AND (merchant_id, livemode, ${sealed.idColumn}) > ($1, $2, $3)
        ORDER BY merchant_id, livemode, ${sealed.idColumn}
        LIMIT ${reencryptBatch}`,
      [after.merchantId, after.livemode, after.id, cipher.currentPrefix()],
    )) as { merchantId: string; livemode: boolean; id: string; ciphertext: string }[];
    for (const row of rows) {
      let resealed: string;
      try {
        resealed = cipher.encrypt(cipher.decrypt(row.ciphertext, sealed.ownerOf(row)), sealed.ownerOf(row));
      } catch (error) {
        failed.push({ table: sealed.table, id: row.id, error: error instanceof Error ? error.message : String(error) });
        continue;
      }
      const [, affected] = (await dataSource.query(
        `UPDATE ${sealed.table} SET ${sealed.column} = $5
          WHERE merchant_id = $1 AND livemode = $2 AND ${sealed.idColumn} = $3 AND ${sealed.column} = $4`,
        [row.merchantId, row.livemode, row.id, row.ciphertext, resealed],
      )) as [unknown, number];
      reencrypted += affected;
    }
    if (rows.length < reencryptBatch) return { reencrypted, failed };
    after = rows.at(-1)!;
  }
}

/** Values of `sealed` not under the current key: 0 once a rotation's re-encryption is complete. */
export async function countNotUnder(dataSource: DataSource, cipher: DataCipher, sealed: SealedColumn): Promise<number> {
  const [row] = (await dataSource.query(
    `SELECT count(*)::int AS count FROM ${sealed.table} WHERE ${sealed.column} IS NOT NULL AND NOT starts_with(${sealed.column}, $1)`,
    [cipher.currentPrefix()],
  )) as { count: number }[];
  return Number(row!.count);
}
