import { describe, expect, it } from "vitest";
import { encodeGrpcMessage, respecGrpcMessage } from "./grpc-message.js";

describe("encodeGrpcMessage", () => {
  it("leaves printable ASCII as it is, ':' and ',' included, so decodeURI (grpc-js) reads the text unchanged", () => {
    const text = "Invalid value for field card_exp_month: expected 1-12, got 13 (see /payments?x=1#y)";
    expect(encodeGrpcMessage(text)).toBe(text);
    expect(decodeURI(encodeGrpcMessage(text))).toBe(text);
  });

  it("percent-encodes '%', control characters and every UTF-8 byte beyond ASCII", () => {
    expect(encodeGrpcMessage("100% Zoë\n")).toBe("100%25 Zo%C3%AB%0A");
    for (const text of ["100% Zoë\n", "« x » 😀 \u007f"]) {
      expect(decodeURI(encodeGrpcMessage(text))).toBe(text);
      expect(decodeURIComponent(encodeGrpcMessage(text))).toBe(text);
    }
  });
});

describe("respecGrpcMessage", () => {
  it("rewrites connect's encodeURIComponent text to the spec's encoding", () => {
    const headers = new Headers({ "grpc-message": encodeURIComponent("Missing required field: amount, 50%") });
    respecGrpcMessage(headers);
    expect(headers.get("grpc-message")).toBe("Missing required field: amount, 50%25");
  });
});
