// POST /v1/audio/transcriptions runs through the relay's one upstream executor (attempt.ts) like
// every other upstream call: the configured upstream timeout ends a hung backend's attempt (and
// frees its reservation and lease), every attempt gets its usage record, and a failing lane falls
// back to the key's next transcribing lane.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { storesLabel } from "../helpers/gateway.ts";
import { connectSub, createKey, eventually, startSubWorld, usageOf, type SubWorld } from "./helpers.ts";

let w: SubWorld;

beforeAll(async () => {
  // The timeout under test, set for this gateway (the default is minutes).
  w = await startSubWorld({ UPSTREAM_TIMEOUT_SECONDS: "2" });
}, 60_000);
afterAll(() => w.stop(), 60_000);

function audioForm(): FormData {
  const f = new FormData();
  f.append("file", new File([new Uint8Array(2048).fill(7)], "clip.wav", { type: "audio/wav" }));
  f.append("model", "gpt-4o-transcribe");
  return f;
}

const transcribe = (rawKey: string) =>
  fetch(`${w.gw.url}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${rawKey}` }, body: audioForm() });

const audioCalls = () => w.backend.received.filter((r) => r.path === "/audio/transcriptions").length;

describe(`transcriptions through the upstream executor (${storesLabel})`, () => {
  test("CONTRACT §7: a backend that hangs on a transcription → the upstream timeout ends the attempt (502), its usage record is written, and the key's concurrency lease comes back", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey, key } = await createKey(w.gw, w.account.token, { max_concurrent_requests: 1, providers: [{ provider: "sub", sub_session_id: sessionId }] });
    w.backend.setAudioLatency(60_000);
    try {
      const res = await transcribe(rawKey);
      expect(res.status).toBe(502);
      const err = ((await res.json()) as any).error;
      expect(err.code).toBe("upstream_error");
    } finally {
      w.backend.setAudioLatency(0);
    }
    const rows = (await eventually(async () => {
      const r = (await usageOf(w.gw, key.id)).filter((x) => x.endpoint === "transcriptions");
      return r.length ? r : null;
    }, 10_000, "the timed-out attempt's record"))!;
    expect(rows.length).toBe(1);
    expect(rows[0]!.outcome).toBe("aborted");
    expect(rows[0]!.errorCode).toBe("timeout_tokens_estimated");
    expect(rows[0]!.provider).toBe("sub");
    expect(rows[0]!.seat).toBe(true);
    // The lease was given back at the settlement: the next transcription (concurrency 1) is served.
    const next = await transcribe(rawKey);
    expect(next.status).toBe(200);
  }, 30_000);

  test("CONTRACT §8: a transcribing lane that fails (503) falls back to the key's next one; each attempt has its record", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey, key } = await createKey(w.gw, w.account.token, { providers: [{ provider: "sub", sub_session_id: sessionId }, { provider: "sub", sub_session_id: sessionId }] });
    const before = audioCalls();
    w.backend.failAudio(1, 503);
    const res = await transcribe(rawKey);
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).text).toContain("clip.wav (2048 bytes");
    expect(audioCalls() - before).toBe(2);
    const rows = (await eventually(async () => {
      const r = (await usageOf(w.gw, key.id)).filter((x) => x.endpoint === "transcriptions");
      return r.length >= 2 ? r : null;
    }, 10_000, "both attempts' records"))!;
    const byLane = rows.sort((a, b) => (a.laneIndex ?? 0) - (b.laneIndex ?? 0)).map((r) => [r.laneIndex, r.status, r.outcome]);
    expect(byLane).toEqual([[0, 503, "error"], [1, 200, "ok"]]);
  });
});
