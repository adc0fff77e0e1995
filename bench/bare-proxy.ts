// The floor of any proxy written on Bun: `Bun.serve` + `fetch`, the body passed back as it comes.
// The benchmark runs it beside the gateway (same core, same mock upstream) so the gateway's
// figures read as a ratio to what Bun itself costs.
//   bun bench/bare-proxy.ts --upstream http://127.0.0.1:9100 --port 0   → prints its URL on line 1
const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const upstream = arg("--upstream") ?? "http://127.0.0.1:9100";
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(arg("--port") ?? 0),
  async fetch(req) {
    const path = req.url.slice(req.url.indexOf("/", 8));
    const headers: Record<string, string> = { "content-type": req.headers.get("content-type") ?? "application/json" };
    const auth = req.headers.get("authorization");
    if (auth) headers.authorization = auth;
    const res = await fetch(upstream + path, { method: req.method, headers, body: req.method === "GET" ? undefined : await req.arrayBuffer(), signal: req.signal });
    return new Response(res.body, { status: res.status, headers: { "content-type": res.headers.get("content-type") ?? "application/json" } });
  },
});
console.log(`http://127.0.0.1:${server.port}`);
process.on("SIGTERM", () => { server.stop(true); process.exit(0); });
