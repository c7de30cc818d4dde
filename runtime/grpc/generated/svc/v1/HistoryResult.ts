// Original file: proto/svc/v1/svc.proto

import type { HistoryEntry as _svc_v1_HistoryEntry, HistoryEntry__Output as _svc_v1_HistoryEntry__Output } from '../../svc/v1/HistoryEntry.js';

export interface HistoryResult {
  'record'?: (string);
  'history'?: (_svc_v1_HistoryEntry)[];
  'next_before'?: (string);
  'truncated_before'?: (string);
  '_next_before'?: "next_before";
  '_truncated_before'?: "truncated_before";
}

export interface HistoryResult__Output {
  'record': (string);
  'history': (_svc_v1_HistoryEntry__Output)[];
  'next_before'?: (string);
  'truncated_before'?: (string);
  '_next_before'?: "next_before";
  '_truncated_before'?: "truncated_before";
}
