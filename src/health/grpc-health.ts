import type { DescMethod } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { notFound } from "../errors.js";
import type { Readiness } from "./readiness.js";

/** How often a Watch asks the database again while nothing else tells it of a change. */
const watchProbeIntervalMs = 5_000;

/**
 * Whether a method is the standard health service's: public, since Kubernetes gRPC probes and
 * grpc_health_probe send no API key.
 */
export function isGrpcHealthMethod(method: DescMethod): boolean {
  return method.parent.typeName === Health.typeName;
}

/**
 * The standard gRPC health protocol (grpc.health.v1.Health), answered from the instance's real
 * readiness, for the whole server (service "") and for each service it serves, which all share
 * the one instance's readiness. `servedServices` is read at each call, once the router is complete.
 */
export function grpcHealthService(readiness: Readiness, servedServices: () => ReadonlySet<string>): ServiceImpl<typeof Health> {
  const isKnown = (service: string): boolean => service === "" || servedServices().has(service);
  const statusOf = async (): Promise<ServingStatus> => ((await readiness.isReady()) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  return {
    async check({ service }) {
      if (!isKnown(service)) throw notFound("service", service, "service");
      return { status: await statusOf() };
    },

    async *watch({ service }, ctx) {
      // The protocol keeps a Watch of an unknown service open; this server's services never change,
      // so only the end of the call or shutdown ends it.
      if (!isKnown(service)) {
        yield { status: ServingStatus.SERVICE_UNKNOWN };
        while (!ctx.signal.aborted && !readiness.isClosing) await readiness.pause(watchProbeIntervalMs, ctx.signal);
        return;
      }
      let last: ServingStatus | undefined;
      while (!ctx.signal.aborted) {
        const status = await statusOf();
        if (status !== last) yield { status };
        last = status;
        // Shutdown is final: the stream ends once the watcher knows, so it does not hold the port open.
        if (readiness.isClosing) return;
        await readiness.pause(watchProbeIntervalMs, ctx.signal);
      }
    },

    async list() {
      const status = await statusOf();
      return { statuses: Object.fromEntries(["", ...servedServices()].map((name) => [name, { status }])) };
    },
  };
}
