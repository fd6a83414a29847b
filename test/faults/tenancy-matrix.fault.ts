import { isDeepStrictEqual } from "node:util";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Access } from "../../gen/paymentservice/v1/options_pb.js";
import { loadApiSchema } from "../fuzz/schema.js";
import { visaCard } from "../support/cards.js";
import type { DocumentedCode } from "../support/errors.js";
import { adminIssue, newMerchant } from "../support/merchant.js";
import { uniqueId } from "../support/resource-api.js";
import { createPayment } from "../support/payments.js";
import { payoutBodies, payoutCards } from "../support/payout-destinations.js";
import { servicePair } from "../support/running.js";
import { noPolling, type TestService } from "../support/service.js";
import { ledgerOf, makeObjects, type Objects, type Tenant } from "./tenancy/objects.js";
import { classify, environmentKinds, kindsNamedBy, type FieldKind, type IdField, type Kind, type MatrixRpc } from "./tenancy/surface.js";
import { call, wireName, wiresOf, type Answer, type Credentials, type Wire } from "./tenancy/wires.js";

/*
 * Tenancy and keys (issue 18, docs/reliability.md "Tenancy and keys"): a matrix generated from the
 * protos over every RPC and every way in (each REST binding, Connect JSON, binary and GET, gRPC,
 * gRPC-Web). Merchant A makes one object of every kind in each environment; then another merchant's
 * keys, and A's key of the other environment, call every RPC with A's ids, list and stream with and
 * without filters naming them, pick them as ids of new objects and reuse A's idempotency keys.
 * Nothing of A's may be seen or changed, and what names no object at all (a balance, a report) must
 * be the caller's own: it adds up to the caller's ledger. Then revoked and expired keys must fail on
 * the very next request on every instance.
 */

const services = servicePair({ ...noPolling, RATE_LIMIT_PER_MINUTE: "1000000000" });

/** Calls in flight at once: enough to keep both instances busy, few enough for a shared 2-core machine. */
const parallelCalls = 8;

let cells = 0;
const violations: string[] = [];
let rpcCount = 0;

afterAll(() => {
  console.log(`tenancy matrix: ${rpcCount} RPCs, ${cells} cells, ${violations.length} violations`);
});

/** Runs `tasks` with at most parallelCalls of them at once. */
async function inParallel(tasks: Array<() => Promise<void>>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]!();
  };
  await Promise.all(Array.from({ length: Math.min(parallelCalls, tasks.length) }, worker));
}

/** One judged call: counted as a cell, and its failure recorded rather than thrown, so one run lists every violation. */
async function cell(where: string, judge: () => Promise<string | undefined>): Promise<void> {
  cells++;
  const problem = await judge();
  if (problem !== undefined) violations.push(`${where}: ${problem}`);
}

/** The answer's failure as one of `expected`, or what was wrong with it. */
function refused(answer: Answer, expected: readonly DocumentedCode[], ownerIds: readonly string[]): string | undefined {
  if (answer.ok) {
    const leaked = ownerIds.filter((id) => answer.text.includes(id));
    return `answered 200 instead of ${expected.join(" or ")}${leaked.length > 0 ? `, showing ${leaked.join(", ")}` : ""}`;
  }
  const differs = expected.map((code) => answer.differsFrom(code));
  return differs.includes(undefined) ? undefined : `expected ${expected.join(" or ")}, got ${answer.summary} (${differs.join("; ")})`;
}

const payouts = payoutBodies(() => new Date());

/**
 * What each RPC needs besides its ids for its checks to pass, so that a refusal can only come from
 * whose ids it names: the caller's own objects fill whatever the cell does not aim at another's. An
 * RPC missing here is sent with its ids alone; if that is not a valid request, its cells fail naming it.
 */
