import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { queryNames } from '../../runtime/http/app.js';

const viaUrl = (url: string) => [...new URL(url).searchParams.keys()];

describe('queryNames: the parameter names of a request URL', () => {
  it('is empty without a query, and keeps repeats and order', () => {
    expect(queryNames('http://h/v1/records/a/b')).toEqual([]);
    expect(queryNames('http://h/v1/records/a/b?')).toEqual([]);
    expect(queryNames('http://h/x?fields=a,b&limit=1&fields=c')).toEqual(['fields', 'limit', 'fields']);
    expect(queryNames('http://h/x?a%20b=1&c+d&=e#frag=1')).toEqual(['a b', 'c d', '']);
  });

  it('answers what the WHATWG URL parser answers', () => {
    const part = fc
      .array(fc.constantFrom('a', 'Z', '0', '=', '&', '+', '%', '%2', '%20', '%3D', '#', '?', '/', '.', '-', ';', '~', 'é'), { maxLength: 24 })
      .map((a) => a.join(''));
    fc.assert(
      fc.property(part, part, (path, query) => {
        const url = new URL(`http://127.0.0.1:8080/${path}?${query}`).href;
        expect(queryNames(url)).toEqual(viaUrl(url));
      }),
      { numRuns: 2000 },
    );
  });
});
