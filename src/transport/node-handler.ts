import type { ConnectRouter } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
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
      .then((answer) => universalResponseToNodeResponse(answer, res))
      .catch((reason: unknown) => log.error("rpc response failed", { path: req.url, error: String(reason) }));
  };
}
