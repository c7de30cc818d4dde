// Original file: proto/svc/v1/svc.proto


export interface QueryRequest {
  'class'?: (string);
  'filters'?: ({[key: string]: string});
  'limit'?: (number);
  'after'?: (string);
}

export interface QueryRequest__Output {
  'class': (string);
  'filters': ({[key: string]: string});
  'limit': (number);
  'after': (string);
}
