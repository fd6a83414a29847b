import { AsyncLocalStorage } from "node:async_hooks";
import type { DataSource, EntityManager, EntityTarget, ObjectLiteral, Repository } from "typeorm";

/** One transaction that every database access of a call joins, and what to do once it commits. */
interface UnitOfWork {
  readonly manager: EntityManager;
  active: boolean;
  readonly afterCommit: (() => void | Promise<void>)[];
}

const current = new AsyncLocalStorage<UnitOfWork>();

function activeUnit(): UnitOfWork | undefined {
  const unit = current.getStore();
  return unit?.active === true ? unit : undefined;
}

/**
 * Runs `work` in one transaction that every database access made through a `joiningUnitOfWork`
 * data source joins, whatever function makes it: what the handler writes and what the caller
 * writes after it (a stored idempotent response) commit together or not at all.
 */
export async function withUnitOfWork<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  const afterCommit: (() => void | Promise<void>)[] = [];
  const result = await dataSource.transaction(async (manager) => {
    const unit: UnitOfWork = { manager, active: true, afterCommit };
    try {
      return await current.run(unit, () => work(manager));
    } finally {
      unit.active = false;
    }
  });
  for (const hook of afterCommit) await hook();
  return result;
}

/**
 * Runs `hook` once the active unit of work has committed (never if it rolls back), or now when there
 * is none; the call answers only after the hook has finished.
 */
export async function afterCommit(hook: () => void | Promise<void>): Promise<void> {
  const unit = activeUnit();
  if (unit === undefined) await hook();
  else unit.afterCommit.push(hook);
}

/** The manager of the active unit of work, if any: for code that reaches the driver directly. */
export function unitManager(): EntityManager | undefined {
  return activeUnit()?.manager;
}

/**
 * The data source the service uses everywhere: outside a unit of work it is the data source itself;
 * inside one, `manager`, `transaction`, `createQueryBuilder` and `query` run on the unit's
 * transaction (a nested `transaction` joins it rather than opening its own). A repository from
 * `getRepository` picks the unit at each call, so one taken once (when a service is built) joins
 * the unit of whichever call uses it. On the embedded database, whose connections share one
 * session, this is also what keeps a call from waiting on its own open transaction.
 */
export function joiningUnitOfWork(dataSource: DataSource): DataSource {
  return new Proxy(dataSource, {
    get(target, property, receiver) {
      if (property === "getRepository") return (entity: EntityTarget<ObjectLiteral>) => joiningRepository(target, entity);
      const unit = activeUnit();
      if (unit !== undefined) {
        const { manager } = unit;
        switch (property) {
          case "manager":
            return manager;
          case "transaction":
            return (...args: unknown[]) => (args.at(-1) as (em: EntityManager) => Promise<unknown>)(manager);
          case "createQueryBuilder":
            return manager.createQueryBuilder.bind(manager);
          case "query":
            return manager.query.bind(manager);
        }
      }
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}

/** A repository whose every member is taken, at the time of use, from the active unit's manager if there is one. */
function joiningRepository(dataSource: DataSource, entity: EntityTarget<ObjectLiteral>): Repository<ObjectLiteral> {
  const own = dataSource.getRepository(entity);
  return new Proxy(own, {
    get(_, property) {
      const repository = activeUnit()?.manager.getRepository(entity) ?? own;
      const value = Reflect.get(repository, property, repository) as unknown;
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(repository) : value;
    },
  });
}