const bases: Readonly<Record<string, (own: Objects, caller: Tenant) => Record<string, JsonValue | undefined>>> = {
  CreateCustomer: () => ({ name: "made by another key" }),
  UpdateCustomer: () => ({ name: "changed by another key" }),
  CreatePayment: (_, caller) => ({ amount: 1000, currency: "USD", profile_id: caller.profileId }),
  CreatePaymentMethod: () => ({ payment_method: "card", card: visaCard }),
  UpdatePaymentMethod: () => ({ metadata: { changed_by: "another key" } }),
  AttachPaymentMethod: (own) => ({ customer_id: own.ids.get("customer")?.[0] }),
  ListCustomerPaymentMethods: (own) => ({ customer_id: own.ids.get("customer")?.[0] }),
  ListCustomerMandates: (own) => ({ customer_id: own.ids.get("customer")?.[0] }),
  UpdatePayment: (own) => ({ payment_id: own.openPayment, description: "changed by another key" }),
  ConfirmPayment: () => ({ payment_method: "card", payment_method_data: { card: visaCard } }),
  CancelPayment: () => ({ cancellation_reason: "changed by another key" }),
  CreateRefund: (own) => ({ payment_id: own.succeededPayment, amount: 100 }),
  UpdateRefund: (own) => ({ refund_id: own.refund, metadata: { changed_by: "another key" } }),
  CreatePayout: (_, caller) => payouts.cardPayout(caller, payoutCards.succeeds, { confirm: false }),
  UpdatePayout: (own) => ({ payout_id: own.openPayout, metadata: { changed_by: "another key" } }),
  SubmitDisputeEvidence: () => ({ evidence: { uncategorized_text: "from another key" } }),
  ResolveDispute: () => ({ outcome: "won" }),
  CreateApiKey: () => ({ name: "made by another key" }),
  CreateProfile: () => ({ profile_name: "made by another key" }),
  UpdateProfile: () => ({ profile_name: "changed by another key" }),
  // A period holding every balance transaction, so that the report adds up to the whole ledger.
  RetrieveBalanceReport: () => ({ from: "2000-01-01T00:00:00Z", to: "2100-01-01T00:00:00Z" }),
};

/** A caller aiming at an owner's objects. */
interface Case {
  readonly name: string;
  readonly caller: Tenant;
  readonly callerObjects: Objects;
  readonly owner: Tenant;
  readonly ownerObjects: Objects;
  /** The kinds the caller must not reach: all of them across merchants, the per-environment ones within a merchant. */
  readonly kinds: readonly Kind[];
}

function idsOf(c: Case, kind: FieldKind): readonly string[] {
  // Jobs are the operator's to reach, whoever's objects they act on: every caller aims at the owner's.
  if (kind === "job") return c.ownerObjects.jobs;
  return kindsNamedBy(kind)
    .filter((k) => c.kinds.includes(k))
    .flatMap((k) => c.ownerObjects.ids.get(k) ?? []);
}

/** Every id of the owner the caller must not see. */
function ownerIds(c: Case): string[] {
  return c.kinds.flatMap((kind) => c.ownerObjects.ids.get(kind) ?? []);
}

/**
 * How a refused call is answered: an operator-only RPC is refused to any merchant key (IR_01), a
 * sandbox control to a production key (IR_22), the rest is not found (HE_02). A production caller's
 * payment or payout may instead be refused for want of a production processor (IR_16), which comes
 * first and says nothing of the objects named.
 */
function refusalsOf(rpc: MatrixRpc, caller: Tenant): DocumentedCode[] {
  if (rpc.api.access === Access.ADMIN) return ["IR_01"];
  if (rpc.api.access === Access.SANDBOX_SECRET_KEY && caller.livemode) return ["IR_22"];
  return caller.livemode ? ["HE_02", "IR_16"] : ["HE_02"];
}

/** Every way of filling `fields` with the owner's ids: one request per combination. */
function fillings(c: Case, fields: readonly IdField[]): JsonObject[] {
  return fields.reduce<JsonObject[]>(
    (partial, { field, kind }) => partial.flatMap((request) => idsOf(c, kind).map((id) => ({ ...request, [field.name]: id }))),
    [{}],
  );
}

/** The base of `rpc`'s requests as the caller sends them; a field the caller has no object for is left out. */
function baseOf(rpc: MatrixRpc, c: Case): JsonObject {
  const base = bases[rpc.name]?.(c.callerObjects, c.caller) ?? {};
  return Object.fromEntries(Object.entries(base).filter((entry): entry is [string, JsonValue] => entry[1] !== undefined));
}

/** A request of `rpc` as the caller sends it, with `aimed` on top of its base. */
function request(rpc: MatrixRpc, c: Case, aimed: JsonObject): JsonObject {
  // Lists are read whole (their largest page), so a leak cannot hide on a later page.
  const limit: JsonObject = rpc.listOf !== undefined && rpc.api.input.fields.some((f) => f.name === "limit") ? { limit: 100 } : {};
  return { ...baseOf(rpc, c), ...limit, ...aimed };
}

/** Spreads calls over both instances, as a load balancer would. */
let turn = 0;
function instance(): TestService {
  return services.instance(turn++);
}

function callerOf(tenant: Tenant): Credentials {
  return { apiKey: tenant.apiKey };
}

