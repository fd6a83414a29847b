import { invalidRequest, type ApiError } from "../errors.js";

/** A NUL, or a surrogate without its pair: `\uD800-\uDBFF` not followed by `\uDC00-\uDFFF`, or the reverse. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching NUL is the point, PostgreSQL refuses it in text
const illFormed = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Whether a string can be kept as text: PostgreSQL refuses NUL in text, and an unpaired surrogate
 * (which JSON's `\ud800` escapes can produce) is no Unicode character at all, so has no UTF-8 form.
 */
export function isWellFormedText(value: string): boolean {
  return !illFormed.test(value);
}

/** The refusal of text that is not well-formed: IR_06 naming the field. */
export function illFormedText(path: string): ApiError {
  return invalidRequest(`Invalid value for field ${path}: text must not contain NUL characters or unpaired UTF-16 surrogates`);
}

/** IR_06 naming the field, unless `value` is well-formed text. */
export function checkText(value: string, path: string): void {
  if (!isWellFormedText(value)) throw illFormedText(path);
}
