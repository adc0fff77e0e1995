// Waiting for a condition instead of a fixed time: a loaded machine runs late, a broken one never.

/** Polls `fn` until it returns non-null (its value) or `ms` pass (throws, naming `what`). */
export async function until<T>(what: string, fn: () => Promise<T | null>, ms: number, everyMs = 100): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== null) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(everyMs);
  }
}
