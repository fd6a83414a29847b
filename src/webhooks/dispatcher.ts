import type pg from "pg";
import type { Clock } from "../clock.js";
import { ReleaseRetries } from "../db/release-retries.js";
import { preparedOn } from "../db/prepared.js";
import { FailureStreak, log } from "../log.js";
import { leaseMsFor, newLease } from "./lease.js";
import { retryAtSql, retrySpread } from "./schedule.js";
import { type Attempt, post } from "./sender.js";
import { webhookBody } from "./body.js";
import type { DispatcherSettings, HandedOver, WebhookSender } from "./delivery-thread.js";
import { signatureHeaders } from "./signature.js";

/** How often to look for due deliveries when there was nothing to do. */
const pollMs = 100;
/**
 * While deliveries flow, the least time between two looks for more and between two writes of
 * outcomes: each statement then carries the deliveries of that span together, since what a
 * statement costs the database is mostly per statement, not per row. Well under the 1 s a delivery
 * may take under load (issue 16).
 */
const batchGapMs = 20;
/** Deliveries held by this instance at once, all receivers together. */
const maxHeld = 2000;
/** How soon outcomes the database refused are written again: it may be back from a restart by then. */
const rewriteAfterMs = 250;

/** What sending a delivery needs besides its event, however it came to this instance. */
type Destined = Omit<HandedOver, "type" | "created" | "data_json">;

/** A delivery this instance has taken, with what sending it needs. */
interface Taken extends Destined {
  /** What is POSTed (body.ts). */
  readonly body: string;
  /** Until when this instance holds it (newLease): the token its outcome is written with. */
  readonly lease: string;
}

/** A delivery as a look reads it, with its event as stored. */
interface Looked extends Destined {
  readonly type: string;
  readonly created: Date;
  readonly data: unknown;
}

/**
 * What became of one taken delivery, written back while its lease still holds: an attempt, or none
 * (its profile lost its webhook_url, which ends the delivery).
 */
interface Outcome {
  readonly eventId: string;
  readonly lease: string;
  readonly attempt: Attempt | undefined;
  readonly attemptedAt: Date;
  readonly finishedAt: Date;
}

/** One profile's deliveries in this instance's hands: waiting, and being sent. */
interface Endpoint {
  readonly waiting: Taken[];
  sending: number;
}

/**
 * When a pending delivery can next be taken, as an SQL expression over the row `alias`: once it is
 * due and no lease holds it. The index webhook_deliveries_takeable is on this very expression, so
 * the deliveries being sent, whose leases hold, are never walked past.
 */
function takeableAt(alias: string): string {
  return `greatest(${alias}next_attempt_at, coalesce(${alias}leased_until, '-infinity'))`;
}

/**
 * Takes due deliveries, oldest first, at most `$4` of each profile and `$3` in all, none of the
 * profiles in `$2` (this instance holds enough of theirs), skipping those another instance holds,
 * and leases them until `$5`: the lease is the token their outcome is written with. The candidates
 * are read without locks and bounded, so the look costs the same however long the queue; rows are
 * locked only once picked, and the lease condition is checked again on the locked row.
 */
const takeDue = `
WITH due AS (
  SELECT event_id, profile_id, ${takeableAt("")} AS takeable_at FROM webhook_deliveries
   WHERE status = 'pending' AND ${takeableAt("")} <= $1 AND profile_id <> ALL ($2::varchar[])
   ORDER BY ${takeableAt("")} LIMIT 1000
), ranked AS (
  SELECT event_id, takeable_at, row_number() OVER (PARTITION BY profile_id ORDER BY takeable_at) AS place FROM due
), picked AS (
  SELECT w.event_id FROM webhook_deliveries w
   WHERE w.event_id = ANY (ARRAY(SELECT event_id FROM ranked WHERE place <= $4 ORDER BY takeable_at LIMIT $3))
     AND w.status = 'pending' AND ${takeableAt("w.")} <= $1
   FOR UPDATE SKIP LOCKED
)
UPDATE webhook_deliveries w SET leased_until = $5
  FROM picked, events e, profiles p
 WHERE w.event_id = picked.event_id AND e.event_id = w.event_id AND p.profile_id = w.profile_id
RETURNING w.event_id, w.livemode, w.profile_id, e.type, e.created, e.data,
          p.webhook_url, p.webhook_secret, p.previous_webhook_secret, p.previous_webhook_secret_until`;

