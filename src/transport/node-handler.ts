import type { ConnectRouter } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { createAsyncIterable, readAllBytes, type UniversalHandler, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { log } from "../log.js";
import type { DualProtocolHandler } from "./listener.js";
import { createRestHandler } from "./rest/handler.js";
import { RestRouter } from "./rest/router.js";

/** Browser pages served beside the API (e.g. the 3DS challenge), by path prefix. */
export interface Pages {
  readonly prefix: string;
  readonly handler: DualProtocolHandler;
}

/**
 * The one request handler of the port: RPC paths (`/package.Service/Method`) go to connect, which
 * speaks Connect, gRPC and gRPC-Web; browser pages go to their handler; every other path is a REST
 * path for the transcoder.
 */
export function createNodeHandler(router: ConnectRouter, pages: readonly Pages[]): DualProtocolHandler {
  const rpc = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, h]));
  const rest = createRestHandler(new RestRouter(router.handlers));
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0]!;
    const handler = rpc.get(path);
    if (handler === undefined) {
      (pages.find((p) => path.startsWith(p.prefix))?.handler ?? rest)(req, res);
      return;
    }
    handler(universalRequestFromNodeRequest(req, res, undefined, undefined))
      .then((answer) => withoutEchoedValue(answer))
      .then((answer) => universalResponseToNodeResponse(answer, res))
      .catch((reason: unknown) => log.error("rpc response failed", { path: req.url, error: String(reason) }));
  };
}

/**
 * connect's JSON decoder quotes the offending value in its error ("cannot decode field
 * paymentservice.v1.CardInput.card_number from JSON: expected string, got 4242…"), and that value may
 * be a card number or CVC (decisions §4). Such a Connect error keeps its message up to the field name.
 */
async function withoutEchoedValue(answer: UniversalServerResponse): Promise<UniversalServerResponse> {
  const header = answer.header;
  if (answer.status !== 400 || answer.body === undefined || header === undefined) return answer;
  if (header.get("content-type") !== "application/json" || header.has("content-encoding")) return answer;
  const bytes = await readAllBytes(answer.body, 1024 * 1024);
  const error = JSON.parse(new TextDecoder().decode(bytes)) as { message?: unknown };
  if (typeof error.message === "string" && error.message.includes(" from JSON: ")) {
    error.message = error.message.replace(/ from JSON: [\s\S]*$/, " from JSON");
    const redacted = new TextEncoder().encode(JSON.stringify(error));
    header.set("content-length", String(redacted.byteLength));
    return { ...answer, body: createAsyncIterable([redacted]) };
  }
  return { ...answer, body: createAsyncIterable([bytes]) };
}
