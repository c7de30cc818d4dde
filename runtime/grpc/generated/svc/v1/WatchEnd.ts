// Original file: proto/svc/v1/svc.proto


export interface WatchEnd {
  'reason'?: (string);
  'message'?: (string);
  'error'?: (string);
  '_error'?: "error";
}

export interface WatchEnd__Output {
  'reason': (string);
  'message': (string);
  'error'?: (string);
  '_error'?: "error";
}
