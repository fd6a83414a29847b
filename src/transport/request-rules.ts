import type { DescField, DescMethod, Message } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { ConnectError, type Interceptor, type StreamRequest } from "@connectrpc/connect";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { missingField } from "../errors.js";
import { assertWellFormedMessage } from "../validation/message.js";
import { documentedRefusal } from "./connect-refusals.js";
import { pathFieldsOf } from "./rest/router.js";

/**
 * The one request message of a server-streaming call. Connect reads it only when the handler asks,
 * inside the call, so what it cannot read would surface as a failure of ours: it is read here and
 * refused as the caller's mistake (IR_06), like a unary request connect could not read.
 */
async function onlyMessage(req: StreamRequest): Promise<Message> {
  try {
    for await (const message of req.message) return message;
  } catch (error) {
    if (error instanceof ConnectError) throw documentedRefusal(error, req.requestMethod, req.method);
    throw error;
  }
  throw documentedRefusal(new ConnectError("protocol error: missing input message"), req.requestMethod, req.method);
}

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
  const check = (method: DescMethod, sent: Message) => {
    const message = reflect(method.input, sent);
    for (const field of pathFieldsFor(method)) {
      if (message.get(field) === "") throw missingField(field.name);
    }
    assertWellFormedMessage(message);
  };
  return (next) => async (req) => {
    if (!req.stream) {
      check(req.method, req.message);
      return next(req);
    }
    if (req.method.methodKind !== "server_streaming") return next(req);
    const message = await onlyMessage(req);
    check(req.method, message);
    return next({ ...req, message: createAsyncIterable([message]) });
  };
}
