/** The path and query of a request, as the client sent them (the path still percent-encoded). */
export interface RequestTarget {
  readonly path: string;
  readonly query: URLSearchParams;
}

/**
 * Splits a request target into path and query without ever throwing: `new URL()` throws on targets
 * such as `//` or `//@`, and one such request once stopped the whole process. Origin-form targets
 * (`/payments?limit=5`) are split as they are, without resolving dot segments; absolute-form ones
 * (`http://host/payments`, which proxies send) are parsed. Anything else (`*`, `host:443`, a URL
 * that does not parse) is undefined: not a target this service serves.
 */
export function parseRequestTarget(target: string | undefined): RequestTarget | undefined {
  if (target === undefined || target === "") return undefined;
  if (target.startsWith("/")) {
    // A fragment is not the server's (browsers never send one); cut it as URL parsing would.
    const fragmentStart = target.indexOf("#");
    const withoutFragment = fragmentStart === -1 ? target : target.slice(0, fragmentStart);
    const queryStart = withoutFragment.indexOf("?");
    return queryStart === -1
      ? { path: withoutFragment, query: new URLSearchParams() }
      : { path: withoutFragment.slice(0, queryStart), query: new URLSearchParams(withoutFragment.slice(queryStart + 1)) };
  }
  if (!URL.canParse(target)) return undefined;
  const url = new URL(target);
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  return { path: url.pathname, query: url.searchParams };
}
