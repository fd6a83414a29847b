import { isIP } from "node:net";
import type { CustomerAcceptance, MandateData } from "../../gen/paymentservice/v1/payment_pb.js";
import { AcceptanceTypeSchema, MandateTypeSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { sentWord } from "../enum-words.js";
import { invalidField, missingField } from "../errors.js";
import { text } from "../validation/fields.js";
import { currency, positiveAmount } from "../validation/money.js";
import { timestampToDate } from "../validation/time.js";
import type { MandateTypeWord, StoredAcceptance, StoredMandateRequest } from "./mandate.entity.js";

/*
 * An off-session setup's request for a mandate (decisions §10): the customer's acceptance, which is
 * required, and the mandate's type and limits, which are not.
 */

/**
 * The mandate an off-session setup asks for, paid in `paymentCurrency`: IR_04 without
 * customer_acceptance (or its online part, for online acceptance), IR_05 naming a field that is wrong.
 */
export function mandateRequest(
  acceptance: CustomerAcceptance | undefined,
  data: MandateData | undefined,
  paymentCurrency: string,
  now: Date,
): StoredMandateRequest {
  const type = (sentWord(MandateTypeSchema, data?.type) ?? "multi_use") as MandateTypeWord;
  const amountLimit = data?.amountLimit === undefined ? null : positiveAmount("mandate_data.amount_limit", data.amountLimit);
  const limitCurrency = data?.currency === undefined ? null : currency("mandate_data.currency", data.currency);
  return {
    type,
    amount_limit: amountLimit === null ? null : String(amountLimit),
    currency: limitCurrency ?? (amountLimit === null ? null : paymentCurrency),
    customer_acceptance: customerAcceptance(acceptance, now),
  };
}

/**
 * The acceptance as a mandate keeps it (IR_04 when missing, IR_05 naming what is wrong); accepted now
 * when the request does not say when.
 */
export function customerAcceptance(acceptance: CustomerAcceptance | undefined, now: Date): StoredAcceptance {
  const field = "customer_acceptance";
  if (acceptance === undefined) throw missingField(field);
  const type = sentWord(AcceptanceTypeSchema, acceptance.acceptanceType) as StoredAcceptance["acceptance_type"] | undefined;
  if (type === undefined) throw missingField(`${field}.acceptance_type`);
  const acceptedAt = acceptance.acceptedAt === undefined ? now : timestampToDate(acceptance.acceptedAt);
  if (acceptedAt > now) throw invalidField(`${field}.accepted_at`, "must not lie in the future");
  const online = acceptance.online;
  if (type === "online" && online === undefined) throw missingField(`${field}.online`);
  if (type === "offline" && online !== undefined) throw invalidField(`${field}.online`, "only applies to online acceptance");
  return {
    acceptance_type: type,
    accepted_at: acceptedAt.toISOString(),
    online:
      online === undefined
        ? null
        : {
            ip_address: ipAddress(`${field}.online.ip_address`, online.ipAddress),
            user_agent: required(`${field}.online.user_agent`, text(`${field}.online.user_agent`, online.userAgent, 512)),
          },
  };
}

function ipAddress(field: string, value: string | undefined): string {
  const address = required(field, value);
  if (isIP(address) === 0) throw invalidField(field, "expected an IPv4 or IPv6 address");
  return address;
}

function required(field: string, value: string | undefined): string {
  if (value === undefined || value === "") throw missingField(field);
  return value;
}
