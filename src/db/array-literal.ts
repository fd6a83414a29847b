/*
 * Batched statements send each column as one array parameter (`unnest($1::varchar[], …)`), about a
 * hundred elements a payment. The driver writes an array's text by running each element through
 * its general conversion and two regular-expression replaces; this writes the same text with one
 * test per string, and leaves every other parameter to the driver.
 */

/** Characters an element inside double quotes must escape with a backslash. */
const needsEscape = /["\\]/;

function quoted(text: string): string {
  return needsEscape.test(text) ? `"${text.replace(/[\\"]/g, "\\$&")}"` : `"${text}"`;
}

function elementLiteral(value: unknown): string {
  switch (typeof value) {
    case "string":
      return quoted(value);
    case "number":
    case "bigint":
    case "boolean":
      return String(value);
    case "undefined":
      return "NULL";
    default:
      if (value === null) return "NULL";
      if (value instanceof Date) return Number.isNaN(value.getTime()) ? '"invalid date"' : `"${value.toISOString()}"`;
      if (Buffer.isBuffer(value)) return `"\\\\x${value.toString("hex")}"`;
      if (Array.isArray(value)) return arrayLiteral(value);
      throw new TypeError(`an array parameter cannot hold ${Object.prototype.toString.call(value)}`);
  }
}

/**
 * PostgreSQL's text form of `values` as an array parameter: strings, numbers, bigints, booleans,
 * dates (as UTC instants), buffers (bytea), nested arrays and nulls; undefined is NULL, as the driver
 * has it. An invalid date is sent as text PostgreSQL refuses, as the driver's would be.
 */
export function arrayLiteral(values: readonly unknown[]): string {
  let text = "{";
  for (let i = 0; i < values.length; i++) {
    if (i > 0) text += ",";
    text += elementLiteral(values[i]);
  }
  return `${text}}`;
}

/** `values` with each array written as `arrayLiteral` writes it, for a statement's parameters. */
export function withArrayLiterals(values: readonly unknown[]): unknown[] {
  return values.map((value) => (Array.isArray(value) ? arrayLiteral(value) : value));
}
