import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import type { DataSource, EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { alreadyExists, claimLost, type ApiError } from "../errors.js";
import { keyTakenOver } from "../idempotency/store.js";
import type { NewJob } from "../jobs/runner.js";
import type { DeliveryHandOff } from "../webhooks/delivery-thread.js";
import { rejectedByDatabase, StatementBatches } from "../db/batches.js";
import { responseRecorderKey, type CallValues, type KeyAnswer } from "../db/unit-of-work.js";
import { changeOf, creationOf, writeChanges, type ChangeOutcome, type Holding, type ObjectChange, type Written } from "./change.js";
import type { Claimed, ClaimableRow } from "./claims.js";
import { idOf, type Resource, type StatusRow } from "./resource.js";

/*
 * How a change reaches the database (objects/change.ts builds its statement): in the caller's
 * transaction when the change needs one (the object's row is locked in it), else in a batch with the
 * changes other calls write at about the same time, one statement and one commit for all
 * (db/batches.ts). Whether a call carries an idempotency key changes nothing: its response is one
 * more part of the statement.
 */

/**
 * Writes to other tables that must commit with a change (the card a payment saves, the mandate it
 * uses), made first in the change's transaction: a change carrying them is written in a transaction
 * of its own rather than in a batch. Throwing refuses the change.
 */
export type Alongside = (em: EntityManager) => Promise<void>;

/** What the writer keeps per resource. */
interface ResourceWriting {
  /**
   * The key no two changes of one batch share: the row's own key, or for a new object the resource's
   * `batchKey` (what its guard reads).
   */
  keyOf(row: StatusRow, holding: Holding): string;
  readonly byHolding: Map<Holding, StatementBatches<ObjectChange<StatusRow>, ChangeOutcome>>;
}

/**
 * The batches of changes this instance writes, one per resource and holding, and what they need:
 * owned by the App, so two Apps in one process (the tests) never share one.
 */
export class ObjectWriter {
  private readonly byResource = new Map<object, ResourceWriting>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly webhooks: DeliveryHandOff,
  ) {}

  /**
   * Writes `row`, a new object, with its first event and `jobs` as the effect of the call `ctx`, and
   * answers its view: the resource's refusal when its guard stopped it, HE_01 when its id is taken.
   */
  async create<Row extends StatusRow, Desc extends DescMessage>(
    ctx: CallValues,
    resource: Resource<Row, Desc>,
    row: Row,
    jobs: readonly NewJob[],
  ): Promise<MessageInitShape<Desc>> {
    const view = resource.view(row);
    const answer = ctx.values.get(responseRecorderKey)?.answer(view);
    const outcome = await this.write(resource, "new", creationOf(this.clock, resource, row, jobs, { announced: true, answer }));
    if (outcome !== "written") throw await this.failure(resource, row, outcome);
    return view;
  }

  /**
   * Writes `row` before anyone is told of it: the record an operation makes before it asks a
   * processor, whose outcome is the object's first event and the call's effect. "taken" when its id
   * is, which may be a retry meeting the record of the call it repeats (and then `alongside` is undone).
   */
  async record<Row extends StatusRow, Desc extends DescMessage>(
    resource: Resource<Row, Desc>,
    row: Row,
    alongside?: Alongside,
  ): Promise<"written" | "taken"> {
    const change = () => creationOf(this.clock, resource, row, [], { announced: false });
    const outcome =
      alongside === undefined
        ? await this.write(resource, "new", change())
        : await this.writeAlongside(resource, "new", change, alongside, (outcome) => outcome === "taken");
    if (outcome === "written" || outcome === "taken") return outcome;
    throw await this.failure(resource, row, outcome);
  }

  /**
   * Writes the outcome of an operation on an object it claimed (objects/claims.ts), ending the claim,
   * with `answer` as its call's idempotency key's answer. Nothing is written when the claim is no
   * longer this operation's: its lease ran out mid-call and another operation took the object, so
   * this outcome must not overwrite what that one did (IK_01). "ended" when the status is final, so
   * the statement ended the object's pending jobs (a job writing its own object's outcome need not
   * delete itself again).
   */
  async writeClaimed<Row extends ClaimableRow, Desc extends DescMessage>(
    resource: Resource<Row, Desc>,
    claim: Claimed<Row>,
    previousStatus: Row["status"],
    jobs: readonly NewJob[],
    answer?: KeyAnswer,
    alongside?: Alongside,
  ): Promise<"ended" | undefined> {
    const { row, token } = claim;
    row.claimToken = null;
    row.claimedUntil = null;
    // Built once what is written alongside has had its say on the row.
    const change = () => changeOf(this.clock, resource, row, previousStatus, jobs, { token, answer });
    const outcome =
      alongside === undefined
        ? await this.write(resource, "claimed", change())
        : await this.writeAlongside(resource, "claimed", change, alongside, () => false);
    if (outcome !== "written") throw await this.failure(resource, row, outcome);
    return resource.states.isFinal(row.status) ? "ended" : undefined;
  }

  /**
   * Writes one change with what must commit with it, in a transaction of their own, `alongside`
   * first. An outcome other than "written" undoes both; `kept` says which of them is still answered
   * rather than thrown (a record's "taken").
   */
  private async writeAlongside<Row extends StatusRow, Desc extends DescMessage>(
    resource: Resource<Row, Desc>,
    holding: Holding,
    change: () => ObjectChange<Row>,
    alongside: Alongside,
    kept: (outcome: ChangeOutcome) => boolean,
  ): Promise<ChangeOutcome> {
    const generic = resource as unknown as Resource<StatusRow, DescMessage>;
    let undone: ChangeOutcome | undefined;
    try {
      return await this.dataSource.transaction(async (em) => {
        await alongside(em);
        const built = change();
        const { outcomes } = await writeChanges(em, this.clock, generic, holding, [built as ObjectChange<StatusRow>], undefined);
        const outcome = outcomes[0]!;
        if (outcome === "written") return outcome;
        undone = outcome;
        if (kept(outcome)) throw new Undone();
        throw await failureOf(em, resource, built.row, outcome);
      });
    } catch (error) {
      if (error instanceof Undone && undone !== undefined) return undone;
      throw error;
    }
  }

  /** Writes `change` in the next batch of its resource and holding; two changes of one object never share one. */
  private write<Row extends StatusRow, Desc extends DescMessage>(
    resource: Resource<Row, Desc>,
    holding: Holding,
    change: ObjectChange<Row>,
  ): Promise<ChangeOutcome> {
    const generic = resource as unknown as Resource<StatusRow, DescMessage>;
    const writing = this.writingOf(generic);
    let batches = writing.byHolding.get(holding);
    if (batches === undefined) {
      batches = new StatementBatches((batch) => this.writeBatch(generic, holding, batch));
      writing.byHolding.set(holding, batches);
    }
    return batches.add(change, writing.keyOf(change.row, holding));
  }

  /** A resource's batches and the key no two changes of one batch share, made on first use. */
  private writingOf(resource: Resource<StatusRow, DescMessage>): ResourceWriting {
    let writing = this.byResource.get(resource);
    if (writing === undefined) {
      const keyColumns = this.dataSource.getMetadata(resource.entity).primaryColumns;
      writing = {
        keyOf: (row, holding) =>
          (holding === "new" ? resource.batchKey?.(row) : undefined) ?? keyColumns.map((c) => String(c.getEntityValue(row))).join("\u0000"),
        byHolding: new Map(),
      };
      this.byResource.set(resource, writing);
    }
    return writing;
  }

  /** Writes a batch in a statement of its own, which commits it, and hands its webhook deliveries to this instance's sender. */
  private async writeBatch(
    resource: Resource<StatusRow, DescMessage>,
    holding: Holding,
    batch: readonly ObjectChange<StatusRow>[],
  ): Promise<ChangeOutcome[]> {
    const lease = this.webhooks.leaseForNew(this.clock.now());
    let written: Written;
    try {
      written = await writeChanges(this.dataSource.manager, this.clock, resource, holding, batch, lease);
    } catch (error) {
      if (lease !== undefined && !rejectedByDatabase(error)) this.webhooks.abandon(lease);
      throw error;
    }
    if (lease !== undefined && written.deliveries.length > 0) this.webhooks.adopt(written.deliveries, lease);
    return written.outcomes;
  }

  /** The error answering a change that was not written. */
  private failure<Row extends StatusRow, Desc extends DescMessage>(
    resource: Resource<Row, Desc>,
    row: Row,
    outcome: Exclude<ChangeOutcome, "written">,
  ): Promise<ApiError> {
    return failureOf(this.dataSource.manager, resource, row, outcome);
  }
}

