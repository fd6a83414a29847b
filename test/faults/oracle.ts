import { fromBinary, type DescMessage } from "@bufbuild/protobuf";
import { ConnectError, type Client } from "@connectrpc/connect";
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { PaymentSchema, PaymentService, PaymentStatusSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { PayoutSchema } from "../../gen/paymentservice/v1/payout_pb.js";
import { RefundSchema, RefundService, RefundStatusSchema } from "../../gen/paymentservice/v1/refund_pb.js";
import { paymentStates } from "../../src/payments/states.js";
import { payoutStates } from "../../src/payouts/states.js";
import { refundStates } from "../../src/refunds/states.js";
import { enumWord } from "../../src/enum-words.js";
import type { StateMachine } from "../../src/state-machine.js";
import { cardData } from "../support/cards.js";
import { rest, rpcClient, type JsonBody } from "../support/clients.js";
import { rows } from "../support/database.js";
import type { TestMerchant } from "../support/merchant.js";
import { payoutAccounts, payoutBodies, payoutCards } from "../support/payout-destinations.js";
import { runNpmScript } from "../support/server-log.js";
import type { ServerProcess } from "../support/server-process.js";

/*
 * The money oracle of the fault tests that take instances or their database away under load (issue
 * 18): client loops create, confirm, capture, refund and pay out with idempotency keys against
 * whichever instances are up. A request that fails with a connection error, a 5xx or IK_01 (its key
 * is still held by a request that was running) is sent again with the same key to an instance that is
 * up, until a definitive answer. Every acknowledged answer is recorded. Once the run ends the jobs it
 * left must drain, and then the database, the API and the sandbox's books must agree with every
 * acknowledgement, and `npm run ledger:verify` must find every balance equal to its recomputation.
 * The oracle counts violations rather than stopping at the first, so one run says everything that
 * went wrong. What takes the instances or the database away is the test's own.
 */

/** The longest the jobs left by the run may take to drain once it ends (issue 18). */
export const drainLimitMs = 30_000;

/** The kinds of object the clients make. */
export type Resource = "payment" | "refund" | "payout";

/** One acknowledged answer: the object and the status the service said it was in. */
export interface Ack {
  readonly resource: Resource;
  readonly id: string;
  readonly status: string;
  readonly key: string;
  /** Date.now() when the answer came: the failover test times the first success after a promotion by it. */
  readonly at: number;
}

/** What the oracle runs against: the test decides which instances are up and where the run's data lives. */
export interface OracleOptions {
  /** The instances up now, for the clients to call; while none is, they wait. */
  readonly instances: () => readonly Pick<ServerProcess, "url">[];
  /** The merchants the clients act for, in turn; the checks read only their data. */
  readonly merchants: readonly TestMerchant[];
  /** Reads the run's database for the backlog and the checks. */
  readonly db: pg.Client | pg.Pool;
  /** The environment `npm run ledger:verify` runs in: the run's database, as an operator's command would see it. */
  readonly ledgerEnv: NodeJS.ProcessEnv;
}

/** How the run's backlog drained once it ended, for the checks and the report. */
export interface Drained {
  /** From the end of the run until the clients were answered and the backlog was empty (150 s at most). */
  readonly ms: number;
  /** When the clients' last requests were answered, after the end of the run. */
  readonly clientsFinishedMs: number;
  /** The backlog at the end of the run. */
  readonly atEnd: Record<string, number>;
  /** The backlog when the drain stopped waiting: empty unless it gave up. */
  readonly left: Record<string, number>;
  /** What was still left once the drain was late, to say which job or object held it up. */
  readonly late: unknown;
}

/** What the checks found: every violation and how much they looked at. */
export interface Verdict {
  readonly violations: string[];
  readonly checked: {
    acknowledged: number;
    keys: number;
    objects: number;
    payments: number;
    payouts: number;
    transfers: number;
    events: number;
    authorizations: number;
    ledger: { balances: number; transactions: number };
  };
  /** The run's objects by status, per resource. */
  readonly objects: Record<"payments" | "refunds" | "payouts", Record<string, number>>;
}

/** A definitive answer: 200 with the object, or a documented refusal. */
type Outcome = { readonly ok: true; readonly body: JsonBody } | { readonly ok: false; readonly code: string };

/**
 * What one try of a call came to: a definitive answer, or why to try again elsewhere (the instance went
 * away, failed, was unavailable or refused for load, or another request still holds the key).
 */
type Attempt = { readonly outcome: Outcome } | { readonly retry: "connection" | "in flight" | "internal" | "unavailable" | "server" };

const { bankPayout, cardPayout } = payoutBodies(() => new Date());
const card = (number = "4242424242424242") => cardData(number, new Date());

/** The client loops of one run and the checks of what they were told: one per test, as it keeps their counts. */
export class MoneyOracle {
  /** What the clients counted, for the report. */
  readonly counts = {
    requests: 0,
    acknowledged: 0,
    refused: 0,
    connectionErrors: 0,
    serverErrors: 0,
    /** Of those, 500 HE_00: a fault of ours, never expected while only the database fails. */
    internalErrors: 0,
    inFlightConflicts: 0,
    retriedRequests: 0,
    /** Calls sent again after at least one 503 (SU_01 over Connect): the service said it could not serve them then. */
    retriedAfter503: 0,
    overConnect: 0,
  };
  /** Every acknowledged answer, which the checks hold the service to. */
  readonly acks: Ack[] = [];
  /** Definitive refusals by code, for the report. */
  readonly refusals = new Map<string, number>();
  /** Keys of calls that create an object, with the resource they create. */
  private readonly createKeys = new Map<string, Resource>();
  /** Keys of calls that act on an existing object, with that object. */
  private readonly actionKeys = new Map<string, { resource: Resource; id: string }>();
  /** Typed Connect clients per instance url and merchant, made once. */
  private readonly connectClients = new Map<string, { payments: Client<typeof PaymentService>; refunds: Client<typeof RefundService> }>();
  /** The backlog at its largest during the run, looked at twice a second. */
  private readonly peakBacklog: Record<string, number> = {};
  private readonly merchantIds: string[];
  private keySeq = 0;
  private clients: Promise<void>[] = [];
  private sampling: Promise<void> = Promise.resolve();

  constructor(private readonly options: OracleOptions) {
    this.merchantIds = options.merchants.map((m) => m.merchantId);
  }

  /**
   * Starts `loops` clients over the merchants in turn, and the sampling of the backlog, until
   * `running()` turns false; each client finishes the request in hand, which `drain` waits for.
   */
  start(loops: number, running: () => boolean): void {
    const { merchants, db } = this.options;
    this.clients = Array.from({ length: loops }, (_, i) => this.clientLoop(i, merchants[i % merchants.length]!, running));
    this.sampling = (async () => {
      while (running()) {
        // A database failing over answers no sample for seconds: the peak is a figure, not a check.
        const sample = await backlog(db, this.merchantIds).catch(() => ({}));
        for (const [what, n] of Object.entries(sample)) this.peakBacklog[what] = Math.max(this.peakBacklog[what] ?? 0, n);
        await sleep(500);
      }
    })();
  }

  /**
   * Waits, from `end` (when the run ended), until the clients' last requests are answered and nothing
   * is left to settle: no job due or in hand, nothing transitional, no key in flight. Gives up 150 s
   * after `end`, so a backlog that never drains is reported rather than hung on.
   */
  async drain(end: number): Promise<Drained> {
    const { db } = this.options;
    let clientsDone: number | undefined;
    void Promise.all(this.clients).then(() => {
      clientsDone = Date.now();
    });
    await this.sampling;
    const atEnd = await backlog(db, this.merchantIds);
    let left = atEnd;
    let late: unknown;
    while ((clientsDone === undefined || Object.values(left).some((n) => n > 0)) && Date.now() - end < 150_000) {
      await sleep(100);
      left = await backlog(db, this.merchantIds);
      if (late === undefined && Date.now() - end > drainLimitMs) late = await backlogRows(db, this.merchantIds);
    }
    const ms = Date.now() - end;
    await Promise.all(this.clients);
    return { ms, clientsFinishedMs: clientsDone! - end, atEnd, left, late };
  }

  /** Holds the database, the API and the sandbox's books to every acknowledgement once the run has drained. */
  async check(drained: Drained): Promise<Verdict> {
    const { db, merchants } = this.options;
    const { acks, createKeys, actionKeys, merchantIds } = this;
    const violations: string[] = [];
    const checked = {
      acknowledged: 0,
      keys: 0,
      objects: 0,
      payments: 0,
      payouts: 0,
      transfers: 0,
      events: 0,
      authorizations: 0,
      ledger: { balances: 0, transactions: 0 },
    };
    for (const [what, n] of Object.entries(drained.left)) if (n > 0) violations.push(`after the drain: ${n} ${what}`);

    // 1. Every acknowledged object exists, in the API and the database, at or after the acknowledged status.
    const api = this.options.instances()[0]!;
    const stored = new Map<string, { status: string; resource: Resource }>();
    for (const resource of Object.keys(tables) as Resource[]) {
      const { table, id } = tables[resource];
      for (const row of await rows<{ id: string; status: string }>(
        db,
        `SELECT ${id} AS id, status FROM ${table} WHERE merchant_id = ANY($1)`,
        [merchantIds],
      )) {
        stored.set(row.id, { status: row.status, resource });
      }
    }
    const merchantOf = new Map<string, TestMerchant>();
    for (const ack of acks) merchantOf.set(ack.key, merchants[Number(/^c(\d+)-/.exec(ack.key)![1]) % merchants.length]!);
    const latestAck = new Map<string, Ack>();
    for (const ack of acks) latestAck.set(ack.id, ack);
    const apiStatus = new Map<string, string>();
    const toRetrieve = [...latestAck.values()];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let ack = toRetrieve.pop(); ack !== undefined; ack = toRetrieve.pop()) {
          const res = await rest(api.url, "GET", `/${tables[ack.resource].table}/${ack.id}`, { apiKey: merchantOf.get(ack.key)!.apiKey });
          if (res.status === 200) apiStatus.set(ack.id, res.body.status);
          else violations.push(`${ack.resource} ${ack.id}: GET answered ${res.status} ${res.body?.error?.code}`);
        }
      }),
    );
    for (const ack of acks) {
      checked.acknowledged++;
      const row = stored.get(ack.id);
      if (row === undefined) {
        violations.push(`acknowledged ${ack.resource} ${ack.id} (${ack.status}, key ${ack.key}) is not in the database`);
        continue;
      }
      if (!atOrAfter(machines[ack.resource], ack.status, row.status)) {
        violations.push(`${ack.resource} ${ack.id} acknowledged ${ack.status} (key ${ack.key}) but is ${row.status}`);
      }
      const seen = apiStatus.get(ack.id);
      if (seen !== undefined && seen !== row.status)
        violations.push(`${ack.resource} ${ack.id}: the API says ${seen}, the database ${row.status}`);
    }

    // 2. One object per idempotency key: each create key's stored response names an object, no object has two keys or none.
    const keyRows = await rows<{ idempotency_key: string; state: string; response: Buffer | null }>(
      db,
      "SELECT idempotency_key, state, response FROM idempotency_keys WHERE merchant_id = ANY($1)",
      [merchantIds],
    );
    const keysOfObject = new Map<string, string[]>();
    const storedKeys = new Set<string>();
    for (const key of keyRows) {
      checked.keys++;
      storedKeys.add(key.idempotency_key);
      const resource = createKeys.get(key.idempotency_key) ?? actionKeys.get(key.idempotency_key)?.resource;
      if (resource === undefined) {
        violations.push(`key ${key.idempotency_key} is stored but no client sent it`);
        continue;
      }
      if (key.state !== "completed" || key.response === null) {
        violations.push(`key ${key.idempotency_key} is ${key.state}`);
        continue;
      }
      const { schema, idField } = tables[resource];
      const objectId = (fromBinary(schema, key.response) as unknown as Record<string, string>)[idField]!;
      if (!stored.has(objectId)) violations.push(`key ${key.idempotency_key} answered ${resource} ${objectId}, which does not exist`);
      const action = actionKeys.get(key.idempotency_key);
      if (action !== undefined) {
        if (action.id !== objectId) violations.push(`key ${key.idempotency_key} was for ${action.id} but answered ${objectId}`);
        continue;
      }
      keysOfObject.set(objectId, [...(keysOfObject.get(objectId) ?? []), key.idempotency_key]);
    }
    for (const ack of acks) {
      if (!storedKeys.has(ack.key)) violations.push(`acknowledged key ${ack.key} has no stored response`);
    }
    for (const [id, { resource }] of stored) {
      checked.objects++;
      const keys = keysOfObject.get(id) ?? [];
      if (keys.length !== 1) violations.push(`${resource} ${id} was created by ${keys.length} keys: ${keys.join(", ")}`);
    }

    // 3. Refunds never exceed what was captured.
    const overRefunded = await rows<{ payment_id: string; received: string; refunded: string }>(
      db,
      `SELECT p.payment_id, coalesce(p.amount_received, 0)::text AS received, sum(r.amount)::text AS refunded
         FROM payments p JOIN refunds r USING (merchant_id, livemode, payment_id)
        WHERE p.merchant_id = ANY($1) AND r.status IN ('pending', 'succeeded', 'manual_review')
        GROUP BY p.payment_id, p.amount_received HAVING sum(r.amount) > coalesce(p.amount_received, 0)`,
      [merchantIds],
    );
    const [refundedPayments] = await rows<{ n: number }>(
      db,
      "SELECT count(DISTINCT payment_id)::int AS n FROM refunds WHERE merchant_id = ANY($1)",
      [merchantIds],
    );
    checked.payments = refundedPayments!.n;
    for (const p of overRefunded) violations.push(`payment ${p.payment_id}: refunded ${p.refunded} of ${p.received} received`);

    // 4. No payout paid twice, by the sandbox bank's own books: one transfer per attempt, one succeeded transfer iff success.
    const payouts = await rows<{
      payout_id: string;
      status: string;
      attempts: { attempt_id: string; processor: string; status: string }[];
    }>(db, "SELECT payout_id, status, attempts FROM payouts WHERE merchant_id = ANY($1)", [merchantIds]);
    const transfers = await rows<{ rail: string; idempotency_key: string; status: string }>(
      db,
      "SELECT rail, idempotency_key, outcome->>'status' AS status FROM sandbox_payout_transfers",
    );
    const transfersOf = new Map<string, { rail: string; status: string }[]>();
    for (const t of transfers) transfersOf.set(t.idempotency_key, [...(transfersOf.get(t.idempotency_key) ?? []), t]);
    for (const p of payouts) {
      checked.payouts++;
      const booked = p.attempts.flatMap((a) => transfersOf.get(a.attempt_id) ?? []);
      checked.transfers += booked.length;
      const paid = booked.filter((t) => t.status === "succeeded").length;
      if (paid > 1) violations.push(`payout ${p.payout_id} paid ${paid} times: ${JSON.stringify(booked)}`);
      if ((paid === 1) !== (p.status === "success"))
        violations.push(`payout ${p.payout_id} is ${p.status} but the books show ${paid} payments`);
      for (const a of p.attempts) {
        const t = transfersOf.get(a.attempt_id) ?? [];
        if (t.length > 1) violations.push(`attempt ${a.attempt_id} of ${p.payout_id} booked ${t.length} times`);
      }
    }

    // 5. Events: the latest event of each object is its status, no status entered twice, every acknowledged status has its event.
    const events = await rows<{ object_id: string; type: string; status: string }>(
      db,
      "SELECT object_id, type, data->'object'->>'status' AS status FROM events WHERE merchant_id = ANY($1) ORDER BY seq",
      [merchantIds],
    );
    const eventsOf = new Map<string, { type: string; status: string }[]>();
    for (const e of events) eventsOf.set(e.object_id, [...(eventsOf.get(e.object_id) ?? []), e]);
    for (const [id, { resource, status }] of stored) {
      checked.events++;
      const list = eventsOf.get(id) ?? [];
      const last = list.at(-1);
      if (last === undefined || last.type !== `${resource}.${status}` || last.status !== status) {
        violations.push(`${resource} ${id} is ${status} but its latest event is ${last?.type} (${last?.status})`);
      }
      const types = list.map((e) => e.type);
      if (new Set(types).size !== types.length) violations.push(`${resource} ${id} entered a status twice: ${types.join(", ")}`);
    }
    for (const ack of acks) {
      if (!(eventsOf.get(ack.id) ?? []).some((e) => e.type === `${ack.resource}.${ack.status}`)) {
        violations.push(`${ack.resource} ${ack.id}: no ${ack.resource}.${ack.status} event for the acknowledged status`);
      }
    }

    // 6. No authorization without its payment, by the sandbox processor's own books: every authorization
    // it granted (authorized or captured) under a processor key of the run's merchants belongs to the
    // payment its key names, which holds its reference; and no payment was granted two.
    const granted = await rows<{ idempotency_key: string; status: string; reference: string; holders: string[] | null }>(
      db,
      `SELECT c.idempotency_key, c.outcome->>'status' AS status, c.outcome->>'reference' AS reference,
              (SELECT array_agg(p.payment_id) FROM payments p
                WHERE p.merchant_id = ANY($1) AND p.processor_reference = c.outcome->>'reference') AS holders
         FROM sandbox_processor_calls c
        WHERE c.operation = 'authorize' AND c.outcome->>'status' IN ('authorized', 'captured') AND c.idempotency_key LIKE ANY($2)`,
      [merchantIds, merchantIds.map((id) => `${id}:%`)],
    );
    const grantsOf = new Map<string, string[]>();
    for (const grant of granted) {
      checked.authorizations++;
      const paymentId = grant.idempotency_key.split(":")[1]!;
      grantsOf.set(paymentId, [...(grantsOf.get(paymentId) ?? []), grant.idempotency_key]);
      const holders = grant.holders ?? [];
      if (holders.length !== 1 || holders[0] !== paymentId) {
        violations.push(
          `the processor ${grant.status} ${grant.reference} (key ${grant.idempotency_key}) but the payments holding it are [${holders.join(", ")}]`,
        );
      }
    }
    for (const [paymentId, keys] of grantsOf) {
      if (keys.length > 1) violations.push(`payment ${paymentId} was authorized ${keys.length} times: ${keys.join(", ")}`);
    }

    // 7. The ledger adds up: every balance equals its recomputation from the objects, every entry is
    // balanced. Checked by `npm run ledger:verify` on this run's database, as an operator runs it.
    const ledger = await runNpmScript("ledger:verify", this.options.ledgerEnv);
    const verified = ledger.output.split("\n").find((line) => line.includes('"message":"ledger verified"'));
    if (ledger.code !== 0 || verified === undefined) {
      violations.push(`npm run ledger:verify exited ${ledger.code}: ${ledger.output.split("\n").slice(-20).join("\n")}`);
    } else {
      const { balances, transactions } = JSON.parse(verified) as { balances: number; transactions: number };
      checked.ledger = { balances, transactions };
    }

    const byStatus = (resource: Resource) => {
      const tally: Record<string, number> = {};
      for (const o of stored.values()) if (o.resource === resource) tally[o.status] = (tally[o.status] ?? 0) + 1;
      return tally;
    };
    return { violations, checked, objects: { payments: byStatus("payment"), refunds: byStatus("refund"), payouts: byStatus("payout") } };
  }

  /** The report's lines about the clients, the drain and the checks; the test prints them beside its own. */
  report(drained: Drained, verdict: Verdict) {
    return {
      clients_finished_after_s: drained.clientsFinishedMs / 1000,
      ...this.counts,
      refusals: Object.fromEntries(this.refusals),
      peak_backlog: this.peakBacklog,
      backlog_at_end: drained.atEnd,
      drain_s: drained.ms / 1000,
      late_backlog: drained.late,
      checked: verdict.checked,
      objects: verdict.objects,
      violations: verdict.violations.length,
    };
  }

  /** An instance that is up, other than the one that just failed when there is a choice. */
  private async pickInstance(avoid: string | undefined): Promise<Pick<ServerProcess, "url">> {
    for (;;) {
      const up = this.options.instances();
      const preferred = up.filter((s) => s.url !== avoid);
      const choices = preferred.length > 0 ? preferred : up;
      if (choices.length > 0) return choices[Math.floor(Math.random() * choices.length)]!;
      await sleep(20);
    }
  }

  /**
   * Makes one call with its idempotency key until it gets a definitive answer: `attempt` tries it once
   * on an instance and says what came of it; a retryable failure moves the call to another instance.
   */
  private async untilAnswered(attempt: (url: string) => Promise<Attempt>): Promise<Outcome> {
    const counts = this.counts;
    let avoid: string | undefined;
    let unavailable = false;
    for (let tries = 0; ; tries++) {
      if (tries === 1) counts.retriedRequests++;
      const instance = await this.pickInstance(avoid);
      counts.requests++;
      const result = await attempt(instance.url);
      if ("outcome" in result) return result.outcome;
      if (result.retry === "connection") counts.connectionErrors++;
      else if (result.retry === "in flight") counts.inFlightConflicts++;
      else {
        counts.serverErrors++;
        if (result.retry === "internal") counts.internalErrors++;
        if (result.retry === "unavailable" && !unavailable) {
          unavailable = true;
          counts.retriedAfter503++;
        }
      }
      avoid = instance.url;
      await sleep(result.retry === "connection" ? 20 + Math.random() * 50 : 50 + Math.random() * 100);
    }
  }

  /** One REST call until answered (untilAnswered). */
  private restUntilAnswered(merchant: TestMerchant, method: string, path: string, body: unknown, key: string): Promise<Outcome> {
    return this.untilAnswered(async (url): Promise<Attempt> => {
      let res: Awaited<ReturnType<typeof rest>>;
      try {
        res = await rest(url, method, path, { apiKey: merchant.apiKey, body, headers: { "x-idempotency-key": key } });
      } catch {
        return { retry: "connection" };
      }
      const code: string | undefined = res.body?.error?.code;
      if (code === "IK_01") return { retry: "in flight" };
      if (res.status === 500) return { retry: "internal" };
      if (res.status === 503) return { retry: "unavailable" };
      if (res.status > 500 || res.status === 429) return { retry: "server" };
      if (res.status === 200) return { outcome: { ok: true, body: res.body } };
      return { outcome: { ok: false, code: code ?? `http_${res.status}` } };
    });
  }

  /** One Connect call until answered (untilAnswered): `call` makes it on an instance and returns the object's id and status word. */
  private connectUntilAnswered(
    key: string,
    call: (url: string, headers: Record<string, string>) => Promise<{ id: string; status: string }>,
  ): Promise<Outcome> {
    return this.untilAnswered(async (url): Promise<Attempt> => {
      this.counts.overConnect++;
      try {
        return { outcome: { ok: true, body: await call(url, { "x-idempotency-key": key }) } };
      } catch (error) {
        const code = ConnectError.from(error).findDetails(ErrorDetailSchema)[0]?.code;
        // HE_00 and SU_01 are REST's 500 and 503, which the REST call retries too.
        if (code === undefined) return { retry: "connection" };
        if (code === "IK_01") return { retry: "in flight" };
        if (code === "HE_00") return { retry: "internal" };
        if (code === "SU_01") return { retry: "unavailable" };
        return { outcome: { ok: false, code } };
      }
    });
  }

  private connectOf(url: string, merchant: TestMerchant) {
    const cacheKey = `${url} ${merchant.apiKey}`;
    let clients = this.connectClients.get(cacheKey);
    if (clients === undefined) {
      clients = {
        payments: rpcClient(PaymentService, url, "connect", { apiKey: merchant.apiKey }),
        refunds: rpcClient(RefundService, url, "connect", { apiKey: merchant.apiKey }),
      };
      this.connectClients.set(cacheKey, clients);
    }
    return clients;
  }

  /** Records a definitive answer: the acknowledged object and status, or the refusal's code. */
  private record(outcome: Outcome, resource: Resource, key: string, idField: string): JsonBody | undefined {
    if (!outcome.ok) {
      this.counts.refused++;
      this.refusals.set(outcome.code, (this.refusals.get(outcome.code) ?? 0) + 1);
      return undefined;
    }
    const body = outcome.body;
    const id: string = body.id ?? body[idField];
    this.counts.acknowledged++;
    this.acks.push({ resource, id, status: body.status, key, at: Date.now() });
    return { ...body, id };
  }

  /** A key no other call of the run sends; its client's number says which merchant sent it (check 1). */
  private newKey(client: number, what: string): string {
    return `c${client}-${++this.keySeq}-${what}`;
  }

  /** A payment made with confirm:true in one call, over REST or Connect, captured automatically, by hand or on schedule. */
  private async payment(client: number, merchant: TestMerchant, running: () => boolean): Promise<JsonBody | undefined> {
    const amount = 2000 + Math.floor(Math.random() * 8000);
    const kind = Math.random();
    const key = this.newKey(client, "payment-create");
    this.createKeys.set(key, "payment");
    if (kind < 0.25) {
      // Over Connect: an automatic capture.
      const outcome = await this.connectUntilAnswered(key, async (url, headers) => {
        const p = await this.connectOf(url, merchant).payments.createPayment(
          {
            amount: BigInt(amount),
            currency: "USD",
            profileId: merchant.profileId,
            confirm: true,
            paymentMethodData: {
              card: {
                cardNumber: "4242424242424242",
                cardExpMonth: "12",
                cardExpYear: String(new Date().getUTCFullYear() + 3),
                cardCvc: "123",
              },
            },
          },
          { headers },
        );
        return { id: p.paymentId, status: enumWord(PaymentStatusSchema, p.status)! };
      });
      return this.record(outcome, "payment", key, "payment_id");
    }
    const base = { amount, currency: "USD", profile_id: merchant.profileId };
    if (kind < 0.45) {
      // Created, then confirmed in a second call.
      const created = this.record(await this.restUntilAnswered(merchant, "POST", "/payments", base, key), "payment", key, "payment_id");
      if (created === undefined || !running()) return undefined;
      const confirmKey = this.newKey(client, "payment-confirm");
      this.actionKeys.set(confirmKey, { resource: "payment", id: created.id });
      const confirmBody = { payment_method_data: card() };
      return this.record(
        await this.restUntilAnswered(merchant, "POST", `/payments/${created.id}/confirm`, confirmBody, confirmKey),
        "payment",
        confirmKey,
        "payment_id",
      );
    }
    if (kind < 0.6) {
      // Scheduled capture, a few seconds ahead: the job runner captures it.
      const captureOn = new Date(Date.now() + 2000 + Math.random() * 3000).toISOString();
      const body = { ...base, confirm: true, payment_method_data: card(), capture_method: "scheduled", capture_on: captureOn };
      return this.record(await this.restUntilAnswered(merchant, "POST", "/payments", body, key), "payment", key, "payment_id");
    }
    if (kind < 0.85) {
      // Manual capture, then captured (in part, sometimes).
      const body = { ...base, confirm: true, payment_method_data: card(), capture_method: "manual" };
      const authorized = this.record(await this.restUntilAnswered(merchant, "POST", "/payments", body, key), "payment", key, "payment_id");
      if (authorized === undefined || authorized.status !== "requires_capture" || !running()) return authorized;
      const captureKey = this.newKey(client, "payment-capture");
      this.actionKeys.set(captureKey, { resource: "payment", id: authorized.id });
      const captureBody = Math.random() < 0.5 ? {} : { amount_to_capture: amount - 500 };
      return this.record(
        await this.restUntilAnswered(merchant, "POST", `/payments/${authorized.id}/capture`, captureBody, captureKey),
        "payment",
        captureKey,
        "payment_id",
      );
    }
    const body = { ...base, confirm: true, payment_method_data: card() };
    return this.record(await this.restUntilAnswered(merchant, "POST", "/payments", body, key), "payment", key, "payment_id");
  }

  /** Partial refunds of a succeeded payment, instant and scheduled, some over Connect; some ask for more than is left. */
  private async refunds(client: number, merchant: TestMerchant, paid: JsonBody, running: () => boolean): Promise<void> {
    const count = 1 + Math.floor(Math.random() * 3);
    for (let i = 0; i < count && running(); i++) {
      const amount = 300 + Math.floor(Math.random() * 2500);
      const scheduled = Math.random() < 0.3;
      const key = this.newKey(client, "refund-create");
      this.createKeys.set(key, "refund");
      if (Math.random() < 0.2) {
        const outcome = await this.connectUntilAnswered(key, async (url, headers) => {
          const r = await this.connectOf(url, merchant).refunds.createRefund(
            { paymentId: paid.id, amount: BigInt(amount), ...(scheduled ? { refundType: 2 } : {}) },
            { headers },
          );
          return { id: r.refundId, status: enumWord(RefundStatusSchema, r.status)! };
        });
        this.record(outcome, "refund", key, "refund_id");
        continue;
      }
      const body = { payment_id: paid.id, amount, ...(scheduled ? { refund_type: "scheduled" } : {}) };
      this.record(await this.restUntilAnswered(merchant, "POST", "/refunds", body, key), "refund", key, "refund_id");
    }
  }

  /** A payout to a bank account or a card; some wait for a fulfill, some go to the bank that answers 2 s late. */
  private async payout(client: number, merchant: TestMerchant, running: () => boolean): Promise<void> {
    const kind = Math.random();
    const confirm = Math.random() < 0.75;
    const amount = 500 + Math.floor(Math.random() * 5000);
    const body =
      kind < 0.4
        ? bankPayout(merchant, payoutAccounts.succeeds, { amount, confirm })
        : kind < 0.55
          ? bankPayout(merchant, payoutAccounts.slow, { amount, confirm })
          : kind < 0.65
            ? bankPayout(merchant, payoutAccounts.achUnavailable, { amount, confirm })
            : kind < 0.9
              ? cardPayout(merchant, payoutCards.succeeds, { amount, confirm })
              : cardPayout(merchant, payoutCards.declined, { amount, confirm });
    const key = this.newKey(client, "payout-create");
    this.createKeys.set(key, "payout");
    const created = this.record(await this.restUntilAnswered(merchant, "POST", "/payouts/create", body, key), "payout", key, "payout_id");
    if (created === undefined || created.status !== "requires_fulfillment" || !running()) return;
    const fulfillKey = this.newKey(client, "payout-fulfill");
    this.actionKeys.set(fulfillKey, { resource: "payout", id: created.id });
    this.record(
      await this.restUntilAnswered(merchant, "POST", `/payouts/${created.id}/fulfill`, undefined, fulfillKey),
      "payout",
      fulfillKey,
      "payout_id",
    );
  }

  /** One client: realistic flows one after the other until the run ends. */
  private async clientLoop(client: number, merchant: TestMerchant, running: () => boolean): Promise<void> {
    while (running()) {
      if (Math.random() < 0.3) {
        await this.payout(client, merchant, running);
        continue;
      }
      const paid = await this.payment(client, merchant, running);
      if (paid !== undefined && paid.status === "succeeded" && running()) await this.refunds(client, merchant, paid, running);
    }
  }
}

