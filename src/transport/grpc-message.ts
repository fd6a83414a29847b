import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import { headerGrpcMessage } from "@connectrpc/connect/protocol-grpc";

/*
 * connect-es writes `grpc-message` with encodeURIComponent, which also escapes printable ASCII such
 * as ':' and ','. The gRPC spec (PROTOCOL-HTTP2.md, "Status-Message") asks only for the bytes of the
 * UTF-8 text outside 0x20–0x7E, and '%', to be percent-encoded. @grpc/grpc-js decodes with
 * decodeURI, which leaves `%3A`, `%2C`, `%2F`, … as they are, so its users would read
 * `Missing required field%3A amount`. Written as the spec says, every decoder reads the same text.
 */

/** The text of a status message as `grpc-message` carries it by the gRPC spec, so every gRPC client reads it unchanged. */
export function encodeGrpcMessage(text: string): string {
  let encoded = "";
  for (const byte of Buffer.from(text, "utf8")) {
    encoded +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return encoded;
}

/** Rewrites connect's `grpc-message` in `headers` (a gRPC header or trailer block) to the spec's encoding, so grpc-js users read it cleanly. */
export function respecGrpcMessage(headers: Headers): void {
  const written = headers.get(headerGrpcMessage);
  if (written === null) return;
  headers.set(headerGrpcMessage, encodeGrpcMessage(decodeGrpcMessage(written)));
}

/** connect's encodeURIComponent undone; a value that is not percent-encoded text is taken as it is. */
function decodeGrpcMessage(written: string): string {
  try {
    return decodeURIComponent(written);
  } catch {
    return written;
  }
}

/**
 * A gRPC answer of connect's whose `grpc-message`, in its header (a trailers-only answer) or its
 * trailer, is written as the gRPC spec says. Connect fills both while the body is read, and
 * connect-node sends the header after the body's first chunk and the trailer after its end, so
 * each is rewritten at that moment.
 */
export function withSpecGrpcMessage(answer: UniversalServerResponse): UniversalServerResponse {
  const { header, trailer, body } = answer;
  const rewrite = (headers: Headers | undefined): void => {
    if (headers !== undefined) respecGrpcMessage(headers);
  };
  if (body === undefined) {
    rewrite(header);
    rewrite(trailer);
    return answer;
  }
  return {
    ...answer,
    body: (async function* () {
      let headerRewritten = false;
      for await (const chunk of body) {
        if (!headerRewritten) rewrite(header);
        headerRewritten = true;
        yield chunk;
      }
      if (!headerRewritten) rewrite(header);
      rewrite(trailer);
    })(),
  };
}
