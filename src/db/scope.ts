/** Which merchant and environment a call acts in: the partition every object lives in. */
export interface Scope {
  readonly merchantId: string;
  readonly livemode: boolean;
}

/** An object's key (its merchant, environment and id) as one string: no batch holds two writes of one key. */
export function objectKey(scope: Scope, id: string): string {
  return `${scope.merchantId}\u0000${scope.livemode}\u0000${id}`;
}
