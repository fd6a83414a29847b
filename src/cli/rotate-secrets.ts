import { pathToFileURL } from "node:url";
import { countKeysByHashSecret, type KeysByHashSecret } from "../api-keys/hash-secrets.js";
import { closeApp, openApp } from "../app.js";
import { loadConfig, type Config } from "../config.js";
import { log } from "../log.js";
import { refingerprintCards, sealedCardNumbers } from "../payment-methods/vault.js";
import { sealedDestinations } from "../payouts/destination.js";
import { countNotUnder, reencryptColumn, type Reencryption } from "../secrets/sealed-columns.js";

/*
 * `npm run rotate-secrets` (in a build: `node dist/src/cli/rotate-secrets.js`), step 3 of a
 * rotation (docs/operations.md, "Rotating secrets"): re-encrypts every stored value under the current
 * DATA_ENCRYPTION_KEY and reports what is left under other keys, recomputes saved cards' fingerprints
 * under the current API_KEY_HASH_SECRET, and counts the API keys not yet re-hashed with it. Runs beside the instances, against the same
 * database (DATABASE_URL; the embedded one only while no server has it open).
 */

/** Every column of sealed values: payout destinations, saved card numbers. */
const sealedColumns = [sealedDestinations, sealedCardNumbers];

/** What one run did and found. */
export interface RotationReport {
  readonly data: Reencryption & { readonly remaining: number; readonly currentKeyId: string };
  /** Saved cards whose fingerprint was under another API_KEY_HASH_SECRET. */
  readonly cardFingerprintsRecomputed: number;
  readonly apiKeys: KeysByHashSecret & { readonly currentSecretId: string };
}

/** Runs step 3 of a rotation with `config`: the instances' own, the new secrets current and the old ones previous. */
export async function rotateSecrets(config: Config): Promise<RotationReport> {
  if (config.dataEncryptionNextKey !== undefined || config.apiKeyHashNextSecret !== undefined) {
    // Run with the old key current, it would move values written by switched instances back to it.
    throw new Error(
      "DATA_ENCRYPTION_NEXT_KEY or API_KEY_HASH_NEXT_SECRET is set: run this with step 2's configuration, the new secrets current and the old ones previous",
    );
  }
  const app = await openApp(config);
  try {
    let reencrypted = 0;
    let remaining = 0;
    const failed: Reencryption["failed"][number][] = [];
    for (const sealed of sealedColumns) {
      const done = await reencryptColumn(app.dataSource, app.dataCipher, sealed);
      reencrypted += done.reencrypted;
      failed.push(...done.failed);
      remaining += await countNotUnder(app.dataSource, app.dataCipher, sealed);
    }
    return {
      data: { reencrypted, failed, remaining, currentKeyId: app.dataCipher.currentKeyId },
      cardFingerprintsRecomputed: await refingerprintCards(app.dataSource, app.dataCipher, app.hasher),
      apiKeys: {
        ...(await countKeysByHashSecret(app.dataSource, app.hasher.secretId, app.clock.now())),
        currentSecretId: app.hasher.secretId,
      },
    };
  } finally {
    await closeApp(app);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const report = await rotateSecrets(loadConfig());
    for (const failure of report.data.failed)
      log.error("stored value not re-encrypted", { table: failure.table, id: failure.id, error: failure.error });
    // Ids, never secrets: an operator matches them with the stored values' (docs/operations.md).
    log.info("secrets rotated", {
      data_key_id: report.data.currentKeyId,
      api_key_hash_secret_id: report.apiKeys.currentSecretId,
      data_values_reencrypted: report.data.reencrypted,
      data_values_under_other_keys: report.data.remaining,
      card_fingerprints_recomputed: report.cardFingerprintsRecomputed,
      api_keys_current_secret: report.apiKeys.current,
      api_keys_not_rehashed: report.apiKeys.notCurrent,
    });
    if (report.data.failed.length > 0) process.exitCode = 1;
  } catch (error) {
    log.error("rotate-secrets failed", { error: error instanceof Error ? error.message : String(error) });
    process.exitCode = 1;
  }
}
