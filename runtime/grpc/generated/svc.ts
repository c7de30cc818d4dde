import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { ListValue as _google_protobuf_ListValue, ListValue__Output as _google_protobuf_ListValue__Output } from './google/protobuf/ListValue.js';
import type { Struct as _google_protobuf_Struct, Struct__Output as _google_protobuf_Struct__Output } from './google/protobuf/Struct.js';
import type { Value as _google_protobuf_Value, Value__Output as _google_protobuf_Value__Output } from './google/protobuf/Value.js';
import type { AppendRequest as _svc_v1_AppendRequest, AppendRequest__Output as _svc_v1_AppendRequest__Output } from './svc/v1/AppendRequest.js';
import type { AppendResult as _svc_v1_AppendResult, AppendResult__Output as _svc_v1_AppendResult__Output } from './svc/v1/AppendResult.js';
import type { ChangedField as _svc_v1_ChangedField, ChangedField__Output as _svc_v1_ChangedField__Output } from './svc/v1/ChangedField.js';
import type { CheckpointLoadRequest as _svc_v1_CheckpointLoadRequest, CheckpointLoadRequest__Output as _svc_v1_CheckpointLoadRequest__Output } from './svc/v1/CheckpointLoadRequest.js';
import type { CheckpointLoadResult as _svc_v1_CheckpointLoadResult, CheckpointLoadResult__Output as _svc_v1_CheckpointLoadResult__Output } from './svc/v1/CheckpointLoadResult.js';
import type { CheckpointSaveRequest as _svc_v1_CheckpointSaveRequest, CheckpointSaveRequest__Output as _svc_v1_CheckpointSaveRequest__Output } from './svc/v1/CheckpointSaveRequest.js';
import type { CheckpointSaveResult as _svc_v1_CheckpointSaveResult, CheckpointSaveResult__Output as _svc_v1_CheckpointSaveResult__Output } from './svc/v1/CheckpointSaveResult.js';
import type { ClaimRequest as _svc_v1_ClaimRequest, ClaimRequest__Output as _svc_v1_ClaimRequest__Output } from './svc/v1/ClaimRequest.js';
import type { ClaimResult as _svc_v1_ClaimResult, ClaimResult__Output as _svc_v1_ClaimResult__Output } from './svc/v1/ClaimResult.js';
import type { Entry as _svc_v1_Entry, Entry__Output as _svc_v1_Entry__Output } from './svc/v1/Entry.js';
import type { Field as _svc_v1_Field, Field__Output as _svc_v1_Field__Output } from './svc/v1/Field.js';
import type { GetRequest as _svc_v1_GetRequest, GetRequest__Output as _svc_v1_GetRequest__Output } from './svc/v1/GetRequest.js';
import type { HistoryEntry as _svc_v1_HistoryEntry, HistoryEntry__Output as _svc_v1_HistoryEntry__Output } from './svc/v1/HistoryEntry.js';
import type { HistoryRequest as _svc_v1_HistoryRequest, HistoryRequest__Output as _svc_v1_HistoryRequest__Output } from './svc/v1/HistoryRequest.js';
import type { HistoryResult as _svc_v1_HistoryResult, HistoryResult__Output as _svc_v1_HistoryResult__Output } from './svc/v1/HistoryResult.js';
import type { Premise as _svc_v1_Premise, Premise__Output as _svc_v1_Premise__Output } from './svc/v1/Premise.js';
import type { PutRequest as _svc_v1_PutRequest, PutRequest__Output as _svc_v1_PutRequest__Output } from './svc/v1/PutRequest.js';
import type { QueryRequest as _svc_v1_QueryRequest, QueryRequest__Output as _svc_v1_QueryRequest__Output } from './svc/v1/QueryRequest.js';
import type { QueryResult as _svc_v1_QueryResult, QueryResult__Output as _svc_v1_QueryResult__Output } from './svc/v1/QueryResult.js';
import type { Record as _svc_v1_Record, Record__Output as _svc_v1_Record__Output } from './svc/v1/Record.js';
import type { SvcServiceClient as _svc_v1_SvcServiceClient, SvcServiceDefinition as _svc_v1_SvcServiceDefinition } from './svc/v1/SvcService.js';
import type { TransactRequest as _svc_v1_TransactRequest, TransactRequest__Output as _svc_v1_TransactRequest__Output } from './svc/v1/TransactRequest.js';
import type { TransactResult as _svc_v1_TransactResult, TransactResult__Output as _svc_v1_TransactResult__Output } from './svc/v1/TransactResult.js';
import type { TransactWrite as _svc_v1_TransactWrite, TransactWrite__Output as _svc_v1_TransactWrite__Output } from './svc/v1/TransactWrite.js';
import type { TransactWriteResult as _svc_v1_TransactWriteResult, TransactWriteResult__Output as _svc_v1_TransactWriteResult__Output } from './svc/v1/TransactWriteResult.js';
import type { WatchChange as _svc_v1_WatchChange, WatchChange__Output as _svc_v1_WatchChange__Output } from './svc/v1/WatchChange.js';
import type { WatchEnd as _svc_v1_WatchEnd, WatchEnd__Output as _svc_v1_WatchEnd__Output } from './svc/v1/WatchEnd.js';
import type { WatchEvent as _svc_v1_WatchEvent, WatchEvent__Output as _svc_v1_WatchEvent__Output } from './svc/v1/WatchEvent.js';
import type { WatchHeartbeat as _svc_v1_WatchHeartbeat, WatchHeartbeat__Output as _svc_v1_WatchHeartbeat__Output } from './svc/v1/WatchHeartbeat.js';
import type { WatchOpen as _svc_v1_WatchOpen, WatchOpen__Output as _svc_v1_WatchOpen__Output } from './svc/v1/WatchOpen.js';
import type { WatchRequest as _svc_v1_WatchRequest, WatchRequest__Output as _svc_v1_WatchRequest__Output } from './svc/v1/WatchRequest.js';
import type { WriteResult as _svc_v1_WriteResult, WriteResult__Output as _svc_v1_WriteResult__Output } from './svc/v1/WriteResult.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  google: {
    protobuf: {
      ListValue: MessageTypeDefinition<_google_protobuf_ListValue, _google_protobuf_ListValue__Output>
      NullValue: EnumTypeDefinition
      Struct: MessageTypeDefinition<_google_protobuf_Struct, _google_protobuf_Struct__Output>
      Value: MessageTypeDefinition<_google_protobuf_Value, _google_protobuf_Value__Output>
    }
  }
  svc: {
    v1: {
      AppendRequest: MessageTypeDefinition<_svc_v1_AppendRequest, _svc_v1_AppendRequest__Output>
      AppendResult: MessageTypeDefinition<_svc_v1_AppendResult, _svc_v1_AppendResult__Output>
      ChangedField: MessageTypeDefinition<_svc_v1_ChangedField, _svc_v1_ChangedField__Output>
      CheckpointLoadRequest: MessageTypeDefinition<_svc_v1_CheckpointLoadRequest, _svc_v1_CheckpointLoadRequest__Output>
      CheckpointLoadResult: MessageTypeDefinition<_svc_v1_CheckpointLoadResult, _svc_v1_CheckpointLoadResult__Output>
      CheckpointSaveRequest: MessageTypeDefinition<_svc_v1_CheckpointSaveRequest, _svc_v1_CheckpointSaveRequest__Output>
      CheckpointSaveResult: MessageTypeDefinition<_svc_v1_CheckpointSaveResult, _svc_v1_CheckpointSaveResult__Output>
      ClaimRequest: MessageTypeDefinition<_svc_v1_ClaimRequest, _svc_v1_ClaimRequest__Output>
      ClaimResult: MessageTypeDefinition<_svc_v1_ClaimResult, _svc_v1_ClaimResult__Output>
      Entry: MessageTypeDefinition<_svc_v1_Entry, _svc_v1_Entry__Output>
      Field: MessageTypeDefinition<_svc_v1_Field, _svc_v1_Field__Output>
      GetRequest: MessageTypeDefinition<_svc_v1_GetRequest, _svc_v1_GetRequest__Output>
      HistoryEntry: MessageTypeDefinition<_svc_v1_HistoryEntry, _svc_v1_HistoryEntry__Output>
      HistoryRequest: MessageTypeDefinition<_svc_v1_HistoryRequest, _svc_v1_HistoryRequest__Output>
      HistoryResult: MessageTypeDefinition<_svc_v1_HistoryResult, _svc_v1_HistoryResult__Output>
      Premise: MessageTypeDefinition<_svc_v1_Premise, _svc_v1_Premise__Output>
      PutRequest: MessageTypeDefinition<_svc_v1_PutRequest, _svc_v1_PutRequest__Output>
      QueryRequest: MessageTypeDefinition<_svc_v1_QueryRequest, _svc_v1_QueryRequest__Output>
      QueryResult: MessageTypeDefinition<_svc_v1_QueryResult, _svc_v1_QueryResult__Output>
      Record: MessageTypeDefinition<_svc_v1_Record, _svc_v1_Record__Output>
      SvcService: SubtypeConstructor<typeof grpc.Client, _svc_v1_SvcServiceClient> & { service: _svc_v1_SvcServiceDefinition }
      TransactRequest: MessageTypeDefinition<_svc_v1_TransactRequest, _svc_v1_TransactRequest__Output>
      TransactResult: MessageTypeDefinition<_svc_v1_TransactResult, _svc_v1_TransactResult__Output>
      TransactWrite: MessageTypeDefinition<_svc_v1_TransactWrite, _svc_v1_TransactWrite__Output>
      TransactWriteResult: MessageTypeDefinition<_svc_v1_TransactWriteResult, _svc_v1_TransactWriteResult__Output>
      WatchChange: MessageTypeDefinition<_svc_v1_WatchChange, _svc_v1_WatchChange__Output>
      WatchEnd: MessageTypeDefinition<_svc_v1_WatchEnd, _svc_v1_WatchEnd__Output>
      WatchEvent: MessageTypeDefinition<_svc_v1_WatchEvent, _svc_v1_WatchEvent__Output>
      WatchHeartbeat: MessageTypeDefinition<_svc_v1_WatchHeartbeat, _svc_v1_WatchHeartbeat__Output>
      WatchOpen: MessageTypeDefinition<_svc_v1_WatchOpen, _svc_v1_WatchOpen__Output>
      WatchRequest: MessageTypeDefinition<_svc_v1_WatchRequest, _svc_v1_WatchRequest__Output>
      WriteResult: MessageTypeDefinition<_svc_v1_WriteResult, _svc_v1_WriteResult__Output>
    }
  }
}

