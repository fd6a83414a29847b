import { describe, expect, it } from "vitest";
import { formActionOf, threeDsScene } from "./support/three-ds.js";

/*
 * The sandbox 3D Secure flow (decisions §3) without a browser: the forms of the service's page posted
 * to directly, as a script would. The flow in Chromium, as a customer goes through it, is
 * test/system/browser-3ds.test.ts (the system tier).
 */

const scene = threeDsScene();

describe("3D Secure without a browser", () => {
  it("gives the same outcome when the Complete form's URL is posted to directly: 303 to return_url", async () => {
    const returnUrl = `${scene.site.url}/shop/direct`;
    const { paymentId, redirectUrl } = await scene.paymentNeedingAuthentication({ return_url: returnUrl });
    const completeUrl = await formActionOf(redirectUrl, "complete");

    const res = await fetch(completeUrl, { method: "POST", redirect: "manual" });
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get("location")!);
    expect(location.origin + location.pathname).toBe(returnUrl);
    expect(Object.fromEntries(location.searchParams)).toEqual({ payment_id: paymentId, status: "succeeded" });
    expect((await scene.retrieve(paymentId)).status).toBe("succeeded");

    // A second post (a double click, a replay) finds nothing to authenticate and changes nothing.
    const before = await scene.retrieve(paymentId);
    const replay = await fetch(completeUrl, { method: "POST", redirect: "manual" });
    expect(replay.status).toBe(404);
    expect(await scene.retrieve(paymentId)).toEqual(before);
  });

  it("fails the payment when the Fail form's URL is posted to directly", async () => {
    const { paymentId, redirectUrl } = await scene.paymentNeedingAuthentication({ return_url: `${scene.site.url}/shop/direct-fail` });
    const failUrl = await formActionOf(redirectUrl, "fail");

    const res = await fetch(failUrl, { method: "POST", redirect: "manual" });
    expect(res.status).toBe(303);
    expect(Object.fromEntries(new URL(res.headers.get("location")!).searchParams)).toEqual({ payment_id: paymentId, status: "failed" });
    expect(await scene.retrieve(paymentId)).toMatchObject({ status: "failed", error_code: "authentication_failed" });
  });

  it("serves the page and accepts its form without any api-key; an unknown token is not valid", async () => {
    const { paymentId, redirectUrl } = await scene.paymentNeedingAuthentication({ return_url: `${scene.site.url}/shop/nokey` });

    const pageRes = await fetch(redirectUrl);
    expect(pageRes.status).toBe(200);
    expect(pageRes.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await pageRes.text()).toContain("$25.00");

    const unknown = new URL(redirectUrl);
    unknown.pathname = "/3ds/notARealTokenAtAll0123456789abcdefghijkl";
    expect((await fetch(unknown)).status).toBe(404);
    expect((await fetch(`${unknown.href}/complete`, { method: "POST", redirect: "manual" })).status).toBe(404);
    expect((await scene.retrieve(paymentId)).status).toBe("requires_action");

    const completed = await fetch(await formActionOf(redirectUrl, "complete"), { method: "POST", redirect: "manual" });
    expect(completed.status).toBe(303);
    expect((await scene.retrieve(paymentId)).status).toBe("succeeded");
  });
});
