import type { DescMethod, DescService } from "@bufbuild/protobuf";
import {
  createConnectRouter,
  createMethodImplSpec,
  createServiceImplSpec,
  type ConnectRouter,
  type ConnectRouterOptions,
  type Interceptor,
  type MethodImpl,
  type MethodImplSpec,
  type ServiceImpl,
} from "@connectrpc/connect";
import type { UniversalHandler, UniversalHandlerOptions } from "@connectrpc/connect/protocol";

/**
 * The connect router of the service, which also keeps every method's implementation and the
 * interceptors, so the REST transcoder can invoke the very same implementation through the very
 * same interceptors without encoding each call into a Connect request and decoding it again.
 */
export class ApiRouter implements ConnectRouter {
  private readonly connect: ConnectRouter;
  /** Every served method with its implementation (one not implemented answers `unimplemented`). */
  readonly methods: MethodImplSpec[] = [];
  readonly interceptors: Interceptor[];

  /** `options` are kept for the port's direct Connect calls, which must read and answer as connect does. */
  constructor(readonly options: ConnectRouterOptions) {
    this.connect = createConnectRouter(options);
    this.interceptors = options.interceptors ?? [];
  }

  get handlers(): UniversalHandler[] {
    return this.connect.handlers;
  }

  service<T extends DescService>(service: T, implementation: Partial<ServiceImpl<T>>, options?: Partial<UniversalHandlerOptions>): this {
    this.connect.service(service, implementation, options);
    this.methods.push(...Object.values(createServiceImplSpec(service, implementation).methods));
    return this;
  }

  rpc<M extends DescMethod>(method: M, implementation: MethodImpl<M>, options?: Partial<UniversalHandlerOptions>): this {
    this.connect.rpc(method, implementation, options);
    this.methods.push(createMethodImplSpec(method, implementation));
    return this;
  }
}
