//! What the two tools' reports share: the fairness and handoff figures computed from per-thread
//! counts, the speedup against a baseline lock, and the table and CSV printers. Each tool keeps
//! its own columns and rows; a row reaches these printers as its formatted cells.

/// (fairness factor, max/min) of per-thread op counts; `None` when no thread did anything.
///
/// The fairness factor is the share of all ops done by the busiest `ceil(n/2)` threads: 0.5 when
/// every thread did the same amount (for even n), 1.0 when the busiest half did everything.
/// max/min is the busiest over the idlest thread's ops (infinite when a thread did none).
pub fn fairness(ops: &[u64]) -> Option<(f64, f64)> {
    let mut sorted = ops.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let total: u64 = sorted.iter().sum();
    if total == 0 {
        return None;
    }
    let busiest_half: u64 = sorted.iter().take(sorted.len().div_ceil(2)).sum();
    let (max, min) = (sorted[0], sorted[sorted.len() - 1]);
    let max_min = if min == 0 {
        f64::INFINITY
    } else {
        max as f64 / min as f64
    };
    Some((busiest_half as f64 / total as f64, max_min))
}

/// `remote` of `handoffs` handoffs crossed nodes: that share in percent (0 without handoffs).
pub fn remote_handoff_pct(handoffs: u64, remote: u64) -> f64 {
    if handoffs == 0 {
        0.0
    } else {
        100.0 * remote as f64 / handoffs as f64
    }
}

/// Every row's speedup over the baseline lock's row of the same point. A row is given as
/// (whether it is the baseline lock's, its point, its rate); the speedup is its rate over the
/// rate of the first baseline row with an equal point, `None` where there is none.
pub fn speedups<P: PartialEq>(rows: impl IntoIterator<Item = (bool, P, f64)>) -> Vec<Option<f64>> {
    let rows: Vec<(bool, P, f64)> = rows.into_iter().collect();
    rows.iter()
        .map(|(_, point, rate)| {
            rows.iter()
                .find(|(baseline, other, _)| *baseline && other == point)
                .map(|&(_, _, baseline)| rate / baseline)
        })
        .collect()
}

/// The header and one line per row of cells, comma-separated.
pub fn print_csv(header: &[&str], lines: &[Vec<String>]) {
    println!("{}", header.join(","));
    for line in lines {
        println!("{}", line.join(","));
    }
}

/// An aligned table: the first `text_columns` columns left-aligned, the numbers right-aligned,
/// two spaces between columns, no trailing blanks. A blank line separates rows of different
/// `groups` (one entry per line: the workload).
pub fn print_table(header: &[&str], lines: &[Vec<String>], text_columns: usize, groups: &[&str]) {
    let mut widths: Vec<usize> = header.iter().map(|column| column.len()).collect();
    for line in lines {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.len());
        }
    }
    let format_line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(column, (cell, &width))| {
                if column < text_columns {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let header: Vec<String> = header.iter().map(|column| column.to_string()).collect();
    println!("{}", format_line(&header));
    let mut previous_group = None;
    for (line, &group) in lines.iter().zip(groups) {
        if previous_group.is_some_and(|previous| previous != group) {
            println!();
        }
        previous_group = Some(group);
        println!("{}", format_line(line));
    }
}
