//! Command-line parsing for `locktorture`, by hand (std only).
//!
//! Every bad input becomes a [`CliError`] whose message names the offending value and the values that
//! are allowed; `main` prints it to stderr and exits with code 2. Nothing here panics on user input.

use std::fmt;

/// The usage text printed by `--help`.
pub const USAGE: &str = "\
locktorture: run McsMutex, CnaMutex, HqMutex, parking_lot::Mutex and std::sync::Mutex side by side
and report throughput, fairness and cross-node handoffs.

USAGE:
    cargo run --release --example locktorture -- [OPTIONS]

OPTIONS (a value may also be given as --option=value):
    --locks LIST             comma list of locks to run [default: mcs,cna,hq,parking_lot,std]
                             allowed: mcs, cna, hq, parking_lot, std
    --threads LIST           comma list of thread counts, each 1..=1024 [default: 1,2,4,8]
    --duration-ms MS         length of one run in milliseconds, 1..=3600000 [default: 500]
    --runs N                 runs per (lock, workload, threads), 1..=1000 [default: 3]
    --workload LIST          comma list of critical sections [default: counter]
                             allowed: empty, counter, kv, freelist
    --virtual-nodes N        thread i pretends to run on node i % N, 1..=1024
                             (topology::set_thread_node); without it each thread's node is
                             topology::current_node(), read just before every lock()
    --remote-penalty-ns P    NUMA emulation: a critical section entered on a different node than
                             the previous holder's first busy-spins P ns, standing in for the
                             remote cache misses on the protected data, 0..=10000000 [default: 0]
    --stealing on|off        whether this crate's locks let an arriving thread take a free lock
                             ahead of queued waiters (numa_locks::tunables::set_stealing); off
                             makes every contended acquisition a queue handoff, which is how the
                             NUMA-aware policies show on a machine with few cores. parking_lot
                             and std are not affected [default: on]
    --format FORMAT          table or csv [default: table]
    -h, --help               print this text

WORKLOADS (what one critical section does):
    empty       nothing (the classic locktorture loop)
    counter     increments 4 shared u64 counters, each on its own cache line
    kv          one operation on a HashMap<u64, u64> pre-filled with 65536 keys; skewed keys
                (key = r1 % (r2 % 65536 + 1)); 90% get, 10% put
    freelist    pops a 64-byte block from the head of a shared index-linked free list and pushes
                back the block the thread popped last time (a page allocator's zone lock)
    Between acquisitions every thread does a few ns of local work (xorshift PRNG rounds), so the
    lock stays hot.

COLUMNS:
    ops_per_sec             critical sections per second, all threads; mean over runs
    stddev                  sample standard deviation of ops_per_sec over runs (0 for one run)
    speedup_vs_parking_lot  ops_per_sec / parking_lot's ops_per_sec for the same workload and
                            thread count, measured in this invocation ('-' in the table and empty
                            in CSV when parking_lot is not among --locks)
    fairness_factor         share of all operations done by the busiest ceil(n/2) threads, mean
                            over runs; 0.5 is perfectly fair for an even thread count, 1.0 means
                            the busiest half did everything (always 1.0 for one thread)
    max_min                 busiest thread's ops / idlest thread's ops, mean over runs
                            ('inf' when a thread never got the lock)
    remote_handoff_pct      percentage of handoffs that crossed nodes. A handoff is an acquisition
                            whose previous holder was a different thread (re-acquisitions by the
                            same thread are not handoffs); it is remote when the previous holder's
                            node differs from the acquiring thread's node. The harness measures it
                            inside the critical section from a last_thread/last_node pair stored
                            with the protected data, identically for every lock; the remote
                            penalty is applied at the same place. Summed over runs; 0 when there
                            were no handoffs (one thread).

Progress goes to stderr, results to stdout. Bad input exits with code 2.
";

/// The lock implementations the harness knows, in their default order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// `numa_locks::McsMutex`.
    Mcs,
    /// `numa_locks::CnaMutex`.
    Cna,
    /// `numa_locks::HqMutex`.
    Hq,
    /// `parking_lot::Mutex`, the baseline for the speedup column.
    ParkingLot,
    /// `std::sync::Mutex`.
    Std,
}