/** Rolls back a transaction whose change was not written but is answered, not thrown. */
class Undone extends Error {}

/**
 * Writes a change to an object whose row the caller's transaction locked, with what must commit with
 * it: the event of the status it entered (if it changed), the jobs the new status needs, and the end
 * of its pending jobs once its status is final.
 */
export async function writeLockedChange<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  previousStatus: Row["status"],
  jobs: readonly NewJob[] = [],
): Promise<void> {
  const { outcomes } = await writeChanges(em, clock, resource, "locked", [changeOf(clock, resource, row, previousStatus, jobs)], undefined);
  if (outcomes[0] !== "written") throw await failureOf(em, resource, row, outcomes[0] as Exclude<ChangeOutcome, "written">);
}

/**
 * Writes a new object (a dispute) with its first event and its jobs in the caller's transaction, for
 * a change that locks other rows first: the resource's refusal when its guard stopped it, HE_01 when
 * its id is taken.
 */
export async function writeNewObject<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  jobs: readonly NewJob[],
): Promise<void> {
  const { outcomes } = await writeChanges(
    em,
    clock,
    resource,
    "new",
    [creationOf(clock, resource, row, jobs, { announced: true })],
    undefined,
  );
  if (outcomes[0] !== "written") throw await failureOf(em, resource, row, outcomes[0] as Exclude<ChangeOutcome, "written">);
}

/** The error answering a change that was not written, naming the object or the field that stopped it. */
async function failureOf<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  resource: Resource<Row, Desc>,
  row: Row,
  outcome: Exclude<ChangeOutcome, "written">,
): Promise<ApiError> {
  switch (outcome) {
    case "key_lost":
      return keyTakenOver();
    case "claim_lost":
      return claimLost(resource.name, idOf(resource, row));
    case "taken": {
      const idColumn = em.connection.getMetadata(resource.entity).findColumnWithPropertyName(resource.idProperty)!.databaseName;
      return alreadyExists(resource.name, idColumn, idOf(resource, row));
    }
    case "refused":
      if (resource.refusal === undefined)
        throw new Error(`${resource.name}: its guard stopped a new object, and it has no refusal to answer with`);
      return resource.refusal(em, row);
  }
}
