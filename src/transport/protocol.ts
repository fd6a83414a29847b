import { createContextKey } from "@connectrpc/connect";

/**
 * The protocol a call arrived on. Connect, gRPC and gRPC-Web are told apart by connect itself; REST
 * calls invoke the same implementations through the same interceptors, so the REST layer marks them
 * here for logs.
 */
export const protocolKey = createContextKey<"rest" | "rpc">("rpc", { description: "protocol of the call" });
