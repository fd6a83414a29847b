import { fileURLToPath } from "node:url";
import type { Code } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { build } from "esbuild";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import type { JsonBody } from "../support/clients.js";
import { newMerchant } from "../support/merchant.js";
import { runningService } from "../support/running.js";
import { type CallResult, type ClientFamily, type ErrorDetailJson, runClientScenario } from "./scenario.js";

/*
 * The service called from a web page with @connectrpc/connect-web in headless Chromium, its
 * generated clients bundled with esbuild as a web app would. The page is served on the service's own
 * origin (the browser is handed it for a path the service does not serve), so this is the client
 * library under test; calls from another origin, and CORS, are test/system/browser-checkout.test.ts's.
 */

const service = runningService();
const repository = fileURLToPath(new URL("../..", import.meta.url));

/** The page's script: a call of any method by name, in proto JSON, through connect-web's transport. */
const pageScript = `
import { ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { createRegistry, fromJson, toJson } from "@bufbuild/protobuf";
import { file_grpc_health_v1_health } from "./gen/grpc/health/v1/health_pb.js";
import { ErrorDetailSchema } from "./gen/paymentservice/v1/error_pb.js";
import { file_paymentservice_v1_customer } from "./gen/paymentservice/v1/customer_pb.js";
import { file_paymentservice_v1_event } from "./gen/paymentservice/v1/event_pb.js";
import { file_paymentservice_v1_payment } from "./gen/paymentservice/v1/payment_pb.js";
import { file_paymentservice_v1_refund } from "./gen/paymentservice/v1/refund_pb.js";

const registry = createRegistry(
  file_grpc_health_v1_health, file_paymentservice_v1_customer, file_paymentservice_v1_event,
  file_paymentservice_v1_payment, file_paymentservice_v1_refund,
);
const transport = createConnectTransport({ baseUrl: location.origin });

function methodOf(name) {
  const [serviceName, methodName] = name.split("/");
  const service = registry.getService(serviceName);
  const method = service.methods.find((m) => m.name === methodName);
  // A method the service does not serve is sent with another's messages: the server never reads it.
  return { service, method: method ?? { ...service.methods.find((m) => m.name === "RetrievePayment"), name: methodName } };
}

window.scenarioCall = async (name, request, headers) => {
  const { method } = methodOf(name);
  try {
    const answer = await transport.unary(method, undefined, undefined, headers, fromJson(method.input, request));
    return { ok: true, message: toJson(method.output, answer.message), replayed: answer.header.get("idempotent-replayed") === "true" };
  } catch (reason) {
    const error = ConnectError.from(reason);
    const [detail] = error.findDetails(ErrorDetailSchema);
    return {
      ok: false,
      code: error.code,
      message: error.rawMessage,
      detail: detail === undefined ? undefined : { type: detail.type, code: detail.code, message: detail.message },
    };
  }
};

window.scenarioFirstOfStream = async (name, request, headers) => {
  const { service, method } = methodOf(name);
  const client = createClient(service, transport);
  const abort = new AbortController();
  for await (const message of client[method.localName](fromJson(method.input, request), { headers, signal: abort.signal })) {
    abort.abort();
    return toJson(method.output, message);
  }
  throw new Error("the stream ended without a message");
};
`;

/** The page's answer to a unary call: CallResult with connect-web's numeric code. */
type PageResult =
  | { readonly ok: true; readonly message: JsonBody; readonly replayed: boolean }
  | { readonly ok: false; readonly code: Code; readonly message: string; readonly detail: ErrorDetailJson | undefined };

/** Methods the page exposes to the test. */
interface ScenarioPage {
  scenarioCall(name: string, request: JsonBody, headers: Record<string, string>): Promise<PageResult>;
  scenarioFirstOfStream(name: string, request: JsonBody, headers: Record<string, string>): Promise<JsonBody>;
}

let browser: Browser;
let page: Page;

beforeAll(async () => {
  const bundled = await build({
    stdin: { contents: pageScript, resolveDir: repository, sourcefile: "scenario.js", loader: "js" },
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  const script = bundled.outputFiles[0]!.text;
  browser = await launchChromium();
  page = await browser.newPage();
  await page.route(`${service.url}/connect-web-scenario**`, (route) =>
    route.request().url().endsWith(".js")
      ? route.fulfill({ contentType: "text/javascript", body: script })
      : route.fulfill({
          contentType: "text/html; charset=utf-8",
          body: '<!doctype html><title>Scenario</title><script type="module" src="/connect-web-scenario.js"></script>',
        }),
  );
  await page.goto(`${service.url}/connect-web-scenario`);
  await page.waitForFunction(() => "scenarioFirstOfStream" in globalThis);
});

afterAll(async () => {
  await browser?.close();
});

/** connect-web in the page, driven call by call. */
const connectWeb: ClientFamily = {
  async call(method, request, headers): Promise<CallResult> {
    const result = await page.evaluate(
      ({ method, request, headers }) => (globalThis as unknown as ScenarioPage).scenarioCall(method, request, headers),
      { method, request, headers },
    );
    return result.ok ? result : { ...result, code: codeToString(result.code) };
  },
  firstOfStream(method, request, headers) {
    return page.evaluate(
      ({ method, request, headers }) => (globalThis as unknown as ScenarioPage).scenarioFirstOfStream(method, request, headers),
      { method, request, headers },
    );
  },
};

describe("@connectrpc/connect-web in Chromium", () => {
  it("runs the client scenario", { timeout: 60_000 }, async () => {
    await runClientScenario(connectWeb, await newMerchant(service.url));
  });
});
