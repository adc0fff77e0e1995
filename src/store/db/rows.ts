// The rows of a raw statement (`db.execute(sql…)`), whichever driver ran it: postgres.js answers an
// array, PGlite `{rows}`.
export const rowsOf = <T>(r: unknown): T[] => (Array.isArray(r) ? r : (r as { rows: T[] }).rows) as T[];
