/**
 * utf8 (runtime/http/reply.ts): a JSON body sent in parts (a history page) is encoded part
 * by part into one byte array; it must be byte for byte what encoding the joined text gives,
 * whatever the characters, including those that make the first guess of its size too small.
 */
import fc from 'fast-check';
import { expect, test } from 'vitest';
import { utf8 } from '../../runtime/http/reply.js';

const wellFormed = fc.string({ unit: 'grapheme', maxLength: 200 });

test('parts encode to the bytes of their joined text: ASCII, accents, CJK, emoji, empty parts', () => {
  fc.assert(
    fc.property(fc.array(wellFormed, { maxLength: 8 }), (parts) => {
      expect(Buffer.from(utf8(parts))).toEqual(Buffer.from(new TextEncoder().encode(parts.join(''))));
    }),
    { numRuns: 500 },
  );
});

test('a part far larger than one byte per character grows the array', () => {
  const parts = ['{"a":"', '😀'.repeat(50_000), 'é'.repeat(1_000), '"}'];
  const bytes = utf8(parts);
  expect(bytes.byteLength).toBe(Buffer.byteLength(parts.join('')));
  expect(JSON.parse(Buffer.from(bytes).toString('utf8'))).toEqual({ a: '😀'.repeat(50_000) + 'é'.repeat(1_000) });
});