/** The RPC that retrieves an object of `kind` (its last path variable names it), to see it as its owner does. */
function retrieverOf(rpcs: readonly MatrixRpc[], kind: Kind): MatrixRpc {
  const found = rpcs.find(
    (rpc) =>
      rpc.api.sideEffectFree &&
      rpc.listOf === undefined &&
      rpc.api.routes.some((route) => route.httpMethod === "GET") &&
      rpc.idFields.filter((f) => f.role === "target").at(-1)?.kind === kind,
  );
  if (found === undefined) throw new Error(`no RPC retrieves a ${kind}: teach the tenancy matrix how its owner sees one`);
  return found;
}

/** Every object of the owner as the owner retrieves it, by id. */
async function snapshot(rpcs: readonly MatrixRpc[], owner: Tenant, objects: Objects): Promise<Map<string, string>> {
  const seen = new Map<string, string>();
  const tasks: Array<() => Promise<void>> = [];
  for (const [kind, ids] of objects.ids) {
    const retriever = retrieverOf(rpcs, kind);
    const route = retriever.api.routes.find((r) => r.httpMethod === "GET")!;
    const who: Credentials = retriever.api.access === Access.ADMIN ? { admin: true } : callerOf(owner);
    for (const id of ids) {
      const aimed: JsonObject = Object.fromEntries(
        retriever.idFields.filter((f) => f.role === "target").map((f) => [f.field.name, f.kind === kind ? id : owner.merchantId]),
      );
      tasks.push(async () => {
        const answer = await call(instance().url, retriever.api, route, who, aimed);
        seen.set(id, answer.ok ? answer.text : `not retrievable by its owner: ${answer.summary}`);
      });
    }
  }
  await inParallel(tasks);
  return seen;
}

/** Calls aimed at the owner's objects: each must be refused on every way in. */
function aimedCells(rpcs: readonly MatrixRpc[], c: Case): Array<() => Promise<void>> {
  const hidden = ownerIds(c);
  const tasks: Array<() => Promise<void>> = [];
  for (const rpc of rpcs) {
    const targets = rpc.idFields.filter((f) => f.role === "target");
    // A call on a target the caller may not reach aims at the target alone; one on its own target
    // aims at each object it references.
    // An operator-only RPC that names nothing (CreateMerchant, ListJobs) is aimed at as it is: no key may call it.
    const untargeted = rpc.api.access === Access.ADMIN && targets.length === 0 ? [{}] : [];
    const aims = (targets.length > 0 ? fillings(c, targets) : untargeted).map((aimed) => ({
      aimed,
      control: undefined as IdField | undefined,
    }));
    // References are aimed at from the caller's own target; a caller with none (production has no payments) has no such cells.
    const ownTarget = targets.every((f) => baseOf(rpc, c)[f.field.name] !== undefined);
    for (const ref of rpc.idFields.filter((f) => f.role === "reference" && ownTarget)) {
      aims.push(...fillings(c, [ref]).map((aimed) => ({ aimed, control: ref })));
    }
    for (const { aimed, control } of aims) {
      for (const wire of wiresOf(rpc.api)) {
        const where = `${c.name}: ${rpc.name} ${JSON.stringify(aimed)} over ${wireName(wire)}`;
        tasks.push(() =>
          cell(where, async () => {
            const answer = await call(instance().url, rpc.api, wire, callerOf(c.caller), request(rpc, c, aimed));
            const expected = refusalsOf(rpc, c.caller);
            if (control !== undefined && !answer.ok && !expected.some((code) => answer.differsFrom(code) === undefined)) {
              // A field refused whatever it names (one that cannot be updated) says nothing of the
              // owner's object: the caller naming its own object there is refused alike.
              const own = await ownControl(rpc, c, control, wire);
              if (own !== undefined && !own.ok && own.code !== undefined) expected.push(own.code as DocumentedCode);
            }
            return refused(answer, expected, hidden);
          }),
        );
      }
    }
  }
  return tasks;
}

/** The same call naming the caller's own object in `field` instead of the owner's, or undefined when the caller has none of its kind. */
async function ownControl(rpc: MatrixRpc, c: Case, field: IdField, wire: Wire): Promise<Answer | undefined> {
  const own =
    field.kind === "job" ? c.callerObjects.jobs[0] : kindsNamedBy(field.kind).flatMap((kind) => c.callerObjects.ids.get(kind) ?? [])[0];
  if (own === undefined) return undefined;
  return call(instance().url, rpc.api, wire, callerOf(c.caller), request(rpc, c, { [field.field.name]: own }));
}

