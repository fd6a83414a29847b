import path from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { Code } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { describe, expect, it } from "vitest";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { type JsonBody, rest } from "../support/clients.js";
import { newMerchant } from "../support/merchant.js";
import { runningService } from "../support/running.js";
import { type CallResult, type ClientFamily, runClientScenario } from "./scenario.js";

/*
 * The service called as a Node user of Google's gRPC library would: @grpc/grpc-js with the protos
 * loaded at run time by @grpc/proto-loader, no generated code of ours.
 */

const service = runningService();

const protoDir = path.resolve(import.meta.dirname, "../../proto");

/** The unary calls of CustomerService as grpc-js presents them, with the fields under their proto names. */
interface CustomerServiceClient extends grpc.Client {
  createCustomer(
    request: Record<string, unknown>,
    metadata: grpc.Metadata,
    callback: (error: grpc.ServiceError | null, response?: Record<string, unknown>) => void,
  ): grpc.ClientUnaryCall;
}

/** A grpc-js client of CustomerService on the test service's port. */
function customerClient(): CustomerServiceClient {
  const definition = protoLoader.loadSync("paymentservice/v1/customer.proto", { includeDirs: [protoDir], keepCase: true });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    paymentservice: { v1: { CustomerService: new (address: string, credentials: grpc.ChannelCredentials) => CustomerServiceClient } };
  };
  return new loaded.paymentservice.v1.CustomerService(new URL(service.url).host, grpc.credentials.createInsecure());
}

/** Calls CreateCustomer and returns the error grpc-js reports (the test expects one). */
function failedCreate(
  client: CustomerServiceClient,
  apiKey: string | undefined,
  request: Record<string, unknown>,
): Promise<grpc.ServiceError> {
  const metadata = new grpc.Metadata();
  if (apiKey !== undefined) metadata.set("api-key", apiKey);
  return new Promise((resolve, reject) => {
    client.createCustomer(request, metadata, (error, response) => {
      if (error === null) reject(new Error(`expected an error, got ${JSON.stringify(response)}`));
      else resolve(error);
    });
  });
}

/** What proto-loader made of a method: its path and (de)serializers. */
interface LoadedMethod {
  readonly path: string;
  readonly requestSerialize: (value: object) => Buffer;
  readonly responseDeserialize: (bytes: Buffer) => JsonBody;
}

/**
 * Every method of the protos the scenario calls, keyed `package.Service/Method`, read by
 * proto-loader as a grpc-js user would: camelCase fields, 64-bit integers and enums as strings.
 */
function loadMethods(): Map<string, LoadedMethod> {
  const files = ["customer", "payment", "refund", "event"].map((name) => `paymentservice/v1/${name}.proto`);
  const definition = protoLoader.loadSync([...files, "grpc/health/v1/health.proto"], {
    includeDirs: [protoDir],
    longs: String,
    enums: String,
  });
  const methods = new Map<string, LoadedMethod>();
  for (const [service, methodsOf] of Object.entries(definition)) {
    if (!("format" in methodsOf)) {
      for (const [name, method] of Object.entries(methodsOf as protoLoader.ServiceDefinition)) {
        methods.set(`${service}/${name}`, method as unknown as LoadedMethod);
      }
    }
  }
  return methods;
}

/** A google.protobuf.Struct as proto-loader reads it (`{fields: {name: {stringValue: …}}}`), as the JSON it stands for. */
function structToJson(value: JsonBody): JsonBody {
  if (value === null || typeof value !== "object") return value;
  if ("fields" in value) return Object.fromEntries(Object.entries(value.fields ?? {}).map(([k, v]) => [k, structToJson(v)]));
  if ("structValue" in value) return structToJson(value.structValue);
  if ("listValue" in value) return (value.listValue.values ?? []).map(structToJson);
  if ("stringValue" in value) return value.stringValue;
  if ("numberValue" in value) return value.numberValue;
  if ("boolValue" in value) return value.boolValue;
  return null;
}

