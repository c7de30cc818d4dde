// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface TransactWriteResult {
  'op'?: (string);
  'field'?: (string);
  'version'?: (number | string | Long);
  'seq'?: (number | string | Long);
  'owner'?: (string);
  'lease_expires_at'?: (string);
  'took_over_from'?: (string);
  '_version'?: "version";
  '_seq'?: "seq";
  '_owner'?: "owner";
  '_lease_expires_at'?: "lease_expires_at";
  '_took_over_from'?: "took_over_from";
}

export interface TransactWriteResult__Output {
  'op': (string);
  'field': (string);
  'version'?: (number);
  'seq'?: (number);
  'owner'?: (string);
  'lease_expires_at'?: (string);
  'took_over_from'?: (string);
  '_version'?: "version";
  '_seq'?: "seq";
  '_owner'?: "owner";
  '_lease_expires_at'?: "lease_expires_at";
  '_took_over_from'?: "took_over_from";
}
