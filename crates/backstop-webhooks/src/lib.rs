//! backstop-webhooks