impl LockKind {
    /// Every lock, in the default order.
    pub const ALL: [LockKind; 5] = [Self::Mcs, Self::Cna, Self::Hq, Self::ParkingLot, Self::Std];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mcs => "mcs",
            Self::Cna => "cna",
            Self::Hq => "hq",
            Self::ParkingLot => "parking_lot",
            Self::Std => "std",
        }
    }
}

/// What a critical section does (see [`USAGE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Nothing.
    Empty,
    /// Four shared counters on separate cache lines.
    Counter,
    /// A skewed get/put on a shared hash map.
    Kv,
    /// Pop and push at the head of a shared free list.
    FreeList,
}

impl WorkloadKind {
    /// Every workload, in the order the help lists them.
    pub const ALL: [WorkloadKind; 4] = [Self::Empty, Self::Counter, Self::Kv, Self::FreeList];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::Counter => "counter",
            Self::Kv => "kv",
            Self::FreeList => "freelist",
        }
    }
}

/// How the results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An aligned human-readable table.
    Table,
    /// Comma-separated values with a fixed header.
    Csv,
}

/// A fully validated command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// Locks to run, in order, without duplicates.
    pub locks: Vec<LockKind>,
    /// Thread counts, in order, without duplicates.
    pub threads: Vec<usize>,
    /// Length of one run in milliseconds.
    pub duration_ms: u64,
    /// Runs per (lock, workload, threads).
    pub runs: usize,
    /// Workloads, in order, without duplicates.
    pub workloads: Vec<WorkloadKind>,
    /// `Some(n)`: thread i is put on virtual node `i % n`.
    pub virtual_nodes: Option<usize>,
    /// Busy-spin this long on a remote handoff.
    pub remote_penalty_ns: u64,
    /// Whether this crate's locks may steal (`numa_locks::tunables::set_stealing`).
    pub stealing: bool,
    /// Output format.
    pub format: Format,
}

impl Default for Options {
    /// The defaults keep a full run on a 2-core machine at about 5 locks x 4 thread counts x 3 runs
    /// x 0.5 s = 30 s.
    fn default() -> Self {
        Self {
            locks: LockKind::ALL.to_vec(),
            threads: vec![1, 2, 4, 8],
            duration_ms: 500,
            runs: 3,
            workloads: vec![WorkloadKind::Counter],
            virtual_nodes: None,
            remote_penalty_ns: 0,
            stealing: true,
            format: Format::Table,
        }
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Print [`USAGE`] and exit successfully.
    Help,
    /// Run the torture test.
    Run(Options),
}

/// A bad command line; the message is complete and ends without a newline.
#[derive(Debug)]
pub struct CliError(String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.0)
    }
}

const MAX_THREADS: u64 = 1024;
const MAX_DURATION_MS: u64 = 3_600_000;
const MAX_RUNS: u64 = 1000;
const MAX_VIRTUAL_NODES: u64 = 1024;
const MAX_PENALTY_NS: u64 = 10_000_000;

const OPTION_NAMES: &str = "--locks, --threads, --duration-ms, --runs, --workload, --virtual-nodes, \
                            --remote-penalty-ns, --stealing, --format, --help";

/// Parses the arguments after the program name.
pub fn parse<I>(args: I) -> Result<Command, CliError>
where
    I: IntoIterator<Item = String>,
{
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help);
        }
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_string(), Some(value.to_string()))
            }
            _ => (arg.clone(), None),
        };
        if !is_known_option(&flag) {
            return Err(CliError(format!(
                "unknown option '{arg}'; allowed: {OPTION_NAMES}"
            )));
        }
        let value = match inline_value.or_else(|| args.next()) {
            Some(value) => value,
            None => {
                return Err(CliError(format!(
                    "{flag} needs a value ({})",
                    expected_value(&flag)
                )));
            }
        };
        match flag.as_str() {
            "--locks" => {
                options.locks = parse_names(&flag, &value, &LockKind::ALL, |l| l.name(), "lock")?
            }
            "--workload" => {
                options.workloads =
                    parse_names(&flag, &value, &WorkloadKind::ALL, |w| w.name(), "workload")?
            }
            "--threads" => options.threads = parse_number_list(&flag, &value, 1, MAX_THREADS)?,
            "--duration-ms" => {
                options.duration_ms = parse_number(&flag, &value, 1, MAX_DURATION_MS)?
            }
            "--runs" => options.runs = to_usize(parse_number(&flag, &value, 1, MAX_RUNS)?),
            "--virtual-nodes" => {
                options.virtual_nodes =
                    Some(to_usize(parse_number(&flag, &value, 1, MAX_VIRTUAL_NODES)?))
            }
            "--remote-penalty-ns" => {
                options.remote_penalty_ns = parse_number(&flag, &value, 0, MAX_PENALTY_NS)?
            }
            "--stealing" => {
                options.stealing = match value.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => {
                        return Err(CliError(format!(
                            "unknown value '{value}' in --stealing; allowed: on, off"
                        )));
                    }
                }
            }
            "--format" => {
                options.format = match value.as_str() {
                    "table" => Format::Table,
                    "csv" => Format::Csv,
                    _ => {
                        return Err(CliError(format!(
                            "unknown format '{value}' in --format; allowed: table, csv"
                        )));
                    }
                }
            }
            _ => {
                return Err(CliError(format!(
                    "unknown option '{arg}'; allowed: {OPTION_NAMES}"
                )));
            }
        }
    }
    Ok(Command::Run(options))
}

