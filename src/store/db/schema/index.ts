export * from "./accounts.ts";
export * from "./routing.ts";
export * from "./usage.ts";
export * from "./blitz-jobs.ts";
export * from "./webhooks.ts";
export * from "./prices.ts";
export * from "./batch-files.ts";
