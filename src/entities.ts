import { ApiKeyRow } from "./api-keys/api-key.entity.js";
import { CustomerRow } from "./customers/customer.entity.js";
import { DisputeRow } from "./disputes/dispute.entity.js";
import { EventRow } from "./events/event.entity.js";
import { DeliveryRow } from "./webhooks/delivery.entity.js";
import { JobRow } from "./jobs/job.entity.js";
import { BalanceTransactionRow } from "./ledger/balance-transaction.entity.js";
import { MandateRow } from "./mandates/mandate.entity.js";
import { MerchantRow } from "./merchants/merchant.entity.js";
import { ProfileRow } from "./merchants/profile.entity.js";
import { PaymentMethodRow } from "./payment-methods/payment-method.entity.js";
import { PaymentRow } from "./payments/payment.entity.js";
import { PayoutRow } from "./payouts/payout.entity.js";
import { RefundRow } from "./refunds/refund.entity.js";

/** Every entity the data source maps (db/data-source.ts), listed beside the composition root; each lives in the folder of its resource. */
export const entities = [
  MerchantRow,
  ProfileRow,
  ApiKeyRow,
  CustomerRow,
  PaymentMethodRow,
  MandateRow,
  PaymentRow,
  RefundRow,
  PayoutRow,
  DisputeRow,
  BalanceTransactionRow,
  EventRow,
  DeliveryRow,
  JobRow,
];
