import type { ConnectRouter } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { log } from "../log.js";
import type { DualProtocolHandler } from "./listener.js";
import { createRestHandler } from "./rest/handler.js";
import { RestRouter } from "./rest/router.js";

/**
 * The one request handler of the port: RPC paths (`/package.Service/Method`) go to connect, which
 * speaks Connect, gRPC and gRPC-Web; every other path is a REST path for the transcoder.
 */
export function createNodeHandler(router: ConnectRouter): DualProtocolHandler {
  const rpc = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, h]));
  const rest = createRestHandler(new RestRouter(router.handlers));
  return (req, res) => {
    const handler = rpc.get((req.url ?? "").split("?", 1)[0]!);
    if (handler === undefined) {
      rest(req, res);
      return;
    }
    handler(universalRequestFromNodeRequest(req, res, undefined, undefined))
      .then((answer) => universalResponseToNodeResponse(answer, res))
      .catch((reason: unknown) => log.error("rpc response failed", { path: req.url, error: String(reason) }));
  };
}
