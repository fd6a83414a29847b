import { create, toBinary } from "@bufbuild/protobuf";
import type { DescFile, DescMethod } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  ServerReflection,
  ServerReflectionResponseSchema,
  file_grpc_reflection_v1_reflection,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflection as ServerReflectionV1alpha,
  ServerReflectionResponseSchema as ServerReflectionResponseSchemaV1alpha,
  file_grpc_reflection_v1alpha_reflection,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

/*
 * v1 and v1alpha differ only in their package, so one implementation answers both: a request is
 * read, and its answer built, as the plain shapes below, which the messages of either version fit.
 */

/** What a reflection request asks. */
interface Question {
  readonly host: string;
  readonly messageRequest:
    | { readonly case: "listServices" | "fileByFilename" | "fileContainingSymbol"; readonly value: string }
    | { readonly case: "fileContainingExtension" | "allExtensionNumbersOfType"; readonly value: unknown }
    | { readonly case: undefined; readonly value?: undefined };
}

/** One reply of the reflection stream. */
type Answer =
  | { readonly case: "listServicesResponse"; readonly value: { service: { name: string }[] } }
  | { readonly case: "fileDescriptorResponse"; readonly value: { fileDescriptorProto: Uint8Array[] } }
  | { readonly case: "errorResponse"; readonly value: { errorCode: number; errorMessage: string } };

/** The reflection services served: v1, and v1alpha for older tools (grpcurl before 1.8.8, Postman). */
const reflectionServices = [ServerReflection, ServerReflectionV1alpha] as const;

/** The files reachable from the registered ones, looked up the ways reflection clients ask. */
interface Schema {
  readonly services: string[];
  readonly byFilename: Map<string, DescFile>;
  readonly bySymbol: Map<string, DescFile>;
  readonly encoded: Map<DescFile, Uint8Array>;
}

/** Whether a method is reflection's: public, like the schema it describes (no API key). */
export function isReflectionMethod(method: DescMethod): boolean {
  return reflectionServices.some((service) => service.typeName === method.parent.typeName);
}

/**
 * Serves grpc.reflection.v1, and v1alpha with the same answers, so `buf curl`, `grpcurl` and older
 * tools can list, describe and call the services in `files` without a local schema. `files` may
 * also hold files no service names (the types errors carry), so clients can resolve them too.
 */
export function registerReflection(router: ConnectRouter, files: readonly DescFile[]): void {
  const schema = indexSchema([...files, file_grpc_reflection_v1_reflection, file_grpc_reflection_v1alpha_reflection]);
  router.service(ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const [request, messageResponse] of answers(schema, requests)) {
        yield create(ServerReflectionResponseSchema, { validHost: request.host, originalRequest: request, messageResponse });
      }
    },
  });
  router.service(ServerReflectionV1alpha, {
    async *serverReflectionInfo(requests) {
      for await (const [request, messageResponse] of answers(schema, requests)) {
        yield create(ServerReflectionResponseSchemaV1alpha, { validHost: request.host, originalRequest: request, messageResponse });
      }
    },
  });
}

/** The answer to each request of one reflection stream, whichever version it speaks. */
async function* answers<Q extends Question>(schema: Schema, requests: AsyncIterable<Q>): AsyncIterable<[Q, Answer]> {
  // Per stream, because the protocol lets a client cache what this stream already sent it.
  const sent = new Set<DescFile>();
  for await (const request of requests) yield [request, answer(schema, request, sent)];
}

function indexSchema(roots: readonly DescFile[]): Schema {
  const schema: Schema = {
    services: [...new Set(roots.flatMap((file) => file.services.map((s) => s.typeName)))],
    byFilename: new Map(),
    bySymbol: new Map(),
    encoded: new Map(),
  };
  // Dependencies are indexed too: clients resolve imported types (e.g.
  // google.protobuf.Timestamp) with the same lookups.
  const visit = (file: DescFile): void => {
    if (schema.encoded.has(file)) return;
    schema.encoded.set(file, toBinary(FileDescriptorProtoSchema, file.proto));
    schema.byFilename.set(file.proto.name, file);
    for (const type of nestedTypes(file)) {
      schema.bySymbol.set(type.typeName, file);
      if (type.kind === "service") {
        for (const method of type.methods) schema.bySymbol.set(`${type.typeName}.${method.name}`, file);
      }
    }
    file.dependencies.forEach(visit);
  };
  roots.forEach(visit);
  return schema;
}

function answer(schema: Schema, request: Question, sent: Set<DescFile>): Answer {
  const query = request.messageRequest;
  switch (query.case) {
    case "listServices":
      return {
        case: "listServicesResponse",
        value: { service: schema.services.map((name) => ({ name })) },
      };
    case "fileByFilename":
      return fileResponse(schema, schema.byFilename.get(query.value), sent, `file ${query.value}`);
    case "fileContainingSymbol":
      return fileResponse(schema, schema.bySymbol.get(query.value), sent, `symbol ${query.value}`);
    case "fileContainingExtension":
    case "allExtensionNumbersOfType":
      return errorResponse(Code.Unimplemented, "extension lookups are not supported");
    case undefined:
      return errorResponse(Code.InvalidArgument, "empty reflection request");
  }
}

function fileResponse(schema: Schema, file: DescFile | undefined, sent: Set<DescFile>, what: string): Answer {
  if (file === undefined) return errorResponse(Code.NotFound, `${what} not found`);
  const fileDescriptorProto: Uint8Array[] = [];
  const queue = [file];
  const seen = new Set<DescFile>();
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    if (seen.has(next)) continue;
    seen.add(next);
    // The requested file goes out even if sent before: the client asked for it again.
    if (next === file || !sent.has(next)) {
      sent.add(next);
      fileDescriptorProto.push(schema.encoded.get(next)!);
    }
    queue.push(...next.dependencies);
  }
  return {
    case: "fileDescriptorResponse",
    value: { fileDescriptorProto },
  };
}

function errorResponse(code: Code, message: string): Answer {
  return { case: "errorResponse", value: { errorCode: code, errorMessage: message } };
}
