//! Running one attempt on its target: an in-process handler, an HTTP push or a broker
//! publish.

use crate::checkpoint::AttemptControl;
use crate::handler::{Handler, TaskContext};
use backstop_core::classify::{TransportFailure, classify_transport};
use backstop_core::duration::format_duration;
use backstop_core::store::ClaimedTask;
use backstop_core::{AttemptReport, Outcome};
use backstop_webhooks::{Delivery, DeliveryClient, StandardWebhooks};
use futures_util::FutureExt;
use jiff::Timestamp;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

/// Where a kind's attempts go.
pub(crate) enum Executor {
    InProcess(Handler),
    Http(Box<HttpTarget>),
    /// A broker target: one publisher per kind, shared by its attempts, so their publishes
    /// are pipelined on one connection and each answered by its own confirm.
    Broker(Box<dyn backstop_brokers::Publisher>),
}

/// An HTTP push target: where, how to sign, and the shared client.
pub(crate) struct HttpTarget {
    pub(crate) url: backstop_webhooks::Url,
    pub(crate) signer: Option<StandardWebhooks>,
    pub(crate) client: DeliveryClient,
}

impl Executor {
    /// Makes one attempt, bounded by `timeout`. Never panics: a panicking handler is a
    /// transient failure. An in-process handler gets `control`: its lease, for checkpoints.
    pub(crate) async fn attempt(
        &self,
        task: ClaimedTask,
        control: AttemptControl,
        timeout: Duration,
        now: Timestamp,
    ) -> AttemptReport {
        match self {
            Executor::InProcess(handler) => {
                // The claimed task is moved in: no copy of the payload per attempt.
                let ctx = TaskContext::running(task, control);
                let run = AssertUnwindSafe(handler(ctx)).catch_unwind();
                match tokio::time::timeout(timeout, run).await {
                    Ok(Ok(outcome)) => outcome.into(),
                    Ok(Err(panic)) => {
                        let msg = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "unknown panic".into());
                        Outcome::retry(format!("handler panicked: {msg}")).into()
                    }
                    Err(_) => classify_transport(
                        TransportFailure::Timeout,
                        &format!("handler ran longer than {}", format_duration(timeout)),
                    )
                    .into(),
                }
            }
            Executor::Http(http) => {
                let HttpTarget {
                    url,
                    signer,
                    client,
                } = &**http;
                let id = task.id.to_string();
                let d = Delivery {
                    url,
                    signer: signer.as_ref(),
                    task_id: &id,
                    kind: &task.kind,
                    key: &task.key,
                    attempt: task.attempt,
                    traceparent: task.traceparent.as_deref(),
                    body: &task.payload,
                    timeout,
                };
                client.deliver(&d, now).await
            }
            Executor::Broker(publisher) => {
                let id = task.id.to_string();
                let m = backstop_brokers::Outgoing {
                    id: &id,
                    kind: &task.kind,
                    key: &task.key,
                    attempt: task.attempt,
                    traceparent: task.traceparent.as_deref(),
                    body: &task.payload,
                    since_enqueued: now
                        .duration_since(task.created_at)
                        .try_into()
                        .unwrap_or_default(),
                };
                match publisher.publish(m, timeout).await {
                    backstop_brokers::Published::Confirmed => Outcome::Success.into(),
                    backstop_brokers::Published::ConfirmedWithNote(note) => AttemptReport {
                        note: Some(note),
                        ..Outcome::Success.into()
                    },
                    backstop_brokers::Published::Transient(e) => Outcome::retry(e).into(),
                    backstop_brokers::Published::Permanent(e) => Outcome::fail(e).into(),
                }
            }
        }
    }
}