/** The caller's lists, unfiltered and filtered by each of the owner's ids: none may hold anything of the owner's. */
function listCells(rpcs: readonly MatrixRpc[], c: Case): Array<() => Promise<void>> {
  const hidden = ownerIds(c);
  const tasks: Array<() => Promise<void>> = [];
  for (const rpc of rpcs.filter((r) => r.listOf !== undefined)) {
    const filters = rpc.idFields.filter((f) => f.role === "filter");
    for (const aimed of [{}, ...filters.flatMap((f) => fillings(c, [f]))]) {
      for (const wire of wiresOf(rpc.api)) {
        const where = `${c.name}: ${rpc.name} ${JSON.stringify(aimed)} over ${wireName(wire)}`;
        tasks.push(() =>
          cell(where, async () => {
            const answer = await call(instance().url, rpc.api, wire, callerOf(c.caller), request(rpc, c, aimed));
            if (!answer.ok) {
              // A filter naming another's object may be refused as not found; a plain list may not.
              return Object.keys(aimed).length > 0 && answer.differsFrom("HE_02") === undefined ? undefined : `failed: ${answer.summary}`;
            }
            const leaked = hidden.filter((id) => answer.text.includes(id));
            return leaked.length === 0 ? undefined : `lists the owner's ${leaked.join(", ")}`;
          }),
        );
      }
    }
  }
  return tasks;
}

/** The owner's own unfiltered lists show its objects, on every way in: the list cells are not vacuous. */
function ownListCells(rpcs: readonly MatrixRpc[], c: Case): Array<() => Promise<void>> {
  const tasks: Array<() => Promise<void>> = [];
  const asOwner: Case = { ...c, caller: c.owner, callerObjects: c.ownerObjects };
  for (const rpc of rpcs.filter((r) => r.listOf !== undefined)) {
    const own = c.ownerObjects.ids.get(rpc.listOf!) ?? [];
    if (own.length === 0) continue;
    for (const wire of wiresOf(rpc.api)) {
      tasks.push(() =>
        cell(`${c.owner.label} lists its own with ${rpc.name} over ${wireName(wire)}`, async () => {
          const answer = await call(instance().url, rpc.api, wire, callerOf(c.owner), request(rpc, asOwner, {}));
          if (!answer.ok) return `failed: ${answer.summary}`;
          return own.some((id) => answer.text.includes(id)) ? undefined : `shows none of ${own.join(", ")}`;
        }),
      );
    }
  }
  return tasks;
}

/** A balance transaction as its owner lists it (REST JSON). */
type Ledger = readonly JsonObject[];

/** A JSON number or int64 string as a number; absent (proto3's zero) as 0. */
function amount(value: JsonValue | undefined): number {
  return Number(value ?? 0);
}

/** An answer's repeated field, absent when empty. */
function entries(value: JsonValue | undefined): JsonObject[] {
  return (Array.isArray(value) ? value : []) as JsonObject[];
}

/** The net of `ledger`'s transactions that `keep` accepts. */
function netOf(ledger: Ledger, keep: (t: JsonObject) => boolean): number {
  return ledger.filter(keep).reduce((sum, t) => sum + amount(t.net), 0);
}

/** The ledger's currencies, in order. */
function currenciesOf(ledger: Ledger): string[] {
  return [...new Set(ledger.map((t) => String(t.currency)))].sort();
}

/** A balance as `currency status → amount`: the order of its lists is no business of the matrix. */
function balanceFigures(balance: JsonObject): Record<string, number> {
  const figures: Record<string, number> = {};
  for (const status of ["available", "pending"]) {
    for (const entry of entries(balance[status])) figures[`${String(entry.currency)} ${status}`] = amount(entry.amount);
  }
  return figures;
}

/** A report as `currency line → figures`, every line of every currency. */
function reportFigures(report: JsonObject): Record<string, JsonValue> {
  const figures: Record<string, JsonValue> = {};
  for (const currency of entries(report.currencies)) {
    const name = String(currency.currency);
    figures[`${name} opening_balance`] = amount(currency.opening_balance);
    figures[`${name} closing_balance`] = amount(currency.closing_balance);
    for (const line of entries(currency.activity)) {
      figures[`${name} ${String(line.type)}`] = [amount(line.count), amount(line.amount), amount(line.fee), amount(line.net)];
    }
  }
  return figures;
}

/**
 * What the answers of RPCs that name no object must add up to, from the caller's own ledger: its
 * balance (the net of its transactions per currency and status) and its report over a period holding
 * them all (see bases). Mixing in anyone else's money changes the figures.
 */
const ledgerViews: Readonly<
  Record<string, { figures: (answer: JsonObject) => Record<string, JsonValue>; of: (ledger: Ledger) => Record<string, JsonValue> }>