/** When a failed attempt is tried again, and whether that is still within the delivery's window. */
const retryAt = retryAtSql("u.finished_at", "d.window_attempts", "u.spread");
const retried = `NOT u.delivered AND u.tried = 1 AND ${retryAt} <= d.deliver_until`;
/**
 * Writes back outcomes, each only while its lease is still the one it was taken with. Whether a
 * failed delivery is retried, and when, is decided here from the row as it is now, so that a
 * redelivery made while the attempt was in flight (a new window) counts.
 */
const writeOutcomes = `
UPDATE webhook_deliveries d
   SET status = CASE WHEN u.delivered THEN 'delivered' WHEN ${retried} THEN 'pending' ELSE 'failed' END,
       next_attempt_at = CASE WHEN ${retried} THEN ${retryAt} END,
       attempts = d.attempts + u.tried, window_attempts = d.window_attempts + u.tried,
       last_response_status = CASE WHEN u.tried = 1 THEN u.response_status ELSE d.last_response_status END,
       last_attempt_at = CASE WHEN u.tried = 1 THEN u.attempted_at ELSE d.last_attempt_at END,
       last_error = u.error, leased_until = NULL
  FROM unnest($1::varchar[], $2::timestamptz[], $3::boolean[], $4::int[], $5::int[], $6::text[], $7::timestamptz[], $8::timestamptz[], $9::float8[])
       AS u(event_id, lease, delivered, tried, response_status, error, attempted_at, finished_at, spread)
 WHERE d.event_id = u.event_id AND d.leased_until = u.lease`;

/** Ends the leases of deliveries taken but not sent, each only while its lease is the one it was taken with. */
const giveBack = `
UPDATE webhook_deliveries d SET leased_until = NULL
  FROM unnest($1::varchar[], $2::timestamptz[]) AS u(event_id, lease)
 WHERE d.event_id = u.event_id AND d.leased_until = u.lease`;

/**
 * Ends the leases of one take whose answer never came, or of the deliveries a write of new objects
 * may have committed before its answer was lost: the database may have committed them and then gone
 * before answering, leaving them leased to no one. A lease's end lies past its deliveries'
 * `next_attempt_at`, so the takeable index finds them.
 */
const giveBackTake = `
UPDATE webhook_deliveries SET leased_until = NULL
 WHERE status = 'pending' AND ${takeableAt("")} = $1::timestamptz AND leased_until = $1::timestamptz`;

/**
 * Sends every event to its profile's webhook_url (docs/events.md), from the deliveries written with
 * the events. Any number of instances run side by side: a delivery is taken with `FOR UPDATE SKIP
 * LOCKED` and leased, so no two send it while its lease holds, and one whose instance died is taken
 * again when the lease ends (at least once). No transaction is open while a receiver is waited on.
 * Each profile gets at most `perEndpoint` attempts at once and is not given more deliveries while it
 * holds `perEndpointBatch`, so a slow receiver delays only its own events.
 */
