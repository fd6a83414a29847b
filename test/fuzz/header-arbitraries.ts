import * as fc from "fast-check";
import { Access } from "../../gen/paymentservice/v1/options_pb.js";
import type { Fixtures } from "./fixtures.js";
import type { ApiMethod } from "./schema.js";
import { longText, unknownId } from "./value-arbitraries.js";

/** A header as it goes on the wire; a name may repeat. */
export type Header = readonly [string, string];

/**
 * Credentials and idempotency keys, the headers every protocol shares. Most requests carry the
 * credentials the method's `(access)` option asks for, so they reach the handler; the rest try
 * every other kind of key, garbage and nothing.
 */
export class HeaderArbitraries {
  /** The admin key of the server under test; a wrong one is also tried. */
  constructor(
    private readonly fixtures: Fixtures,
    private readonly adminApiKey: string,
  ) {}

  /** Credentials for a call of `method`. */
  credentials(method: ApiMethod | undefined): fc.Arbitrary<Header[]> {
    const { keys } = this.fixtures;
    const apiKey = (value: string): Header[] => [["api-key", value]];
    const admin: Header[] = [["admin-api-key", this.adminApiKey]];
    const fitting: Header[][] =
      method === undefined
        ? [apiKey(keys.sandboxSecret)]
        : method.access === Access.ADMIN
          ? [admin]
          : method.access === Access.ADMIN_OR_SECRET_KEY
            ? [admin, apiKey(keys.sandboxSecret)]
            : method.access === Access.ANY_KEY || method.access === Access.CLIENT_SECRET
              ? [apiKey(keys.sandboxSecret), apiKey(keys.sandboxPublishable)]
              : [apiKey(keys.sandboxSecret)];
    const garbageKey = fc.oneof(
      fc.constantFrom("", "snd_", "Bearer snd_x", "prd_", "pk_snd_", "admin", " ".repeat(3), "snd_é"),
      unknownId("snd"),
      longText(1_000, 10_000).map((text) => text.replace(/[^\x21-\x7e]/g, "k")),
    );
    return fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom(...fitting) },
      {
        weight: 4,
        arbitrary: fc.constantFrom<Header[]>(
          apiKey(keys.sandboxSecret),
          apiKey(keys.sandboxPublishable),
          apiKey(keys.productionSecret),
          apiKey(keys.revoked),
          apiKey(keys.otherMerchantSecret),
          admin,
          [["admin-api-key", "wrong-admin-key"]],
          [...apiKey(keys.sandboxSecret), ...admin],
          [...apiKey(keys.sandboxSecret), ...apiKey(keys.productionSecret)],
          [],
        ),
      },
      { weight: 1, arbitrary: garbageKey.map(apiKey) },
    );
  }

  /** An idempotency key now and then: fresh, shared by several requests, empty, or too long. */
  readonly idempotency: fc.Arbitrary<Header[]> = fc.oneof(
    { weight: 10, arbitrary: fc.constant<Header[]>([]) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constantFrom("X-Idempotency-Key", "Idempotency-Key"),
          fc.oneof(fc.uuid(), fc.constantFrom("order-1", "order-2", "", "k".repeat(256), "k".repeat(300), "é")),
        )
        .map(([name, value]): Header[] => [[name, value]]),
    },
  );
}
