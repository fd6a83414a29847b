import type { AddressInfo } from "node:net";
import { create, type DescMethod, type DescService, type Message, ScalarType } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { callInterceptors, routerOptions } from "../../src/app.js";
import { ApiError, type ErrorCode } from "../../src/errors.js";
import { ApiRouter } from "../../src/transport/api-router.js";
import { ClientAddresses } from "../../src/transport/client-address.js";
import { createDualProtocolServer } from "../../src/transport/listener.js";
import { createNodeHandler } from "../../src/transport/node-handler.js";
import { sampleMessage } from "./samples.js";

/*
 * The service's real transport — the port's handler, the REST transcoder, connect's protocols, the
 * direct unary paths and the interceptors that shape requests and errors — in the test process, on a
 * loopback port, in front of stub implementations of every RPC instead of the business services (as
 * vanguard-go's parity suites stand its transcoder in front of stub services). What a stub received,
 * and what it answers, is all the parity suite compares.
 */

/** The request header that names a parity row: the stub files what it received under it, and echoes it back. */
export const rowHeader = "x-parity-row";
/** The request header that asks a stub to fail with the documented code it holds. */
export const failHeader = "x-parity-fail";
/** The request header that asks a stub for empty answers: every field unset, which REST writes as null or its default. */
export const emptyHeader = "x-parity-empty";
/** The request header that asks a stub for answers over a kilobyte, which the protocols compress for clients that accept it. */
export const largeHeader = "x-parity-large";

/** The rate-limit header admission adds to every answer, as the real admission does. */
export const limitHeader = "x-ratelimit-limit";

/** The output's sample with its first text field a few kilobytes long. */
export function largeAnswer(method: DescMethod): Message {
  const answer = reflect(method.output, sampleMessage(method.output));
  const text = answer.fields.find((field) => field.fieldKind === "scalar" && field.scalar === ScalarType.STRING);
  if (text === undefined) throw new Error(`${method.output.typeName} has no text field to make long`);
  answer.set(text, "Grüße ✓ ".repeat(400));
  return answer.message;
}

/** The message of every error a stub throws: text outside ASCII, so each protocol's encoding of it shows. */
export function stubErrorMessage(method: DescMethod): string {
  return `${method.name} failed as asked — “Grüße” ✓`;
}

/** What a stub received for one row. */
export interface Received {
  readonly request: Message;
  readonly header: Headers;
}

/** The stub server: its address and what each row's call brought to a stub. */
export interface StubServer {
  readonly url: string;
  received(row: string): Received | undefined;
  close(): Promise<void>;
}

/** Files the call, echoes its row, and throws the error its header asks for. */
function receive(calls: Map<string, Received>, method: DescMethod, request: Message, ctx: HandlerContext): void {
  const row = ctx.requestHeader.get(rowHeader) ?? "";
  calls.set(row, { request, header: new Headers(ctx.requestHeader) });
  ctx.responseHeader.set(rowHeader, row);
  const code = ctx.requestHeader.get(failHeader);
  if (code !== null) throw new ApiError(code as ErrorCode, stubErrorMessage(method));
}

/** What a stub answers: the output's sample, or the empty or large answer the call asks for. */
function answerOf(method: DescMethod, ctx: HandlerContext): Message {
  if (ctx.requestHeader.has(emptyHeader)) return create(method.output);
  return ctx.requestHeader.has(largeHeader) ? largeAnswer(method) : sampleMessage(method.output);
}

/** A stub of every method of `service`: unary ones answer once, streams twice. */
function stubOf(service: DescService, calls: Map<string, Received>): ServiceImpl<DescService> {
  const impl: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind === "unary") {
      impl[method.localName] = (request: Message, ctx: HandlerContext) => {
        receive(calls, method, request, ctx);
        return answerOf(method, ctx);
      };
    } else if (method.methodKind === "server_streaming") {
      impl[method.localName] = async function* (request: Message, ctx: HandlerContext) {
        const row = ctx.requestHeader.get(rowHeader) ?? "";
        ctx.responseHeader.set(rowHeader, row);
        yield answerOf(method, ctx);
        // A stream fails after its first message: the error must reach the client behind it.
        receive(calls, method, request, ctx);
        yield answerOf(method, ctx);
      };
    } else {
      throw new Error(`${method.name}: no stub for ${method.methodKind} methods yet`);
    }
  }
  return impl as ServiceImpl<DescService>;
}

/** Starts the stub server for `services`, on a free loopback port. */
export async function startStubServer(services: readonly DescService[]): Promise<StubServer> {
  const calls = new Map<string, Received>();
  // The real interceptors but idempotency, whose keys live in the database the stubs do without.
  const router = new ApiRouter({ ...routerOptions, interceptors: callInterceptors() });
  for (const service of services) router.service(service, stubOf(service, calls));
  const handler = createNodeHandler({
    router,
    pages: [],
    renderings: new Map(),
    admit: async () => ({
      caller: { kind: "merchant", merchantId: "mer_parity", livemode: false, publishable: false, keyId: "key_parity" },
      header: [[limitHeader, "1000"]],
    }),
    clients: new ClientAddresses([]),
  });
  const listener = createDualProtocolServer(handler);
  await new Promise<void>((resolve, reject) => {
    listener.server.once("error", reject);
    listener.server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = listener.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received: (row) => calls.get(row),
    close: () => listener.close(1_000),
  };
}
