import type { JsonObject } from "@bufbuild/protobuf";
import { rows, type Sql } from "./database.js";
import type { TestMerchant } from "./merchant.js";
import type { TestService } from "./service.js";

/*
 * The events the service stored, read from its database, so a suite can check what a change wrote
 * without going through the events API (test/events.test.ts covers that API itself).
 */

/** One stored event: its type and the object as the event carries it. */
export interface StoredEvent {
  readonly type: string;
  readonly object: JsonObject;
}

/**
 * The events of one object, oldest first. Events of one clock instant keep the order they were stored
 * in unless `rank` (of their type) orders them: the order a lifecycle enters its statuses in.
 */
export async function eventsOf(
  service: Pick<TestService, "app">,
  merchantId: string,
  objectId: string,
  rank: (type: string) => number = () => 0,
): Promise<StoredEvent[]> {
  const stored: Array<{ type: string; data: { object: JsonObject }; created: Date }> = await service.app.dataSource.query(
    "SELECT type, data, created FROM events WHERE merchant_id = $1 AND object_id = $2 ORDER BY created, event_id",
    [merchantId, objectId],
  );
  return stored
    .sort((a, b) => new Date(a.created).getTime() - new Date(b.created).getTime() || rank(a.type) - rank(b.type))
    .map((r) => ({ type: r.type, object: r.data.object }));
}

/** The types of the events of one object, sorted: what racing calls left behind, whichever won. */
export async function eventTypes(db: Sql, merchant: TestMerchant, objectId: string): Promise<string[]> {
  const found = await rows<{ type: string }>(db, "SELECT type FROM events WHERE merchant_id = $1 AND object_id = $2", [
    merchant.merchantId,
    objectId,
  ]);
  return found.map((row) => row.type).sort();
}
