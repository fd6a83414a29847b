import { execFile } from "node:child_process";
import * as http2 from "node:http2";
import path from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ServerReflection } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { ErrorDetailSchema } from "../gen/paymentservice/v1/error_pb.js";
import { HealthService } from "../gen/paymentservice/v1/health_pb.js";
import { rest, rpcClient } from "./support/clients.js";
import { newMerchant } from "./support/merchant.js";
import { runningService } from "./support/running.js";

const service = runningService();

const bufBinary = path.resolve(import.meta.dirname, "../node_modules/.bin/buf");

/** The names of the files reflection sends for a symbol, the file defining it first, over v1 or v1alpha. */
async function filesContaining(baseUrl: string, version: "v1" | "v1alpha", symbol: string): Promise<string[]> {
  const transport = createGrpcTransport({ baseUrl });
  async function* ask() {
    yield { host: "", messageRequest: { case: "fileContainingSymbol" as const, value: symbol } };
  }
  const answers =
    version === "v1"
      ? createClient(ServerReflection, transport).serverReflectionInfo(ask())
      : createClient(ServerReflectionV1alpha, transport).serverReflectionInfo(ask());
  for await (const answer of answers) {
    if (answer.messageResponse.case !== "fileDescriptorResponse") throw new Error(`reflection answered ${answer.messageResponse.case}`);
    return answer.messageResponse.value.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes).name);
  }
  throw new Error("reflection sent no answer");
}

/** Runs `buf curl` over gRPC with HTTP/2 prior knowledge and no local schema, as a user would. */
function bufCurl(args: string[]): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      bufBinary,
      ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args],
      { timeout: 20_000 },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== "number") {
          reject(error);
          return;
        }
        resolve({ exitCode: error === null ? 0 : (error.code as number), stdout, stderr });
      },
    );
  });
}

/** One request over a fresh HTTP/2 prior-knowledge (h2c) connection. */
function h2Request(
  baseUrl: string,
  headers: http2.OutgoingHttpHeaders,
): Promise<{ status: number; contentType: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.once("error", reject);
    const stream = session.request(headers);
    let status = 0;
    let contentType: string | undefined;
    const chunks: Buffer[] = [];
    stream.once("response", (h) => {
      status = Number(h[":status"]);
      contentType = h["content-type"] as string | undefined;
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("error", reject);
    stream.once("end", () => {
      session.close();
      resolve({ status, contentType, body: Buffer.concat(chunks).toString("utf8") });
    });
    stream.end();
  });
}

describe("gRPC server reflection", () => {
  it("lets buf curl list the methods without a local schema", async () => {
    const { exitCode, stdout, stderr } = await bufCurl([service.url, "--list-methods"]);
    expect(exitCode, stderr).toBe(0);
    const methods = stdout.split("\n").map((line) => line.trim());
    expect(methods).toContain("paymentservice.v1.CustomerService/CreateCustomer");
    expect(methods).toContain("paymentservice.v1.HealthService/Check");
    expect(methods).toContain("paymentservice.v1.ApiKeyService/RevokeApiKey");
    expect(methods).toContain("paymentservice.v1.MerchantService/CreateMerchant");
  });

  it("lets buf curl call a method without --schema", async () => {
    const merchant = await newMerchant(service.url);
    const { exitCode, stdout, stderr } = await bufCurl([
      "-H",
      `api-key: ${merchant.apiKey}`,
      `${service.url}/paymentservice.v1.HealthService/Check`,
    ]);
    expect(exitCode, stderr).toBe(0);
    expect(JSON.parse(stdout)).toEqual({ status: "ok", merchantId: merchant.merchantId, environment: "ENVIRONMENT_SANDBOX" });
  });

  it("lets buf curl see the documented error code of a failed call", async () => {
    const { exitCode, stderr } = await bufCurl(["-H", "api-key: snd_notakey", `${service.url}/paymentservice.v1.HealthService/Check`]);
    expect(exitCode).not.toBe(0);
    const error = JSON.parse(stderr);
    expect(error.code).toBe("unauthenticated");
    expect(error.details).toHaveLength(1);
    expect(error.details[0].type).toBe("paymentservice.v1.ErrorDetail");
    const detail = fromBinary(ErrorDetailSchema, Buffer.from(error.details[0].value, "base64"));
    expect(detail).toMatchObject({ type: "authentication_error", code: "IR_01" });
  });
});

describe("gRPC server reflection v1alpha, for older tools", () => {
  it("lets buf curl list the services and call a method over v1alpha", async () => {
    const listed = await bufCurl(["--reflect-protocol", "grpc-v1alpha", service.url, "--list-services"]);
    expect(listed.exitCode, listed.stderr).toBe(0);
    const services = listed.stdout.split("\n").map((line) => line.trim());
    expect(services).toEqual(
      expect.arrayContaining([
        "paymentservice.v1.PaymentService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
      ]),
    );
    const called = await bufCurl(["--reflect-protocol", "grpc-v1alpha", `${service.url}/grpc.health.v1.Health/Check`]);
    expect(called.exitCode, called.stderr).toBe(0);
    expect(JSON.parse(called.stdout)).toEqual({ status: "SERVING" });
  });

  it.each(["v1", "v1alpha"] as const)("describes a service's file and its imports over %s", async (version) => {
    const files = await filesContaining(service.url, version, "paymentservice.v1.PaymentService.CreatePayment");
    expect(files[0]).toBe("paymentservice/v1/payment.proto");
    expect(files).toContain("google/api/annotations.proto");
  });
});

describe("the types errors carry, through reflection", () => {
  it.each(["v1", "v1alpha"] as const)("finds google.rpc.Status and paymentservice.v1.ErrorDetail over %s", async (version) => {
    const status = await filesContaining(service.url, version, "google.rpc.Status");
    expect(status[0]).toBe("google/rpc/status.proto");
    expect(status).toContain("google/protobuf/any.proto");
    expect(await filesContaining(service.url, version, "paymentservice.v1.ErrorDetail")).toEqual(["paymentservice/v1/error.proto"]);
  });
});

describe("one port", () => {
  it("also answers REST over HTTP/1.1 and Connect", async () => {
    const merchant = await newMerchant(service.url);
    const viaRest = await rest(service.url, "GET", "/health", { apiKey: merchant.apiKey });
    expect(viaRest.status).toBe(200);
    expect(viaRest.body.merchant_id).toBe(merchant.merchantId);
    const viaConnect = await rpcClient(HealthService, service.url, "connect", { apiKey: merchant.apiKey }).check({});
    expect(viaConnect.merchantId).toBe(merchant.merchantId);
  });

  it("answers REST over HTTP/2 with prior knowledge (h2c)", async () => {
    const merchant = await newMerchant(service.url);
    const res = await h2Request(service.url, { ":method": "GET", ":path": "/health", "api-key": merchant.apiKey });
    expect(res.status).toBe(200);
    expect(res.contentType).toMatch(/^application\/json/);
    expect(JSON.parse(res.body)).toEqual({ status: "ok", merchant_id: merchant.merchantId, environment: "sandbox" });

    const denied = await h2Request(service.url, { ":method": "GET", ":path": "/health" });
    expect(denied.status).toBe(401);
    expect(JSON.parse(denied.body).error.code).toBe("IR_01");
  });
});
