// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface ChangedField {
  'field'?: (string);
  'version'?: (number | string | Long);
  'author'?: (string);
  'evidence'?: (string);
  '_author'?: "author";
  '_evidence'?: "evidence";
}

export interface ChangedField__Output {
  'field': (string);
  'version': (number);
  'author'?: (string);
  'evidence'?: (string);
  '_author'?: "author";
  '_evidence'?: "evidence";
}
