import { timestampToDate } from "./time.js";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { describeValue, invalidField, invalidRequest } from "../errors.js";

import type { Page } from "../db/list-query.js";

/** What a list request message carries, whatever its resource. */
interface PageRequest {
  limit?: number;
  offset?: number;
  createdGte?: Timestamp;
  createdLte?: Timestamp;
}

/** Reads limit (1–100, default 10; else IR_06), offset (≥ 0; else IR_05) and the creation window. */
export function pageOf(request: PageRequest): Page {
  const limit = request.limit ?? 10;
  if (limit < 1 || limit > 100) {
    throw invalidRequest(`Invalid value for field limit: must be between 1 and 100, got ${describeValue(limit)}`);
  }
  const offset = request.offset ?? 0;
  if (offset < 0) {
    throw invalidField("offset", `must be 0 or more, got ${describeValue(offset)}`);
  }
  return {
    limit,
    offset,
    createdGte: request.createdGte && timestampToDate(request.createdGte),
    createdLte: request.createdLte && timestampToDate(request.createdLte),
  };
}

/** The list envelope `{data, total_count, has_more}` for one page of rows. */
export function envelope<T>(data: T[], totalCount: number, page: Page): { data: T[]; totalCount: bigint; hasMore: boolean } {
  return { data, totalCount: BigInt(totalCount), hasMore: page.offset + data.length < totalCount };
}
