import type { JsonBody } from "../support/clients.js";

/** What a fault test's client got from one call: the HTTP status, or 0 when no answer came. */
export interface Answered {
  readonly status: number;
  readonly body: JsonBody;
}

/** An answer by kind, for counting what clients saw: `200`, `503 SU_01`, `no answer: …`. */
export function kindOf(answered: Answered): string {
  if (answered.status === 0) return `no answer: ${String(answered.body)}`;
  if (answered.status < 300) return String(answered.status);
  return `${answered.status} ${answered.body?.error?.code ?? "(no code)"}`;
}

/** How many of `items` fall under each key. */
export function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}
