/** Protocol Buffers by hand, for tests that must send exactly the bytes they mean (no client encoder in between). */

export function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

/** Length-delimited fields: a string, or bytes (a nested message). */
export const pb = {
  string: (field: number, s: string) => pb.bytes(field, Buffer.from(s)),
  bytes: (field: number, b: Buffer) => Buffer.concat([varint((field << 3) | 2), varint(b.length), b]),
};
