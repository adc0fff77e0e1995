/** The headers of every SSE answer: no caching, and no buffering by a proxy in front (nginx's x-accel-buffering). */
export const SSE_HEADERS: Record<string, string> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
};
