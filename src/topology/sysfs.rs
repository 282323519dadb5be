//! Reading the topology from Linux sysfs, and the kernel's CPU list format.
//!
//! Layout read (relative to a root that stands for `/sys`):
//!
//! ```text
//! devices/system/node/node<N>/cpulist   one per node; N may be sparse (node0, node2)
//! devices/system/cpu/online             optional; CPUs not listed here are dropped
//! devices/system/cpu/cpu<C>/cache/index<I>/level             optional: the cache's level (1, 2, 3)
//! devices/system/cpu/cpu<C>/cache/index<I>/type              optional: Data, Instruction, Unified
//! devices/system/cpu/cpu<C>/cache/index<I>/shared_cpu_list   the CPUs that share that cache
//! ```
//!
//! Other entries of `devices/system/node` (`online`, `possible`, `has_cpu`, `power`, ...) are
//! ignored.
//!
//! The cache domains come from the level-3 cache of every online CPU: `index3` on every Linux
//! machine seen so far, but the index is only the kernel's enumeration order, so the `level` file
//! decides (an index whose `level` is 3 and whose `type` is not `Instruction`). Whatever is odd
//! there — no cache directory (containers, some VMs and Arm machines without cache information in
//! the firmware), no level-3 cache, a malformed list, sets that do not partition a node — leaves
//! one domain per node; `from_sysfs` never fails because of cache data.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

use super::{MAX_CPUS, NodeInfo, Topology, TopologyError};

/// Largest file we read. Kernel CPU lists are a page or two; anything bigger is not a CPU list.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// What the parser says about a list that is not in the kernel's format.
const EXPECTED_LIST: &str =
    "comma-separated CPU numbers or ranges low-high, such as 0-3,8-11 (or nothing)";

/// Parses a kernel CPU list such as `0-3,8-11` (the format of sysfs `cpulist` and `online` files).
///
/// Surrounding whitespace (the trailing newline of a sysfs file) is ignored, and an empty list is
/// valid (a memory-only node). The result is sorted and has no duplicates. Every CPU number must be
/// below [`MAX_CPUS`], so a garbage list cannot make the caller allocate gigabytes.
///
/// # Errors
///
/// [`TopologyError::MalformedCpuList`] (with an empty path) for anything that is not a
/// comma-separated list of decimal numbers and `low-high` ranges with `low <= high`: `3-1`, `a`,
/// `1,,2`, `-1`, `1-`, `+1`, a number that overflows `usize`; [`TopologyError::CpuOutOfRange`] for
/// a number `>= MAX_CPUS`.
///
/// # Examples
///
/// ```
/// use numa_locks::topology::parse_cpulist;
///
/// assert_eq!(parse_cpulist("0-2,8,10-11\n").unwrap(), vec![0, 1, 2, 8, 10, 11]);
/// assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
/// assert!(parse_cpulist("1,,2").is_err());
/// ```
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, TopologyError> {
    parse_cpulist_in(text, Path::new(""))
}

/// [`parse_cpulist`], with errors naming the file the text came from.
pub(super) fn parse_cpulist_in(text: &str, path: &Path) -> Result<Vec<usize>, TopologyError> {
    let list = text.trim();
    let malformed = |expected| TopologyError::MalformedCpuList {
        path: path.to_path_buf(),
        text: list.to_owned(),
        expected,
    };
    let cpu_number = |digits: &str| -> Result<usize, TopologyError> {
        // `usize::from_str` also takes a leading `+`; the kernel never writes one.
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed(EXPECTED_LIST));
        }
        let cpu: usize = digits
            .parse()
            .map_err(|_| malformed("CPU numbers that fit in a usize"))?;
        if cpu >= MAX_CPUS {
            return Err(TopologyError::CpuOutOfRange {
                path: path.to_path_buf(),
                cpu,
                limit: MAX_CPUS,
            });
        }
        Ok(cpu)
    };

    if list.is_empty() {
        return Ok(Vec::new());
    }
    // Ranges first, expanded only after merging overlaps: a list repeating `0-1048575` a thousand
    // times then costs one range, not a billion entries.
    let mut ranges = Vec::new();
    for item in list.split(',') {
        let (low, high) = match item.split_once('-') {
            Some((low, high)) => (cpu_number(low)?, cpu_number(high)?),
            None => {
                let cpu = cpu_number(item)?;
                (cpu, cpu)
            }
        };
        if low > high {
            return Err(malformed("ranges written low-high, such as 0-3"));
        }
        ranges.push((low, high));
    }
    ranges.sort_unstable();
    let mut cpus: Vec<usize> = Vec::new();
    for (low, high) in ranges {
        // Skip what an earlier (overlapping) range already produced.
        let start = match cpus.last() {
            Some(&last) if last >= low => last + 1,
            _ => low,
        };
        // Both ends are below MAX_CPUS, so `high + 1` cannot overflow and the total stays below
        // MAX_CPUS.
        cpus.extend(start..high + 1);
    }
    Ok(cpus)
}

/// Reads a small text file; `Ok(None)` if it does not exist.
fn read_small_file(path: &Path) -> Result<Option<String>, TopologyError> {
    let io_error = |err: io::Error| TopologyError::Io {
        path: path.to_path_buf(),
        message: err.to_string(),
    };
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(io_error(err)),
    };
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io_error)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(TopologyError::Io {
            path: path.to_path_buf(),
            message: format!("file is larger than {MAX_FILE_BYTES} bytes, expected a CPU list"),
        });
    }
    Ok(Some(text))
}

