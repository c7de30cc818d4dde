// Original file: proto/svc/v1/svc.proto

import type { Value as _google_protobuf_Value, Value__Output as _google_protobuf_Value__Output } from '../../google/protobuf/Value.js';
import type { Premise as _svc_v1_Premise, Premise__Output as _svc_v1_Premise__Output } from '../../svc/v1/Premise.js';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from '../../google/protobuf/Struct.js';
import type { Entry as _svc_v1_Entry, Entry__Output as _svc_v1_Entry__Output } from '../../svc/v1/Entry.js';
import type { Long } from '@grpc/proto-loader';

export interface Field {
  'value'?: (_google_protobuf_Value | null);
  'version'?: (number | string | Long);
  'author'?: (string);
  'identity_strength'?: (string);
  'evidence'?: (string);
  'based_on'?: (_svc_v1_Premise)[];
  'invocation'?: (_google_protobuf_Struct | null);
  'updated_at'?: (string);
  'owner'?: (string);
  'lease_expires_at'?: (string);
  'entries'?: (_svc_v1_Entry)[];
  'lease_lapsed'?: (boolean);
  'declare_no_premises'?: (boolean);
  'next_entries_before'?: (string);
  '_author'?: "author";
  '_identity_strength'?: "identity_strength";
  '_evidence'?: "evidence";
  '_updated_at'?: "updated_at";
  '_owner'?: "owner";
  '_lease_expires_at'?: "lease_expires_at";
  '_next_entries_before'?: "next_entries_before";
}

export interface Field__Output {
  'value': (_google_protobuf_Value__Output | null);
  'version': (number);
  'author'?: (string);
  'identity_strength'?: (string);
  'evidence'?: (string);
  'based_on': (_svc_v1_Premise__Output)[];
  'invocation': (_google_protobuf_Struct__Output | null);
  'updated_at'?: (string);
  'owner'?: (string);
  'lease_expires_at'?: (string);
  'entries': (_svc_v1_Entry__Output)[];
  'lease_lapsed': (boolean);
  'declare_no_premises': (boolean);
  'next_entries_before'?: (string);
  '_author'?: "author";
  '_identity_strength'?: "identity_strength";
  '_evidence'?: "evidence";
  '_updated_at'?: "updated_at";
  '_owner'?: "owner";
  '_lease_expires_at'?: "lease_expires_at";
  '_next_entries_before'?: "next_entries_before";
}
