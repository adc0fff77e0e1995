// The deployment recipe is linted, not just written: deploy/compose/docker-compose.yml against the
// Compose Specification's schema (vendored, schemas/README.md), its HAProxy configuration by
// `haproxy -c`, the Kubernetes manifests against their API schemas (kubernetes-models), and the
// gateways' settings in both through the gateway's own configuration parser.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import addFormats from "ajv-formats";
import { parseAllDocuments, parse } from "yaml";
import { loadConfig } from "../../src/config.ts";
import { findBinary } from "../helpers/private-pgbouncer.ts";

const ROOT = join(import.meta.dir, "..", "..");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");

function composeValidator() {
  // The schema names its draft as "https://json-schema.org/draft-07/schema", an id Ajv does not know
  // for the draft-07 meta-schema it ships: the schema itself is not re-validated.
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  return ajv.compile(JSON.parse(read("test/deploy/schemas/compose-spec.json")));
}

/** `${VAR:-default}` / `${VAR:?msg}` / `${VAR}` as compose interpolates them, with `vars` set. */
function interpolate(v: string, vars: Record<string, string>): string {
  return v.replace(/\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}/g, (_, name: string, op?: string, rest?: string) => vars[name] ?? (op === "-" ? rest ?? "" : ""));
}

describe("deployment recipe: docker compose (3 gateways, HAProxy on /readyz, Redis Sentinel, PgBouncer)", () => {
  const compose = parse(read("deploy/compose/docker-compose.yml"), { merge: true }) as any;

  test("validates against the Compose Specification schema; a misspelt key does not (the check can fail)", () => {
    const validate = composeValidator();
    const ok = validate(compose);
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
    expect(validate({ ...compose, servics: {} })).toBe(false);
    expect(validate({ services: { g: { image: "x", stop_grace_period: { s: 1 } } } })).toBe(false);
  });

  test("three gateway instances reach Postgres through PgBouncer (direct URL beside it) and Redis through Sentinel, with settings the gateway accepts", () => {
    const gateways = Object.keys(compose.services).filter((s) => s.startsWith("gateway-"));
    expect(gateways).toHaveLength(3);
    for (const name of gateways) {
      const env = Object.fromEntries(Object.entries(compose.services[name].environment as Record<string, string>).map(([k, v]) => [k, interpolate(String(v), { GATEWAY_SECRET_KEY: "ab".repeat(32), REDIS_PASSWORD: "pw" })]));
      const c = loadConfig(env);
      expect(c.redis?.mode).toBe("sentinel");
      expect(new URL(c.DATABASE_URL!).host).toBe("pgbouncer:6432");
      expect(new URL(c.DATABASE_DIRECT_URL!).host).toBe("postgres:5432");
      // Grace period longer than the longest stream, and longer than the drain the gateway allows itself.
      const grace = Number(/^(\d+)s$/.exec(compose.services[name].stop_grace_period)![1]);
      expect(grace).toBeGreaterThan(c.UPSTREAM_TIMEOUT_SECONDS);
      expect(grace).toBeGreaterThan(c.SHUTDOWN_TIMEOUT_SECONDS);
      expect(c.SHUTDOWN_TIMEOUT_SECONDS).toBeGreaterThanOrEqual(c.UPSTREAM_TIMEOUT_SECONDS);
    }
    const sentinels = Object.keys(compose.services).filter((s) => s.startsWith("sentinel-"));
    expect(sentinels).toHaveLength(3);
    expect(compose.services["redis-2"].command.join(" ")).toContain("--replicaof redis-1 6379");
    expect(read("deploy/compose/pgbouncer.ini")).toMatch(/^pool_mode = transaction$/m);
  });

  test("HAProxy health-checks GET /readyz, waits longer than the longest stream, and its configuration parses (haproxy -c)", async () => {
    const cfg = read("deploy/compose/haproxy.cfg");
    expect(cfg).toContain("option httpchk GET /readyz");
    expect(cfg).toContain("http-check expect status 200");
    for (const g of ["gateway-1", "gateway-2", "gateway-3"]) expect(cfg).toContain(`server ${g} ${g}:8080`);
    expect(Number(/timeout server (\d+)s/.exec(cfg)![1])).toBeGreaterThan(600);
    const bin = findBinary("haproxy");
    if (!bin) {
      console.warn("haproxy is not installed (apt-get install haproxy): its own configuration check was not run");
      return;
    }
    const p = Bun.spawn([bin, "-c", "-f", join(ROOT, "deploy/compose/haproxy.cfg")], { stdout: "pipe", stderr: "pipe" });
    const [code, out, err] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
    expect(`${out}${err}`).toContain("Configuration file is valid");
    expect(code).toBe(0);
  });
});

describe("deployment recipe: Kubernetes manifests (deploy/kubernetes)", () => {
  const files = ["gateway.yaml", "pgbouncer.yaml", "secret.example.yaml"];
  const docs = files.flatMap((f) => parseAllDocuments(read(`deploy/kubernetes/${f}`)).map((d) => ({ file: f, obj: d.toJSON() as any })));

  async function validate(obj: any): Promise<void> {
    const [group, version] = String(obj.apiVersion).includes("/") ? String(obj.apiVersion).split("/") : [null, obj.apiVersion];
    const mod = await import(`kubernetes-models/${group ? `${group}/` : ""}${version}/${obj.kind}`);
    new mod[obj.kind](obj).validate();
  }

  test("every manifest validates against its API schema; a wrong type does not (the check can fail)", async () => {
    expect(docs.map((d) => d.obj.kind).sort()).toEqual(["ConfigMap", "ConfigMap", "Deployment", "Deployment", "PodDisruptionBudget", "Secret", "Secret", "Service", "Service"]);
    for (const d of docs) await validate(d.obj);
    const bad = structuredClone(docs.find((d) => d.obj.kind === "Deployment" && d.obj.metadata.name === "gateway")!.obj);
    bad.spec.template.spec.containers[0].ports[0].containerPort = "eighty";
    await expect(validate(bad)).rejects.toThrow();
  });

  test("the gateway Deployment: 3 replicas, ready only on /readyz, a grace period longer than the longest stream, settings the gateway accepts", () => {
    const dep = docs.find((d) => d.obj.kind === "Deployment" && d.obj.metadata.name === "gateway")!.obj;
    const cm = docs.find((d) => d.obj.kind === "ConfigMap" && d.obj.metadata.name === "gateway")!.obj;
    const secret = docs.find((d) => d.obj.kind === "Secret" && d.obj.metadata.name === "gateway")!.obj;
    expect(dep.spec.replicas).toBe(3);
    const c0 = dep.spec.template.spec.containers[0];
    expect(c0.readinessProbe.httpGet.path).toBe("/readyz");
    const env: Record<string, string> = { ...cm.data };
    for (const e of c0.env) env[e.name] = secret.stringData[e.valueFrom.secretKeyRef.key].replace(/<[^>]+>/g, (m: string) => (m.includes("hex") ? "ab".repeat(32) : "x"));
    const c = loadConfig(env);
    expect(c.redis?.mode).toBe("sentinel");
    expect(c.DATABASE_DIRECT_URL).toBeTruthy();
    expect(dep.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(c.SHUTDOWN_TIMEOUT_SECONDS);
    expect(c.SHUTDOWN_TIMEOUT_SECONDS).toBeGreaterThanOrEqual(c.UPSTREAM_TIMEOUT_SECONDS);
  });
});
