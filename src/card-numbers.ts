/*
 * Recognising card numbers wherever they appear, so that one sent by mistake where no card number
 * belongs (an id, a metadata key, a path) is never echoed to a client or written to a log.
 */

/** The Luhn check digit catches typos before a number ever reaches a processor. */
export function passesLuhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let digit = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

/**
 * A run of 13 to 19 digits, single spaces or dashes allowed between them, starting as card numbers
 * of the networks we know do (2 to 6): how card numbers are written, and never an epoch timestamp.
 */
const cardLike = /(?<!\d)[2-6](?:[ -]?\d){12,18}(?!\d)/g;

/** The text with every run of digits that could be a card number (cardLike, passing the Luhn check) replaced. */
export function redactCardNumbers(text: string): string {
  return text.replace(cardLike, (run) => (passesLuhn(run.replace(/[ -]/g, "")) ? "[redacted]" : run));
}
