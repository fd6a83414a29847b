import * as fc from "fast-check";
import type { FixtureKeys } from "./fixtures.js";
import { printable, type FuzzRequest } from "./fuzz-request.js";
import type { ApiSchema } from "./schema.js";

/*
 * HTTP/1.1 that node:http refuses to send: malformed request lines, bad headers, conflicting or
 * broken body framing, a body far larger than it will ever be sent. Every request here is complete
 * (or declares a length a server must refuse), so the server has all it needs to answer at once.
 * Sending one and reading its answer is sendRaw in test/support/wire.ts.
 */

const crlf = "\r\n";

/** A raw case before it becomes a FuzzRequest. */
interface RawCase {
  readonly name: string;
  readonly text: string | Uint8Array;
  readonly answeredAs: "rest" | "connect";
  readonly leavesBodyUnsent?: boolean;
}

function requestText(requestLine: string, headers: readonly string[], body = ""): string {
  return [requestLine, ...headers].join(crlf) + crlf + crlf + body;
}

/**
 * Malformed and borderline HTTP/1.1 requests to REST and RPC paths: bad method tokens and versions,
 * spaces and control characters in the target, a ~100 KB header, invalid header characters,
 * Content-Length with Transfer-Encoding, broken chunked bodies, a declared 100 MB body sent in part,
 * HTTP/1.0 without Host.
 */
