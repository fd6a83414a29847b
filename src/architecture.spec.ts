import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/*
 * Rules about how src/ is put together that no compiler checks: they keep each concept in one home,
 * and fail here, naming the files, the moment a change breaks them.
 */

const root = dirname(fileURLToPath(import.meta.url));

/** Every module of src/ (specs aside), by path relative to src/. */
function modules(dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return modules(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".spec.ts") ? [relative(root, path)] : [];
  });
}

/** The src/ modules a module imports, type-only imports and re-exports included. */
function importsOf(module: string, source: string): string[] {
  const specifiers = [...source.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"(\.[^"]+)"/gms)].map((m) => m[1]!);
  return specifiers
    .map((specifier) => relative(root, resolve(root, dirname(module), specifier)).replace(/\.js$/, ".ts"))
    .filter((path) => !path.startsWith(".."));
}

/** The strongly connected groups of more than one module (or a module importing itself): Tarjan's algorithm. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node)!, index.get(target)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== node);
    if (group.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(group.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

const sources = new Map(modules().map((module) => [module, readFileSync(join(root, module), "utf8")]));

describe("the import graph of src/", () => {
  it("finds a cycle when there is one (the checker itself)", () => {
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", ["a.ts"]],
    ]);
    expect(cycles(graph)).toEqual([["a.ts", "b.ts", "c.ts"]]);
    expect(importsOf("payments/service.ts", 'import type { App } from "../app.js";\nexport { x } from "./view.js";')).toEqual([
      "app.ts",
      "payments/view.ts",
    ]);
  });

  it("has no import cycle, type-only imports included", () => {
    const graph = new Map([...sources].map(([module, source]) => [module, importsOf(module, source)]));
    expect(cycles(graph)).toEqual([]);
  });

  it("has no cycle between folders: each folder of src/ builds on the ones below it, never on one that needs it", () => {
    expect(cycles(folderGraph())).toEqual([]);
  });

  it("keeps db/ infrastructure: it imports no other folder of src/, only top-level modules", () => {
    const outside = [...sources].flatMap(([module, source]) =>
      module.startsWith("db/")
        ? importsOf(module, source).filter((target) => folderOf(target) !== "db" && folderOf(target) !== undefined)
        : [],
    );
    expect(outside).toEqual([]);
  });
});

/** A module's folder of src/; undefined for a top-level module (the composition root and the shared leaves). */
function folderOf(module: string): string | undefined {
  return module.includes("/") ? module.split("/")[0] : undefined;
}

/** Which folders each folder imports from. Top-level modules are left out: app.ts sees every folder, and errors.ts is seen by all. */
function folderGraph(): Map<string, string[]> {
  const graph = new Map<string, Set<string>>();
  for (const [module, source] of sources) {
    const from = folderOf(module);
    if (from === undefined) continue;
    const targets = graph.get(from) ?? new Set<string>();
    for (const target of importsOf(module, source)) {
      const to = folderOf(target);
      if (to !== undefined && to !== from) targets.add(to);
    }
    graph.set(from, targets);
  }
  return new Map([...graph].map(([folder, targets]) => [folder, [...targets]]));
}

describe("errors", () => {
  it("are built by the typed constructors of src/errors.ts only", () => {
    const elsewhere = [...sources].filter(([module, source]) => module !== "errors.ts" && /new ApiError\(/.test(source)).map(([m]) => m);
    expect(elsewhere).toEqual([]);
  });
});
