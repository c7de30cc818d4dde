// Original file: proto/svc/v1/svc.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { AppendRequest as _svc_v1_AppendRequest, AppendRequest__Output as _svc_v1_AppendRequest__Output } from '../../svc/v1/AppendRequest.js';
import type { AppendResult as _svc_v1_AppendResult, AppendResult__Output as _svc_v1_AppendResult__Output } from '../../svc/v1/AppendResult.js';
import type { CheckpointLoadRequest as _svc_v1_CheckpointLoadRequest, CheckpointLoadRequest__Output as _svc_v1_CheckpointLoadRequest__Output } from '../../svc/v1/CheckpointLoadRequest.js';
import type { CheckpointLoadResult as _svc_v1_CheckpointLoadResult, CheckpointLoadResult__Output as _svc_v1_CheckpointLoadResult__Output } from '../../svc/v1/CheckpointLoadResult.js';
import type { CheckpointSaveRequest as _svc_v1_CheckpointSaveRequest, CheckpointSaveRequest__Output as _svc_v1_CheckpointSaveRequest__Output } from '../../svc/v1/CheckpointSaveRequest.js';
import type { CheckpointSaveResult as _svc_v1_CheckpointSaveResult, CheckpointSaveResult__Output as _svc_v1_CheckpointSaveResult__Output } from '../../svc/v1/CheckpointSaveResult.js';
import type { ClaimRequest as _svc_v1_ClaimRequest, ClaimRequest__Output as _svc_v1_ClaimRequest__Output } from '../../svc/v1/ClaimRequest.js';
import type { ClaimResult as _svc_v1_ClaimResult, ClaimResult__Output as _svc_v1_ClaimResult__Output } from '../../svc/v1/ClaimResult.js';
import type { GetRequest as _svc_v1_GetRequest, GetRequest__Output as _svc_v1_GetRequest__Output } from '../../svc/v1/GetRequest.js';
import type { HistoryRequest as _svc_v1_HistoryRequest, HistoryRequest__Output as _svc_v1_HistoryRequest__Output } from '../../svc/v1/HistoryRequest.js';
import type { HistoryResult as _svc_v1_HistoryResult, HistoryResult__Output as _svc_v1_HistoryResult__Output } from '../../svc/v1/HistoryResult.js';
import type { PutRequest as _svc_v1_PutRequest, PutRequest__Output as _svc_v1_PutRequest__Output } from '../../svc/v1/PutRequest.js';
import type { QueryRequest as _svc_v1_QueryRequest, QueryRequest__Output as _svc_v1_QueryRequest__Output } from '../../svc/v1/QueryRequest.js';
import type { QueryResult as _svc_v1_QueryResult, QueryResult__Output as _svc_v1_QueryResult__Output } from '../../svc/v1/QueryResult.js';
import type { Record as _svc_v1_Record, Record__Output as _svc_v1_Record__Output } from '../../svc/v1/Record.js';
import type { TransactRequest as _svc_v1_TransactRequest, TransactRequest__Output as _svc_v1_TransactRequest__Output } from '../../svc/v1/TransactRequest.js';
import type { TransactResult as _svc_v1_TransactResult, TransactResult__Output as _svc_v1_TransactResult__Output } from '../../svc/v1/TransactResult.js';
import type { WatchEvent as _svc_v1_WatchEvent, WatchEvent__Output as _svc_v1_WatchEvent__Output } from '../../svc/v1/WatchEvent.js';
import type { WatchRequest as _svc_v1_WatchRequest, WatchRequest__Output as _svc_v1_WatchRequest__Output } from '../../svc/v1/WatchRequest.js';
import type { WriteResult as _svc_v1_WriteResult, WriteResult__Output as _svc_v1_WriteResult__Output } from '../../svc/v1/WriteResult.js';

