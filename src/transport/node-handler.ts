import { Code, ConnectError } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { createAsyncIterable, readAllBytes, type UniversalHandler, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { invalidRequest } from "../errors.js";
import { log } from "../log.js";
import type { ApiRouter } from "./api-router.js";
import { toConnectError } from "./errors.js";
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
export function createNodeHandler(router: ApiRouter, pages: readonly Pages[]): DualProtocolHandler {
  const rpc = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, h]));
  const rest = createRestHandler(new RestRouter(router.methods), router.interceptors);
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0]!;
    const handler = rpc.get(path);
    if (handler === undefined) {
      (pages.find((p) => path.startsWith(p.prefix))?.handler ?? rest)(req, res);
      return;
    }
    handler(universalRequestFromNodeRequest(req, res, undefined, undefined))
      .then((answer) => documentedDecodeError(answer))
      .then((answer) => universalResponseToNodeResponse(answer, res))
      .catch((reason: unknown) => log.error("rpc response failed", { path: req.url, error: String(reason) }));
  };
}

/**
 * An error connect raises itself while decoding a Connect JSON request, before any interceptor runs,
 * gets the documented shape like every other error (decisions §5): IR_06 as an ErrorDetail. Its
 * message keeps connect's words up to the field ("cannot decode field
 * paymentservice.v1.CardInput.card_number from JSON"), never the rest: connect quotes the
 * offending value there, and that value may be a card number or CVC.
 */
async function documentedDecodeError(answer: UniversalServerResponse): Promise<UniversalServerResponse> {
  const header = answer.header;
  if (answer.status !== 400 || answer.body === undefined || header === undefined) return answer;
  if (header.get("content-type") !== "application/json" || header.has("content-encoding")) return answer;
  const bytes = await readAllBytes(answer.body, 1024 * 1024);
  const error = errorFromJsonBytes(bytes, undefined, new ConnectError("The request could not be decoded", Code.InvalidArgument));
  if (error.findDetails(ErrorDetailSchema).length > 0) return { ...answer, body: createAsyncIterable([bytes]) };
  const message = error.rawMessage.replace(/ from JSON: [\s\S]*$/, " from JSON");
  const documented = errorToJsonBytes(toConnectError(invalidRequest(message)), undefined);
  header.set("content-length", String(documented.byteLength));
  return { ...answer, body: createAsyncIterable([documented]) };
}