> = {
  RetrieveBalance: {
    figures: balanceFigures,
    of: (ledger) =>
      Object.fromEntries(
        currenciesOf(ledger).flatMap((currency) =>
          ["available", "pending"].map((status) => [
            `${currency} ${status}`,
            netOf(ledger, (t) => t.currency === currency && t.status === status),
          ]),
        ),
      ),
  },
  RetrieveBalanceReport: {
    figures: reportFigures,
    of: (ledger) =>
      Object.fromEntries(
        currenciesOf(ledger).flatMap((currency) => {
          const own = ledger.filter((t) => t.currency === currency);
          const types = [...new Set(own.map((t) => String(t.type)))];
          return [
            [`${currency} opening_balance`, 0],
            [`${currency} closing_balance`, netOf(own, () => true)],
            ...types.map((type): [string, JsonValue] => {
              const lines = own.filter((t) => t.type === type);
              const total = (field: string) => lines.reduce((sum, t) => sum + amount(t[field]), 0);
              return [`${currency} ${type}`, [lines.length, total("amount"), total("fee"), total("net")]];
            }),
          ];
        }),
      ),
  },
};

/** The RPCs a merchant key calls that name no object, nor list any: the caller's own view of itself (health, its balance, its report). */
function viewRpcs(rpcs: readonly MatrixRpc[]): MatrixRpc[] {
  return rpcs.filter(
    (rpc) =>
      rpc.idFields.length === 0 &&
      rpc.listOf === undefined &&
      rpc.api.access !== Access.ADMIN &&
      rpc.api.sideEffectFree &&
      rpc.api.desc.methodKind === "unary",
  );
}

/**
 * The RPCs that name no object, called by the caller on every way in: the answer shows nothing of
 * the owner's, a merchant id only the caller's, and a balance or report adds up to the caller's own
 * ledger (`ledger`, listed just before while nothing moved anyone's money).
 */
function viewCells(rpcs: readonly MatrixRpc[], c: Case, ledger: Ledger): Array<() => Promise<void>> {
  const hidden = ownerIds(c);
  return viewRpcs(rpcs).flatMap((rpc) =>
    wiresOf(rpc.api).map(
      (wire) => () =>
        cell(`${c.name}: ${rpc.name} over ${wireName(wire)}`, async () => {
          const answer = await call(instance().url, rpc.api, wire, callerOf(c.caller), request(rpc, c, {}));
          if (rpc.api.access === Access.SANDBOX_SECRET_KEY && c.caller.livemode) return refused(answer, ["IR_22"], hidden);
          if (!answer.ok) return `failed: ${answer.summary}`;
          const leaked = hidden.filter((id) => answer.text.includes(id));
          if (leaked.length > 0) return `shows the owner's ${leaked.join(", ")}`;
          const shown = answer.objects[0]!;
          if (shown.merchant_id !== undefined && shown.merchant_id !== c.caller.merchantId)
            return `answered as merchant ${String(shown.merchant_id)}`;
          const view = ledgerViews[rpc.name];
          if (view === undefined) return undefined;
          const [figures, expected] = [view.figures(shown), view.of(ledger)];
          return isDeepStrictEqual(figures, expected)
            ? undefined
            : `shows ${JSON.stringify(figures)}, the caller's own ledger makes ${JSON.stringify(expected)}`;
        }),
    ),
  );
}

/**
 * Every stream of the caller's objects, started from its own last event before the owner and then
 * the caller made new payments: it carries the caller's new one (so it was read far enough) and
 * nothing of the owner's, new or old.
 */
async function streamCells(rpcs: readonly MatrixRpc[], c: Case): Promise<Array<() => Promise<void>>> {
  const start = c.callerObjects.ids.get("event")?.[0];
  // Production has no events to start from, nor payments to mark with: only sandbox callers are read.
  if (start === undefined || c.owner.livemode) return [];
  const url = services.a.url;
  const paid = { confirm: true, payment_method: "card", payment_method_data: { card: visaCard } };
  const ownerNew = uniqueId("pay");
  const marker = uniqueId("pay");
  await createPayment(url, c.owner, { ...paid, payment_id: ownerNew });
  await createPayment(url, c.caller, { ...paid, payment_id: marker });
  const hidden = [...ownerIds(c), ownerNew];
  return rpcs
    .filter((rpc) => rpc.streamOf === "event")
    .flatMap((rpc) => {
      const from = rpc.idFields.find((f) => f.kind === "event");
      if (from === undefined) throw new Error(`${rpc.name}: a stream without a starting event; teach the tenancy matrix to read it`);
      return wiresOf(rpc.api).map(
        (wire) => () =>
          cell(`${c.name}: ${rpc.name} from the caller's ${start} over ${wireName(wire)}`, async () => {
            const answer = await call(
              instance().url,
              rpc.api,
              wire,
              callerOf(c.caller),
              { [from.field.name]: start },
              {
                until: (event) => JSON.stringify(event).includes(marker),
                readMs: 30_000,
              },
            );
            if (!answer.ok) return `failed: ${answer.summary}`;
            const leaked = hidden.filter((id) => answer.text.includes(id));
            if (leaked.length > 0) return `streams the owner's ${leaked.join(", ")}`;
            return answer.text.includes(marker) ? undefined : `never sent the caller's own new payment ${marker}`;
          }),
      );
    });
}

