// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface WatchRequest {
  'record'?: (string);
  'class'?: (string);
  'from_record_version'?: (number | string | Long);
  'from'?: (string);
  'target'?: "record"|"class";
  '_from_record_version'?: "from_record_version";
  '_from'?: "from";
}

export interface WatchRequest__Output {
  'record'?: (string);
  'class'?: (string);
  'from_record_version'?: (number);
  'from'?: (string);
  'target'?: "record"|"class";
  '_from_record_version'?: "from_record_version";
  '_from'?: "from";
}
