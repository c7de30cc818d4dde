// Original file: proto/svc/v1/svc.proto


export interface GetRequest {
  'record'?: (string);
  'fields'?: (string)[];
  'entries_limit'?: (number);
  '_entries_limit'?: "entries_limit";
}

export interface GetRequest__Output {
  'record': (string);
  'fields': (string)[];
  'entries_limit'?: (number);
  '_entries_limit'?: "entries_limit";
}
