import { describe, expect, test } from "bun:test";
import { asGatewayError, errorBody, GatewayError, loggableError } from "../../src/errors.ts";

describe("error shapes (SPEC Errors)", () => {
  const err = new GatewayError(402, "Budget reached.", { code: "budget_exceeded" });

  test("inference endpoints use the nested shape {error: {message, type, param, code}} (CONTRACT §8: param is null unless a parameter is named)", () => {
    expect(errorBody(err, "nested")).toEqual({ error: { message: "Budget reached.", type: "insufficient_quota", param: null, code: "budget_exceeded" } });
  });

  test("management endpoints and /blitz use the flat shape {error, code}", () => {
    expect(errorBody(err, "flat")).toEqual({ error: "Budget reached.", code: "budget_exceeded" });
  });

  test("CONTRACT §8: an error whose code the spec leaves empty is code: null in the nested shape, and has no code field in the flat shape", () => {
    const e = new GatewayError(405, "Use POST.");
    expect(errorBody(e, "nested")).toEqual({ error: { message: "Use POST.", type: "invalid_request_error", param: null, code: null } });
    expect(errorBody(e, "flat")).toEqual({ error: "Use POST." });
  });

  test("a crash becomes 500 unhandled; a failed database operation becomes 500 server_error", () => {
    expect(asGatewayError(new TypeError("x is undefined")).code).toBe("unhandled");
    const dbErr = Object.assign(new Error("Failed query: select 1\nparams: sk_secret"), { name: "DrizzleQueryError" });
    expect(asGatewayError(dbErr)).toMatchObject({ status: 500, code: "server_error" });
  });

  test("database errors are logged without the query parameters (they can hold secrets)", () => {
    const dbErr = Object.assign(new Error("Failed query: select * from t where h = $1\nparams: sk_live_secret_value"), { name: "DrizzleQueryError" });
    const logged = JSON.stringify(loggableError(dbErr));
    expect(logged).toContain("Failed query");
    expect(logged).not.toContain("sk_live_secret_value");
  });
});
