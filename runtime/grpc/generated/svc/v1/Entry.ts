// Original file: proto/svc/v1/svc.proto

import type { Value as _google_protobuf_Value, Value__Output as _google_protobuf_Value__Output } from '../../google/protobuf/Value.js';
import type { Premise as _svc_v1_Premise, Premise__Output as _svc_v1_Premise__Output } from '../../svc/v1/Premise.js';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';
import type { Long } from '@grpc/proto-loader';

export interface Entry {
  'seq'?: (number | string | Long);
  'value'?: (_google_protobuf_Value | null);
  'author'?: (string);
  'identity_strength'?: (string);
  'evidence'?: (string);
  'updated_at'?: (string);
  'based_on'?: (_svc_v1_Premise)[];
  'invocation'?: (_google_protobuf_Struct | null);
  'declare_no_premises'?: (boolean);
  '_identity_strength'?: "identity_strength";
  '_evidence'?: "evidence";
}

export interface Entry__Output {
  'seq': (number);
  'value': (_google_protobuf_Value__Output | null);
  'author': (string);
  'identity_strength'?: (string);
  'evidence'?: (string);
  'updated_at': (string);
  'based_on': (_svc_v1_Premise__Output)[];
  'invocation': (_google_protobuf_Struct__Output | null);
  'declare_no_premises': (boolean);
  '_identity_strength'?: "identity_strength";
  '_evidence'?: "evidence";
}