/** The scenario's calls made through grpc-js's generic client, with proto-loader's (de)serializers. */
function grpcJsFamily(client: grpc.Client, methods: Map<string, LoadedMethod>): ClientFamily {
  const metadataOf = (headers: Record<string, string>) => {
    const metadata = new grpc.Metadata();
    for (const [name, value] of Object.entries(headers)) metadata.set(name, value);
    return metadata;
  };
  const methodOf = (name: string): LoadedMethod => {
    // A method the protos do not declare is sent with another's serializers: the server never reads it.
    const known = methods.get(name);
    return known ?? { ...methods.get("paymentservice.v1.PaymentService/RetrievePayment")!, path: `/${name}` };
  };
  return {
    call(name, request, headers) {
      const method = methodOf(name);
      return new Promise<CallResult>((resolve) => {
        let replayed = false;
        const call = client.makeUnaryRequest(
          method.path,
          method.requestSerialize,
          method.responseDeserialize,
          request,
          metadataOf(headers),
          (error, message) => {
            if (error === null) {
              resolve({ ok: true, message, replayed });
              return;
            }
            const [statusBin] = error.metadata.get("grpc-status-details-bin");
            const details = statusBin === undefined ? [] : fromBinary(StatusSchema, statusBin as Buffer).details;
            const detail = details.map((any) => anyUnpack(any, ErrorDetailSchema)).find((unpacked) => unpacked !== undefined);
            resolve({
              ok: false,
              code: codeToString(error.code as number as Code),
              message: error.details,
              detail: detail === undefined ? undefined : { type: detail.type, code: detail.code, message: detail.message },
            });
          },
        );
        call.on("metadata", (metadata) => {
          replayed = metadata.get("idempotent-replayed")[0] === "true";
        });
      });
    },
    firstOfStream(name, request, headers) {
      const method = methodOf(name);
      const stream = client.makeServerStreamRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        metadataOf(headers),
      );
      return new Promise((resolve, reject) => {
        stream.once("data", (event: JsonBody) => {
          resolve({ ...event, data: { object: structToJson(event.data.object) } });
          stream.cancel();
        });
        stream.on("error", (error: grpc.ServiceError) => {
          if (error.code !== grpc.status.CANCELLED) reject(error);
        });
      });
    },
  };
}

describe("@grpc/grpc-js", () => {
  it("runs the client scenario with the protos loaded by @grpc/proto-loader", async () => {
    const client = new grpc.Client(new URL(service.url).host, grpc.credentials.createInsecure());
    try {
      await runClientScenario(grpcJsFamily(client, loadMethods()), await newMerchant(service.url));
    } finally {
      client.close();
    }
  });

  it("reads a validation error's message holding ':' and ',' exactly as the REST error object documents it", async () => {
    const merchant = await newMerchant(service.url);
    const body = { address: { country: "ZZ" } };
    const documented = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body });
    const message = 'Invalid value for field address.country: expected a two-letter ISO 3166-1 country code such as GB, got "ZZ"';
    expect(documented.body.error).toEqual({
      type: "invalid_request",
      code: "IR_05",
      message,
      request_id: documented.headers.get("x-request-id"),
    });

    const client = customerClient();
    try {
      const error = await failedCreate(client, merchant.apiKey, body);
      expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(error.details).toBe(message);
      const [statusBin] = error.metadata.get("grpc-status-details-bin");
      const status = fromBinary(StatusSchema, statusBin as Buffer);
      expect(status.message).toBe(message);
      expect(status.details.map((detail) => anyUnpack(detail, ErrorDetailSchema))).toEqual([
        expect.objectContaining({
          type: "invalid_request",
          code: "IR_05",
          message,
          requestId: expect.stringMatching(/^req_\w+$/),
        }),
      ]);
    } finally {
      client.close();
    }
  });

  it("reads a refusal answered before the call runs (trailers-only) as REST documents it", async () => {
    const documented = await rest(service.url, "POST", "/customers", { body: {} });
    const message = "API key not provided: send it in the api-key header";
    expect(documented.body.error).toEqual({
      type: "authentication_error",
      code: "IR_01",
      message,
      request_id: documented.headers.get("x-request-id"),
    });

    const client = customerClient();
    try {
      const error = await failedCreate(client, undefined, {});
      expect(error.code, error.details).toBe(grpc.status.UNAUTHENTICATED);
      expect(error.details).toBe(message);
    } finally {
      client.close();
    }
  });
});
