// Original file: proto/svc/v1/svc.proto

import type { WatchOpen as _svc_v1_WatchOpen, WatchOpen__Output as _svc_v1_WatchOpen__Output } from '../../svc/v1/WatchOpen.js';
import type { WatchChange as _svc_v1_WatchChange, WatchChange__Output as _svc_v1_WatchChange__Output } from '../../svc/v1/WatchChange.js';
import type { WatchHeartbeat as _svc_v1_WatchHeartbeat, WatchHeartbeat__Output as _svc_v1_WatchHeartbeat__Output } from '../../svc/v1/WatchHeartbeat.js';
import type { WatchEnd as _svc_v1_WatchEnd, WatchEnd__Output as _svc_v1_WatchEnd__Output } from '../../svc/v1/WatchEnd.js';

export interface WatchEvent {
  'open'?: (_svc_v1_WatchOpen | null);
  'change'?: (_svc_v1_WatchChange | null);
  'heartbeat'?: (_svc_v1_WatchHeartbeat | null);
  'end'?: (_svc_v1_WatchEnd | null);
  'event'?: "open"|"change"|"heartbeat"|"end";
}

export interface WatchEvent__Output {
  'open'?: (_svc_v1_WatchOpen__Output | null);
  'change'?: (_svc_v1_WatchChange__Output | null);
  'heartbeat'?: (_svc_v1_WatchHeartbeat__Output | null);
  'end'?: (_svc_v1_WatchEnd__Output | null);
  'event'?: "open"|"change"|"heartbeat"|"end";
}
