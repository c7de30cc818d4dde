// Original file: proto/svc/v1/svc.proto

import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';

export interface CheckpointSaveRequest {
  'record'?: (string);
  'document'?: (_google_protobuf_Struct | null);
  'dry_run'?: (boolean);
}

export interface CheckpointSaveRequest__Output {
  'record': (string);
  'document': (_google_protobuf_Struct__Output | null);
  'dry_run': (boolean);
}
