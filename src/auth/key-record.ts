/** What authentication needs to know about a presented key. */
export interface KeyRecord {
  readonly keyId: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly publishable: boolean;
  readonly expiresAt: Date | null;
  readonly revokedAt: Date | null;
}
