import { describe, expect, it } from "vitest";
import { jsonbText, webhookBody } from "./body.js";

/*
 * A delivery handed over at commit builds its body from the JSON its writer sent; one taken by a look
 * (a retry) from the row PostgreSQL returns. Both must send the same bytes, so the body writes objects
 * in jsonb's key order, as PostgreSQL's documentation gives it (shorter keys first, then bytewise).
 * test/webhooks.test.ts holds the two paths to the same bytes on both databases.
 */

describe("webhook bodies", () => {
  it("orders keys as jsonb does: by length in UTF-8 bytes, then byte by byte", () => {
    expect(jsonbText({ bb: 1, a: 2, ccc: 3, b: 4 })).toBe('{"a":2,"b":4,"bb":1,"ccc":3}');
    // "é" is two bytes, "😀" four: they come after the one-byte keys and in that order.
    expect(jsonbText({ "😀": 1, é: 2, z: 3 })).toBe('{"z":3,"é":2,"😀":1}');
    // Four bytes each: EF BF BF 61 comes before F0 90 80 80, where UTF-16 (FFFF against D800) has it after.
    expect(jsonbText({ 𐀀: 1, "\uffffa": 2 })).toBe('{"\uffffa":2,"𐀀":1}');
  });

  it("writes every key of objects whose keys join alike, and each object's own order", () => {
    expect(jsonbText({ "a\u0000b": 1, c: 2 })).toBe('{"c":2,"a\\u0000b":1}');
    expect(jsonbText({ a: 1, "b\u0000c": 2 })).toBe('{"a":1,"b\\u0000c":2}');
    expect(jsonbText({ ab: { y: 1, x: [2, { b: 3, a: 4 }] }, a: null })).toBe('{"a":null,"ab":{"x":[2,{"a":4,"b":3}],"y":1}}');
    expect(jsonbText({ a: null, ab: { x: [2, { a: 4, b: 3 }], y: 1 } })).toBe('{"a":null,"ab":{"x":[2,{"a":4,"b":3}],"y":1}}');
  });

  it("is the event with its data, whatever the order the data came in", () => {
    const created = new Date("2026-11-27T12:00:00.123Z");
    const body = webhookBody("evt_1", "payment.succeeded", created, { object: { status: "succeeded", amount: 1 } });
    expect(body).toBe(
      '{"event_id":"evt_1","type":"payment.succeeded","created":"2026-11-27T12:00:00.123Z","data":{"object":{"amount":1,"status":"succeeded"}}}',
    );
    expect(webhookBody("evt_1", "payment.succeeded", created, { object: { amount: 1, status: "succeeded" } })).toBe(body);
  });
});
