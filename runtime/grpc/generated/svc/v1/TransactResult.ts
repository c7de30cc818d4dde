// Original file: proto/svc/v1/svc.proto

import type { TransactWriteResult as _svc_v1_TransactWriteResult, TransactWriteResult__Output as _svc_v1_TransactWriteResult__Output } from '../../svc/v1/TransactWriteResult.js';
import type { Long } from '@grpc/proto-loader';

export interface TransactResult {
  'record'?: (string);
  'record_version'?: (number | string | Long);
  'transaction'?: (string);
  'writes'?: (_svc_v1_TransactWriteResult)[];
  'created'?: (boolean);
  'dry_run'?: (boolean);
  'expires_at'?: (string);
  '_expires_at'?: "expires_at";
}

export interface TransactResult__Output {
  'record': (string);
  'record_version': (number);
  'transaction': (string);
  'writes': (_svc_v1_TransactWriteResult__Output)[];
  'created': (boolean);
  'dry_run': (boolean);
  'expires_at'?: (string);
  '_expires_at'?: "expires_at";
}
