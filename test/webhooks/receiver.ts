// A webhook receiver for tests: a real HTTP server on loopback that records every delivery and
// answers with the statuses it is told to (then 200).
export interface Delivery {
  headers: Headers;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  got: Delivery[];
  /** Statuses for the next deliveries, in order; 200 once they are used up. */
  failNext(...statuses: number[]): void;
  stop(): Promise<void>;
}

export function startReceiver(): Receiver {
  const got: Delivery[] = [];
  const plan: number[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = await req.text();
      got.push({ headers: req.headers, body, at: Date.now() });
      return new Response(null, { status: plan.shift() ?? 200 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    got,
    failNext: (...s) => void plan.push(...s),
    stop: async () => void server.stop(true),
  };
}

/**
 * The receiver's check, written out as a user would (node:crypto only, nothing from the gateway):
 * Gateway-Signature `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, timestamp within 5 minutes.
 */
export async function independentlyVerified(secret: string, body: string, header: string | null): Promise<boolean> {
  const { createHmac, timingSafeEqual } = await import("node:crypto");
  const { t, v1 } = Object.fromEntries((header ?? "").split(",").map((kv) => kv.split("=")));
  const expected = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
  const fresh = Math.abs(Date.now() / 1000 - Number(t)) <= 300;
  return fresh && !!v1 && v1.length === expected.length && timingSafeEqual(Buffer.from(v1), Buffer.from(expected));
}
