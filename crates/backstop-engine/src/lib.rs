//! backstop-engine
