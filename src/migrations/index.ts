import { Foundation1763800000000 } from "./1763800000000-foundation.js";
import { Payments1763900000000 } from "./1763900000000-payments.js";
import { Refunds1764000000000 } from "./1764000000000-refunds.js";
import { Disputes1764100000000 } from "./1764100000000-disputes.js";
import { SandboxClock1764200000000 } from "./1764200000000-sandbox-clock.js";
import { Payouts1764300000000 } from "./1764300000000-payouts.js";
import { Idempotency1764400000000 } from "./1764400000000-idempotency.js";
import { ApiKeyChanges1764500000000 } from "./1764500000000-api-key-changes.js";
import { OperationClaims1764600000000 } from "./1764600000000-operation-claims.js";
import { EventOrder1764700000000 } from "./1764700000000-event-order.js";
import { WebhookDeliveries1764800000000 } from "./1764800000000-webhook-deliveries.js";
import { WebhookTakeable1764900000000 } from "./1764900000000-webhook-takeable.js";
import { InstanceLiveness1765000000000 } from "./1765000000000-instance-liveness.js";
import { DeadJobs1765100000000 } from "./1765100000000-dead-jobs.js";
import { ApiKeyHashRotation1765200000000 } from "./1765200000000-api-key-hash-rotation.js";
import { ListFilterIndexes1765300000000 } from "./1765300000000-list-filter-indexes.js";
import { ListCounts1765400000000 } from "./1765400000000-list-counts.js";
import { StatusChecks1765500000000 } from "./1765500000000-status-checks.js";
import { JsonStatistics1765600000000 } from "./1765600000000-json-statistics.js";
import { RefundHolds1765700000000 } from "./1765700000000-refund-holds.js";
import { ProcessorAttempts1765800000000 } from "./1765800000000-processor-attempts.js";
import { PaymentMethods1765900000000 } from "./1765900000000-payment-methods.js";
import { Mandates1766000000000 } from "./1766000000000-mandates.js";
import { SandboxBooksAge1766100000000 } from "./1766100000000-sandbox-books-age.js";
import { Ledger1766200000000 } from "./1766200000000-ledger.js";
import { AttemptStatistics1766300000000 } from "./1766300000000-attempt-statistics.js";
import { MergedDeltas1766400000000 } from "./1766400000000-merged-deltas.js";
import { DeltaTablesKeepPages1766500000000 } from "./1766500000000-delta-tables-keep-pages.js";
import { StatusMovesPerStatement1766600000000 } from "./1766600000000-status-moves-per-statement.js";
import { LedgerLinesOnTransactions1766700000000 } from "./1766700000000-ledger-lines-on-transactions.js";
import { AuthenticationTokensWhenSet1766800000000 } from "./1766800000000-authentication-tokens-when-set.js";

/** Migrations in the order they apply; run on every start, each at most once. */
export const migrations = [
  Foundation1763800000000,
  Payments1763900000000,
  Refunds1764000000000,
  Disputes1764100000000,
  SandboxClock1764200000000,
  Payouts1764300000000,
  Idempotency1764400000000,
  ApiKeyChanges1764500000000,
  OperationClaims1764600000000,
  EventOrder1764700000000,
  WebhookDeliveries1764800000000,
  WebhookTakeable1764900000000,
  InstanceLiveness1765000000000,
  DeadJobs1765100000000,
  ApiKeyHashRotation1765200000000,
  ListFilterIndexes1765300000000,
  ListCounts1765400000000,
  StatusChecks1765500000000,
  JsonStatistics1765600000000,
  RefundHolds1765700000000,
  ProcessorAttempts1765800000000,
  PaymentMethods1765900000000,
  Mandates1766000000000,
  SandboxBooksAge1766100000000,
  Ledger1766200000000,
  AttemptStatistics1766300000000,
  MergedDeltas1766400000000,
  DeltaTablesKeepPages1766500000000,
  StatusMovesPerStatement1766600000000,
  LedgerLinesOnTransactions1766700000000,
  AuthenticationTokensWhenSet1766800000000,
];
