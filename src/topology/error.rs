//! [`TopologyError`]: everything that can be wrong with what the system reports.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a topology could not be read, or a topology setting was refused.
///
/// Every message names the offending file, text or value and what was expected instead. Paths are
/// empty when the input did not come from a file (for example
/// [`parse_cpulist`](super::parse_cpulist) called directly, or CPU sets from hwloc); the message
/// then leaves the path out.
///
/// # Examples
///
/// ```
/// use numa_locks::topology::{self, TopologyError};
///
/// let err = topology::parse_cpulist("3-1").unwrap_err();
/// assert!(matches!(err, TopologyError::MalformedCpuList { ref text, .. } if text == "3-1"));
/// assert!(err.to_string().contains("\"3-1\""));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologyError {
    /// A file or directory could not be read.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A CPU list (such as `0-3,8-11`) is not in the kernel's list format.
    MalformedCpuList {
        /// The file it came from (empty if none).
        path: PathBuf,
        /// The whole list as read, without surrounding whitespace.
        text: String,
        /// What was expected instead.
        expected: &'static str,
    },
    /// A CPU number is too large to be real (a garbage file must not make us allocate gigabytes).
    CpuOutOfRange {
        /// The file it came from (empty if none).
        path: PathBuf,
        /// The CPU number.
        cpu: usize,
        /// Every CPU number must be below this ([`MAX_CPUS`](super::MAX_CPUS)).
        limit: usize,
    },
    /// One CPU is listed in two NUMA nodes.
    CpuInTwoNodes {
        /// The CPU number.
        cpu: usize,
        /// The OS index of the first node that lists it (the lower one).
        first: usize,
        /// The OS index of the second node that lists it.
        second: usize,
    },
    /// Two nodes have the same OS index.
    DuplicateNode {
        /// The repeated OS index.
        os_index: usize,
    },
    /// No NUMA node with at least one online CPU was found.
    NoNodes {
        /// The directory that was searched (`<root>/devices/system/node`), or `hwloc`.
        path: PathBuf,
    },
    /// [`set_virtual_nodes`](super::set_virtual_nodes) was given a count below 1.
    InvalidVirtualNodeCount {
        /// The refused count.
        value: usize,
    },
    /// [`set_virtual_domains`](super::set_virtual_domains) was given a count below 1 or above
    /// `max`.
    InvalidVirtualDomainCount {
        /// The refused count.
        value: usize,
        /// The largest count accepted ([`MAX_CPUS`](super::MAX_CPUS)).
        max: usize,
    },
    /// hwloc failed, or reported something unusable (feature `hwloc`).
    Hwloc {
        /// What failed, with hwloc's own message.
        what: String,
    },
}

/// `" in <path>"`, or nothing for an empty path.
struct InPath<'a>(&'a Path);

impl fmt::Display for InPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.as_os_str().is_empty() {
            Ok(())
        } else {
            write!(f, " in {}", self.0.display())
        }
    }
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, message } => write!(f, "cannot read {}: {message}", path.display()),
            Self::MalformedCpuList {
                path,
                text,
                expected,
            } => write!(
                f,
                "malformed CPU list {text:?}{}: expected {expected}",
                InPath(path)
            ),
            Self::CpuOutOfRange { path, cpu, limit } => write!(
                f,
                "CPU number {cpu}{} is out of range: expected a CPU number below {limit}",
                InPath(path)
            ),
            Self::CpuInTwoNodes { cpu, first, second } => write!(
                f,
                "CPU {cpu} is listed in NUMA node {first} and in NUMA node {second}: \
                 expected every CPU in exactly one node"
            ),
            Self::DuplicateNode { os_index } => write!(
                f,
                "NUMA node {os_index} is listed twice: expected distinct node numbers"
            ),
            Self::NoNodes { path } => write!(
                f,
                "no NUMA node with an online CPU under {}: expected node<N> entries with a non-empty CPU list",
                path.display()
            ),
            Self::InvalidVirtualNodeCount { value } => write!(
                f,
                "invalid virtual node count {value}: the count must be at least 1"
            ),
            Self::InvalidVirtualDomainCount { value, max } => write!(
                f,
                "invalid virtual domain count {value}: expected from 1 to {max} domains per node"
            ),
            Self::Hwloc { what } => write!(f, "hwloc: {what}"),
        }
    }
}

impl std::error::Error for TopologyError {}
