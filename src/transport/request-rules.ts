import type { DescField, DescMethod } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import type { Interceptor } from "@connectrpc/connect";
import { missingField } from "../errors.js";
import { assertWellFormedMessage } from "../validation/message.js";
import { pathFieldsOf } from "./rest/router.js";

/**
 * Rules every request message must pass whatever its protocol, derived from the protos so that a
 * new method or field is covered without anyone remembering to add it: the ids a method's REST path
 * binds are never empty (IR_04 naming the field, not a 404 for an object called ""), and every
 * field is well-formed (assertWellFormedMessage: text PostgreSQL can hold, enum values that exist).
 * They run before idempotency, so a request they refuse never claims its key.
 */
export function createRequestRulesInterceptor(): Interceptor {
  const pathFields = new WeakMap<DescMethod, DescField[]>();
  const pathFieldsFor = (method: DescMethod): DescField[] => {
    let fields = pathFields.get(method);
    if (fields === undefined) {
      fields = pathFieldsOf(method);
      pathFields.set(method, fields);
    }
    return fields;
  };
  return (next) => (req) => {
    if (req.stream) return next(req);
    const message = reflect(req.method.input, req.message);
    for (const field of pathFieldsFor(req.method)) {
      if (message.get(field) === "") throw missingField(field.name);
    }
    assertWellFormedMessage(message);
    return next(req);
  };
}
