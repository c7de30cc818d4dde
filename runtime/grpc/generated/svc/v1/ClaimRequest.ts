// Original file: proto/svc/v1/svc.proto

import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';

export interface ClaimRequest {
  'record'?: (string);
  'field'?: (string);
  'lease_seconds'?: (number);
  'renew'?: (boolean);
  'invocation'?: (_google_protobuf_Struct | null);
  'dry_run'?: (boolean);
  '_lease_seconds'?: "lease_seconds";
}

export interface ClaimRequest__Output {
  'record': (string);
  'field': (string);
  'lease_seconds'?: (number);
  'renew': (boolean);
  'invocation': (_google_protobuf_Struct__Output | null);
  'dry_run': (boolean);
  '_lease_seconds'?: "lease_seconds";
}