export interface SvcServiceClient extends grpc.Client {
  Append(argument: _svc_v1_AppendRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  Append(argument: _svc_v1_AppendRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  Append(argument: _svc_v1_AppendRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  Append(argument: _svc_v1_AppendRequest, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  append(argument: _svc_v1_AppendRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  append(argument: _svc_v1_AppendRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  append(argument: _svc_v1_AppendRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  append(argument: _svc_v1_AppendRequest, callback: grpc.requestCallback<_svc_v1_AppendResult__Output>): grpc.ClientUnaryCall;
  
  CheckpointLoad(argument: _svc_v1_CheckpointLoadRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  CheckpointLoad(argument: _svc_v1_CheckpointLoadRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  CheckpointLoad(argument: _svc_v1_CheckpointLoadRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  CheckpointLoad(argument: _svc_v1_CheckpointLoadRequest, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  checkpointLoad(argument: _svc_v1_CheckpointLoadRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  checkpointLoad(argument: _svc_v1_CheckpointLoadRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  checkpointLoad(argument: _svc_v1_CheckpointLoadRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  checkpointLoad(argument: _svc_v1_CheckpointLoadRequest, callback: grpc.requestCallback<_svc_v1_CheckpointLoadResult__Output>): grpc.ClientUnaryCall;
  
  CheckpointSave(argument: _svc_v1_CheckpointSaveRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  CheckpointSave(argument: _svc_v1_CheckpointSaveRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  CheckpointSave(argument: _svc_v1_CheckpointSaveRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  CheckpointSave(argument: _svc_v1_CheckpointSaveRequest, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  checkpointSave(argument: _svc_v1_CheckpointSaveRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  checkpointSave(argument: _svc_v1_CheckpointSaveRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  checkpointSave(argument: _svc_v1_CheckpointSaveRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  checkpointSave(argument: _svc_v1_CheckpointSaveRequest, callback: grpc.requestCallback<_svc_v1_CheckpointSaveResult__Output>): grpc.ClientUnaryCall;
  
  Claim(argument: _svc_v1_ClaimRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  Claim(argument: _svc_v1_ClaimRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  Claim(argument: _svc_v1_ClaimRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  Claim(argument: _svc_v1_ClaimRequest, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  claim(argument: _svc_v1_ClaimRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  claim(argument: _svc_v1_ClaimRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  claim(argument: _svc_v1_ClaimRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  claim(argument: _svc_v1_ClaimRequest, callback: grpc.requestCallback<_svc_v1_ClaimResult__Output>): grpc.ClientUnaryCall;
  
  Get(argument: _svc_v1_GetRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  Get(argument: _svc_v1_GetRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  Get(argument: _svc_v1_GetRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  Get(argument: _svc_v1_GetRequest, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  get(argument: _svc_v1_GetRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  get(argument: _svc_v1_GetRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  get(argument: _svc_v1_GetRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  get(argument: _svc_v1_GetRequest, callback: grpc.requestCallback<_svc_v1_Record__Output>): grpc.ClientUnaryCall;
  
  History(argument: _svc_v1_HistoryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  History(argument: _svc_v1_HistoryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  History(argument: _svc_v1_HistoryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  History(argument: _svc_v1_HistoryRequest, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  history(argument: _svc_v1_HistoryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  history(argument: _svc_v1_HistoryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  history(argument: _svc_v1_HistoryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  history(argument: _svc_v1_HistoryRequest, callback: grpc.requestCallback<_svc_v1_HistoryResult__Output>): grpc.ClientUnaryCall;
  
  Put(argument: _svc_v1_PutRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  Put(argument: _svc_v1_PutRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  Put(argument: _svc_v1_PutRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  Put(argument: _svc_v1_PutRequest, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  put(argument: _svc_v1_PutRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  put(argument: _svc_v1_PutRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  put(argument: _svc_v1_PutRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  put(argument: _svc_v1_PutRequest, callback: grpc.requestCallback<_svc_v1_WriteResult__Output>): grpc.ClientUnaryCall;
  
  Query(argument: _svc_v1_QueryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  Query(argument: _svc_v1_QueryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  Query(argument: _svc_v1_QueryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  Query(argument: _svc_v1_QueryRequest, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  query(argument: _svc_v1_QueryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  query(argument: _svc_v1_QueryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  query(argument: _svc_v1_QueryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  query(argument: _svc_v1_QueryRequest, callback: grpc.requestCallback<_svc_v1_QueryResult__Output>): grpc.ClientUnaryCall;
  
  Transact(argument: _svc_v1_TransactRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  Transact(argument: _svc_v1_TransactRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  Transact(argument: _svc_v1_TransactRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  Transact(argument: _svc_v1_TransactRequest, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  transact(argument: _svc_v1_TransactRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  transact(argument: _svc_v1_TransactRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  transact(argument: _svc_v1_TransactRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  transact(argument: _svc_v1_TransactRequest, callback: grpc.requestCallback<_svc_v1_TransactResult__Output>): grpc.ClientUnaryCall;
  
  Watch(argument: _svc_v1_WatchRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_svc_v1_WatchEvent__Output>;
  Watch(argument: _svc_v1_WatchRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_svc_v1_WatchEvent__Output>;
  watch(argument: _svc_v1_WatchRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_svc_v1_WatchEvent__Output>;
  watch(argument: _svc_v1_WatchRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_svc_v1_WatchEvent__Output>;
  
}

export interface SvcServiceHandlers extends grpc.UntypedServiceImplementation {
  Append: grpc.handleUnaryCall<_svc_v1_AppendRequest__Output, _svc_v1_AppendResult>;
  
  CheckpointLoad: grpc.handleUnaryCall<_svc_v1_CheckpointLoadRequest__Output, _svc_v1_CheckpointLoadResult>;
  
  CheckpointSave: grpc.handleUnaryCall<_svc_v1_CheckpointSaveRequest__Output, _svc_v1_CheckpointSaveResult>;
  
  Claim: grpc.handleUnaryCall<_svc_v1_ClaimRequest__Output, _svc_v1_ClaimResult>;
  
  Get: grpc.handleUnaryCall<_svc_v1_GetRequest__Output, _svc_v1_Record>;
  
  History: grpc.handleUnaryCall<_svc_v1_HistoryRequest__Output, _svc_v1_HistoryResult>;
  
  Put: grpc.handleUnaryCall<_svc_v1_PutRequest__Output, _svc_v1_WriteResult>;
  
  Query: grpc.handleUnaryCall<_svc_v1_QueryRequest__Output, _svc_v1_QueryResult>;
  
  Transact: grpc.handleUnaryCall<_svc_v1_TransactRequest__Output, _svc_v1_TransactResult>;
  
  Watch: grpc.handleServerStreamingCall<_svc_v1_WatchRequest__Output, _svc_v1_WatchEvent>;
  
}

export interface SvcServiceDefinition extends grpc.ServiceDefinition {
  Append: MethodDefinition<_svc_v1_AppendRequest, _svc_v1_AppendResult, _svc_v1_AppendRequest__Output, _svc_v1_AppendResult__Output>
  CheckpointLoad: MethodDefinition<_svc_v1_CheckpointLoadRequest, _svc_v1_CheckpointLoadResult, _svc_v1_CheckpointLoadRequest__Output, _svc_v1_CheckpointLoadResult__Output>
  CheckpointSave: MethodDefinition<_svc_v1_CheckpointSaveRequest, _svc_v1_CheckpointSaveResult, _svc_v1_CheckpointSaveRequest__Output, _svc_v1_CheckpointSaveResult__Output>
  Claim: MethodDefinition<_svc_v1_ClaimRequest, _svc_v1_ClaimResult, _svc_v1_ClaimRequest__Output, _svc_v1_ClaimResult__Output>
  Get: MethodDefinition<_svc_v1_GetRequest, _svc_v1_Record, _svc_v1_GetRequest__Output, _svc_v1_Record__Output>
  History: MethodDefinition<_svc_v1_HistoryRequest, _svc_v1_HistoryResult, _svc_v1_HistoryRequest__Output, _svc_v1_HistoryResult__Output>
  Put: MethodDefinition<_svc_v1_PutRequest, _svc_v1_WriteResult, _svc_v1_PutRequest__Output, _svc_v1_WriteResult__Output>
  Query: MethodDefinition<_svc_v1_QueryRequest, _svc_v1_QueryResult, _svc_v1_QueryRequest__Output, _svc_v1_QueryResult__Output>
  Transact: MethodDefinition<_svc_v1_TransactRequest, _svc_v1_TransactResult, _svc_v1_TransactRequest__Output, _svc_v1_TransactResult__Output>
  Watch: MethodDefinition<_svc_v1_WatchRequest, _svc_v1_WatchEvent, _svc_v1_WatchRequest__Output, _svc_v1_WatchEvent__Output>
}
