import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { IsNull, type DataSource } from "typeorm";
import type { CustomerSchema, CustomerService } from "../../gen/paymentservice/v1/customer_pb.js";
import { merchantOf, type MerchantCaller } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { alreadyExists, invalidField, notFound } from "../errors.js";
import { callerIdProblem, newId } from "../ids.js";
import { addressFromStore, addressToStore } from "../validation/address.js";
import { change, email, phone, phoneCountryCode, text } from "../validation/fields.js";
import { mergeMetadata, newMetadata } from "../validation/metadata.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { envelope, pageOf } from "../validation/list.js";
import { isUniqueViolation } from "../db/errors.js";
import { deletePaymentMethods } from "../payment-methods/store.js";
import { CustomerRow } from "./customer.entity.js";

/** The text fields a customer request may carry, with the check each must pass. */
const checks = {
  email: (v: string) => email("email", v),
  name: (v: string) => text("name", v, 200),
  phone: (v: string) => phone("phone", v),
  phoneCountryCode: (v: string) => phoneCountryCode("phone_country_code", v),
  description: (v: string) => text("description", v, 1000),
} as const;

type TextFields = { [K in keyof typeof checks]?: string };

/** The API view of a customer row. */
export function toCustomer(row: CustomerRow): MessageInitShape<typeof CustomerSchema> {
  return {
    customerId: row.customerId,
    merchantId: row.merchantId,
    email: row.email ?? undefined,
    name: row.name ?? undefined,
    phone: row.phone ?? undefined,
    phoneCountryCode: row.phoneCountryCode ?? undefined,
    description: row.description ?? undefined,
    address: addressFromStore(row.address),
    metadata: row.metadata,
    created: timestampFromDate(row.created),
    updated: timestampFromDate(row.updated),
  };
}

/** Checks the text fields of a request; for each: undefined = not sent, null = clear, else the value. */
function changedText(req: TextFields): { [K in keyof typeof checks]: string | null | undefined } {
  return {
    email: change(req.email, checks.email),
    name: change(req.name, checks.name),
    phone: change(req.phone, checks.phone),
    phoneCountryCode: change(req.phoneCountryCode, checks.phoneCountryCode),
    description: change(req.description, checks.description),
  };
}

/** Where a customer lives: its merchant and environment partition. */
function ownedBy(caller: MerchantCaller, customerId: string) {
  return { merchantId: caller.merchantId, livemode: caller.livemode, customerId, deletedAt: IsNull() };
}

/** What the customers API needs: the database and time. */
export interface CustomerDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
}

/** Customers: create, update, retrieve, list, delete (interface §4, decisions §4); deleting one deletes its payment methods. */
export function customerService(deps: CustomerDependencies): ServiceImpl<typeof CustomerService> {
  const { dataSource, clock, units } = deps;
  const customers = dataSource.getRepository(CustomerRow);

  return {
    async createCustomer(req, ctx) {
      const caller = merchantOf(ctx);
      const idProblem = req.customerId === undefined ? undefined : callerIdProblem(req.customerId);
      if (idProblem !== undefined) throw invalidField("customer_id", idProblem);
      const fields = changedText(req);
      const now = clock.now();
      const row = Object.assign(new CustomerRow(), {
        merchantId: caller.merchantId,
        customerId: req.customerId ?? newId("cus"),
        livemode: caller.livemode,
        email: fields.email ?? null,
        name: fields.name ?? null,
        phone: fields.phone ?? null,
        phoneCountryCode: fields.phoneCountryCode ?? null,
        description: fields.description ?? null,
        address: req.address === undefined ? null : addressToStore("address", req.address),
        metadata: newMetadata("metadata", req.metadata),
        created: now,
        updated: now,
        deletedAt: null,
      });
      return units.commit(ctx, async (em) => {
        try {
          await em.insert(CustomerRow, row);
        } catch (error) {
          if (isUniqueViolation(error)) throw alreadyExists("customer", "customer_id", row.customerId);
          throw error;
        }
        return toCustomer(row);
      });
    },

    async updateCustomer(req, ctx) {
      const caller = merchantOf(ctx);
      const fields = changedText(req);
      const address = req.address === undefined ? undefined : addressToStore("address", req.address);
      return units.commit(ctx, async (em) => {
        const row = await em.findOne(CustomerRow, {
          where: ownedBy(caller, req.customerId),
          lock: { mode: "pessimistic_write" },
        });
        if (row === null) throw notFound("Customer", req.customerId);
        for (const [key, value] of Object.entries(fields)) {
          if (value !== undefined) Object.assign(row, { [key]: value });
        }
        if (address !== undefined) row.address = address;
        row.metadata = mergeMetadata("metadata", row.metadata, req.metadata);
        row.updated = clock.now();
        await em.save(row);
        return toCustomer(row);
      });
    },

    async retrieveCustomer(req, ctx) {
      const row = await customers.findOneBy(ownedBy(merchantOf(ctx), req.customerId));
      if (row === null) throw notFound("Customer", req.customerId);
      return toCustomer(row);
    },

    async listCustomers(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const query = scopedQuery(dataSource, CustomerRow, "c", caller).andWhere("c.deleted_at IS NULL");
      if (req.email !== undefined) query.andWhere("c.email = :email", { email: req.email });
      const [rows, total] = await fetchPage(query, ["created", "customer_id"], page);
      return envelope(rows.map(toCustomer), total, page);
    },

    async deleteCustomer(req, ctx) {
      const caller = merchantOf(ctx);
      return units.commit(ctx, async (em) => {
        const now = clock.now();
        const result = await em.update(CustomerRow, ownedBy(caller, req.customerId), { deletedAt: now });
        if (result.affected === 0) throw notFound("Customer", req.customerId);
        // Decisions §10: its saved cards go with it, and the mandates to charge them.
        await deletePaymentMethods(em, clock, caller, { customerId: req.customerId });
        return { customerId: req.customerId, deleted: true };
      });
    },
  };
}
