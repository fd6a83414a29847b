/** True for PostgreSQL's unique_violation (23505), which is how a duplicate caller-chosen id shows. */
export function isUniqueViolation(error: unknown): boolean {
  const cause = (error as { driverError?: { code?: string }; code?: string } | null) ?? {};
  return (cause.driverError?.code ?? cause.code) === "23505";
}
