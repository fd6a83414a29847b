import type { PayoutMethodDataInput } from "../../gen/paymentservice/v1/payout_pb.js";
import { invalidField, missingField } from "../errors.js";
import { readDestinationCard } from "../processors/card.js";
import type { PayoutDestination, PayoutProcessor } from "../processors/processor.js";
import type { DataCipher } from "../secrets/data-cipher.js";
import type { SealedColumn } from "../secrets/sealed-columns.js";
import { text } from "../validation/fields.js";
import type { MaskedDestination } from "./payout.entity.js";

/** An empty string is treated as not sent. */
function required(field: string, value: string | undefined): string {
  if (value === undefined || value === "") throw missingField(field);
  return value;
}

function bankDestination(input: NonNullable<PayoutMethodDataInput["bank"]>): PayoutDestination {
  const field = "payout_method_data.bank";
  const accountNumber = required(`${field}.bank_account_number`, input.bankAccountNumber).replaceAll(" ", "");
  // Domestic account numbers and IBANs; never echoed, since errors end up in logs.
  if (!/^[0-9A-Za-z]{4,34}$/.test(accountNumber)) {
    throw invalidField(`${field}.bank_account_number`, "expected 4-34 letters or digits");
  }
  const routingNumber = required(`${field}.bank_routing_number`, input.bankRoutingNumber).replaceAll(" ", "");
  // ABA routing numbers (9 digits), sort codes (6), BICs (8 or 11).
  if (!/^[0-9A-Za-z]{6,11}$/.test(routingNumber)) {
    throw invalidField(`${field}.bank_routing_number`, "expected 6-11 letters or digits (routing number, sort code or BIC)");
  }
  const holderName = required(
    `${field}.bank_account_holder_name`,
    text(`${field}.bank_account_holder_name`, input.bankAccountHolderName, 100),
  );
  const bankName = text(`${field}.bank_name`, input.bankName, 100);
  return { type: "bank", bankName: bankName ?? "", accountNumber, routingNumber, holderName };
}

/**
 * Reads the destination of a new payout from payout_method_data: the key matching payout_type must
 * be set and valid, the other must not be. Every processor that may send the payout checks a card
 * (the sandbox only knows its test cards).
 */
export function readDestination(
  input: PayoutMethodDataInput | undefined,
  payoutType: "card" | "bank",
  processors: readonly PayoutProcessor[],
  now: Date,
): PayoutDestination {
  if (input === undefined) throw missingField("payout_method_data");
  const other = payoutType === "card" ? "bank" : "card";
  if (input[other] !== undefined) {
    throw invalidField(`payout_method_data.${other}`, `not allowed with payout_type ${payoutType}; send payout_method_data.${payoutType}`);
  }
  if (payoutType === "bank") {
    if (input.bank === undefined) throw missingField("payout_method_data.bank");
    return bankDestination(input.bank);
  }
  if (input.card === undefined) throw missingField("payout_method_data.card");
  const card = readDestinationCard(input.card, "payout_method_data.card", now);
  for (const processor of processors) processor.checkCard(card, "payout_method_data.card");
  return { type: "card", card };
}

/** What responses show of a destination (decisions §9: last4 only). */
export function maskDestination(destination: PayoutDestination): MaskedDestination {
  if (destination.type === "bank") {
    return {
      bank: { last4: destination.accountNumber.slice(-4), ...(destination.bankName === "" ? {} : { bank_name: destination.bankName }) },
    };
  }
  const { card } = destination;
  return { card: { last4: card.number.slice(-4), exp_month: String(card.expMonth).padStart(2, "0"), exp_year: String(card.expYear) } };
}

/** The encryption owner of a payout's destination: a ciphertext only decrypts on its own payout. */
function ownerOf(payout: { merchantId: string; livemode: boolean; payoutId: string }): string {
  return `payout:${payout.merchantId}:${payout.livemode}:${payout.payoutId}`;
}

/** The destination as stored until the payout is final. */
export function sealDestination(
  cipher: DataCipher,
  payout: { merchantId: string; livemode: boolean; payoutId: string },
  destination: PayoutDestination,
): string {
  return cipher.encrypt(JSON.stringify(destination), ownerOf(payout));
}

/** The destination back from its stored ciphertext, to send the payout. */
export function openDestination(
  cipher: DataCipher,
  payout: { merchantId: string; livemode: boolean; payoutId: string },
  ciphertext: string,
): PayoutDestination {
  return JSON.parse(cipher.decrypt(ciphertext, ownerOf(payout))) as PayoutDestination;
}

/** Where payouts keep their sealed destinations, for a rotation's re-encryption. */
export const sealedDestinations: SealedColumn = {
  table: "payouts",
  idColumn: "payout_id",
  column: "destination_ciphertext",
  ownerOf: (row) => ownerOf({ merchantId: row.merchantId, livemode: row.livemode, payoutId: row.id }),
};
