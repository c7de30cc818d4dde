// Original file: proto/svc/v1/svc.proto

import type { Long } from '@grpc/proto-loader';

export interface Premise {
  'field'?: (string);
  'version'?: (number | string | Long);
  'kind'?: (string);
  'inferred'?: (boolean);
}

export interface Premise__Output {
  'field': (string);
  'version': (number);
  'kind': (string);
  'inferred': (boolean);
}