/** The order a resource's statuses can come in: `later` is `earlier` or reachable from it through the state machine. */
function atOrAfter<S extends string>(machine: StateMachine<S, string>, earlier: S, later: S): boolean {
  const seen = new Set<S>([earlier]);
  const queue: S[] = [earlier];
  while (queue.length > 0) {
    const status = queue.shift()!;
    for (const transition of Object.values(machine.transitions) as { from: readonly S[]; to: readonly S[] }[]) {
      if (!transition.from.includes(status)) continue;
      for (const next of transition.to) {
        if (!seen.has(next)) {
          seen.add(next);
          queue.push(next);
        }
      }
    }
  }
  return seen.has(later);
}

const machines: Record<Resource, StateMachine<string, string>> = {
  payment: paymentStates as unknown as StateMachine<string, string>,
  refund: refundStates as unknown as StateMachine<string, string>,
  payout: payoutStates as unknown as StateMachine<string, string>,
};
const tables: Record<Resource, { table: string; id: string; schema: DescMessage; idField: string }> = {
  payment: { table: "payments", id: "payment_id", schema: PaymentSchema, idField: "paymentId" },
  refund: { table: "refunds", id: "refund_id", schema: RefundSchema, idField: "refundId" },
  payout: { table: "payouts", id: "payout_id", schema: PayoutSchema, idField: "payoutId" },
};

