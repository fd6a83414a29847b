import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { log } from "../log.js";
import { ProfileRow } from "../merchants/profile.entity.js";
import { PaymentRow } from "./payment.entity.js";
import { paymentStates } from "./states.js";
import { operateOnPayment, type PaymentOperationDependencies } from "./operation.js";
import { authenticationPath } from "./attempts.js";
import { authenticateOperation } from "./operations/authenticate.js";

/** What the 3DS pages need: what the operations need. */
export type AuthenticationPageDependencies = PaymentOperationDependencies;

/** Serves one request for a page under its path prefix; the port has already parsed the path. */
export type PageHandler = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse, path: string) => void;

const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => escapes[c]!);
}

function formatAmount(amount: bigint, currency: string): string {
  const format = new Intl.NumberFormat("en", { style: "currency", currency });
  const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
  return format.format(Number(amount) / 10 ** digits);
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
button{font-size:1rem;padding:.6rem 1.2rem;margin-right:.5rem}</style></head>
<body>${body}</body></html>`;
}

/**
 * What the challenge page may do: show its own inline style and nothing else; never be framed, so
 * another site cannot overlay its buttons and click them for the customer. `form-action` is left
 * out: the form posts to this page, whose answer redirects to the merchant's return_url, and
 * browsers hold such redirects to `form-action` too.
 */
const pagePolicy = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'";

/**
 * The sandbox 3D Secure challenge (decisions §3): a page with Complete and Fail buttons that the
 * customer's browser reaches through `next_action.redirect_to_url`. It needs no API key — the
 * unguessable token in its URL authorizes it — and after either button the payment moves on and
 * the browser goes to the payment's (or profile's) return_url with payment_id and status.
 */
export function createAuthenticationPages(deps: AuthenticationPageDependencies): PageHandler {
  const payments = deps.dataSource.getRepository(PaymentRow);

  return (req, res, path) => {
    const [token, action, ...rest] = path.slice(authenticationPath.length).split("/");
    const send = (status: number, html: string) => {
      res.statusCode = status;
      res.setHeader("content-type", "text/html; charset=utf-8");
      res.setHeader("content-security-policy", pagePolicy);
      res.end(html);
    };
    const notFoundPage = () => send(404, page("Not found", "<h1>This authentication link is not valid any more.</h1>"));
    if (token === undefined || token === "" || rest.length > 0) return notFoundPage();

    if (req.method === "GET" && action === undefined) {
      payments
        .findOneBy({ authenticationToken: token })
        .then((row) => {
          if (row === null || !paymentStates.allows("authenticate", row.status)) return notFoundPage();
          const base = `${authenticationPath}${encodeURIComponent(token)}`;
          send(
            200,
            page(
              "Authenticate your payment",
              `<h1>Sandbox 3D Secure</h1>
<p>Confirm the payment of <strong id="amount">${escapeHtml(formatAmount(row.amount, row.currency))}</strong>${
                row.description === null ? "" : ` for ${escapeHtml(row.description)}`
              }.</p>
<form method="post" action="${base}/complete" style="display:inline"><button id="complete" type="submit">Complete</button></form>
<form method="post" action="${base}/fail" style="display:inline"><button id="fail" type="submit">Fail</button></form>`,
            ),
          );
        })
        .catch((error: unknown) => {
          log.error("3ds page failed", { error: String(error) });
          send(500, page("Error", "<h1>Something went wrong.</h1>"));
        });
      return;
    }

    if (req.method === "POST" && (action === "complete" || action === "fail")) {
      // The form posts nothing the page needs; the port closes a body left unread instead of reading it.
      finishAuthentication(deps, token, action === "complete")
        .then((outcome) => {
          if (outcome === undefined) return notFoundPage();
          if (outcome.returnUrl === null) {
            return send(200, page(`Payment ${outcome.status}`, `<h1 id="status">Payment ${escapeHtml(outcome.status)}</h1>`));
          }
          const target = new URL(outcome.returnUrl);
          target.searchParams.set("payment_id", outcome.paymentId);
          target.searchParams.set("status", outcome.status);
          res.statusCode = 303;
          res.setHeader("location", target.toString());
          res.end();
        })
        .catch((error: unknown) => {
          log.error("3ds completion failed", { error: String(error) });
          send(500, page("Error", "<h1>Something went wrong.</h1>"));
        });
      return;
    }
    res.statusCode = 405;
    res.end();
  };
}

/**
 * Finishes the authentication of the payment behind `token`. Undefined when the token is unknown or
 * the payment no longer waits for authentication (a second click, or a cancel in between).
 */
async function finishAuthentication(
  deps: AuthenticationPageDependencies,
  token: string,
  authenticated: boolean,
): Promise<{ paymentId: string; status: string; returnUrl: string | null } | undefined> {
  const found = await deps.dataSource.manager.findOneBy(PaymentRow, { authenticationToken: token });
  if (found === null) return undefined;
  const operated = await operateOnPayment(deps, found, found.paymentId, authenticateOperation(deps, token, authenticated), undefined);
  if (operated === undefined) return undefined;
  const row = operated.row;
  const profile = await deps.dataSource.manager.findOneBy(ProfileRow, { merchantId: row.merchantId, profileId: row.profileId });
  return { paymentId: row.paymentId, status: row.status, returnUrl: row.returnUrl ?? profile?.returnUrl ?? null };
}
