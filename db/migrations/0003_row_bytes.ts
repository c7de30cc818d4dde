/**
 * Row sizes for byte-bounded reads. Frozen in time: never edit an applied migration.
 *
 * Every read response is bounded by bytes as well as rows (a history page of 140 rejected
 * 3.9 MiB puts was one 546 MiB text, past what the driver can hold). To cut a page at a
 * byte budget without reading (and de-TOASTing) the values it will not return, each row
 * carries `bytes`: the UTF-8 size of its value, evidence, based_on and invocation texts,
 * computed by the writer from the texts it inserts. Rows written before this migration have
 * `bytes` null; readers fall back to measuring them.
 */
export const version = 3;
export const name = 'row_bytes';

export const up = /* sql */ `
alter table history add column bytes integer;
alter table entries add column bytes integer;
alter table fields add column bytes integer;
`;
