// Original file: proto/svc/v1/svc.proto

import type { Record as _svc_v1_Record, Record__Output as _svc_v1_Record__Output } from '../../svc/v1/Record.js';

export interface QueryResult {
  'class'?: (string);
  'records'?: (_svc_v1_Record)[];
  'next_after'?: (string);
  '_next_after'?: "next_after";
}

export interface QueryResult__Output {
  'class': (string);
  'records': (_svc_v1_Record__Output)[];
  'next_after'?: (string);
  '_next_after'?: "next_after";
}