export function rawHttpRequests(schema: ApiSchema, keys: FixtureKeys): fc.Arbitrary<FuzzRequest> {
  const restPaths = schema.routes.filter((r) => !r.template.includes("{")).map((r) => r.template);
  const rpcPaths = schema.methods.map((m) => m.rpcPath);
  const key = `api-key: ${keys.sandboxSecret}`;
  const json = "content-type: application/json";

  const restPath = fc.constantFrom(...restPaths);
  const rpcPath = fc.constantFrom(...rpcPaths);
  const cases: fc.Arbitrary<RawCase>[] = [
    fc.tuple(fc.constantFrom("GE T", "G@T", "\u0000GET", "GETT", "P(ST", "", "\u00ffGET", "GET\u0001"), restPath).map(([method, path]) => ({
      name: "bad method token",
      text: requestText(`${method} ${path} HTTP/1.1`, ["Host: x", key]),
      answeredAs: "rest",
    })),
    fc
      .tuple(
        fc.constantFrom("HTTP/9.9", "HTTP/1.x", "HTTP/1", "HTTX/1.1", "HTTP/1.1 extra", "HTTP/0.9", "HTTP/2.0", "http/1.1", "HTTP/01.1"),
        restPath,
      )
      .map(([version, path]) => ({
        name: "bad HTTP version",
        text: requestText(`GET ${path} ${version}`, ["Host: x", key]),
        answeredAs: "rest",
      })),
    fc
      .tuple(
        fc.constantFrom(
          "/he alth",
          "/health\u0001",
          "/\u007f",
          "/health\t",
          "/customers/\u00fc",
          "/%",
          "health",
          "/health?\u0000",
          "/\u0000",
          "/customers/cus_1 x",
        ),
        fc.boolean(),
      )
      .map(([target, utf8]) => ({
        name: "control characters or spaces in the target",
        text: Buffer.from(requestText(`GET ${target} HTTP/1.1`, ["Host: x", key]), utf8 ? "utf8" : "latin1"),
        answeredAs: "rest",
      })),
    fc.tuple(fc.integer({ min: 20_000, max: 120_000 }), restPath).map(([length, path]) => ({
      name: "over-long header",
      text: requestText(`GET ${path} HTTP/1.1`, ["Host: x", key, `X-Long: ${"a".repeat(length)}`]),
      answeredAs: "rest",
    })),
    fc
      .tuple(
        fc.constantFrom(
          "X-Bad\u0001: v",
          "X Bad: v",
          "X-Bad: \u0000v",
          "NoColon",
          "X-Ok: a\r\n b",
          ": empty-name",
          "X-Bad\u00ff: v",
          "X-Bad: a\rb",
          "api-key : x",
        ),
        restPath,
      )
      .map(([header, path]) => ({
        name: "invalid header",
        text: requestText(`GET ${path} HTTP/1.1`, ["Host: x", key, header]),
        answeredAs: "rest",
      })),
    fc
      .constantFrom(
        ["Content-Length: 2", "Transfer-Encoding: chunked"],
        ["Transfer-Encoding: chunked", "Content-Length: 2"],
        ["Content-Length: 2", "Content-Length: 3"],
        ["Content-Length: -1"],
        ["Content-Length: 1e3"],
        ["Content-Length: +2"],
        ["Content-Length: 0x2"],
        ["Transfer-Encoding: chunked, gzip"],
        ["Transfer-Encoding: xchunked"],
        ["Transfer-Encoding: chunked", "Transfer-Encoding: identity"],
      )
      .map((framing) => ({
        name: `conflicting body framing (${framing.join(", ")})`,
        text: requestText("POST /customers HTTP/1.1", ["Host: x", key, json, ...framing], "2\r\n{}\r\n0\r\n\r\n"),
        answeredAs: "rest",
      })),
    fc
      .tuple(
        fc.constantFrom(
          "zz\r\n{}\r\n0\r\n\r\n",
          "fffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
          "2\r\n{}XX\r\n0\r\n\r\n",
          "-2\r\n{}\r\n0\r\n\r\n",
          "2;\u0000\r\n{}\r\n0\r\n\r\n",
          "0x2\r\n{}\r\n0\r\n\r\n",
          "2\r\n{}\r\n0\r\nX-Bad\u0001: v\r\n\r\n",
          "2\n{}\n0\n\n",
        ),
        fc.constantFrom("/customers", "/paymentservice.v1.CustomerService/CreateCustomer"),
      )
      .map(([chunks, path]) => ({
        name: "broken chunked body",
        text: requestText(`POST ${path} HTTP/1.1`, ["Host: x", key, json, "Transfer-Encoding: chunked"], chunks),
        answeredAs: path.startsWith("/paymentservice") ? "connect" : "rest",
      })),
    fc
      .tuple(
        fc.integer({ min: 64 * 1024, max: 2 * 1024 * 1024 }),
        fc.constantFrom("/customers", "/payments", "/paymentservice.v1.CustomerService/CreateCustomer"),
      )
      .map(([sent, path]) => ({
        name: "declared 100 MB body, part sent",
        text: requestText(
          `POST ${path} HTTP/1.1`,
          ["Host: x", key, json, "Content-Length: 104857600"],
          `{"description":"${"d".repeat(sent)}`,
        ),
        answeredAs: path.startsWith("/paymentservice") ? "connect" : "rest",
        leavesBodyUnsent: true,
      })),
    fc.tuple(fc.constantFrom("HTTP/1.0", "HTTP/1.1"), fc.boolean(), restPath).map(([version, withKey, path]) => ({
      name: `${version} without Host to a REST path`,
      text: requestText(`GET ${path} ${version}`, withKey ? [key] : []),
      answeredAs: "rest",
    })),
    fc.tuple(fc.constantFrom("HTTP/1.0", "HTTP/1.1"), fc.boolean(), rpcPath).map(([version, withKey, path]) => ({
      name: `${version} without Host to an RPC path`,
      text: requestText(`POST ${path} ${version}`, [json, "Content-Length: 2", ...(withKey ? [key] : [])], "{}"),
      answeredAs: "connect",
    })),
    fc
      .tuple(
        fc.constantFrom(
          ["Host: a", "Host: b"],
          ["Host: a b"],
          ["Host: @"],
          ["Host: [::1"],
          ["Host:"],
          [`Host: ${"h".repeat(10_000)}`],
          ["Host: x:99999"],
        ),
        fc.boolean(),
        restPath,
        rpcPath,
      )
      .map(([hosts, toRpc, rest, rpc]) => ({
        name: "odd Host header",
        text: toRpc
          ? requestText(`POST ${rpc} HTTP/1.1`, [...hosts, key, json, "Content-Length: 2"], "{}")
          : requestText(`GET ${rest} HTTP/1.1`, [...hosts, key]),
        answeredAs: toRpc ? "connect" : "rest",
      })),
  ];
  return fc.oneof(...cases).map((raw) =>
    printable({
      protocol: "raw-http",
      label: `raw ${raw.name}`,
      variant: raw.name,
      method: undefined,
      pathMangled: true,
      cardNumbers: [],
      answeredAs: raw.answeredAs,
      wire: {
        kind: "socket",
        bytes: typeof raw.text === "string" ? Buffer.from(raw.text, "latin1") : raw.text,
        leavesBodyUnsent: raw.leavesBodyUnsent === true,
      },
    }),
  );
}
