// What session affinity is worth to an agent's prompt cache (docs/benchmarks.md "Session affinity"):
// a 20-turn agent conversation on a two-lane key whose first lane fails one request in four, against
// an OpenAI-protocol mock that reports cached_tokens only for the part of the prompt that already
// reached the same credential before (as vendors' prompt caches do: per account, by prefix). Run
// with session affinity on (the key's default) and off, it prints the cache-read share of the input
// tokens and the cost the gateway recorded for each.
//   bun bench/affinity.ts [--turns 20] [--json]
import { eq } from "drizzle-orm";
import { createAccount, startTestGateway } from "../test/helpers/gateway.ts";
import { addCredential, addRoutingKey, lane, usageRows } from "../test/helpers/relay-world.ts";
import { serveLoopback, json } from "../test/mocks/scaffold.ts";
import { usageRecords } from "../src/store/db/schema/index.ts";

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const TURNS = Number(arg("--turns") ?? 20);
const FAIL_EVERY = 4;
const MODEL = "gpt-4o-mini";

/** Tokens of a text, as the mock counts them: a quarter token per character. */
const tokens = (s: string) => Math.ceil(s.length / 4);

/**
 * The mock vendor: each credential has its own prompt cache of message-prefixes seen; a request's
 * cached tokens are those of the longest prefix of its messages that credential saw before.
 * Requests with `failing` credentials fail (503) one in FAIL_EVERY.
 */
function startCacheMock(failing: Set<string>) {
  const caches = new Map<string, Set<string>>();
  const seen = new Map<string, number>();
  return serveLoopback({
    async fetch(req) {
      const auth = req.headers.get("authorization") ?? "";
      const body = await req.json() as { messages: Array<{ role: string; content: string }> };
      if (failing.has(auth)) {
        const n = (seen.get(auth) ?? 0) + 1;
        seen.set(auth, n);
        if (n % FAIL_EVERY === 0) return json({ error: { message: "overloaded", type: "server_error", code: null, param: null } }, 503);
      }
      const cache = caches.get(auth) ?? new Set<string>();
      caches.set(auth, cache);
      let prefix = "", cachedChars = 0, total = 0;
      for (const m of body.messages) {
        prefix += `${m.role}\u0000${m.content}\u0001`;
        total += m.content.length;
        if (cache.has(prefix)) cachedChars = total;
        cache.add(prefix);
      }
      const prompt = tokens("x".repeat(total));
      const cached = Math.min(prompt, tokens("x".repeat(cachedChars)));
      const text = `step done (${body.messages.length})`;
      return json({
        id: "chatcmpl-bench", object: "chat.completion", created: 1_700_000_000, model: MODEL,
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
        usage: { prompt_tokens: prompt, completion_tokens: 200, total_tokens: prompt + 200, prompt_tokens_details: { cached_tokens: cached } },
      });
    },
  });
}

/** One agent's conversation: a long system prompt and tool output growing every turn. */
function conversation(turn: number): Array<{ role: string; content: string }> {
  const messages = [{ role: "system", content: "You are a coding agent. ".repeat(400) }];
  for (let i = 0; i < turn; i++) {
    messages.push({ role: "user", content: `Turn ${i}: run the tests and read the output. ${"log line ".repeat(150)}` });
    messages.push({ role: "assistant", content: `step done (${2 * i + 2})` });
  }
  messages.push({ role: "user", content: `Turn ${turn}: continue.` });
  return messages;
}

async function run(affinity: boolean) {
  const keys = { one: `sk-bench-one-${crypto.randomUUID()}`, two: `sk-bench-two-${crypto.randomUUID()}` };
  const mock = startCacheMock(new Set([`Bearer ${keys.one}`]));
  const gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: `${mock.origin}/v1`, LANE_COOLDOWN_FAILURES: "3" });
  try {
    const acct = await createAccount(gw);
    const c1 = await addCredential(gw, acct.id, "openai", keys.one);
    const c2 = await addCredential(gw, acct.id, "openai", keys.two);
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", c1.id), lane("openai", c2.id)], sessionAffinityTtlSeconds: affinity ? 3600 : 0 });
    for (let t = 0; t < TURNS; t++) {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, headers: { "x-session-id": "agent-1" }, body: { model: MODEL, messages: conversation(t) } });
      if (r.status !== 200) throw new Error(`turn ${t}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    const rows = (await usageRows(gw, eq(usageRecords.routingKeyId, key.id))).filter((r) => r.outcome === "ok");
    const input = rows.reduce((s, r) => s + r.promptTokens, 0);
    const cached = rows.reduce((s, r) => s + r.cachedTokens, 0);
    const cost = rows.reduce((s, r) => s + r.costUsd, 0);
    return { affinity, turns: TURNS, inputTokens: input, cachedTokens: cached, cacheReadShare: cached / input, costUsd: cost };
  } finally {
    await gw.stop();
    await mock.stop();
  }
}

if (import.meta.main) {
  const on = await run(true);
  const off = await run(false);
  const ratio = on.cacheReadShare / Math.max(off.cacheReadShare, 1e-9);
  if (process.argv.includes("--json")) console.log(JSON.stringify({ on, off, ratio }));
  else {
    const row = (r: typeof on) => `| ${r.affinity ? "on" : "off"} | ${r.inputTokens} | ${r.cachedTokens} | ${(100 * r.cacheReadShare).toFixed(1)} % | $${r.costUsd.toFixed(6)} |`;
    console.log(["| affinity | input tokens | cache reads | cache-read share | cost |", "|---|---|---|---|---|", row(on), row(off)].join("\n"));
    console.log(`cache-read share with affinity: ${ratio.toFixed(2)}x the share without`);
  }
}
