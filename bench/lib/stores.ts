// Stores for a benchmark run: a fresh Postgres database per run when DATABASE_URL is set (dropped
// at the end), the configured Redis when REDIS_URL is set, the gateway's embedded defaults otherwise.
import postgres from "postgres";
import { randomBytes } from "node:crypto";

export interface RunStores {
  env: Record<string, string>;
  label: string;
  cleanup(): Promise<void>;
}

export async function prepareStores(source: Record<string, string | undefined>): Promise<RunStores> {
  const env: Record<string, string> = {};
  const parts: string[] = [];
  let drop: (() => Promise<void>) | null = null;
  if (source.DATABASE_URL) {
    const base = source.DATABASE_URL;
    const name = `gwbench_${Date.now().toString(36)}_${randomBytes(3).toString("hex")}`;
    const admin = postgres(base, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`create database ${name}`);
    } finally {
      await admin.end();
    }
    const u = new URL(base);
    u.pathname = `/${name}`;
    env.DATABASE_URL = u.toString();
    parts.push(`postgres (fresh database ${name})`);
    drop = async () => {
      const a = postgres(base, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
      await a.end();
    };
  } else {
    parts.push("embedded PGlite");
  }
  if (source.REDIS_URL) {
    env.REDIS_URL = source.REDIS_URL;
    parts.push("redis");
  } else {
    parts.push("in-process KV");
  }
  return { env, label: parts.join(" + "), cleanup: async () => { if (drop) await drop(); } };
}
