// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface ClaimResult {
  'record'?: (string);
  'field'?: (string);
  'owner'?: (string);
  'lease_expires_at'?: (string);
  'version'?: (number | string | Long);
  'record_version'?: (number | string | Long);
  'took_over_from'?: (string);
  'created'?: (boolean);
  'dry_run'?: (boolean);
  '_owner'?: "owner";
  '_lease_expires_at'?: "lease_expires_at";
  '_took_over_from'?: "took_over_from";
}

export interface ClaimResult__Output {
  'record': (string);
  'field': (string);
  'owner'?: (string);
  'lease_expires_at'?: (string);
  'version': (number);
  'record_version': (number);
  'took_over_from'?: (string);
  'created': (boolean);
  'dry_run': (boolean);
  '_owner'?: "owner";
  '_lease_expires_at'?: "lease_expires_at";
  '_took_over_from'?: "took_over_from";
}