export class WebhookDispatcher implements WebhookSender {
  /** Deliveries taken at once for one profile: it gets more only while it holds fewer than this. */
  private readonly perEndpointBatch: number;
  private readonly endpoints = new Map<string, Endpoint>();
  private held = 0;
  private started = false;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;
  private taking: Promise<number> | undefined;
  private takeAgain = false;
  private readonly sending = new Set<Promise<void>>();
  private outcomes: { outcome: Outcome; written: () => void }[] = [];
  private writing: Promise<void> | undefined;
  private readonly takeFailures = new FailureStreak("taking due webhook deliveries");
  private readonly writeFailures = new FailureStreak("writing webhook outcomes");
  /**
   * Give-backs the database could not take when asked (of a take or a hand-over whose answer was
   * lost, of deliveries given back while it was away), made once it is back.
   */
  private readonly giveBacks = new ReleaseRetries();

  /** How long this dispatcher's leases hold, for its attempts' timeout. */
  private readonly leaseMs: number;
  private readonly perEndpoint: number;
  private readonly attemptTimeoutMs: number;
  /** Whether the look for due deliveries and the write of outcomes, run several times a second, are prepared once per connection. */
  private readonly named: boolean;

  /**
   * Its statements run on `pool`, a pg pool rather than a data source, so that the delivery thread
   * opens one of its own without loading TypeORM. `perEndpoint` attempts at most go out at once to
   * one profile's webhook_url (WEBHOOK_ENDPOINT_CONCURRENCY), and twice as many of its deliveries are
   * taken at a time; an attempt without an answer within `attemptTimeoutMs` fails
   * (WEBHOOK_ATTEMPT_TIMEOUT_MS), and leases last for it; `beforePass` runs before each look for due
   * deliveries (the sandbox test clock re-reads its offset there).
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly clock: Clock,
    { perEndpoint, attemptTimeoutMs, namedStatements }: DispatcherSettings,
    private readonly beforePass: () => Promise<void> | undefined = () => undefined,
  ) {
    this.named = namedStatements;
    this.perEndpoint = perEndpoint;
    this.attemptTimeoutMs = attemptTimeoutMs;
    this.perEndpointBatch = 2 * perEndpoint;
    this.leaseMs = leaseMsFor(attemptTimeoutMs);
  }

  /** Starts looking for due deliveries. */
  start(): void {
    this.started = true;
    this.schedule(0);
  }

