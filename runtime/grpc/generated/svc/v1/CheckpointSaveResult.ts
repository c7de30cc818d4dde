// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface CheckpointSaveResult {
  'record'?: (string);
  'role'?: (string);
  'checkpoint_id'?: (number | string | Long);
  'record_version'?: (number | string | Long);
  'dry_run'?: (boolean);
}

export interface CheckpointSaveResult__Output {
  'record': (string);
  'role': (string);
  'checkpoint_id': (number);
  'record_version': (number);
  'dry_run': (boolean);
}