/**
 * Creates sent with an idempotency key the owner has just used: the caller's call runs as its own
 * (a new object of its own, then replays of that one), never replays the owner's answer.
 */
async function idempotencyCells(rpcs: readonly MatrixRpc[], c: Case): Promise<Array<() => Promise<void>>> {
  const tasks: Array<() => Promise<void>> = [];
  const asOwner: Case = { ...c, caller: c.owner, callerObjects: c.ownerObjects };
  for (const rpc of rpcs) {
    const made = rpc.idFields.find((f) => f.role === "chosen");
    if (made === undefined) continue;
    const headers = { "idempotency-key": uniqueId("tenancy") };
    const first = await call(services.a.url, rpc.api, rpc.api.routes[0]!, callerOf(c.owner), request(rpc, asOwner, {}), { headers });
    if (!first.ok) {
      // Production cannot make payments: there is no answer of the owner's to replay.
      if (c.owner.livemode && first.differsFrom("IR_16") === undefined) continue;
      throw new Error(`${c.owner.label} could not make the object to replay: ${first.summary}`);
    }
    const ownerObject = String(first.objects[0]![made.field.name]);
    // One way in after the other: the caller's own calls with one key would otherwise wait for each other (IK_01).
    tasks.push(async () => {
      for (const wire of wiresOf(rpc.api)) {
        await cell(`${c.name}: ${rpc.name} with the owner's idempotency key over ${wireName(wire)}`, async () => {
          const answer = await call(instance().url, rpc.api, wire, callerOf(c.caller), request(rpc, c, {}), { headers });
          if (!answer.ok) {
            return c.caller.livemode && answer.differsFrom("IR_16") === undefined ? undefined : `failed: ${answer.summary}`;
          }
          const object = answer.objects[0]!;
          if (object[made.field.name] === ownerObject) return `replayed the owner's ${ownerObject}`;
          return object.merchant_id === c.caller.merchantId ? undefined : `answered an object of merchant ${String(object.merchant_id)}`;
        });
      }
    });
  }
  return tasks;
}

/**
 * Creates that let the caller pick the new object's id, picking the owner's: the caller gets an
 * object of its own (or HE_01 once it has one with that id), never the owner's.
 */
function chosenIdCells(rpcs: readonly MatrixRpc[], c: Case, before: ReadonlyMap<string, string>): Array<() => Promise<void>> {
  const tasks: Array<() => Promise<void>> = [];
  for (const rpc of rpcs) {
    for (const chosen of rpc.idFields.filter((f) => f.role === "chosen")) {
      for (const aimed of fillings(c, [chosen])) {
        const id = aimed[chosen.field.name] as string;
        for (const wire of wiresOf(rpc.api)) {
          tasks.push(() =>
            cell(`${c.name}: ${rpc.name} ${JSON.stringify(aimed)} over ${wireName(wire)}`, async () => {
              const answer = await call(instance().url, rpc.api, wire, callerOf(c.caller), request(rpc, c, aimed));
              if (!answer.ok) {
                // HE_01 once the caller has an object of its own with that id; IR_16 where production cannot make one at all.
                const refusals: DocumentedCode[] = c.caller.livemode ? ["HE_01", "IR_16"] : ["HE_01"];
                return refusals.some((code) => answer.differsFrom(code) === undefined) ? undefined : `failed: ${answer.summary}`;
              }
              const made = answer.objects[0]!;
              if (made.merchant_id !== c.caller.merchantId) return `answered an object of merchant ${String(made.merchant_id)}`;
              return isDeepStrictEqual(made, JSON.parse(before.get(id)!)) ? "answered the owner's object" : undefined;
            }),
          );
        }
      }
    }
  }
  return tasks;
}

