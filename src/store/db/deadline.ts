// A read that Postgres does not answer within its deadline counts as Postgres being unreachable.
// A frozen server (a stalled VM, SIGSTOP, a lock queue) keeps the TCP connection open and never
// answers, so postgres.js would wait forever and so would the caller's client. Only reads get a
// deadline: a write cut off by one could still commit after the client was told it failed.
// The query itself runs on; only its caller stops waiting.

/** Named as the database errors are (errors.ts), so the answer is 500 `server_error`. */
class ReadDeadline extends Error {
  override name = "DatabaseError";
}

/** `p`, or a database error when it has not settled within `ms`. */
export function readWithin<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ReadDeadline(`${what} took over ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
