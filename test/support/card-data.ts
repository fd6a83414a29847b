import { expect } from "vitest";

/*
 * The search for card data in what the service wrote (a response body, a log line, a table row),
 * shared by the card-data suite and the log redaction fuzz. It is written apart from the service's
 * own redaction (src/card-numbers.ts) so that it does not share its mistakes.
 */

/** What a test sent that must not come back: the card numbers and the CVCs. */
export interface SentCardData {
  readonly numbers: readonly string[];
  readonly cvcs: readonly string[];
}

/** Digits of `number`, allowing a space or dash between any two, as a log or a form might write it. */
function cardPattern(number: string): RegExp {
  return new RegExp(number.split("").join("[ -]?"));
}

function passesLuhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let digit = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return sum % 10 === 0;
}

/**
 * A record that speaks of the CVC: the word on its own or as a field name (card_cvc, cardCvc), not
 * three letters that happen to occur inside a random id (`req_…CvC…`).
 */
const aboutCvc = /(?<![a-z0-9])(card_?)?cv[cv](?![a-z0-9])|cardCv[cv]/i;

/**
 * What in one record looks like card data: one of the numbers sent (also spaced or dashed), a
 * Luhn-valid run of 13–19 digits starting as card numbers do (2 to 6: never an epoch timestamp), a
 * CVC sent in a record that speaks of CVCs, or any value given to a cvc field. A digit run inside a
 * word (a hex digest, a random id) is not taken for a card number: one in ten such runs passes Luhn,
 * and a key's SHA-256 held one (`\\xa2328215157326304…`).
 */
export function cardDataIn(written: string, sent: SentCardData): string[] {
  // Percent-encoded (a path, a query string) card data is card data too.
  const record = `${written}\n${percentDecoded(written)}`;
  const found: string[] = [];
  for (const number of sent.numbers) {
    if (cardPattern(number).test(record)) found.push(`card number ${number.slice(0, 6)}…`);
  }
  for (const run of record.match(/(?<![0-9A-Za-z])[2-6]\d{12,18}(?![0-9A-Za-z])/g) ?? []) {
    if (passesLuhn(run)) found.push(`Luhn-valid digit run ${run.slice(0, 6)}…`);
  }
  if (aboutCvc.test(record) && sent.cvcs.some((cvc) => new RegExp(`\\b${cvc}\\b`).test(record)))
    found.push("a CVC in a record about the CVC");
  if (/(cvc|cvv)["'\s]*[:=]\s*["']?\d{3,4}\b/i.test(record)) found.push("a CVC value");
  return found;
}

function percentDecoded(text: string): string {
  return text.replace(/(%[0-9A-Fa-f]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run;
    }
  });
}

/** Fails the test with every record holding card data, and what was found in it. */
export function expectNoCardData(records: readonly string[], where: string, sent: SentCardData): void {
  const findings = records.flatMap((record) => cardDataIn(record, sent).map((finding) => `${finding} in: ${record.slice(0, 300)}`));
  expect(findings, `card data in ${where}`).toEqual([]);
}
