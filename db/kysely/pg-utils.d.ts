/** pg's value encoder for Bind (pg/lib/utils.js; exported by pg's "./lib/*" entry, untyped). */
declare module 'pg/lib/utils.js' {
  const utils: { prepareValue(value: unknown): unknown };
  export default utils;
}
