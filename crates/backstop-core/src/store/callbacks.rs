//! Inbound callbacks: each request recorded, a verified one with its task. The parameter
//! and result types live in [`crate::callback`].

use super::{BoxFuture, StoreError};
use crate::callback::{
    CallbackRecord, ListCallbacksParams, RecordCallbackParams, RecordedCallback,
};

/// The record of inbound callback requests.
pub trait Callbacks: Send + Sync {
    /// Records an inbound callback request. For a verified one, the record and its task are
    /// written in one transaction, durable when this returns: the task is created unless its
    /// `(kind, key)` exists already, which makes the request a duplicate (acknowledged, nothing
    /// new). A rejected one is only recorded.
    fn record_callback(
        &self,
        p: RecordCallbackParams,
    ) -> BoxFuture<'_, Result<RecordedCallback, StoreError>>;

    /// One source's recorded requests, newest first.
    fn list_callbacks(
        &self,
        p: ListCallbacksParams,
    ) -> BoxFuture<'_, Result<Vec<CallbackRecord>, StoreError>>;
}
