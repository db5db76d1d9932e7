//! backstop-store-tests
