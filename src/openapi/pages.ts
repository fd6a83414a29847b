import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Pages } from "../transport/node-handler.js";
import { MethodNotAllowedError, unrecognizedUrl } from "../errors.js";

/*
 * The API's own description, served beside it without an API key: the OpenAPI document that
 * `npm run generate` writes from the protos (plugins/protoc-gen-openapi), and a reference page
 * rendered from it by Redoc's standalone bundle, served from node_modules so the page needs no
 * network beyond this port.
 */

/** Where the document is served; the reference page loads it from here. */
export const openApiPath = "/openapi.json";

/** Where the reference page is served. */
export const docsPath = "/docs";

const redocPath = `${docsPath}/redoc.standalone.js`;

const docsHtml = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Payment service API reference</title><style>body{margin:0}</style></head>
<body><redoc spec-url="${openApiPath}"></redoc><script src="${redocPath}"></script></body></html>
`;

/** One file a page answers with: its bytes, read once at start-up, and its content type. */
interface Asset {
  readonly body: Buffer;
  readonly contentType: string;
}

/**
 * The pages of the API's description: `/openapi.json` and `/docs` (with Redoc's script). Both are
 * read at start-up, so a missing gen/openapi.json or Redoc bundle stops the start rather than
 * failing each request. Only GET and HEAD are taken; another path under the prefixes is IR_02.
 */
export function createApiDescriptionPages(): Pages[] {
  const require = createRequire(import.meta.url);
  const assets = new Map<string, Asset>([
    [openApiPath, { body: readFileSync(new URL("../../gen/openapi.json", import.meta.url)), contentType: "application/json" }],
    [docsPath, { body: Buffer.from(docsHtml), contentType: "text/html; charset=utf-8" }],
    [
      redocPath,
      { body: readFileSync(require.resolve("redoc/bundles/redoc.standalone.js")), contentType: "text/javascript; charset=utf-8" },
    ],
  ]);
  const handler: Pages["handler"] = (req, res, path) => {
    const method = req.method ?? "";
    const asset = assets.get(path);
    if (asset === undefined) throw unrecognizedUrl(method, path);
    if (method !== "GET" && method !== "HEAD") throw new MethodNotAllowedError(method, path, ["GET", "HEAD"]);
    res.statusCode = 200;
    res.setHeader("content-type", asset.contentType);
    res.setHeader("content-length", asset.body.length);
    // Generated with the code: a new deployment may change it, so clients check back.
    res.setHeader("cache-control", "no-cache");
    if (method === "HEAD") res.end();
    else res.end(asset.body);
  };
  return [
    { prefix: openApiPath, handler },
    { prefix: docsPath, handler },
  ];
}
