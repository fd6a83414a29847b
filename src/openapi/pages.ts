import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import openApiDocument from "../../gen/openapi.json" with { type: "json" };
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
<title>Payment service API reference</title><link rel="icon" href="data:,"><style>body{margin:0}</style></head>
<body><redoc spec-url="${openApiPath}"></redoc><script src="${redocPath}"></script></body></html>
`;

/**
 * What the reference page may load: only this port (Redoc's inline styles and its search worker,
 * started from a blob, aside), so the page works offline and sends nothing about its reader elsewhere.
 */
const docsPolicy =
  "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * Redoc's footer shows its logo from a CDN, which the policy would block (a console error on every
 * visit): the bundle is served with an empty image in its place, which Redoc then leaves out.
 */
function redocBundle(file: string): Buffer {
  const logo = "https://cdn.redoc.ly/redoc/logo-mini.svg";
  const bundle = readFileSync(file, "utf8");
  if (!bundle.includes(logo)) throw new Error(`${file} no longer names ${logo}: check what its footer loads`);
  return Buffer.from(bundle.replaceAll(logo, "data:,"));
}

/** One file a page answers with: its bytes, read once at start-up, and its headers. */
interface Asset {
  readonly body: Buffer;
  readonly contentType: string;
  readonly policy?: string;
}

/**
 * The pages of the API's description: `/openapi.json` and `/docs` (with Redoc's script). The document
 * is imported (so a build carries it in dist/) and Redoc's bundle read at start-up, so a missing one
 * stops the start rather than failing each request. Only GET and HEAD are taken; another path under the prefixes is IR_02.
 */
export function createApiDescriptionPages(): Pages[] {
  const require = createRequire(import.meta.url);
  const assets = new Map<string, Asset>([
    [openApiPath, { body: Buffer.from(JSON.stringify(openApiDocument)), contentType: "application/json" }],
    [docsPath, { body: Buffer.from(docsHtml), contentType: "text/html; charset=utf-8", policy: docsPolicy }],
    [redocPath, { body: redocBundle(require.resolve("redoc/bundles/redoc.standalone.js")), contentType: "text/javascript; charset=utf-8" }],
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
    if (asset.policy !== undefined) res.setHeader("content-security-policy", asset.policy);
    if (method === "HEAD") res.end();
    else res.end(asset.body);
  };
  return [
    { prefix: openApiPath, handler },
    { prefix: docsPath, handler },
  ];
}