/** What is still to settle: jobs due or leased, objects in a transitional status, keys in flight. */
async function backlog(db: pg.Client | pg.Pool, merchantIds: string[]): Promise<Record<string, number>> {
  const [row] = await rows<Record<string, number>>(
    db,
    `SELECT
       (SELECT count(*)::int FROM jobs WHERE run_at <= now() OR kind IN ('refund.process', 'payout.send', 'payment.capture_scheduled')) AS jobs,
       (SELECT count(*)::int FROM refunds WHERE merchant_id = ANY($1) AND status = 'pending') AS pending_refunds,
       (SELECT count(*)::int FROM payouts WHERE merchant_id = ANY($1) AND status = 'pending') AS pending_payouts,
       (SELECT count(*)::int FROM payments WHERE merchant_id = ANY($1) AND status = 'processing') AS processing_payments,
       (SELECT count(*)::int FROM idempotency_keys WHERE merchant_id = ANY($1) AND state = 'in_flight') AS keys_in_flight`,
    [merchantIds],
  );
  return row!;
}

/** The rows `backlog` counts, with their leases and claims: what held a late drain up. */
async function backlogRows(db: pg.Client | pg.Pool, merchantIds: string[]): Promise<Record<string, unknown[]>> {
  const [row] = await rows<Record<string, unknown[]>>(
    db,
    `SELECT
       (SELECT json_agg(j) FROM (SELECT kind, object_id, run_at, leased_by, attempts, last_error, status, now() AS seen_at FROM jobs
          WHERE run_at <= now() OR kind IN ('refund.process', 'payout.send', 'payment.capture_scheduled')) AS j) AS jobs,
       (SELECT json_agg(r) FROM (SELECT refund_id, claim_token IS NOT NULL AS claimed, claimed_until, claimed_by FROM refunds
          WHERE merchant_id = ANY($1) AND status = 'pending') AS r) AS pending_refunds,
       (SELECT json_agg(p) FROM (SELECT payout_id, attempts FROM payouts WHERE merchant_id = ANY($1) AND status = 'pending') AS p) AS pending_payouts,
       (SELECT json_agg(k) FROM (SELECT idempotency_key, state FROM idempotency_keys WHERE merchant_id = ANY($1) AND state = 'in_flight') AS k) AS keys_in_flight,
       (SELECT json_agg(i) FROM live_instances() AS i) AS live_instances`,
    [merchantIds],
  );
  return row!;
}
