// Claude Code puts `system` turns inside `messages`; the Messages API takes system text only in the
// top-level `system`. Under the `adapt` policy a Messages body for an Anthropic lane gets them moved
// there, in order after the existing system text, and the turns around them that end up next to
// each other with the same role are joined (Anthropic joins consecutive same-role turns itself;
// joining here keeps every turn's blocks in order). Pure; the body is never changed in place.
import { badRequest } from "../../errors.ts";
import type { AdaptLog } from "../adapt.ts";
import type { Json } from "../types.ts";

/**
 * `out` (the body for the lane, `body` or a shallow copy of it) with `body`'s system turns moved
 * into `system`; `out` itself when there are none (one pass over the turns' roles, nothing parsed).
 */
export function movedSystemTurns(out: Json, body: Json, log: AdaptLog): Json {
  const turns = body.messages;
  if (!Array.isArray(turns) || !turns.some((m) => m?.role === "system")) return out;
  const system: Json[] = typeof body.system === "string" ? (body.system ? [{ type: "text", text: body.system }] : [])
    : Array.isArray(body.system) ? [...body.system] : [];
  const messages: Json[] = [];
  turns.forEach((m: Json, i: number) => {
    if (m?.role === "system") {
      system.push(...textBlocks(m.content, `messages[${i}]`));
      return;
    }
    const prev = messages[messages.length - 1];
    if (prev && prev.role === m?.role) {
      messages[messages.length - 1] = { ...prev, content: [...blocksOf(prev.content), ...blocksOf(m.content)] };
    } else messages.push(m);
  });
  log.note("messages[].role", "moved");
  return { ...out, system, messages };
}

const blocksOf = (content: unknown): Json[] => (typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content : []);

function textBlocks(content: unknown, where: string): Json[] {
  return blocksOf(content).filter((b, j) => {
    if (b?.type !== "text" || typeof b.text !== "string") throw badRequest(`${where}.content[${j}] must be a text block in a system turn.`);
    return b.text !== "";
  });
}
