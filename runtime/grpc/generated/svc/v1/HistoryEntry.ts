// Original file: proto/svc/v1/svc.proto

import type { Value as _google_protobuf_Value, Value__Output as _google_protobuf_Value__Output } from '../../google/protobuf/Value.js';
import type { Premise as _svc_v1_Premise, Premise__Output as _svc_v1_Premise__Output } from '../../svc/v1/Premise.js';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';
import type { Long } from '@grpc/proto-loader';

export interface HistoryEntry {
  'seq'?: (number | string | Long);
  'field'?: (string);
  'op'?: (string);
  'version'?: (number | string | Long);
  'record_version'?: (number | string | Long);
  'value'?: (_google_protobuf_Value | null);
  'value_size'?: (number | string | Long);
  'value_sha256'?: (string);
  'author'?: (string);
  'identity_strength'?: (string);
  'evidence'?: (string);
  'expected_version'?: (number | string | Long);
  'based_on'?: (_svc_v1_Premise)[];
  'declare_no_premises'?: (boolean);
  'invocation'?: (_google_protobuf_Struct | null);
  'outcome'?: (string);
  'created_at'?: (string);
  '_version'?: "version";
  '_record_version'?: "record_version";
  '_value_size'?: "value_size";
  '_value_sha256'?: "value_sha256";
  '_identity_strength'?: "identity_strength";
  '_evidence'?: "evidence";
  '_expected_version'?: "expected_version";
}

export interface HistoryEntry__Output {
  'seq': (number);
  'field': (string);
  'op': (string);
  'version'?: (number);
  'record_version'?: (number);
  'value': (_google_protobuf_Value__Output | null);
  'value_size'?: (number);
  'value_sha256'?: (string);
  'author': (string);
  'identity_strength'?: (string);
  'evidence'?: (string);
  'expected_version'?: (number);
  'based_on': (_svc_v1_Premise__Output)[];
  'declare_no_premises': (boolean);
  'invocation': (_google_protobuf_Struct__Output | null);
  'outcome': (string);
  'created_at': (string);
  '_version'?: "version";
  '_record_version'?: "record_version";
  '_value_size'?: "value_size";
  '_value_sha256'?: "value_sha256";
  '_identity_strength'?: "identity_strength";
  '_evidence'?: "evidence";
  '_expected_version'?: "expected_version";
}
