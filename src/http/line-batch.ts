// Access lines leave in one write per event-loop turn instead of one write (one syscall) per
// request: under load a turn finishes many requests, and their lines go out together. A line waits
// at most until the end of its turn (setImmediate); a burst past 64 kB is written at once; the
// process's exit writes whatever is still waiting, so no line is lost to a clean stop.
import type { DestinationStream } from "pino";

const MAX_BATCH_CHARS = 64 * 1024;
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
    setImmediate(flush);
  };
}
