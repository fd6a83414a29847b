import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withArrayLiterals } from "../src/db/array-literal.js";
import { databaseOfItsOwn, onDatabase } from "./support/database.js";

/*
 * What a batched statement sends as an array parameter (db/array-literal.ts) is what PostgreSQL reads
 * back, element for element, for every kind of value the service's columns hold: on the database the
 * run uses, PostgreSQL or the embedded one.
 */

describe("array parameters", () => {
  let url: string;
  let close: () => Promise<void> = async () => {};

  beforeAll(async () => {
    ({ url, close } = await databaseOfItsOwn("array-parameters"));
  }, 60_000);

  afterAll(() => close());

  /** The elements PostgreSQL reads from `values` sent as one `type[]` parameter, as text. */
  const readBack = (type: string, values: unknown[]) =>
    onDatabase(url, async (db) => {
      const { rows } = await db.query<{ element: string | null }>({
        text: `SELECT element::text FROM unnest($1::${type}[]) WITH ORDINALITY AS t(element, n) ORDER BY n`,
        values: withArrayLiterals([values]),
      });
      return rows.map((row) => row.element);
    });

  it("reads strings back unchanged, whatever they hold", async () => {
    const strings = [
      "pay_1",
      "",
      "NULL",
      "null",
      "a,b",
      "{x}",
      " spaced ",
      'say "hi"',
      "back\\slash",
      '\\"',
      "é – 漢字 🙂",
      "line\nbreak\ttab",
    ];
    expect(await readBack("text", strings)).toEqual(strings);
    expect(await readBack("varchar", [...strings, null])).toEqual([...strings, null]);
  });

  it("reads JSON text back as the same JSON", async () => {
    const documents = [{ order: 'A "quoted" \\ id', nested: { list: [1, "two", null] } }, {}, { emoji: "🙂" }];
    const text = await readBack(
      "jsonb",
      documents.map((document) => JSON.stringify(document)),
    );
    expect(text.map((t) => JSON.parse(t!))).toEqual(documents);
  });

  it("reads numbers, booleans, timestamps and bytes back as the values sent", async () => {
    expect(await readBack("bigint", [1n, -9223372036854775808n, 9223372036854775807n, null])).toEqual([
      "1",
      "-9223372036854775808",
      "9223372036854775807",
      null,
    ]);
    expect(await readBack("integer", [0, -7, 2147483647])).toEqual(["0", "-7", "2147483647"]);
    expect(await readBack("boolean", [true, false, undefined])).toEqual(["true", "false", null]);
    const instants = [new Date("2026-11-30T16:00:00.123Z"), new Date("1999-12-31T23:59:59.999Z")];
    const read = await onDatabase(url, async (db) => {
      const { rows } = await db.query<{ element: Date }>({
        text: "SELECT element FROM unnest($1::timestamptz[]) WITH ORDINALITY AS t(element, n) ORDER BY n",
        values: withArrayLiterals([instants]),
      });
      return rows.map((row) => row.element.getTime());
    });
    expect(read).toEqual(instants.map((instant) => instant.getTime()));
    expect(await readBack("bytea", [Buffer.from([0, 255, 16, 92, 34])])).toEqual(["\\x00ff105c22"]);
  });

  it("refuses an invalid date as PostgreSQL refuses bad input, not as a different instant", async () => {
    await expect(readBack("timestamptz", [new Date(Number.NaN)])).rejects.toMatchObject({ code: "22007" });
  });
});
