import { pathToFileURL } from "node:url";
import { closeApp, openApp } from "../app.js";
import { loadConfig } from "../config.js";
import { verifyLedger } from "../ledger/verify.js";
import { log } from "../log.js";

/*
 * `npm run ledger:verify` (in a build: `node dist/src/cli/ledger-verify.js`): recomputes every
 * balance from the payments, refunds, disputes and payouts, from the balance transactions and from
 * the ledger lines (ledger/verify.ts), prints every difference and exits 1 if there is any. Runs
 * beside the instances, against the same database (DATABASE_URL; the embedded one only while no
 * server has it open).
 */

/** How long one of the checks may take. */
const verifyStatementTimeoutMs = 3_600_000;

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    // Each check scans the whole history (minutes for millions of payments), not a request's rows.
    const app = await openApp({ ...loadConfig(), databaseStatementTimeoutMs: verifyStatementTimeoutMs });
    try {
      const { transactions, balances, differences } = await verifyLedger(app.dataSource);
      for (const difference of differences) {
        log.error("ledger difference", {
          merchant_id: difference.merchantId,
          livemode: difference.livemode,
          subject: difference.subject,
          detail: difference.detail,
        });
      }
      log.info("ledger verified", { balances, transactions, differences: differences.length });
      if (differences.length > 0) process.exitCode = 1;
    } finally {
      await closeApp(app);
    }
  } catch (error) {
    log.error("ledger:verify failed", { error: error instanceof Error ? error.message : String(error) });
    process.exitCode = 1;
  }
}
