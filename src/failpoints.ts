/*
 * Named points inside an operation where a fault test kills this process, as a crash or a kill -9
 * would (FoundationDB and TiKV test their recovery the same way). FAILPOINT=<name> arms one point in
 * a process the test spawns; unarmed, a failpoint is one comparison. Read once from the environment
 * rather than from config.ts: it is no setting of the service, and nothing else may change it.
 */
const armed = process.env.FAILPOINT;

/** Dies at once, without a chance to clean up, when this point is the one armed. */
export function failpoint(name: string): void {
  if (armed === name) process.kill(process.pid, "SIGKILL");
}
