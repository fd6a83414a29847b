import createClient from "openapi-fetch";
import type { paths } from "./generated/schema.js";

// Calls the service refuses, which a client generated from gen/openapi.json must refuse too: each
// line below is a type error, and `tsc` fails on a @ts-expect-error that finds none. (An unknown key
// is not among them: openapi-fetch's generic request type escapes TypeScript's excess property
// check, though the schema says additionalProperties: false.)

const client = createClient<paths>({ baseUrl: "http://localhost:8080" });

export async function refused(): Promise<void> {
  // @ts-expect-error a payment needs an amount
  await client.POST("/payments", { body: { currency: "USD", profile_id: "pro_x" } });
  // @ts-expect-error an amount is a number of the smallest currency unit, not text
  await client.POST("/payments", { body: { amount: "1000", currency: "USD", profile_id: "pro_x" } });
  // @ts-expect-error a required field cannot be null
  await client.POST("/payments", { body: { amount: null, currency: "USD", profile_id: "pro_x" } });
  // @ts-expect-error a create needs its body
  await client.POST("/payments", {});
  // @ts-expect-error capture_method is one of the documented words
  await client.POST("/payments", { body: { amount: 1000, currency: "USD", profile_id: "pro_x", capture_method: "later" } });
  // @ts-expect-error a refund names its payment
  await client.POST("/refunds", { body: { amount: 100 } });
}
