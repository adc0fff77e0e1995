// CONTRACT §9 "Tags": the rule of a tag list, as the relay reads it from `x-gateway-tags` or the
// body's `metadata.tags` (relay/tags.ts): at most 10 distinct tags of 1–64 characters from
// A-Za-z0-9_.:-, anything else a 400 naming where the list came from; the header first; a
// `metadata.tags` array taken off the body before it goes upstream.
import { describe, expect, test } from "bun:test";
import { GatewayError } from "../../src/errors.ts";
import { isTag, parseTagsArray, parseTagsHeader, requestTags } from "../../src/relay/tags.ts";

const refused = (fn: () => unknown): GatewayError => {
  try {
    fn();
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new Error("expected a 400");
};

const h = (v?: string) => new Headers(v === undefined ? {} : { "x-gateway-tags": v });

describe("CONTRACT §9: tag lists", () => {
  test("CONTRACT §9: a header of comma-separated tags, spaces around commas allowed, in the order sent", () => {
    expect(parseTagsHeader("team-search,run:42")).toEqual(["team-search", "run:42"]);
    expect(parseTagsHeader(" a , b.c\t,D_9 ")).toEqual(["a", "b.c", "D_9"]);
    expect(parseTagsHeader("x".repeat(64))).toEqual(["x".repeat(64)]);
  });

  test("CONTRACT §9: duplicates collapse to one, and count once toward the 10", () => {
    expect(parseTagsHeader("a,b,a,a")).toEqual(["a", "b"]);
    const ten = Array.from({ length: 10 }, (_, i) => `t${i}`);
    expect(parseTagsHeader([...ten, "t0", "t9"].join(","))).toEqual(ten);
  });

  test("CONTRACT §9: 11 tags, a 65-character tag, a character outside A-Za-z0-9_.:-, an empty tag: 400 naming the header", () => {
    const cases = [
      Array.from({ length: 11 }, (_, i) => `t${i}`).join(","),
      "x".repeat(65),
      "team search",
      "team/search",
      "tag,é",
      "a,,b",
      "a,",
      "",
      " ",
    ];
    for (const v of cases) {
      const e = refused(() => parseTagsHeader(v));
      expect(e.status).toBe(400);
      expect(e.type).toBe("invalid_request_error");
      expect(e.code).toBe("invalid_tags");
      expect(e.message).toContain("x-gateway-tags");
    }
    expect(refused(() => parseTagsHeader("x".repeat(65))).message).toContain("65 characters");
    expect(refused(() => parseTagsHeader(Array.from({ length: 11 }, (_, i) => `t${i}`).join(","))).message).toContain("more than 10");
  });

  test("CONTRACT §9: metadata.tags follows the same rule and names itself; an empty array is no tags", () => {
    expect(parseTagsArray(["a", "b", "a"])).toEqual(["a", "b"]);
    expect(parseTagsArray([])).toEqual([]);
    for (const bad of [[1], ["ok", null], [""], ["x".repeat(65)], ["a b"], Array.from({ length: 11 }, (_, i) => `t${i}`)]) {
      const e = refused(() => parseTagsArray(bad));
      expect(e.status).toBe(400);
      expect(e.code).toBe("invalid_tags");
      expect(e.message).toContain("metadata.tags");
      expect(e.param).toBe("metadata.tags");
    }
  });

  test("CONTRACT §9: without the header a request is untagged, its body untouched", () => {
    const body = { model: "m", metadata: { user_id: "u1" } };
    expect(requestTags(h(), body)).toBeNull();
    expect(body).toEqual({ model: "m", metadata: { user_id: "u1" } });
    expect(requestTags(h(), { model: "m" })).toBeNull();
  });

  test("CONTRACT §9: metadata.tags is read when no header is sent and taken off the body (metadata with it when nothing else is left)", () => {
    const alone: Record<string, unknown> = { model: "m", metadata: { tags: ["a", "b"] } };
    expect(requestTags(h(), alone)).toEqual(["a", "b"]);
    expect(alone).toEqual({ model: "m" });
    const beside: Record<string, unknown> = { model: "m", metadata: { user_id: "u1", tags: ["a"] } };
    expect(requestTags(h(), beside)).toEqual(["a"]);
    expect(beside).toEqual({ model: "m", metadata: { user_id: "u1" } });
    const none: Record<string, unknown> = { model: "m", metadata: { tags: [] } };
    expect(requestTags(h(), none)).toBeNull();
    expect(none).toEqual({ model: "m" });
  });

  test("CONTRACT §9: the header wins over metadata.tags, which is still taken off the body and not checked", () => {
    const body: Record<string, unknown> = { model: "m", metadata: { tags: ["not ok!", 3], user_id: "u" } };
    expect(requestTags(h("from-header"), body)).toEqual(["from-header"]);
    expect(body).toEqual({ model: "m", metadata: { user_id: "u" } });
  });

  test("CONTRACT §9: a metadata.tags that is no array (OpenAI's own string metadata) is the client's: not read, left in the body", () => {
    const body: Record<string, unknown> = { model: "m", metadata: { tags: "a,b" } };
    expect(requestTags(h(), body)).toBeNull();
    expect(body).toEqual({ model: "m", metadata: { tags: "a,b" } });
  });

  test("CONTRACT §9: the tag= filter takes one well-formed tag", () => {
    expect(isTag("run:42")).toBe(true);
    expect(isTag("")).toBe(false);
    expect(isTag("a,b")).toBe(false);
    expect(isTag("x".repeat(65))).toBe(false);
  });
});
