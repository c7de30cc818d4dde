// Original file: proto/svc/v1/svc.proto


export interface CheckpointLoadRequest {
  'record'?: (string);
  'role'?: (string);
  '_role'?: "role";
}

export interface CheckpointLoadRequest__Output {
  'record': (string);
  'role'?: (string);
  '_role'?: "role";
}
