import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Debian's Chromium: playwright cannot download its own browser on our machines. */
const executablePath = "/usr/bin/chromium";

/**
 * Launches headless Chromium for browser tests, installing Debian's package first on a fresh machine
 * (as root, the way our machines and CI run), so `npm test` needs nothing installed beforehand.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(executablePath)) {
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    execFileSync("apt-get", ["update", "-qq"], { env, stdio: "ignore" });
    execFileSync("apt-get", ["install", "-y", "-qq", "chromium"], { env, stdio: "ignore" });
  }
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-quic",
      "--no-first-run",
    ],
  });
}

/** How long installing Chromium on a fresh machine may take. */
export const chromiumInstallTimeoutMs = 10 * 60 * 1000;
