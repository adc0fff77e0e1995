// Query schemas of the usage read endpoints. Strict: an unknown parameter is a 400 naming it.
import { z } from "zod";
import { LANE_KINDS } from "../routing-keys/model.ts";
import { isTag, MAX_TAG_CHARS } from "../../relay/tags.ts";

export const noQuery = z.strictObject({});

/** What a grouped report is grouped by. `lane` is the lane's provider (`sub`, `bridge`, a vendor id). */
export const USAGE_GROUPINGS = ["day", "key", "lane", "model", "tag"] as const;

/** `tag=`: one tag as requests send it (CONTRACT §9); only the records carrying it count. */
const tag = z.string().refine(isTag, `\`tag\` must be one tag: 1 to ${MAX_TAG_CHARS} characters from A-Z a-z 0-9 _ . : -.`);

/** Outcomes a usage record can carry (CONTRACT §7, §8). */
export const USAGE_OUTCOMES = ["ok", "error", "aborted", "broken", "interrupted", "cache_hit"] as const;

export const RECORDS_LIMIT_MAX = 200;
export const RECORDS_LIMIT_DEFAULT = 50;

// refine, not regex: the sentence names the expected form (zod-input reports a bare regex as "not a valid regex").
const month = z.string().refine((s) => /^\d{4}-(0[1-9]|1[0-2])$/.test(s), "`month` must be a calendar month written YYYY-MM (UTC), e.g. 2026-11.");

export const groupsQuery = z.strictObject({
  by: z.enum(USAGE_GROUPINGS),
  /** A UTC calendar month; omitted = the same 30-day window as GET /v1/organizations/usage. */
  month: month.optional(),
  tag: tag.optional(),
});
export type GroupsQuery = z.output<typeof groupsQuery>;

const positiveInt = (name: string, max: number) =>
  z.string().refine((s) => /^[1-9]\d{0,15}$/.test(s) && Number(s) <= max, `\`${name}\` must be a whole number from 1 to ${max}.`).transform(Number);

export const recordsQuery = z.strictObject({
  limit: positiveInt("limit", RECORDS_LIMIT_MAX).optional(),
  /** A routing key id of the caller. */
  key: z.string().min(1).max(200).optional(),
  provider: z.enum(LANE_KINDS).optional(),
  outcome: z.enum(USAGE_OUTCOMES).optional(),
  tag: tag.optional(),
  /** Page backwards: only records with a smaller id than this one. */
  before: positiveInt("before", 2 ** 53 - 1).optional(),
});
export type RecordsQuery = z.output<typeof recordsQuery>;
