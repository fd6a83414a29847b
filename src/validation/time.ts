import type { Timestamp } from "@bufbuild/protobuf/wkt";

/**
 * The instant a valid google.protobuf.Timestamp names, to the millisecond the service keeps, the
 * nanoseconds beyond it truncated. protobuf-es's `timestampDate` rounds them instead, which carries
 * 9999-12-31T23:59:59.9995Z and later (valid input) to 10000-01-01: a time stored so (an API key's
 * `expires_at`) could never be written back as JSON, and every answer showing it failed.
 */
export function timestampToDate(timestamp: Timestamp): Date {
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1_000_000));
}
