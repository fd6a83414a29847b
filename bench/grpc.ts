/*
 * The gRPC scenario of `npm run bench`: create with confirm over gRPC on HTTP/2 (h2c, the service's
 * one port), driven by h2load (Debian's nghttp2-client) with a prepared request message, since
 * autocannon speaks only HTTP/1.1. h2load counts HTTP statuses and a gRPC failure is a 200 with a
 * non-zero grpc-status trailer, so the scenario checks gRPC's own answer twice: one call before the
 * load reads its trailers, and after it the payments the merchant gained must be at least the calls
 * h2load saw succeed.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { grpcCreateWithConfirmFrame } from "./flows.js";
import { type BenchMerchant, countOf, percentile } from "./service.js";

const path = "/paymentservice.v1.PaymentService/CreatePayment";

/** One measured run. */
export interface GrpcRun {
  /** Calls h2load saw answered with HTTP 200 within the run. */
  readonly answered: number;
  readonly p50: number;
  readonly p99: number;
  /** Calls answered otherwise or not at all, plus 200s that created no payment (a non-zero grpc-status). */
  readonly errors: number;
}

/** Makes one call with Node's HTTP/2 client and fails unless its grpc-status trailer is 0. */
async function checkOneCall(url: string, apiKey: string, frame: Buffer): Promise<void> {
  const session = http2.connect(url);
  try {
    const stream = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      "api-key": apiKey,
    });
    stream.end(frame);
    stream.resume();
    // An error may come "trailers-only": grpc-status in the response's headers, with no trailers after.
    const status = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      stream.once("response", (headers) => {
        if (headers["grpc-status"] !== undefined) resolve(headers);
      });
      stream.once("trailers", resolve);
      stream.once("error", reject);
      stream.once("close", () => reject(new Error("gRPC CreatePayment: the stream closed without a grpc-status")));
    });
    if (status["grpc-status"] !== "0") {
      throw new Error(`gRPC CreatePayment: grpc-status ${status["grpc-status"]} ${status["grpc-message"] ?? ""}`);
    }
  } finally {
    session.close();
  }
}

/**
 * Runs h2load for `seconds` with `connections` HTTP/2 connections of one stream each (the same
 * concurrency as autocannon's connections), creating and confirming payments for `merchant`.
 */
export async function measureGrpc(
  url: string,
  merchant: BenchMerchant,
  options: { connections: number; seconds: number },
): Promise<GrpcRun> {
  const frame = grpcCreateWithConfirmFrame(merchant.profileId);
  await checkOneCall(url, merchant.apiKey, frame);
  const dir = await mkdtemp(join(tmpdir(), "bench-grpc-"));
  try {
    const body = join(dir, "create-payment.bin");
    const log = join(dir, "requests.tsv");
    await writeFile(body, frame);
    const before = await countOf(url, merchant.apiKey, "/payments/list?status=succeeded");
    const { stdout } = await promisify(execFile)(
      "h2load",
      [
        ...["-c", String(options.connections), "-m", "1", "-D", String(options.seconds)],
        ...["-d", body, "--log-file", log],
        ...["-H", "content-type: application/grpc", "-H", "te: trailers", "-H", `api-key: ${merchant.apiKey}`],
        url + path,
      ],
      { maxBuffer: 16 * 2 ** 20 },
    ).catch((error: NodeJS.ErrnoException) => {
      throw error.code === "ENOENT" ? new Error("h2load is missing: install Debian's nghttp2-client (.ci/prepare does)") : error;
    });
    // One line per finished request: start (µs since the epoch), HTTP status, µs until its answer ended.
    const lines = (await readFile(log, "utf8")).split("\n").filter((line) => line !== "");
    const ok = lines.map((line) => line.split("\t")).filter(([, status]) => status === "200");
    const latencies = ok.map(([, , micros]) => Number(micros) / 1000).sort((a, b) => a - b);
    // h2load's summary: "requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout".
    const [, errored, timedOut] = /(\d+) errored, (\d+) timeout/.exec(stdout) ?? ["", "0", "0"];
    const created = (await countOf(url, merchant.apiKey, "/payments/list?status=succeeded")) - before;
    return {
      answered: ok.length,
      p50: Math.round(percentile(latencies, 50)),
      p99: Math.round(percentile(latencies, 99)),
      // A call h2load stopped waiting for at the end may still have created its payment, so more
      // payments than answers is no error; fewer means some 200s carried a gRPC error.
      errors: lines.length - ok.length + Number(errored) + Number(timedOut) + Math.max(0, ok.length - created),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
