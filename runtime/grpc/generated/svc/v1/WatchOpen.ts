// Original file: proto/svc/v1/svc.proto

import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';

export interface WatchOpen {
  'id'?: (string);
  'data'?: (_google_protobuf_Struct | null);
}

export interface WatchOpen__Output {
  'id': (string);
  'data': (_google_protobuf_Struct__Output | null);
}
