import path from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { describe, expect, it } from "vitest";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { rest } from "../support/clients.js";
import { newMerchant } from "../support/merchant.js";
import { runningService } from "../support/running.js";

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

describe("@grpc/grpc-js", () => {
  it("reads a validation error's message holding ':' and ',' exactly as the REST error object documents it", async () => {
    const merchant = await newMerchant(service.url);
    const body = { address: { country: "ZZ" } };
    const documented = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body });
    const message = 'Invalid value for field address.country: expected a two-letter ISO 3166-1 country code such as GB, got "ZZ"';
    expect(documented.body.error).toEqual({ type: "invalid_request", code: "IR_05", message });

    const client = customerClient();
    try {
      const error = await failedCreate(client, merchant.apiKey, body);
      expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(error.details).toBe(message);
      const [statusBin] = error.metadata.get("grpc-status-details-bin");
      const status = fromBinary(StatusSchema, statusBin as Buffer);
      expect(status.message).toBe(message);
      expect(status.details.map((detail) => anyUnpack(detail, ErrorDetailSchema))).toEqual([
        expect.objectContaining({ type: "invalid_request", code: "IR_05", message }),
      ]);
    } finally {
      client.close();
    }
  });

  it("reads a refusal answered before the call runs (trailers-only) as REST documents it", async () => {
    const documented = await rest(service.url, "POST", "/customers", { body: {} });
    const message = "API key not provided: send it in the api-key header";
    expect(documented.body.error).toEqual({ type: "authentication_error", code: "IR_01", message });

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
