// A chat SSE stream → chat.completion.chunk objects, for the translation path (a chat-only lane
// serving a client of another shape). Usage chunks are held back: usage() reports them and the
// client encoder decides how to show usage in its own shape.
import { usageFromChat } from "../pivot.ts";
import { UpstreamStreamError, type ChunkDecoder, type Json, type SseEvent, type Usage } from "../types.ts";

export function chatStreamDecoder(): ChunkDecoder {
  let usage: Usage | null = null;
  let done = false;
  return {
    push(ev: SseEvent): Json[] {
      const data = ev.data.trim();
      if (data === "[DONE]") done = true;
      if (data === "" || data === "[DONE]") return [];
      let chunk: Json;
      try {
        chunk = JSON.parse(data);
      } catch {
        throw new UpstreamStreamError("The upstream sent a stream event that is not JSON.");
      }
      if (ev.event === "error" || (chunk.error && !chunk.choices)) {
        const m = typeof chunk.error?.message === "string" ? chunk.error.message : typeof chunk.error === "string" ? chunk.error : "the upstream reported an error mid-stream";
        throw new UpstreamStreamError(m);
      }
      const u = usageFromChat(chunk.usage);
      if (u) usage = u;
      if (Array.isArray(chunk.choices) && chunk.choices.length === 0) return [];
      if (u) {
        // A vendor that puts usage on a content chunk: pass the content on without it.
        const { usage: _drop, ...rest } = chunk;
        return [rest];
      }
      return [chunk];
    },
    end(): Json[] {
      // Without its `data: [DONE]` the stream was cut off (CONTRACT §8): broken, not a clean end.
      if (!done) throw new UpstreamStreamError("The upstream ended the stream without `data: [DONE]`.");
      return [];
    },
    usage: () => usage,
  };
}
