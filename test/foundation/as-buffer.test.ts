// asBuffer (src/lib/bytes.ts) lends a chunk Buffer's methods in place: the tap searches and
// decodes upstream reads through it, and hands the same arrays on to the client.
import { describe, expect, test } from "bun:test";
import { asBuffer } from "../../src/lib/bytes.ts";

describe("asBuffer: a chunk read as a Buffer without copying it", () => {
  test("the same array, its bytes, offset and length kept; searches and decoding see only its window", () => {
    const whole = new TextEncoder().encode('xx data: {"usage":null}\n\nyy');
    const view = whole.subarray(3, whole.length - 2);
    const b = asBuffer(view);
    expect(b).toBe(view as Buffer);
    expect(b.byteOffset).toBe(3);
    expect(b.length).toBe(whole.length - 5);
    expect(b.indexOf(Buffer.from('usage"'))).toBe(8);
    expect(b.indexOf(Buffer.from("yy"))).toBe(-1);
    expect(b.toString("utf8")).toBe('data: {"usage":null}\n\n');
    // Writing through one is writing through the other: no copy was made.
    whole[3] = "D".charCodeAt(0);
    expect(b.toString("latin1", 0, 4)).toBe("Data");
  });

  test("a small fresh array (what each read of a fetch body is) and a Buffer both come back as themselves", () => {
    const small = new Uint8Array([100, 97, 116, 97, 58]);
    expect(asBuffer(small).toString()).toBe("data:");
    const buf = Buffer.from("data:");
    expect(asBuffer(buf)).toBe(buf);
    expect(Object.getPrototypeOf(buf)).toBe(Buffer.prototype);
  });
});
