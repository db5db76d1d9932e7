//! backstop-store-sqlite