/// The number in a directory name `<prefix><N>` written as the kernel writes it (no sign, no
/// leading zero); `None` for every other name.
fn numbered_entry(name: &str, prefix: &str) -> Option<usize> {
    let digits = name.strip_prefix(prefix)?;
    let canonical = digits == "0" || (!digits.starts_with('0') && !digits.is_empty());
    if canonical && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()
    } else {
        None
    }
}

/// The CPUs that share `cpu`'s level-3 cache, from `root/devices/system/cpu/cpu<cpu>/cache`; `None`
/// if there is no such cache or anything about it cannot be read.
fn l3_shared_cpus(root: &Path, cpu: usize) -> Option<Vec<usize>> {
    let cache_dir = root
        .join("devices")
        .join("system")
        .join("cpu")
        .join(format!("cpu{cpu}"))
        .join("cache");
    let is_l3 = |index_dir: &Path| -> bool {
        let level = read_small_file(&index_dir.join("level")).ok().flatten();
        let kind = read_small_file(&index_dir.join("type")).ok().flatten();
        level.as_deref().map(str::trim) == Some("3")
            && kind.as_deref().map(str::trim) != Some("Instruction")
    };
    let shared = |index_dir: &Path| -> Option<Vec<usize>> {
        let path = index_dir.join("shared_cpu_list");
        let text = read_small_file(&path).ok()??;
        parse_cpulist_in(&text, &path).ok()
    };
    // `index3` is the L3 everywhere we know of: one directory to read instead of four.
    let usual = cache_dir.join("index3");
    if is_l3(&usual) {
        return shared(&usual);
    }
    let mut indices: Vec<usize> = fs::read_dir(&cache_dir)
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            numbered_entry(entry.file_name().to_str()?, "index")
        })
        .collect();
    indices.sort_unstable();
    let index = indices
        .into_iter()
        .map(|index| cache_dir.join(format!("index{index}")))
        .find(|dir| is_l3(dir))?;
    shared(&index)
}

/// The node number in a `node<N>` directory name, written as the kernel writes it (no sign, no
/// leading zero); `None` for every other entry.
fn node_os_index(name: &str) -> Option<usize> {
    numbered_entry(name, "node")
}

impl Topology {
    /// Reads the topology from a sysfs tree; `root` stands for `/sys`.
    ///
    /// Reads `root/devices/system/node/node<N>/cpulist` for every node (node numbers may be
    /// sparse), if present `root/devices/system/cpu/online`, and each online CPU's level-3 cache
    /// (`root/devices/system/cpu/cpu<C>/cache/index<I>/shared_cpu_list`, see the module docs).
    /// Decisions:
    ///
    /// - **Offline CPUs** (not in `cpu/online`) are dropped: [`node_of_cpu`](Topology::node_of_cpu)
    ///   returns `None` for them, and [`current_node`](super::current_node) would answer 0 if a
    ///   thread ever ran there (a CPU brought online later is not re-read).
    /// - **Memory-only nodes** (empty `cpulist`, or only offline CPUs) are skipped: they are not
    ///   counted by [`node_count`](Topology::node_count) and get no dense index, so no CPU can map
    ///   to them.
    /// - **Cache domains**: the CPUs of one node that share an L3 form one domain; an L3 that spans
    ///   two nodes is split per node. Missing or inconsistent cache data (an online CPU without a
    ///   level-3 cache, a malformed or unreadable list, sets that overlap) is no error: every node
    ///   is then one domain.
    ///
    /// # Errors
    ///
    /// - [`TopologyError::NoNodes`] if `root/devices/system/node` does not exist or holds no node
    ///   with an online CPU (containers without sysfs, non-Linux systems);
    /// - [`TopologyError::Io`] if a directory or a node's `cpulist` cannot be read;
    /// - [`TopologyError::MalformedCpuList`] / [`TopologyError::CpuOutOfRange`] for a bad CPU list;
    /// - [`TopologyError::CpuInTwoNodes`] if two nodes list the same CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// match Topology::from_sysfs("/sys") {
    ///     Ok(topology) => assert!(topology.node_count() >= 1),
    ///     Err(err) => println!("no usable sysfs here: {err}"),
    /// }
    /// ```
    pub fn from_sysfs(root: impl AsRef<Path>) -> Result<Topology, TopologyError> {
        let root = root.as_ref();
        let node_dir = root.join("devices").join("system").join("node");
        let dir_error = |err: io::Error| TopologyError::Io {
            path: node_dir.clone(),
            message: err.to_string(),
        };
        let entries = match fs::read_dir(&node_dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(TopologyError::NoNodes { path: node_dir });
            }
            Err(err) => return Err(dir_error(err)),
        };

        let mut nodes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(dir_error)?;
            let Some(os_index) = entry.file_name().to_str().and_then(node_os_index) else {
                continue;
            };
            let path = entry.path().join("cpulist");
            let text = read_small_file(&path)?.ok_or_else(|| TopologyError::Io {
                path: path.clone(),
                message: "file not found, expected the node's CPU list".to_owned(),
            })?;
            let cpus = parse_cpulist_in(&text, &path)?;
            nodes.push(NodeInfo { os_index, cpus });
        }

        let online_path = root
            .join("devices")
            .join("system")
            .join("cpu")
            .join("online");
        if let Some(text) = read_small_file(&online_path)? {
            let online = parse_cpulist_in(&text, &online_path)?;
            for node in &mut nodes {
                node.cpus.retain(|cpu| online.binary_search(cpu).is_ok());
            }
        }

        let topology = Topology::from_nodes(nodes)?;
        if topology.nodes().is_empty() {
            return Err(TopologyError::NoNodes { path: node_dir });
        }
        Ok(topology.with_cache_domains(|cpu| l3_shared_cpus(root, cpu)))
    }
}
