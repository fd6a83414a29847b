/**
 * The service API as TypeScript types and descriptors: every service (pass one to `createClient`
 * of @connectrpc/connect), request and resource message, and enum of paymentservice.v1, generated
 * from the repository's protos.
 */
export * from "../../../gen/paymentservice/v1/api_key_pb.js";
export * from "../../../gen/paymentservice/v1/balance_pb.js";
export * from "../../../gen/paymentservice/v1/common_pb.js";
export * from "../../../gen/paymentservice/v1/customer_pb.js";
export * from "../../../gen/paymentservice/v1/dispute_pb.js";
export * from "../../../gen/paymentservice/v1/error_pb.js";
export * from "../../../gen/paymentservice/v1/event_pb.js";
export * from "../../../gen/paymentservice/v1/health_pb.js";
export * from "../../../gen/paymentservice/v1/job_pb.js";
export * from "../../../gen/paymentservice/v1/mandate_pb.js";
export * from "../../../gen/paymentservice/v1/merchant_pb.js";
export * from "../../../gen/paymentservice/v1/options_pb.js";
export * from "../../../gen/paymentservice/v1/payment_method_pb.js";
export * from "../../../gen/paymentservice/v1/payment_pb.js";
export * from "../../../gen/paymentservice/v1/payout_pb.js";
export * from "../../../gen/paymentservice/v1/refund_pb.js";
export * from "../../../gen/paymentservice/v1/sandbox_pb.js";
