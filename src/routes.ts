import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { ApiKeyService } from "../gen/paymentservice/v1/api_key_pb.js";
import { BalanceService } from "../gen/paymentservice/v1/balance_pb.js";
import { CustomerService } from "../gen/paymentservice/v1/customer_pb.js";
import { DisputeService } from "../gen/paymentservice/v1/dispute_pb.js";
import { EventService } from "../gen/paymentservice/v1/event_pb.js";
import { HealthService } from "../gen/paymentservice/v1/health_pb.js";
import { JobService } from "../gen/paymentservice/v1/job_pb.js";
import { MandateService } from "../gen/paymentservice/v1/mandate_pb.js";
import { MerchantService } from "../gen/paymentservice/v1/merchant_pb.js";
import { PaymentMethodService } from "../gen/paymentservice/v1/payment_method_pb.js";
import { PaymentService } from "../gen/paymentservice/v1/payment_pb.js";
import { PayoutService } from "../gen/paymentservice/v1/payout_pb.js";
import { RefundService } from "../gen/paymentservice/v1/refund_pb.js";
import { SandboxService } from "../gen/paymentservice/v1/sandbox_pb.js";
import { apiKeyService, type ApiKeyDependencies } from "./api-keys/service.js";
import { customerService, type CustomerDependencies } from "./customers/service.js";
import { disputeService, type DisputeDependencies } from "./disputes/service.js";
import { eventService, type EventDependencies } from "./events/service.js";
import { healthService } from "./health/service.js";
import { replayable } from "./idempotency/interceptor.js";
import { jobService, type JobDependencies } from "./jobs/service.js";
import { balanceService, type BalanceDependencies } from "./ledger/service.js";
import { mandateService, type MandateDependencies } from "./mandates/service.js";
import { merchantService, type MerchantDependencies } from "./merchants/service.js";
import { paymentMethodService, type PaymentMethodDependencies } from "./payment-methods/service.js";
import { paymentService, type PaymentDependencies } from "./payments/service.js";
import { payoutService, type PayoutDependencies } from "./payouts/service.js";
import { refundService, type RefundDependencies } from "./refunds/service.js";
import { sandboxService, type SandboxDependencies } from "./sandbox/service.js";

/** What the services need between them: each is handed only the part its own interface names. */
export type ServiceDependencies = MerchantDependencies &
  ApiKeyDependencies &
  CustomerDependencies &
  PaymentMethodDependencies &
  MandateDependencies &
  PaymentDependencies &
  RefundDependencies &
  PayoutDependencies &
  DisputeDependencies &
  BalanceDependencies &
  EventDependencies &
  SandboxDependencies &
  JobDependencies;

/**
 * Every service the API serves, registered once: the same handlers answer Connect, gRPC, gRPC-Web and
 * (through the transcoder) REST. Methods not built yet are left out of their implementation, so
 * connect answers them `unimplemented` (IR_00, HTTP 501) while their REST paths already route.
 */
export default function routes(router: ConnectRouter, deps: ServiceDependencies): ConnectRouter {
  // Every service goes through here, so none can miss the replay wrapper: one that did would run
  // its handler again when the idempotency interceptor replays a call to it.
  const serve = <S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>) => router.service(service, replayable(impl));
  serve(HealthService, healthService());
  serve(MerchantService, merchantService(deps));
  serve(ApiKeyService, apiKeyService(deps));
  serve(CustomerService, customerService(deps));
  serve(PaymentMethodService, paymentMethodService(deps));
  serve(MandateService, mandateService(deps));
  serve(PaymentService, paymentService(deps));
  serve(RefundService, refundService(deps));
  serve(PayoutService, payoutService(deps));
  serve(DisputeService, disputeService(deps));
  serve(BalanceService, balanceService(deps));
  serve(EventService, eventService(deps));
  serve(SandboxService, sandboxService(deps));
  serve(JobService, jobService(deps));
  return router;
}
