// Access lines leave in one write every 10 ms instead of one write (one syscall) per request: a
// busy instance finishes many requests in that time and their lines go out together (one client
// in a loop: ~20 lines a write). A line waits at most 10 ms; a burst past 64 kB is written at
// once; the process's exit writes whatever is still waiting, so no line is lost to a clean stop.
import type { DestinationStream } from "pino";

const MAX_BATCH_CHARS = 64 * 1024;
const WINDOW_MS = 10;
const pending = new Set<() => void>();
let exitHooked = false;

/** A function that queues one line (ending in "\n") for `stream`. */
export function lineBatcher(stream: DestinationStream): (line: string) => void {
  let buf = "";
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    pending.delete(flush);
    if (buf === "") return;
    const out = buf;
    buf = "";
    stream.write(out);
  };
  if (!exitHooked) {
    exitHooked = true;
    process.once("exit", () => { for (const f of [...pending]) f(); });
  }
  return (line) => {
    buf += line;
    if (buf.length >= MAX_BATCH_CHARS) return flush();
    if (scheduled) return;
    scheduled = true;
    pending.add(flush);
    setTimeout(flush, WINDOW_MS).unref();
  };
}
