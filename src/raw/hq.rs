//! PLACEHOLDER
pub use super::mcs::RawMcs as RawHq;
