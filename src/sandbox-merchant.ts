import type { DataSource } from "typeorm";
import type { ApiKeyHasher } from "./auth/api-key-secret.js";
import type { Clock } from "./clock.js";
import { issueApiKey } from "./api-keys/service.js";
import { createMerchant } from "./merchants/service.js";

/** A ready sandbox merchant, its default profile and a secret key, for a new user's first call. */
export interface SandboxStart {
  readonly merchantId: string;
  readonly profileId: string;
  readonly keyId: string;
  readonly apiKey: string;
}

/** Creates a sandbox merchant with a default profile and a secret key, all in one transaction. */
export async function bootstrapSandbox(deps: {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly hasher: ApiKeyHasher;
}): Promise<SandboxStart> {
  return deps.dataSource.transaction(async (em) => {
    const { merchant, profile } = await createMerchant(em, deps.clock, "Sandbox merchant");
    const key = await issueApiKey(em, deps, {
      merchantId: merchant.merchantId,
      livemode: false,
      publishable: false,
      name: "bootstrap",
      expiresAt: null,
    });
    return { merchantId: merchant.merchantId, profileId: profile.profileId, keyId: key.row.keyId, apiKey: key.plaintext };
  });
}

/** The text printed for a new user: what was created and a first call to try. */
export function describeSandboxStart(start: SandboxStart, baseUrl: string): string {
  return [
    "",
    "Sandbox merchant ready (this key is shown once; keep it):",
    `  merchant_id  ${start.merchantId}`,
    `  profile_id   ${start.profileId}`,
    `  key_id       ${start.keyId}`,
    `  api_key      ${start.apiKey}`,
    "",
    "Try it:",
    `  curl -H "api-key: ${start.apiKey}" ${baseUrl}/health`,
    "",
  ].join("\n");
}
