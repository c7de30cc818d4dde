// Original file: proto/svc/v1/svc.proto

import type { Value as _google_protobuf_Value, Value__Output as _google_protobuf_Value__Output } from '../../google/protobuf/Value.js';
import type { Premise as _svc_v1_Premise, Premise__Output as _svc_v1_Premise__Output } from '../../svc/v1/Premise.js';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';
import type { Long } from '@grpc/proto-loader';

export interface PutRequest {
  'record'?: (string);
  'field'?: (string);
  'value'?: (_google_protobuf_Value | null);
  'expected_version'?: (number | string | Long);
  'evidence'?: (string);
  'based_on'?: (_svc_v1_Premise)[];
  'declare_no_premises'?: (boolean);
  'invocation'?: (_google_protobuf_Struct | null);
  'ttl_seconds'?: (number | string | Long);
  'dry_run'?: (boolean);
  '_evidence'?: "evidence";
  '_ttl_seconds'?: "ttl_seconds";
}

export interface PutRequest__Output {
  'record': (string);
  'field': (string);
  'value': (_google_protobuf_Value__Output | null);
  'expected_version': (number);
  'evidence'?: (string);
  'based_on': (_svc_v1_Premise__Output)[];
  'declare_no_premises': (boolean);
  'invocation': (_google_protobuf_Struct__Output | null);
  'ttl_seconds'?: (number);
  'dry_run': (boolean);
  '_evidence'?: "evidence";
  '_ttl_seconds'?: "ttl_seconds";
}