describe("tenancy matrix", () => {
  let rpcs: MatrixRpc[];
  let cases: Case[];
  let sandboxA: Tenant;
  let productionA: Tenant;
  let objectsOf: Map<Tenant, Objects>;

  beforeAll(async () => {
    rpcs = classify(await loadApiSchema());
    rpcCount = rpcs.length;
    const url = services.a.url;
    const tenants = async (label: string): Promise<[Tenant, Tenant]> => {
      const merchant = await newMerchant(url);
      const production = await adminIssue(url, merchant.merchantId, { environment: "production" });
      return [
        { ...merchant, label: `${label} sandbox`, livemode: false },
        { ...merchant, apiKey: production.api_key, keyId: production.key_id, label: `${label} production`, livemode: true },
      ];
    };
    const [[aSandbox, aProduction], [bSandbox, bProduction]] = await Promise.all([tenants("merchant A"), tenants("merchant B")]);
    sandboxA = aSandbox;
    productionA = aProduction;
    const all = [aSandbox, aProduction, bSandbox, bProduction];
    // A refund of its own amount each: no two merchants' balances add up alike.
    const made = await Promise.all(all.map((tenant, i) => makeObjects(url, tenant, 100 * (i + 1))));
    objectsOf = new Map(all.map((tenant, i) => [tenant, made[i]!]));
    const objects = (tenant: Tenant) => objectsOf.get(tenant)!;
    const allKinds = [...objects(aSandbox).ids.keys()];
    cases = [
      { name: "merchant B's sandbox key on A's sandbox objects", caller: bSandbox, owner: aSandbox, kinds: allKinds },
      { name: "merchant B's production key on A's production objects", caller: bProduction, owner: aProduction, kinds: allKinds },
      { name: "A's production key on A's sandbox objects", caller: aProduction, owner: aSandbox, kinds: environmentKinds },
      { name: "A's sandbox key on A's production objects", caller: aSandbox, owner: aProduction, kinds: environmentKinds },
    ].map((c) => ({ ...c, callerObjects: objects(c.caller), ownerObjects: objects(c.owner) }));
  });

  it("no key reaches, lists or changes another merchant's or environment's objects, on any RPC or protocol", async () => {
    const found = violations.length;
    for (const [kind, ids] of objectsOf.get(sandboxA)!.ids) expect(ids.length, `A's sandbox ${kind}s`).toBeGreaterThan(0);
    const owners = [sandboxA, productionA];
    const before = new Map<Tenant, Map<string, string>>();
    for (const owner of owners) before.set(owner, await snapshot(rpcs, owner, objectsOf.get(owner)!));
    for (const [id, seen] of [...before.values()].flatMap((m) => [...m])) expect(seen, id).not.toMatch(/^not retrievable/);

    await inParallel(cases.flatMap((c) => [...listCells(rpcs, c), ...ownListCells(rpcs, c), ...aimedCells(rpcs, c)]));
    // Balances are read while nothing moves anyone's money: the phases below make payments and refunds.
    const ledgers = new Map(await Promise.all([...objectsOf.keys()].map(async (t) => [t, await ledgerOf(services.a.url, t)] as const)));
    for (const c of cases) {
      // An owner whose money could be mixed into the caller's answers must have figures of its own, or the cells prove nothing.
      if (ledgers.get(c.owner)!.length === 0) continue;
      for (const [name, view] of Object.entries(ledgerViews)) {
        expect(view.of(ledgers.get(c.caller)!), `${c.name}: ${name} of caller and owner alike`).not.toEqual(view.of(ledgers.get(c.owner)!));
      }
    }
    await inParallel(cases.flatMap((c) => viewCells(rpcs, c, ledgers.get(c.caller)!)));
    await inParallel((await Promise.all(cases.map((c) => streamCells(rpcs, c)))).flat());
    await inParallel((await Promise.all(cases.map((c) => idempotencyCells(rpcs, c)))).flat());
    // Last, as the caller's new objects then carry the owner's ids and would show in its lists.
    await inParallel(cases.flatMap((c) => chosenIdCells(rpcs, c, before.get(c.owner)!)));

    for (const owner of owners) {
      const after = await snapshot(rpcs, owner, objectsOf.get(owner)!);
      for (const [id, seen] of before.get(owner)!) {
        cells++;
        if (after.get(id) !== seen) violations.push(`${owner.label}'s ${id} changed:\n  before ${seen}\n  after  ${after.get(id)}`);
      }
    }
    expect(violations.slice(found)).toEqual([]);
  });
});

