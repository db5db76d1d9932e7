//! The body each sink format expects: generic JSON, or the text message of Slack, DingTalk,
//! WeCom (WeChat Work) and Feishu incoming webhooks.

use super::window::Window;
use serde_json::json;
use std::str::FromStr;

/// How a sink wants its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertFormat {
    /// `{"source", "window_start", "window_end", "alerts": [groups], "text"}`.
    Generic,
    /// `{"text": …}`.
    Slack,
    /// `{"msgtype": "text", "text": {"content": …}}`.
    DingTalk,
    /// `{"msgtype": "text", "text": {"content": …}}`.
    WeCom,
    /// `{"msg_type": "text", "content": {"text": …}}`.
    Feishu,
}

/// An unknown format name.
#[derive(Debug, thiserror::Error)]
#[error("unknown alert format {0:?} (expected generic, slack, dingtalk, wecom or feishu)")]
pub struct UnknownFormat(pub String);

impl FromStr for AlertFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "generic" | "json" => AlertFormat::Generic,
            "slack" => AlertFormat::Slack,
            "dingtalk" => AlertFormat::DingTalk,
            "wecom" => AlertFormat::WeCom,
            "feishu" | "lark" => AlertFormat::Feishu,
            other => return Err(UnknownFormat(other.into())),
        })
    }
}

/// The request body for one window's message.
pub fn body(
    format: AlertFormat,
    w: &Window,
    source: &str,
    start: &str,
    end: &str,
) -> serde_json::Value {
    let text = w.text(source);
    match format {
        AlertFormat::Generic => json!({
            "source": source,
            "window_start": start,
            "window_end": end,
            "alerts": w.groups,
            "text": text,
        }),
        AlertFormat::Slack => json!({ "text": text }),
        AlertFormat::DingTalk | AlertFormat::WeCom => {
            json!({ "msgtype": "text", "text": { "content": text } })
        }
        AlertFormat::Feishu => json!({ "msg_type": "text", "content": { "text": text } }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::event::{AlertEvent, AlertName};
    use crate::alerts::window::Collector;

    #[test]
    fn each_format_carries_the_text_where_its_receiver_reads_it() {
        let mut c = Collector::default();
        c.add(AlertEvent::new(AlertName::Backlog, "12000 tasks pending"));
        let w = c.take();
        let text = w.text("n1");
        let b = |f| body(f, &w, "n1", "a", "b");
        assert_eq!(b(AlertFormat::Slack)["text"], text);
        assert_eq!(b(AlertFormat::DingTalk)["text"]["content"], text);
        assert_eq!(b(AlertFormat::WeCom)["msgtype"], "text");
        assert_eq!(b(AlertFormat::Feishu)["content"]["text"], text);
        let g = b(AlertFormat::Generic);
        assert_eq!(g["alerts"][0]["event"], "backlog");
        assert_eq!(g["alerts"][0]["count"], 1);
        assert!("teams".parse::<AlertFormat>().is_err());
    }
}
