//! The cases, one file per concern of the ledger. Each takes a fresh store and asserts one
//! behaviour.

pub use crate::callbacks::*;
pub use crate::checkpoints::*;
pub use crate::claim::*;
pub use crate::complete::*;
pub use crate::enqueue::*;
pub use crate::entities::*;
pub use crate::groups::*;
pub use crate::holds::*;
pub use crate::hosts::*;
pub use crate::intake::*;
pub use crate::leadership::*;
pub use crate::leases::*;
pub use crate::limits::*;
pub use crate::manual::*;
pub use crate::pauses::*;
pub use crate::reads::*;
pub use crate::redrive::*;
pub use crate::retention::*;
pub use crate::schedules::*;
pub use crate::schema::*;
pub use crate::watch::*;