describe("revoked and expired keys on every instance", () => {
  /** The RPC every key may call (health): a success proves the key authenticated, a failure that it did not. */
  let probe: MatrixRpc;
  let revoke: MatrixRpc;
  let merchant: Tenant;
  const instances = () => [services.a, services.b] as const;

  beforeAll(async () => {
    const rpcs = classify(await loadApiSchema());
    const find = (name: string, test: (rpc: MatrixRpc) => boolean) => {
      const found = rpcs.find(test);
      if (found === undefined) throw new Error(`no ${name} RPC: teach the tenancy matrix which one it is`);
      return found;
    };
    probe = find("health", (rpc) => rpc.api.access === Access.ANY_KEY && rpc.idFields.length === 0);
    revoke = find("key revoking", (rpc) => rpc.name === "RevokeApiKey");
    const made = await newMerchant(services.a.url);
    merchant = { ...made, label: "merchant C sandbox", livemode: false };
  });

  /** A key per way in, each used successfully over every way in on both instances, so each instance has it at hand. */
  async function warmKeys(fields: JsonObject): Promise<{ keys: Map<Wire, { apiKey: string; keyId: string }>; failures: string[] }> {
    const keys = new Map<Wire, { apiKey: string; keyId: string }>();
    for (const wire of wiresOf(probe.api)) {
      const issued = await adminIssue(services.a.url, merchant.merchantId, { environment: "sandbox", ...fields });
      keys.set(wire, { apiKey: issued.api_key, keyId: issued.key_id });
    }
    const failures: string[] = [];
    await inParallel(
      [...keys.values()].flatMap((key) =>
        instances().flatMap((service) =>
          wiresOf(probe.api).map((wire) => async () => {
            const answer = await call(service.url, probe.api, wire, { apiKey: key.apiKey }, {});
            if (!answer.ok || answer.objects[0]!.merchant_id !== merchant.merchantId) {
              failures.push(`warming ${key.keyId} over ${wireName(wire)}: ${answer.ok ? answer.text : answer.summary}`);
            }
          }),
        ),
      ),
    );
    return { keys, failures };
  }

  /** The key fails with IR_01 over every way in on both instances. */
  function refusedEverywhere(label: string, apiKey: string): Array<() => Promise<void>> {
    return instances().flatMap((service, i) =>
      wiresOf(probe.api).map(
        (wire) => () =>
          cell(`${label} on instance ${i + 1} over ${wireName(wire)}`, async () =>
            refused(await call(service.url, probe.api, wire, { apiKey }, {}), ["IR_01"], []),
          ),
      ),
    );
  }

  it("a key revoked through instance 1 fails on the very next request through instance 2, over every protocol", async () => {
    const found = violations.length;
    const { keys, failures } = await warmKeys({ name: "to revoke" });
    expect(failures).toEqual([]);
    await Promise.all(
      [...keys].map(async ([wire, key]) => {
        const revoked = await call(services.a.url, revoke.api, revoke.api.routes[0]!, callerOf(merchant), { key_id: key.keyId });
        expect(revoked.ok && revoked.objects[0], `revoking ${key.keyId}`).toEqual({ key_id: key.keyId, deleted: true });
        await cell(`revoked key, the very next request, on instance 2 over ${wireName(wire)}`, async () =>
          refused(await call(services.b.url, probe.api, wire, { apiKey: key.apiKey }, {}), ["IR_01"], []),
        );
      }),
    );
    await inParallel([...keys].flatMap(([wire, key]) => refusedEverywhere(`revoked key of ${wireName(wire)}`, key.apiKey)));
    expect(violations.slice(found)).toEqual([]);
  });

  it("a key fails on both instances, over every protocol, on the first request after its expires_at", async () => {
    const found = violations.length;
    // Keys must live until both instances have used them: a life warming outlasted on a slow shared
    // machine is tried again longer, rather than hoped long enough.
    let warmed: { keys: Map<Wire, { apiKey: string; keyId: string }>; expiresAt: Date } | undefined;
    for (const lifeMs of [8_000, 20_000, 45_000]) {
      const expiresAt = new Date(Date.now() + lifeMs);
      const { keys, failures } = await warmKeys({ name: "to expire", expires_at: expiresAt.toISOString() });
      if (failures.length === 0 && Date.now() < expiresAt.getTime()) {
        warmed = { keys, expiresAt };
        break;
      }
    }
    if (warmed === undefined) throw new Error("warming the keys outlasted even a 45 s life");
    const { keys, expiresAt } = warmed;
    await new Promise((resolve) => setTimeout(resolve, expiresAt.getTime() - Date.now() + 1));
    await Promise.all(
      [...keys].map(([wire, key]) =>
        cell(`expired key, the first request after expires_at, on instance 2 over ${wireName(wire)}`, async () =>
          refused(await call(services.b.url, probe.api, wire, { apiKey: key.apiKey }, {}), ["IR_01"], []),
        ),
      ),
    );
    await inParallel([...keys].flatMap(([wire, key]) => refusedEverywhere(`expired key of ${wireName(wire)}`, key.apiKey)));
    expect(violations.slice(found)).toEqual([]);
  });
});
