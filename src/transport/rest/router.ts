import { getOption, type DescField, type DescMethod } from "@bufbuild/protobuf";
import type { MethodImplSpec } from "@connectrpc/connect";
import { http } from "../../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../../gen/google/api/http_pb.js";
import { MethodNotAllowedError, unrecognizedUrl } from "../../errors.js";
import { parsePathTemplate, type PathSegment } from "./path-template.js";

/** The implementation of a unary method, the only kind a REST path can be bound to. */
export type UnaryMethodSpec = Extract<MethodImplSpec, { kind: "unary" }>;

/** One REST binding of an RPC, taken from its google.api.http rule or one of its additional_bindings. */
export interface RestRoute {
  readonly httpMethod: string;
  readonly template: string;
  readonly segments: PathSegment[];
  /** The request fields the path variables fill, in path order. */
  readonly variables: DescField[];
  /** `"*"` when the JSON body is the whole request message, `""` when the binding takes no body. */
  readonly body: "*" | "";
  readonly method: DescMethod;
  readonly spec: UnaryMethodSpec;
  /** How literal the template is, position by position: a more literal template wins a path. */
  readonly specificity: number;
}

/** A route matched by a request, with the raw (still percent-encoded) values of its path variables. */
export interface RouteMatch {
  readonly route: RestRoute;
  readonly variables: string[];
}

/**
 * Maps REST paths onto RPC implementations. Built once at start-up from the http annotations of the served
 * methods, so the REST surface can never drift from the protos.
 */
export class RestRouter {
  private readonly routes: RestRoute[];

  constructor(methods: readonly MethodImplSpec[]) {
    this.routes = methods.flatMap((spec) => bindings(spec)).sort((a, b) => b.specificity - a.specificity);
    const seen = new Set<string>();
    for (const route of this.routes) {
      const key = `${route.httpMethod} ${route.segments.map((s) => ("literal" in s ? s.literal : "{}")).join("/")}`;
      if (seen.has(key)) throw new Error(`two RPCs are bound to ${route.httpMethod} ${route.template}`);
      seen.add(key);
    }
  }

  /** The route for a request, or undefined: what a preflight asks about, which is never refused. */
  find(httpMethod: string, pathname: string): RestRoute | undefined {
    try {
      return this.match(httpMethod, pathname).route;
    } catch {
      return undefined;
    }
  }

  /**
   * Finds the route for a request. The path picks its template first, a literal segment beating a
   * variable (`/customers/list` is not a customer id, whatever the method); then the method picks
   * the route among that template's. A template without the method is IR_03, as vanguard-go
   * answers; no template at all is IR_02.
   */
  match(httpMethod: string, pathname: string): RouteMatch {
    const parts = pathname.split("/").slice(1);
    const allowed = new Set<string>();
    let template: number | undefined;
    for (const route of this.routes) {
      const variables = matchSegments(route.segments, parts);
      if (variables === undefined) continue;
      // Routes are sorted by specificity, and two templates of one specificity cannot both match a path.
      template ??= route.specificity;
      if (route.specificity !== template) break;
      if (route.httpMethod === httpMethod) return { route, variables };
      allowed.add(route.httpMethod);
    }
    if (allowed.size > 0) {
      throw new MethodNotAllowedError(httpMethod, pathname, [...allowed]);
    }
    throw unrecognizedUrl(httpMethod, pathname);
  }
}

/** Every REST binding a method declares: its google.api.http rule and its additional_bindings. */
export function httpRulesOf(method: DescMethod): HttpRule[] {
  const rule = getOption(method, http);
  return [rule, ...rule.additionalBindings].filter((r) => r.pattern.case !== undefined);
}

/**
 * The request fields a method's REST paths bind, e.g. `payment_id` of `/payments/{payment_id}`:
 * they name the object the call acts on, so no protocol may leave them empty.
 */
export function pathFieldsOf(method: DescMethod): DescField[] {
  const fields = httpRulesOf(method).flatMap((rule) =>
    rule.pattern.case === undefined || rule.pattern.case === "custom"
      ? []
      : parsePathTemplate(rule.pattern.value, method.input).flatMap((segment) => ("variable" in segment ? [segment.variable] : [])),
  );
  return [...new Set(fields)];
}

function bindings(spec: MethodImplSpec): RestRoute[] {
  const rules = httpRulesOf(spec.method);
  if (rules.length > 0 && spec.kind !== "unary") {
    throw new Error(`${spec.method.name}: only unary methods can have REST bindings, not ${spec.kind}`);
  }
  return rules.map((r) => toRoute(r, spec as UnaryMethodSpec));
}

function toRoute(rule: HttpRule, spec: UnaryMethodSpec): RestRoute {
  const { pattern } = rule;
  if (pattern.case === "custom" || pattern.case === undefined) {
    throw new Error(`${spec.method.name}: unsupported http rule pattern ${pattern.case}`);
  }
  if (rule.body !== "*" && rule.body !== "") {
    throw new Error(`${spec.method.name}: only body "*" or no body is supported, got "${rule.body}"`);
  }
  if (rule.responseBody !== "") {
    throw new Error(`${spec.method.name}: response_body is not supported`);
  }
  const segments = parsePathTemplate(pattern.value, spec.method.input);
  return {
    httpMethod: pattern.case.toUpperCase(),
    template: pattern.value,
    segments,
    variables: segments.flatMap((s) => ("variable" in s ? [s.variable] : [])),
    body: rule.body,
    method: spec.method,
    spec,
    specificity: specificity(segments),
  };
}

/** Orders routes so that, position by position, literal segments are tried before variables. */
function specificity(segments: PathSegment[]): number {
  return segments.reduce((score, s, i) => score + ("literal" in s ? 2 ** (16 - i) : 0), 0);
}

function matchSegments(segments: PathSegment[], parts: string[]): string[] | undefined {
  if (segments.length !== parts.length) return undefined;
  const variables: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    const part = parts[i]!;
    if ("literal" in segment) {
      if (segment.literal !== part) return undefined;
    } else {
      if (part === "") return undefined;
      variables.push(part);
    }
  }
  return variables;
}