fn is_known_option(flag: &str) -> bool {
    matches!(
        flag,
        "--locks"
            | "--threads"
            | "--duration-ms"
            | "--runs"
            | "--workload"
            | "--virtual-nodes"
            | "--remote-penalty-ns"
            | "--stealing"
            | "--format"
    )
}

/// What a valid value of `flag` looks like, for error messages.
fn expected_value(flag: &str) -> String {
    match flag {
        "--locks" => "a comma list; allowed: mcs, cna, hq, parking_lot, std".to_string(),
        "--workload" => "a comma list; allowed: empty, counter, kv, freelist".to_string(),
        "--threads" => {
            format!("a comma list of integers from 1 to {MAX_THREADS}, e.g. 1,2,4,8")
        }
        "--duration-ms" => format!("an integer from 1 to {MAX_DURATION_MS}"),
        "--runs" => format!("an integer from 1 to {MAX_RUNS}"),
        "--virtual-nodes" => format!("an integer from 1 to {MAX_VIRTUAL_NODES}"),
        "--remote-penalty-ns" => format!("an integer from 0 to {MAX_PENALTY_NS}"),
        "--stealing" => "allowed: on, off".to_string(),
        "--format" => "allowed: table, csv".to_string(),
        _ => String::new(),
    }
}

/// Every limit above fits in `usize` on the 32- and 64-bit targets the crate supports.
fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Splits a comma list, rejecting empty items (`1,,2`, a trailing comma, an empty value).
fn split_list<'a>(flag: &str, value: &'a str) -> Result<Vec<&'a str>, CliError> {
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    if items.iter().any(|item| item.is_empty()) {
        return Err(CliError(format!(
            "empty item in {flag} '{value}'; expected {}",
            expected_value(flag)
        )));
    }
    Ok(items)
}

fn parse_names<T: Copy + PartialEq>(
    flag: &str,
    value: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
    what: &str,
) -> Result<Vec<T>, CliError> {
    let mut chosen = Vec::new();
    for item in split_list(flag, value)? {
        let Some(&kind) = all.iter().find(|&&k| name(k) == item) else {
            let allowed: Vec<&str> = all.iter().map(|&k| name(k)).collect();
            return Err(CliError(format!(
                "unknown {what} '{item}' in {flag}; allowed: {}",
                allowed.join(", ")
            )));
        };
        if !chosen.contains(&kind) {
            chosen.push(kind);
        }
    }
    Ok(chosen)
}

fn parse_number(flag: &str, value: &str, min: u64, max: u64) -> Result<u64, CliError> {
    match value.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(CliError(format!(
            "invalid value '{value}' for {flag}; expected {}",
            expected_value(flag)
        ))),
    }
}

fn parse_number_list(flag: &str, value: &str, min: u64, max: u64) -> Result<Vec<usize>, CliError> {
    let mut chosen = Vec::new();
    for item in split_list(flag, value)? {
        let n = match item.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => to_usize(n),
            _ => {
                return Err(CliError(format!(
                    "invalid value '{item}' in {flag} '{value}'; expected {}",
                    expected_value(flag)
                )));
            }
        };
        if !chosen.contains(&n) {
            chosen.push(n);
        }
    }
    Ok(chosen)
}
