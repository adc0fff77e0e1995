import { defineConfig } from "drizzle-kit";

// `npx drizzle-kit generate` writes SQL migrations from the schema; both Postgres and PGlite apply them at start.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/store/db/schema/index.ts",
  out: "./src/store/db/migrations",
  casing: "snake_case",
});