  /**
   * Stops taking deliveries, waits for the attempts under way and their outcomes, and gives back the
   * deliveries taken but not yet sent, so another instance sends them at once rather than when their
   * leases end.
   */
  async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    await this.taking?.catch(() => 0);
    const unsent = [...this.endpoints.values()].flatMap((endpoint) => endpoint.waiting.splice(0));
    this.held -= unsent.length;
    await this.giveBack(unsent);
    await this.settled();
  }

  leaseForNew(now: Date): string | undefined {
    return this.started ? newLease(now, this.leaseMs) : undefined;
  }

  /**
   * Takes deliveries written leased to this instance, once they committed, as if a look had taken
   * them: a profile already holding a batch, an instance holding its most or a dispatcher that has
   * stopped gives them back, for a look of any instance to take.
   */
  adopt(deliveries: readonly HandedOver[], lease: string): void {
    const over: Taken[] = [];
    for (const { type, created, data_json, ...handed } of deliveries) {
      const delivery: Taken = { ...handed, body: webhookBody(handed.event_id, type, created, JSON.parse(data_json)), lease };
      const waiting = this.endpoints.get(delivery.profile_id)?.waiting.length ?? 0;
      if (!this.started || this.held >= maxHeld || waiting >= this.perEndpointBatch) over.push(delivery);
      else this.hold(delivery);
    }
    void this.giveBack(over);
  }

  abandon(lease: string): void {
    this.giveBacks.add(lease, () => this.pool.query(giveBackTake, [lease]), this.leaseMs);
  }

  /**
   * Ends the leases of deliveries taken but not sent, so that a look (of any instance) takes them at
   * once. When the database cannot be asked now (it is restarting), they are given back once it
   * answers again, rather than left until their leases end.
   */
  private async giveBack(deliveries: readonly Taken[]): Promise<void> {
    if (deliveries.length === 0) return;
    const release = () => this.pool.query(giveBack, [deliveries.map((d) => d.event_id), deliveries.map((d) => d.lease)]);
    try {
      await release();
    } catch (error) {
      log.warn("webhook deliveries not given back yet; they are given back once the database answers", {
        count: deliveries.length,
        error: String(error),
      });
      this.giveBacks.add(`give back ${deliveries[0]!.lease} ${deliveries[0]!.event_id}`, release, this.leaseMs);
    }
  }

  /**
   * Sends every delivery due now and waits until their outcomes are written; returns how many were
   * sent. Tests drive delivery with it on the test clock.
   */
  async deliverDue(): Promise<number> {
    let sent = 0;
    for (;;) {
      // A look already under way may have begun before what is due now committed: this one starts after it.
      await this.taking?.catch(() => 0);
      const taken = await this.takeMore();
      await this.settled();
      if (taken === 0) return sent;
      sent += taken;
    }
  }

  /** Waits until every delivery in hand is sent and its outcome written. */
  private async settled(): Promise<void> {
    while (this.sending.size > 0 || this.writing !== undefined) await Promise.all([...this.sending, this.writing]);
  }

  /** Looks for due deliveries in `delayMs`, unless a look is already set for sooner. */
  private schedule(delayMs: number): void {
    if (!this.started) return;
    const at = performance.now() + delayMs;
    if (this.timer !== undefined && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.pump();
    }, delayMs);
  }

  /** Takes due deliveries; looks again after `batchGapMs` when something came, else after `pollMs`. */
  private async pump(): Promise<void> {
    let taken = 0;
    try {
      taken = await this.takeMore();
      this.takeFailures.succeeded();
    } catch (error) {
      this.takeFailures.failed(error);
    }
    this.schedule(taken > 0 ? batchGapMs : pollMs);
  }

  /** One look at a time: a look asked for while one runs happens right after it. */
  private takeMore(): Promise<number> {
    if (this.taking !== undefined) {
      this.takeAgain = true;
      return this.taking;
    }
    this.taking = this.take().finally(() => {
      this.taking = undefined;
      if (this.takeAgain && this.started) {
        this.takeAgain = false;
        this.schedule(batchGapMs);
      }
    });
    return this.taking;
  }

  /** Leases what is due (room permitting) and starts sending it; returns how many were taken. */
  private async take(): Promise<number> {
    const { perEndpointBatch } = this;
    const room = maxHeld - this.held;
    if (room <= 0) return 0;
    await this.beforePass();
    const now = this.clock.now();
    const full = [...this.endpoints].filter(([, e]) => e.waiting.length + e.sending >= perEndpointBatch).map(([id]) => id);
    const lease = newLease(now, this.leaseMs);
    let rows: Looked[];
    try {
      rows = await preparedOn<Looked>(this.pool, this.named, takeDue, [now, full, room, perEndpointBatch, lease]);
    } catch (error) {
      this.giveBacks.add(lease, () => this.pool.query(giveBackTake, [lease]), this.leaseMs);
      throw error;
    }
    for (const { type, created, data, ...row } of rows) {
      this.hold({ ...row, body: webhookBody(row.event_id, type, created, data), lease });
    }
    return rows.length;
  }

  /** Queues a taken delivery behind its profile's others and starts a sender if the profile has room for one. */
  private hold(delivery: Taken): void {
    let endpoint = this.endpoints.get(delivery.profile_id);
    if (endpoint === undefined) {
      endpoint = { waiting: [], sending: 0 };
      this.endpoints.set(delivery.profile_id, endpoint);
    }
    endpoint.waiting.push(delivery);
    this.held++;
    if (endpoint.sending < this.perEndpoint) {
      endpoint.sending++;
      const lane = this.sendWaiting(delivery.profile_id, endpoint).finally(() => this.sending.delete(lane));
      this.sending.add(lane);
    }
  }

  /** One of a profile's senders: sends its waiting deliveries one after another until none is left. */
  private async sendWaiting(profileId: string, endpoint: Endpoint): Promise<void> {
    for (let next = endpoint.waiting.shift(); next !== undefined; next = endpoint.waiting.shift()) {
      try {
        // The next attempt goes out while this outcome waits for the batch that writes it.
        void this.record(await this.send(next));
      } catch (error) {
        log.error("webhook delivery failed; it is sent again when its lease ends", { event_id: next.event_id, error: String(error) });
      }
      this.held--;
      if (endpoint.waiting.length + endpoint.sending <= this.perEndpointBatch) this.schedule(batchGapMs);
    }
    endpoint.sending--;
    if (endpoint.sending === 0 && endpoint.waiting.length === 0) this.endpoints.delete(profileId);
  }

  private async send(delivery: Taken): Promise<Outcome> {
    const base = { eventId: delivery.event_id, lease: delivery.lease, attemptedAt: this.clock.now() };
    if (delivery.webhook_url === null) return { ...base, attempt: undefined, finishedAt: base.attemptedAt };
    const secrets = [delivery.webhook_secret];
    if (delivery.previous_webhook_secret !== null && delivery.previous_webhook_secret_until! > base.attemptedAt) {
      secrets.push(delivery.previous_webhook_secret);
    }
    // Receivers hold the timestamp against their own clock, so it is the real time, not the sandbox test clock's.
    const headers = signatureHeaders(delivery.event_id, delivery.body, secrets, Math.floor(Date.now() / 1000));
    const attempt = await post({ url: delivery.webhook_url, livemode: delivery.livemode }, headers, delivery.body, this.attemptTimeoutMs);
    return { ...base, attempt, finishedAt: this.clock.now() };
  }

  /** Queues an outcome for the next write, which carries every outcome that arrived meanwhile; resolves once written. */
  private record(outcome: Outcome): Promise<void> {
    return new Promise((written) => {
      this.outcomes.push({ outcome, written });
      if (this.writing === undefined) this.writing = this.writeQueued();
    });
  }

  /**
   * Writes the queued outcomes in batches. A batch the database refuses (restarting, gone) is written
   * again with the next one, for as long as its leases hold: otherwise each of its deliveries, though
   * its receiver has it, would stay pending until its lease ends (70 s) and then be sent again.
   */
  private async writeQueued(): Promise<void> {
    let refused = false;
    while (this.outcomes.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, refused ? rewriteAfterMs : batchGapMs));
      const batch = this.outcomes;
      this.outcomes = [];
      const o = batch.map((b) => b.outcome);
      try {
        await preparedOn(this.pool, this.named, writeOutcomes, [
          o.map((x) => x.eventId),
          o.map((x) => x.lease),
          o.map((x) => x.attempt?.error === null),
          o.map((x) => (x.attempt === undefined ? 0 : 1)),
          o.map((x) => x.attempt?.responseStatus ?? null),
          o.map((x) => (x.attempt === undefined ? "the profile no longer has a webhook_url" : x.attempt.error)),
          o.map((x) => x.attemptedAt),
          o.map((x) => x.finishedAt),
          o.map(() => retrySpread()),
        ]);
        this.writeFailures.succeeded();
        refused = false;
      } catch (error) {
        this.writeFailures.failed(error);
        refused = true;
        // An outcome whose lease has ended, or one of a dispatcher stopping, is left to the lease: the
        // delivery is taken again when it ends, at least once, never lost.
        const now = this.clock.now().getTime();
        const holds = (b: (typeof batch)[number]) => this.started && Date.parse(b.outcome.lease) > now;
        for (const b of batch) if (!holds(b)) b.written();
        const kept = batch.filter(holds);
        this.outcomes = [...kept, ...this.outcomes];
        continue;
      }
      for (const b of batch) b.written();
    }
    this.writing = undefined;
  }
}
