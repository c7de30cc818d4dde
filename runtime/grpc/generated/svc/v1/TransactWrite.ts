// Original file: proto/svc/v1/svc.proto

import type { Value as _google_protobuf_Value, Value__Output as _google_protobuf_Value__Output } from '../../google/protobuf/Value.js';
import type { Premise as _svc_v1_Premise, Premise__Output as _svc_v1_Premise__Output } from '../../svc/v1/Premise.js';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';
import type { Long } from '@grpc/proto-loader';

export interface TransactWrite {
  'op'?: (string);
  'field'?: (string);
  'value'?: (_google_protobuf_Value | null);
  'expected_version'?: (number | string | Long);
  'entry'?: (_google_protobuf_Value | null);
  'evidence'?: (string);
  'based_on'?: (_svc_v1_Premise)[];
  'declare_no_premises'?: (boolean);
  'invocation'?: (_google_protobuf_Struct | null);
  'lease_seconds'?: (number);
  'renew'?: (boolean);
  'ttl_seconds'?: (number | string | Long);
  '_expected_version'?: "expected_version";
  '_evidence'?: "evidence";
  '_lease_seconds'?: "lease_seconds";
  '_ttl_seconds'?: "ttl_seconds";
}

export interface TransactWrite__Output {
  'op': (string);
  'field': (string);
  'value': (_google_protobuf_Value__Output | null);
  'expected_version'?: (number);
  'entry': (_google_protobuf_Value__Output | null);
  'evidence'?: (string);
  'based_on': (_svc_v1_Premise__Output)[];
  'declare_no_premises': (boolean);
  'invocation': (_google_protobuf_Struct__Output | null);
  'lease_seconds'?: (number);
  'renew': (boolean);
  'ttl_seconds'?: (number);
  '_expected_version'?: "expected_version";
  '_evidence'?: "evidence";
  '_lease_seconds'?: "lease_seconds";
  '_ttl_seconds'?: "ttl_seconds";
}
