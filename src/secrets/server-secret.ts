import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";

/** A secret every instance sharing one database must hold the same copy of. */
export interface ServerSecret {
  /** The environment variable that configures it, named in errors. */
  readonly variable: string;
  /** File under DATA_DIR keeping the generated value of an embedded database. */
  readonly file: string;
  /** Turns the configured text, which loadConfig has checked, into the secret's bytes. */
  parse(configured: string): Buffer;
}

/**
 * The secret's value. Production (DATABASE_URL) must configure it, since instances sharing a
 * database must share it; the embedded database gets one generated once and kept beside its data,
 * so `npm start` needs no set-up.
 */
export async function resolveServerSecret(
  secret: ServerSecret,
  configured: string | undefined,
  embeddedDataDir: string | undefined,
): Promise<Buffer> {
  if (configured !== undefined) return secret.parse(configured);
  if (embeddedDataDir === undefined) {
    throw new Error(`${secret.variable} must be set when DATABASE_URL is set (every instance needs the same value)`);
  }
  if (embeddedDataDir === ":memory:") return randomBytes(32);
  const file = path.resolve(embeddedDataDir, secret.file);
  try {
    return Buffer.from((await readFile(file, "utf8")).trim(), "hex");
  } catch {
    const generated = randomBytes(32);
    await mkdir(embeddedDataDir, { recursive: true });
    await writeFile(file, generated.toString("hex"), { mode: 0o600, flag: "wx" });
    return generated;
  }
}

/**
 * A short public name for a secret: the first 8 hex digits of a SHA-256 of it. Stored beside what
 * the secret protects (a ciphertext, an API key's hash), so a rotation can tell which secret each
 * value is under without configuration naming them; it reveals nothing usable about the secret.
 */
export function secretId(secret: Buffer): string {
  return createHash("sha256").update("payment-service secret id\0").update(secret).digest("hex").slice(0, 8);
}
