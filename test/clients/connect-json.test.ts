import { describe, it } from "vitest";
import type { JsonBody } from "../support/clients.js";
import { newMerchant } from "../support/merchant.js";
import { runningService } from "../support/running.js";
import { type CallResult, type ClientFamily, errorDetailOf, runClientScenario } from "./scenario.js";

/*
 * The service called as someone with only an HTTP client would call it: Connect's JSON protocol,
 * a POST of the request message to /package.Service/Method, no library of ours or Connect's.
 */

const service = runningService();

/** Connect JSON over fetch. */
const connectJson: ClientFamily = {
  async call(method, request, headers): Promise<CallResult> {
    const res = await fetch(`${service.url}/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1", ...headers },
      body: JSON.stringify(request),
    });
    const body = (await res.json()) as JsonBody;
    if (res.ok) return { ok: true, message: body, replayed: res.headers.get("idempotent-replayed") === "true" };
    return { ok: false, code: body.code, message: body.message, detail: errorDetailOf(body.details) };
  },

  async firstOfStream(method, request, headers) {
    // A Connect streaming request is one enveloped message: a flags byte, a 4-byte length, the JSON.
    const json = Buffer.from(JSON.stringify(request));
    const envelope = Buffer.concat([Buffer.from([0]), Buffer.alloc(4), json]);
    envelope.writeUInt32BE(json.length, 1);
    const res = await fetch(`${service.url}/${method}`, {
      method: "POST",
      headers: { "content-type": "application/connect+json", "connect-protocol-version": "1", ...headers },
      body: envelope,
    });
    let buffered = Buffer.alloc(0);
    // Leaving the loop cancels the body, which ends the stream.
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
        const message = JSON.parse(buffered.subarray(5, 5 + buffered.readUInt32BE(1)).toString());
        if ((buffered[0]! & 0b10) !== 0) throw new Error(`the stream ended: ${JSON.stringify(message)}`);
        return message;
      }
    }
    throw new Error("the stream ended without a message");
  },
};

describe("Connect JSON over plain HTTP", () => {
  it("runs the client scenario", async () => {
    await runClientScenario(connectJson, await newMerchant(service.url));
  });
});
