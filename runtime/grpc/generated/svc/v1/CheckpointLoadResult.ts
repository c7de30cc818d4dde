// Original file: proto/svc/v1/svc.proto

import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';
import type { ChangedField as _svc_v1_ChangedField, ChangedField__Output as _svc_v1_ChangedField__Output } from '../../svc/v1/ChangedField.js';
import type { Long } from '@grpc/proto-loader';

export interface CheckpointLoadResult {
  'record'?: (string);
  'role'?: (string);
  'document'?: (_google_protobuf_Struct | null);
  'record_version'?: (number | string | Long);
  'changed_fields'?: (_svc_v1_ChangedField)[];
}

export interface CheckpointLoadResult__Output {
  'record': (string);
  'role': (string);
  'document': (_google_protobuf_Struct__Output | null);
  'record_version': (number);
  'changed_fields': (_svc_v1_ChangedField__Output)[];
}
