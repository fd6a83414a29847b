import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Debian's Chromium: playwright cannot download its own browser on our machines. */
const executablePath = "/usr/bin/chromium";

/**
 * Launches headless Chromium for browser tests. Installing it is the machine's preparation
 * (.ci/prepare), so a machine without it fails here with what to do.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(executablePath)) {
    throw new Error(
      `${executablePath} is missing (the browser tests drive Debian's Chromium). Run \`bash .ci/prepare\` first: it installs it.`,
    );
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
