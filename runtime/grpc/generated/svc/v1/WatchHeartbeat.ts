// Original file: proto/svc/v1/svc.proto


export interface WatchHeartbeat {
}

export interface WatchHeartbeat__Output {
}
