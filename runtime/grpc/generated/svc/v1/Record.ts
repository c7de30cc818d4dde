// Original file: proto/svc/v1/svc.proto

import type { Field as _svc_v1_Field, Field__Output as _svc_v1_Field__Output } from '../../svc/v1/Field.js';
import type { Long } from '@grpc/proto-loader';

export interface Record {
  'record'?: (string);
  'record_version'?: (number | string | Long);
  'fields'?: ({[key: string]: _svc_v1_Field});
  'omitted_fields'?: (string)[];
  'expires_at'?: (string);
  '_expires_at'?: "expires_at";
}

export interface Record__Output {
  'record': (string);
  'record_version': (number);
  'fields': ({[key: string]: _svc_v1_Field__Output});
  'omitted_fields': (string)[];
  'expires_at'?: (string);
  '_expires_at'?: "expires_at";
}
