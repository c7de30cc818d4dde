// Original file: proto/svc/v1/svc.proto

import type { TransactWrite as _svc_v1_TransactWrite, TransactWrite__Output as _svc_v1_TransactWrite__Output } from '../../svc/v1/TransactWrite.js';
import type { Premise as _svc_v1_Premise, Premise__Output as _svc_v1_Premise__Output } from '../../svc/v1/Premise.js';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';
import type { Long } from '@grpc/proto-loader';

export interface TransactRequest {
  'record'?: (string);
  'writes'?: (_svc_v1_TransactWrite)[];
  'based_on'?: (_svc_v1_Premise)[];
  'declare_no_premises'?: (boolean);
  'evidence'?: (string);
  'invocation'?: (_google_protobuf_Struct | null);
  'dry_run'?: (boolean);
  'ttl_seconds'?: (number | string | Long);
  '_evidence'?: "evidence";
  '_ttl_seconds'?: "ttl_seconds";
}

export interface TransactRequest__Output {
  'record': (string);
  'writes': (_svc_v1_TransactWrite__Output)[];
  'based_on': (_svc_v1_Premise__Output)[];
  'declare_no_premises': (boolean);
  'evidence'?: (string);
  'invocation': (_google_protobuf_Struct__Output | null);
  'dry_run': (boolean);
  'ttl_seconds'?: (number);
  '_evidence'?: "evidence";
  '_ttl_seconds'?: "ttl_seconds";
}
