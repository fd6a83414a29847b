import { once } from "node:events";
import { Worker } from "node:worker_threads";
import type { DatabaseTimeouts } from "../db/pool.js";
import { log } from "../log.js";
import { leaseMsFor, newLease } from "./lease.js";

/** What sending a delivery needs, as its writer hands it over at commit. */
export interface HandedOver {
  readonly event_id: string;
  readonly livemode: boolean;
  readonly profile_id: string;
  readonly type: string;
  readonly created: Date;
  /** The event's data as its writer sent it to the database, in JSON. */
  readonly data_json: string;
  readonly webhook_url: string | null;
  readonly webhook_secret: string;
  readonly previous_webhook_secret: string | null;
  readonly previous_webhook_secret_until: Date | null;
}

/**
 * How the writers of new events give their deliveries straight to this instance's sender: written
 * already leased to it, and handed over with what sending them needs once they commit, so a fresh
 * delivery costs the database no look, no lease written and no read, and goes out at once. Should
 * the hand-over never arrive (the instance dies first), the lease ends and a look takes the delivery.
 */
export interface DeliveryHandOff {
  /** The lease to write new deliveries with, or undefined when this instance's sender is not taking any. */
  leaseForNew(now: Date): string | undefined;
  /** Hands over deliveries that committed leased with `lease` (from `leaseForNew`). */
  adopt(deliveries: readonly HandedOver[], lease: string): void;
  /**
   * Says that the write with `lease` got no answer (the connection was lost): whatever it may have
   * committed is given back once the database answers, rather than waiting for the lease to end.
   */
  abandon(lease: string): void;
}

/** What an instance's webhook sender offers the rest of the service, wherever it runs. */
export interface WebhookSender extends DeliveryHandOff {
  /** Starts looking for due deliveries. */
  start(): void;
  /** Stops taking deliveries and waits for those in hand. */
  stop(): Promise<void>;
  /** Sends every delivery due now and waits until their outcomes are written; returns how many were sent. */
  deliverDue(): Promise<number>;
}

/** How a dispatcher sends: WEBHOOK_ENDPOINT_CONCURRENCY and WEBHOOK_ATTEMPT_TIMEOUT_MS. */
export interface DispatcherSettings {
  readonly perEndpoint: number;
  readonly attemptTimeoutMs: number;
  /**
   * Whether its connections are PostgreSQL sessions of their own, where its statements are prepared
   * once by name; the embedded database serves all connections from one session (db/prepared.ts).
   */
  readonly namedStatements: boolean;
}

/** What the delivery thread needs to open its own connections and clock (all of it cloneable). */
export interface DeliveryThreadSettings extends DispatcherSettings {
  readonly databaseUrl: string;
  readonly sandboxTestClock: boolean;
  readonly timeouts: DatabaseTimeouts;
}

/** A message from the host to the thread. */
export type ToThread =
  | { readonly type: "deliver-due"; readonly id: number }
  | { readonly type: "adopt"; readonly deliveries: readonly HandedOver[]; readonly lease: string }
  | { readonly type: "abandon"; readonly lease: string }
  | { readonly type: "stop" };

/** A message from the thread to the host. */
export type FromThread =
  | { readonly type: "ready" }
  | { readonly type: "delivered"; readonly id: number; readonly sent: number }
  | { readonly type: "failed"; readonly id: number; readonly error: string }
  | { readonly type: "stopped" };

/**
 * The thread's entry: the compiled body in a build (dist/), or a loader-registering shim when the
 * service runs its TypeScript sources, because a worker does not inherit tsx's `--import` loader.
 */
const workerEntry = import.meta.url.endsWith(".ts") ? "./delivery-worker-boot.mjs" : "./delivery-worker.js";

/** After a crash of the thread, how long before another is started. */
const restartDelayMs = 1000;

/**
 * Runs the instance's webhook dispatcher (dispatcher.ts) in a worker thread of its own, with its own
 * database connections, so that signing, sending and reading answers never take the event loop that
 * serves API calls: under load a payment then costs the API no more with webhooks than without.
 * Deliveries live in the database, so a thread that dies loses nothing: another is started, and what
 * the dead one held is sent once its lease ends.
 */
export class DeliveryThread implements WebhookSender {
  private worker: Worker | undefined;
  private ready: Promise<void> | undefined;
  /** Whether the running thread has said it is ready and has not been asked to stop. */
  private taking = false;
  private stopping = false;
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve(sent: number): void; reject(error: Error): void }>();

  constructor(private readonly settings: DeliveryThreadSettings) {}

  start(): void {
    this.stopping = false;
    this.spawn();
  }

  leaseForNew(now: Date): string | undefined {
    return this.taking ? newLease(now, leaseMsFor(this.settings.attemptTimeoutMs)) : undefined;
  }

  adopt(deliveries: readonly HandedOver[], lease: string): void {
    this.worker?.postMessage({ type: "adopt", deliveries, lease } satisfies ToThread);
  }

  abandon(lease: string): void {
    this.worker?.postMessage({ type: "abandon", lease } satisfies ToThread);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.taking = false;
    const worker = this.worker;
    if (worker === undefined) return;
    await this.ready?.catch(() => undefined);
    const exited = once(worker, "exit");
    worker.postMessage({ type: "stop" } satisfies ToThread);
    await exited;
  }

  async deliverDue(): Promise<number> {
    if (this.worker === undefined) throw new Error("the webhook delivery thread is not running");
    await this.ready;
    const id = this.nextId++;
    const sent = new Promise<number>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    this.worker.postMessage({ type: "deliver-due", id } satisfies ToThread);
    return sent;
  }

  private spawn(): void {
    const worker = new Worker(new URL(workerEntry, import.meta.url), { workerData: this.settings });
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      worker.once("error", reject);
      worker.once("exit", () => reject(new Error("the webhook delivery thread exited before it was ready")));
      worker.on("message", (message: FromThread) => {
        if (message.type === "ready") {
          this.taking = !this.stopping;
          resolve();
        } else this.answer(message);
      });
    });
    this.ready.catch(() => undefined);
    worker.on("error", (error) => log.error("webhook delivery thread failed", { error: String(error) }));
    worker.on("exit", (code) => {
      for (const pending of this.waiting.values()) pending.reject(new Error("the webhook delivery thread exited"));
      this.waiting.clear();
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.taking = false;
      if (this.stopping) return;
      log.error("webhook delivery thread exited; starting another", { code });
      setTimeout(() => {
        if (!this.stopping && this.worker === undefined) this.spawn();
      }, restartDelayMs).unref();
    });
  }

  private answer(message: FromThread): void {
    if (message.type !== "delivered" && message.type !== "failed") return;
    const pending = this.waiting.get(message.id);
    this.waiting.delete(message.id);
    if (message.type === "delivered") pending?.resolve(message.sent);
    else pending?.reject(new Error(message.error));
  }
}
