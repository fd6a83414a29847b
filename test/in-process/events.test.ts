import type { Client } from "@connectrpc/connect";
import { beforeEach, describe, expect, it } from "vitest";
import { EventService } from "../../gen/paymentservice/v1/event_pb.js";
import { PaymentService } from "../../gen/paymentservice/v1/payment_pb.js";
import { inProcessSuite } from "../support/in-process.js";
import { ScriptedProcessor } from "../support/scripted-processor.js";

/*
 * Event retention through the router transport, with the job runner driven by the test clock: the
 * runner's upkeep removes events older than EVENT_RETENTION_DAYS (30 by default), and only those.
 */

const processor = new ScriptedProcessor("scripted");
const suite = inProcessSuite(processor);
let payments: Client<typeof PaymentService>;
let events: Client<typeof EventService>;

beforeEach(() => {
  payments = suite.client(PaymentService);
  events = suite.client(EventService);
});

const day = 86_400_000;

describe("retention", () => {
  it("removes an event once it is older than 30 days, and keeps a younger one", async () => {
    const old = await payments.createPayment({ amount: 100n, currency: "USD", profileId: suite.merchant.profileId });
    suite.services.clock.advance(20 * day);
    const young = await payments.createPayment({ amount: 200n, currency: "USD", profileId: suite.merchant.profileId });
    const [oldEvent] = (await events.listEvents({ objectId: old.paymentId })).data;
    expect(oldEvent?.type).toBe("payment.requires_payment_method");

    suite.services.clock.advance(10 * day + 60_000);
    await suite.services.jobs.runDue();

    expect((await events.listEvents({ objectId: old.paymentId })).data).toEqual([]);
    await expect(events.retrieveEvent({ eventId: oldEvent!.eventId })).rejects.toMatchObject({
      rawMessage: `Event not found: ${oldEvent!.eventId}`,
    });
    expect((await events.listEvents({ objectId: young.paymentId })).data.map((event) => event.type)).toEqual([
      "payment.requires_payment_method",
    ]);
  });
});
