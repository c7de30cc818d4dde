// Original file: proto/svc/v1/svc.proto


export interface HistoryRequest {
  'record'?: (string);
  'field'?: (string);
  'limit'?: (number);
  'before'?: (string);
  '_field'?: "field";
}

export interface HistoryRequest__Output {
  'record': (string);
  'field'?: (string);
  'limit': (number);
  'before': (string);
  '_field'?: "field";
}
