import { invalidField } from "../errors.js";
import type { PayoutCapabilities, PayoutProcessor } from "../processors/processor.js";

/** What routing looks at (docs/payouts.md, "Routing"). */
export interface RouteRequest {
  readonly payoutType: "card" | "bank";
  readonly priority: PayoutCapabilities["priorities"][number];
  readonly currency: string;
  readonly amount: bigint;
  /** The caller's preferred processor, by name. */
  readonly preferred: string | undefined;
}

/** One routing rule: the field it looks at and why a processor fails it, or undefined when it passes. */
interface Rule {
  readonly field: string;
  problem(capabilities: PayoutCapabilities, request: RouteRequest): string | undefined;
}

const rules: readonly Rule[] = [
  {
    field: "payout_type",
    problem: (c, r) => (c.payoutTypes.includes(r.payoutType) ? undefined : `does not send ${r.payoutType} payouts`),
  },
  {
    field: "priority",
    problem: (c, r) => (c.priorities.includes(r.priority) ? undefined : `does not send ${r.priority} payouts`),
  },
  {
    field: "currency",
    problem: (c, r) => (c.currencies === undefined || c.currencies.includes(r.currency) ? undefined : `does not send ${r.currency}`),
  },
  {
    field: "amount",
    problem: (c, r) => (c.maxAmount === undefined || r.amount <= c.maxAmount ? undefined : `sends at most ${c.maxAmount} per payout`),
  },
];

/**
 * The processors that can send a payout, in the order to try them: the caller's preferred one
 * first, then the others in the order of the routing table. The table is `processors` itself; a
 * processor is eligible when it passes every rule. When none is, the error names the first field
 * that ruled the last candidates out, and says why.
 */
export function route(processors: readonly PayoutProcessor[], request: RouteRequest): PayoutProcessor[] {
  let candidates = [...processors];
  for (const rule of rules) {
    const passing = candidates.filter((p) => rule.problem(p.capabilities, request) === undefined);
    if (passing.length === 0) {
      const reasons = candidates.map((p) => `${p.name} ${rule.problem(p.capabilities, request)}`).join("; ");
      throw invalidField(rule.field, `no processor can send this payout (${reasons})`);
    }
    candidates = passing;
  }
  if (request.preferred === undefined) return candidates;
  const preferred = processors.find((p) => p.name === request.preferred);
  if (preferred === undefined) {
    throw invalidField("processor", `unknown processor "${request.preferred}"; one of ${processors.map((p) => p.name).join(", ")}`);
  }
  if (!candidates.includes(preferred)) {
    const reason = rules.map((rule) => rule.problem(preferred.capabilities, request)).find((problem) => problem !== undefined);
    throw invalidField("processor", `${preferred.name} cannot send this payout: it ${reason}`);
  }
  return [preferred, ...candidates.filter((p) => p !== preferred)];
}
