// The translation policy (CONTRACT §9) as the codecs see it. Under `adapt`, a request field the
// lane's protocol cannot carry is mapped to its equivalent where one exists, dropped where it only
// tunes the vendor's own behaviour, and refused only where carrying it is impossible without
// changing what the answer means. Under `strict` the codecs keep the earlier rule (drop only what
// cannot change the answer, otherwise 400 unsupported_feature). Either way every field mapped,
// dropped or moved is noted, for the `x-gateway-adapted` header, the usage record and the access
// line. Pure: the relay makes one log per request (its pivot) and one per lane tried.
export type TranslationPolicy = "adapt" | "strict";
export const TRANSLATION_POLICIES = ["adapt", "strict"] as const;
export type AdaptAction = "mapped" | "dropped" | "moved";

export class AdaptLog {
  // Made at the first note: most requests adapt nothing, and a pass-through's log costs one object.
  private notes: Map<string, AdaptAction> | null = null;

  /**
   * `names`: the client's names of pivot fields that differ (ClientCodec.fieldNames), so a lane's
   * encoder, which reads the pivot, still names the field as the client sent it.
   */
  constructor(readonly policy: TranslationPolicy = "strict", private readonly names?: Readonly<Record<string, string>>) {}

  get adapting(): boolean { return this.policy === "adapt"; }

  /** Notes one field; a field noted twice keeps its first action (the client's field is what it names). */
  note(field: string, action: AdaptAction): void {
    const name = this.names?.[field] ?? field;
    this.notes ??= new Map();
    if (!this.notes.has(name)) this.notes.set(name, action);
  }

  /** A new log with the same policy holding this log's notes (a lane's encoder adds its own to a copy of the pivot's). */
  fork(): AdaptLog {
    const l = new AdaptLog(this.policy, this.names);
    if (this.notes) l.notes = new Map(this.notes);
    return l;
  }

  /** `field=action, …` in the order noted (the header's value), or null when nothing was adapted. */
  summary(): string | null {
    if (!this.notes) return null;
    let s = "";
    for (const [f, a] of this.notes) s += `${s ? ", " : ""}${f}=${a}`;
    return s;
  }
}

/** A log for callers that have no policy (tests, tools): strict, notes kept but unused. */
export const strictLog = () => new AdaptLog("strict");

/**
 * A field the lane cannot carry that only tunes the vendor's behaviour: under adapt it is
 * dropped (noted); under strict `refuse` runs (it throws the 400 it always did).
 */
export function dropOrRefuse(log: AdaptLog | undefined, field: string, refuse: () => never): void {
  if (!log?.adapting) refuse();
  log.note(field, "dropped");
}
