// Original file: proto/svc/v1/svc.proto


export interface GetRequest {
  'record'?: (string);
  'fields'?: (string)[];
  'entries_limit'?: (number);
  'entries_before'?: (string);
  '_entries_limit'?: "entries_limit";
  '_entries_before'?: "entries_before";
}

export interface GetRequest__Output {
  'record': (string);
  'fields': (string)[];
  'entries_limit'?: (number);
  'entries_before'?: (string);
  '_entries_limit'?: "entries_limit";
  '_entries_before'?: "entries_before";
}
