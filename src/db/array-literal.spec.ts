import { describe, expect, it } from "vitest";
import { arrayLiteral, withArrayLiterals } from "./array-literal.js";

describe("arrayLiteral", () => {
  it("quotes every string, escaping only a double quote and a backslash", () => {
    expect(arrayLiteral(["pay_1", "", "NULL", "a,b", "{x}", " spaced ", 'say "hi"', "back\\slash"])).toBe(
      '{"pay_1","","NULL","a,b","{x}"," spaced ","say \\"hi\\"","back\\\\slash"}',
    );
  });

  it("writes numbers, bigints and booleans bare, and null or undefined as NULL", () => {
    expect(arrayLiteral([1, -2.5, 9007199254740993n, true, false, null, undefined])).toBe("{1,-2.5,9007199254740993,true,false,NULL,NULL}");
  });

  it("writes a date as its UTC instant, and an invalid one as text no timestamp accepts", () => {
    expect(arrayLiteral([new Date("2026-11-30T16:00:00.123Z"), new Date(Number.NaN)])).toBe('{"2026-11-30T16:00:00.123Z","invalid date"}');
  });

  it("writes a buffer as bytea's hex form, and a nested array as a nested literal", () => {
    expect(arrayLiteral([Buffer.from([0, 255, 16])])).toBe('{"\\\\x00ff10"}');
    expect(arrayLiteral([["a", null], ["b"]])).toBe('{{"a",NULL},{"b"}}');
  });

  it("refuses an object it has no text for, rather than send what the column would misread", () => {
    expect(() => arrayLiteral([{ amount: 1 }])).toThrow(TypeError);
  });

  it("leaves every parameter that is not an array to the driver", () => {
    const buffer = Buffer.from("x");
    const date = new Date(0);
    expect(withArrayLiterals(["text", 1, null, buffer, date, ["a"]])).toEqual(["text", 1, null, buffer, date, '{"a"}']);
  });
});
