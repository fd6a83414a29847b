import { describe, expect, it } from "vitest";
import { parseRequestTarget } from "./request-target.js";

describe("parseRequestTarget", () => {
  it.each([
    ["/payments", "/payments", ""],
    ["/payments/list?limit=5&status=succeeded", "/payments/list", "limit=5&status=succeeded"],
    ["//", "//", ""],
    ["//%", "//%", ""],
    ["//@", "//@", ""],
    ["/\\\\evil", "/\\\\evil", ""],
    ["/customers/../payments", "/customers/../payments", ""],
    ["/payments#fragment?not=query", "/payments", ""],
    ["/a?b=%zz", "/a", "b=%25zz"],
    ["http://example.com/payments?limit=1", "/payments", "limit=1"],
  ])("%s → path %s, query %s", (target, path, query) => {
    const parsed = parseRequestTarget(target);
    expect(parsed?.path).toBe(path);
    expect(parsed?.query.toString()).toBe(query);
  });

  it.each([[undefined], [""], ["*"], ["example.com:443"], ["http://[/payments"], ["ftp://example.com/x"]])(
    "%s is no target this service serves",
    (target) => {
      expect(parseRequestTarget(target)).toBeUndefined();
    },
  );
});
