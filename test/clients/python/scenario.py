"""The client scenario, run as a Python user of Debian's grpcio runs it.

Messages come from code Debian's protoc generated (--python_out); stubs are built on grpcio's
channel, since Debian's grpc_tools is too old for our protos. Prints one line per check and exits
non-zero at the first failed one.

Usage: python3 scenario.py  (with PAYMENTS_TARGET=host:port, PAYMENTS_API_KEY, PAYMENTS_PROFILE_ID,
and the generated code's directory in PAYMENTS_GENERATED)
"""

import os
import sys
import time
import uuid

sys.path.insert(0, os.environ["PAYMENTS_GENERATED"])

import grpc  # noqa: E402
import importlib.util  # noqa: E402

from google.rpc import status_pb2  # noqa: E402
from paymentservice.v1 import customer_pb2, error_pb2, event_pb2, payment_pb2, refund_pb2  # noqa: E402

def load_generated(module_name, relative_path):
    """A generated module whose package path would shadow an installed one (grpc/health/v1 beside grpcio's grpc)."""
    spec = importlib.util.spec_from_file_location(module_name, os.path.join(os.environ["PAYMENTS_GENERATED"], relative_path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


health_pb2 = load_generated("grpc_health_v1_health_pb2", "grpc/health/v1/health_pb2.py")

TARGET = os.environ["PAYMENTS_TARGET"]
API_KEY = os.environ["PAYMENTS_API_KEY"]
PROFILE_ID = os.environ["PAYMENTS_PROFILE_ID"]

# The API key travels as call metadata, as the api-key header does over HTTP.
METADATA = (("api-key", API_KEY),)


class CheckFailed(Exception):
    pass


def check(name, condition, detail=""):
    if not condition:
        raise CheckFailed(f"FAILED {name}: {detail}")
    print(f"ok {name}", flush=True)


def unary(channel, method, request_type, response_type):
    return channel.unary_unary(
        method, request_serializer=request_type.SerializeToString, response_deserializer=response_type.FromString
    )


def server_stream(channel, method, request_type, response_type):
    return channel.unary_stream(
        method, request_serializer=request_type.SerializeToString, response_deserializer=response_type.FromString
    )


def test_card():
    return payment_pb2.PaymentMethodDataInput(
        card=payment_pb2.CardInput(card_number="4242424242424242", card_exp_month="12", card_exp_year="2035", card_cvc="123")
    )


def error_detail(error):
    """The ErrorDetail in grpc-status-details-bin: a google.rpc.Status whose details hold it."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(error_pb2.ErrorDetail.DESCRIPTOR):
                    unpacked = error_pb2.ErrorDetail()
                    detail.Unpack(unpacked)
                    return status, unpacked
    return None, None


def run(channel):
    payments = "/paymentservice.v1.PaymentService/"
    create_customer = unary(channel, "/paymentservice.v1.CustomerService/CreateCustomer", customer_pb2.CreateCustomerRequest, customer_pb2.Customer)
    create_payment = unary(channel, payments + "CreatePayment", payment_pb2.CreatePaymentRequest, payment_pb2.Payment)
    capture_payment = unary(channel, payments + "CapturePayment", payment_pb2.CapturePaymentRequest, payment_pb2.Payment)
    list_payments = unary(channel, payments + "ListPayments", payment_pb2.ListPaymentsRequest, payment_pb2.ListPaymentsResponse)
    create_refund = unary(channel, "/paymentservice.v1.RefundService/CreateRefund", refund_pb2.CreateRefundRequest, refund_pb2.Refund)
    retrieve_refund = unary(channel, "/paymentservice.v1.RefundService/RetrieveRefund", refund_pb2.RetrieveRefundRequest, refund_pb2.Refund)
    list_events = unary(channel, "/paymentservice.v1.EventService/ListEvents", event_pb2.ListEventsRequest, event_pb2.ListEventsResponse)
    stream_events = server_stream(channel, "/paymentservice.v1.EventService/StreamEvents", event_pb2.StreamEventsRequest, event_pb2.Event)

    customer = create_customer(customer_pb2.CreateCustomerRequest(email="jane@example.com", name="Jane"), metadata=METADATA, timeout=10)
    check("create customer", customer.customer_id.startswith("cus_"), customer)

    paid = create_payment(
        payment_pb2.CreatePaymentRequest(
            amount=1000, currency="USD", profile_id=PROFILE_ID, customer_id=customer.customer_id, confirm=True, payment_method_data=test_card()
        ),
        metadata=METADATA,
        timeout=10,
    )
    check("create and confirm a payment", paid.status == payment_pb2.PAYMENT_STATUS_SUCCEEDED and paid.amount_received == 1000, paid)

    held = create_payment(
        payment_pb2.CreatePaymentRequest(
            amount=2500, currency="EUR", profile_id=PROFILE_ID, confirm=True, capture_method=payment_pb2.CAPTURE_METHOD_MANUAL, payment_method_data=test_card()
        ),
        metadata=METADATA,
        timeout=10,
    )
    check("manual-capture payment confirmed", held.status == payment_pb2.PAYMENT_STATUS_REQUIRES_CAPTURE and held.amount_capturable == 2500, held)
    captured = capture_payment(payment_pb2.CapturePaymentRequest(payment_id=held.payment_id), metadata=METADATA, timeout=10)
    check("capture it", captured.status == payment_pb2.PAYMENT_STATUS_SUCCEEDED and captured.amount_received == 2500, captured)

    refund = create_refund(refund_pb2.CreateRefundRequest(payment_id=paid.payment_id, amount=300), metadata=METADATA, timeout=10)
    check("partial refund created", refund.amount == 300 and refund.payment_id == paid.payment_id, refund)
    # An instant refund is answered pending and succeeds once the processor has it, within moments.
    deadline = time.monotonic() + 15
    while refund.status == refund_pb2.REFUND_STATUS_PENDING and time.monotonic() < deadline:
        time.sleep(0.1)
        refund = retrieve_refund(refund_pb2.RetrieveRefundRequest(refund_id=refund.refund_id), metadata=METADATA, timeout=10)
    check("partial refund succeeded", refund.status == refund_pb2.REFUND_STATUS_SUCCEEDED, refund)

    listed = list_payments(payment_pb2.ListPaymentsRequest(status=payment_pb2.PAYMENT_STATUS_SUCCEEDED), metadata=METADATA, timeout=10)
    check(
        "list payments with a status filter",
        listed.total_count == 2
        and {p.payment_id for p in listed.data} == {paid.payment_id, held.payment_id}
        and all(p.status == payment_pb2.PAYMENT_STATUS_SUCCEEDED for p in listed.data),
        listed,
    )

    try:
        create_payment(payment_pb2.CreatePaymentRequest(currency="USD", profile_id=PROFILE_ID), metadata=METADATA, timeout=10)
        raise CheckFailed("FAILED validation error: a payment without amount was created")
    except grpc.RpcError as error:
        status, detail = error_detail(error)
        check("validation error is INVALID_ARGUMENT", error.code() == grpc.StatusCode.INVALID_ARGUMENT, error)
        check(
            "validation error's ErrorDetail decoded",
            detail is not None and detail.type == "invalid_request" and detail.code == "IR_04" and "amount" in detail.message,
            detail,
        )
        check("validation error's message", error.details() == detail.message == status.message == "Missing required field: amount", error.details())

    key = "py-" + uuid.uuid4().hex
    replay_request = payment_pb2.CreatePaymentRequest(amount=700, currency="GBP", profile_id=PROFILE_ID)
    with_key = METADATA + (("x-idempotency-key", key),)
    first, _ = create_payment.with_call(replay_request, metadata=with_key, timeout=10)
    again, call = create_payment.with_call(replay_request, metadata=with_key, timeout=10)
    replayed = dict(call.initial_metadata()).get("idempotent-replayed")
    check("idempotent replay returns the same payment", again == first and replayed == "true", (first.payment_id, again.payment_id, replayed))

    newest = list_events(event_pb2.ListEventsRequest(limit=1), metadata=METADATA, timeout=10)
    check("saved the newest event id", len(newest.data) == 1 and newest.data[0].event_id.startswith("evt_"), newest)
    saved = newest.data[0].event_id
    later = create_payment(payment_pb2.CreatePaymentRequest(amount=400, currency="USD", profile_id=PROFILE_ID), metadata=METADATA, timeout=10)
    stream = stream_events(event_pb2.StreamEventsRequest(after_event_id=saved), metadata=METADATA, timeout=30)
    try:
        event = next(stream)
    finally:
        stream.cancel()
    check(
        "stream from the saved event receives the next event",
        event.type == "payment.requires_payment_method" and event.data.object["payment_id"] == later.payment_id,
        event,
    )

    unknown = unary(channel, payments + "RefundEverything", payment_pb2.RetrievePaymentRequest, payment_pb2.Payment)
    try:
        unknown(payment_pb2.RetrievePaymentRequest(payment_id="pay_x"), metadata=METADATA, timeout=10)
        raise CheckFailed("FAILED unknown method: it was answered")
    except grpc.RpcError as error:
        check("unknown method is UNIMPLEMENTED", error.code() == grpc.StatusCode.UNIMPLEMENTED, error)

    # Probes send no API key.
    health = unary(channel, "/grpc.health.v1.Health/Check", health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse)
    serving = health(health_pb2.HealthCheckRequest(service=""), timeout=10)
    check("health check is SERVING", serving.status == health_pb2.HealthCheckResponse.SERVING, serving)


def main():
    # No proxy: the service under test is on this machine.
    with grpc.insecure_channel(TARGET, options=(("grpc.enable_http_proxy", 0),)) as channel:
        try:
            run(channel)
        except (CheckFailed, grpc.RpcError) as failure:
            print(failure, flush=True)
            return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
