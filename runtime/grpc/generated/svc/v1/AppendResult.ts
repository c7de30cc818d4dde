// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface AppendResult {
  'record'?: (string);
  'field'?: (string);
  'seq'?: (number | string | Long);
  'record_version'?: (number | string | Long);
  'created'?: (boolean);
  'expires_at'?: (string);
  'dry_run'?: (boolean);
  '_expires_at'?: "expires_at";
}

export interface AppendResult__Output {
  'record': (string);
  'field': (string);
  'seq': (number);
  'record_version': (number);
  'created': (boolean);
  'expires_at'?: (string);
  'dry_run': (boolean);
  '_expires_at'?: "expires_at";
}
