/**
 * @kslate/langgraph: a LangGraph.js checkpointer (KslateSaver) and store (KslateStore) on
 * kslate records through @kslate/client. See README.md.
 */
export { KslateSaver, ThreadConflictError, DEFAULT_CHECKPOINT_CLASS, type KslateSaverOptions } from './saver.js';
export { KslateStore, DEFAULT_STORE_CLASS, type KslateStoreOptions } from './store.js';
export type { Connection } from './codec.js';
