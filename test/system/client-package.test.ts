import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { newMerchant } from "../support/merchant.js";
import { retrievePayment } from "../support/payments.js";
import { runningService } from "../support/running.js";

/*
 * The typed client package (packages/client, docs/client-package.md) as another service gets it:
 * built with `npm run build:client`, packed with `npm pack`, installed from the tarball into a
 * scratch project with its peers, and used there by a plain Node ES module — no tsx, no repository
 * files — that creates a confirmed payment and retrieves it over Connect and over gRPC.
 */

const run = promisify(execFile);
const repository = fileURLToPath(new URL("../..", import.meta.url));
const packageDir = join(repository, "packages/client");
const service = runningService();

/**
 * The environment of npm run from here, less what npm or npx told this process about the
 * repository (npm_config_*, npm_package_*): an install in the scratch project must not see them.
 */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith("npm_")));
}

/** The scratch project's script: the package's README example, in plain JavaScript. */
const script = `
import { randomUUID } from "node:crypto";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { PaymentMethod, PaymentService, PaymentStatus } from "@payment-service/client";

const { BASE_URL, API_KEY, PROFILE_ID } = process.env;
const authenticate = (next) => (req) => {
  req.header.set("api-key", API_KEY);
  return next(req);
};
const idempotent = (next) => (req) => {
  if (req.method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS && !req.header.has("x-idempotency-key")) {
    req.header.set("x-idempotency-key", randomUUID());
  }
  return next(req);
};
const interceptors = [authenticate, idempotent];
const transports = {
  connect: createConnectTransport({ baseUrl: BASE_URL, httpVersion: "1.1", interceptors }),
  grpc: createGrpcTransport({ baseUrl: BASE_URL, interceptors, idleConnectionTimeoutMs: 100 }),
};
for (const [protocol, transport] of Object.entries(transports)) {
  const payments = createClient(PaymentService, transport);
  const request = {
    amount: 1500n,
    currency: "USD",
    profileId: PROFILE_ID,
    confirm: true,
    paymentMethod: PaymentMethod.CARD,
    paymentMethodData: { card: { cardNumber: "4242424242424242", cardExpMonth: "12", cardExpYear: "2035", cardCvc: "123" } },
  };
  const orderKey = "order-" + protocol + "-" + randomUUID();
  const created = await payments.createPayment(request, { headers: { "x-idempotency-key": orderKey } });
  let replayed = null;
  const retried = await payments.createPayment(request, {
    headers: { "x-idempotency-key": orderKey },
    onHeader: (header) => { replayed = header.get("idempotent-replayed"); },
  });
  const retrieved = await payments.retrievePayment({ paymentId: created.paymentId });
  console.log(JSON.stringify({
    protocol,
    paymentId: created.paymentId,
    created: PaymentStatus[created.status],
    retriedId: retried.paymentId,
    replayed,
    retrieved: PaymentStatus[retrieved.status],
    amountReceived: String(retrieved.amountReceived),
  }));
}
`;

let scratchRoot: string | undefined;
afterAll(async () => {
  if (scratchRoot !== undefined) await rm(scratchRoot, { recursive: true, force: true });
});

describe("the client package", () => {
  it("re-exports every generated paymentservice.v1 file", async () => {
    const generated = (await readdir(join(repository, "gen/paymentservice/v1"))).filter((file) => file.endsWith("_pb.ts"));
    const index = await readFile(join(packageDir, "src/index.ts"), "utf8");
    for (const file of generated)
      expect(index).toContain(`export * from "../../../gen/paymentservice/v1/${file.replace(/\.ts$/, ".js")}";`);
  });

  it("builds, packs, installs from its tarball and calls the service over Connect and gRPC from plain Node", async () => {
    const rootManifest = JSON.parse(await readFile(join(repository, "package.json"), "utf8"));
    const manifest = JSON.parse(await readFile(join(packageDir, "package.json"), "utf8"));
    expect(manifest.peerDependencies).toEqual({
      "@bufbuild/protobuf": rootManifest.dependencies["@bufbuild/protobuf"],
      "@connectrpc/connect": rootManifest.dependencies["@connectrpc/connect"],
    });

    await run("npm", ["run", "-s", "build:client"], { cwd: repository });
    scratchRoot = await mkdtemp(join(tmpdir(), "client-package-"));
    const packed = await run("npm", ["pack", "--json", "--pack-destination", scratchRoot], { cwd: packageDir, env: cleanEnv() });
    const [tarball] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    const shipped = tarball!.files.map((file) => file.path);
    expect(shipped).toEqual(
      expect.arrayContaining(["package.json", "README.md", "dist/packages/client/src/index.js", "dist/packages/client/src/index.d.ts"]),
    );
    // JavaScript and declarations only: no TypeScript sources, no tests.
    expect(shipped.filter((path) => !/(\.js|\.d\.ts)$/.test(path)).sort()).toEqual(["README.md", "package.json"]);

    const project = join(scratchRoot, "project");
    await mkdir(project);
    await writeFile(join(project, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
    const versions = { ...rootManifest.dependencies };
    await run(
      "npm",
      [
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        join(scratchRoot, tarball!.filename),
        `@bufbuild/protobuf@${versions["@bufbuild/protobuf"]}`,
        `@connectrpc/connect@${versions["@connectrpc/connect"]}`,
        `@connectrpc/connect-node@${versions["@connectrpc/connect-node"]}`,
      ],
      { cwd: project, env: cleanEnv() },
    );
    await writeFile(join(project, "checkout.mjs"), script);

    const merchant = await newMerchant(service.url);
    const { stdout } = await run("node", ["checkout.mjs"], {
      cwd: project,
      env: { ...cleanEnv(), BASE_URL: service.url, API_KEY: merchant.apiKey, PROFILE_ID: merchant.profileId },
      timeout: 60_000,
    });
    const results = stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(results.map((r) => r.protocol)).toEqual(["connect", "grpc"]);
    for (const result of results) {
      expect(result).toEqual({
        protocol: result.protocol,
        paymentId: expect.stringMatching(/^pay_/),
        created: "SUCCEEDED",
        retriedId: result.paymentId,
        replayed: "true",
        retrieved: "SUCCEEDED",
        amountReceived: "1500",
      });
      expect(await retrievePayment(service.url, merchant, result.paymentId)).toMatchObject({ status: "succeeded", amount_received: 1500 });
    }
  }, 240_000);
});
