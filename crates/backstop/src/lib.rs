//! backstop
