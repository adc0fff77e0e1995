// Invisible format characters (Unicode general category Cf): the bidirectional overrides and
// isolates (U+202A–U+202E, U+2066–U+2069), zero-width characters (U+200B–U+200F, U+2060, U+FEFF),
// soft hyphen, tag characters… In a label or a model name they make one text read as another
// ("‮gnp.exe" shows as "exe.png"), so text a person reads refuses them, and text the gateway
// stores as sent (what came from inference) is shown with them spelled out.
const FORMAT_CHAR = /\p{Cf}/u;
const FORMAT_CHARS = /\p{Cf}/gu;

/** The first format character of `s` as `U+XXXX`, or null. */
export function formatCharIn(s: string): string | null {
  const m = FORMAT_CHAR.exec(s);
  return m ? `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}` : null;
}

/** `s` with every format character written out as `<U+XXXX>`, for showing stored text. */
export function spellOutFormatChars(s: string): string {
  return s.replace(FORMAT_CHARS, (c) => `<U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}>`);
}
