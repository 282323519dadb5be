//! PLACEHOLDER: NUMA topology (being written).
use std::cell::Cell;
std::thread_local!(static OVERRIDE: Cell<Option<usize>> = const { Cell::new(None) });
/// Number of NUMA nodes.
pub fn node_count() -> usize { 1 }
/// Calling thread's node.
pub fn current_node() -> usize { OVERRIDE.with(|o| o.get()).unwrap_or(0) }
/// Overrides the calling thread's node.
pub fn set_thread_node(node: Option<usize>) { OVERRIDE.with(|o| o.set(node)) }
