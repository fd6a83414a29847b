import { Column, Entity, PrimaryColumn } from "typeorm";

/** An API key as stored: a keyed hash and a display prefix, never the plaintext. */
@Entity({ name: "api_keys" })
export class ApiKeyRow {
  @PrimaryColumn({ name: "key_id", type: "varchar", length: 64 })
  keyId!: string;

  @Column({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @Column({ name: "name", type: "text", nullable: true })
  name!: string | null;

  @Column({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @Column({ name: "publishable", type: "boolean" })
  publishable!: boolean;

  @Column({ name: "prefix", type: "varchar", length: 12 })
  prefix!: string;

  /** HMAC-SHA256 of the plaintext under API_KEY_HASH_SECRET. */
  @Column({ name: "key_hash", type: "bytea" })
  keyHash!: Buffer;

  /** The id (secretId) of the secret key_hash is under; null for keys hashed before ids were recorded. */
  @Column({ name: "hash_secret_id", type: "varchar", length: 16, nullable: true })
  hashSecretId!: string | null;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "expires_at", type: "timestamptz", nullable: true })
  expiresAt!: Date | null;

  @Column({ name: "revoked_at", type: "timestamptz", nullable: true })
  revokedAt!: Date | null;
}
