// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface CheckpointSaveResult {
  'record'?: (string);
  'role'?: (string);
  'checkpoint_id'?: (number | string | Long);
  'record_version'?: (number | string | Long);
}

export interface CheckpointSaveResult__Output {
  'record': (string);
  'role': (string);
  'checkpoint_id': (number);
  'record_version': (number);
}
