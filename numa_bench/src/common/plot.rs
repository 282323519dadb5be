//! `--plot` of the examples (locktorture, numasim): throughput against threads, one line per
//! lock, as an SVG line chart drawn with `plotters` (SVG backend only: no fonts, no system
//! packages; text is laid out with plotters' built-in estimate and rendered by the viewer).
//!
//! One chart per workload. With one workload the chart goes to the file asked for; with several,
//! to one file per workload named after it: `FILE.svg` becomes `FILE-<workload>.svg`
//! ([`files_for`]).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// One line of a chart.
pub struct Series {
    /// The legend entry (the lock's name).
    pub label: String,
    /// (threads, operations per second), in the order measured.
    pub points: Vec<(usize, f64)>,
}

/// What one chart shows.
pub struct Chart {
    /// The title (names the machine and the workload).
    pub title: String,
    /// The y axis' label.
    pub y_label: String,
    /// One line per lock.
    pub series: Vec<Series>,
}

/// The file of each of `workloads`' charts: `path` itself for one workload; otherwise `path`'s
/// stem + `-<workload>` + its extension (`.svg` if it has none), in the same directory.
pub fn files_for(path: &Path, workloads: &[&str]) -> Vec<PathBuf> {
    if workloads.len() <= 1 {
        return vec![path.to_path_buf()];
    }
    let stem = path
        .file_stem()
        .map_or_else(|| "plot".into(), |s| s.to_string_lossy().into_owned());
    let extension = path
        .extension()
        .map_or_else(|| "svg".into(), |e| e.to_string_lossy().into_owned());
    workloads
        .iter()
        .map(|workload| path.with_file_name(format!("{stem}-{workload}.{extension}")))
        .collect()
}

/// One measurement to plot: a lock's rate on a workload with a number of threads.
pub struct Point<'a> {
    /// The workload: one chart each.
    pub workload: &'a str,
    /// The lock: one line each.
    pub lock: &'a str,
    /// The x coordinate.
    pub threads: usize,
    /// The y coordinate: critical sections per second.
    pub rate: f64,
}

/// Draws rate against threads: one chart per workload (in the order the workloads first appear
/// in `points`), one line per lock (likewise), titled `title(workload)`; returns the files
/// written (see [`files_for`]).
pub fn draw_per_workload(
    path: &Path,
    points: &[Point],
    title: impl Fn(&str) -> String,
    y_label: &str,
) -> Result<Vec<PathBuf>, String> {
    let mut workloads: Vec<&str> = Vec::new();
    for point in points {
        if !workloads.contains(&point.workload) {
            workloads.push(point.workload);
        }
    }
    let files = files_for(path, &workloads);
    for (&workload, file) in workloads.iter().zip(&files) {
        let mut series: Vec<Series> = Vec::new();
        for point in points.iter().filter(|point| point.workload == workload) {
            let xy = (point.threads, point.rate);
            match series.iter_mut().find(|s| s.label == point.lock) {
                Some(line) => line.points.push(xy),
                None => series.push(Series {
                    label: point.lock.to_string(),
                    points: vec![xy],
                }),
            }
        }
        draw(
            file,
            &Chart {
                title: title(workload),
                y_label: y_label.to_string(),
                series,
            },
        )?;
    }
    Ok(files)
}

/// Says on stderr what a `--plot` did: `<tool>: wrote FILE` for every file written, or the error.
/// Returns whether it succeeded.
pub fn report_written(tool: &str, written: Result<Vec<PathBuf>, String>) -> bool {
    match written {
        Ok(files) => {
            for file in files {
                eprintln!("{tool}: wrote {}", file.display());
            }
            true
        }
        Err(error) => {
            eprintln!("error: cannot write the plot: {error}");
            false
        }
    }
}

/// Draws `chart` into the SVG file `path`: threads on a logarithmic x axis, throughput from 0 on
/// the y axis, a line with points per series, a legend.
pub fn draw(path: &Path, chart: &Chart) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    // Every thread count measured is a tick on the x axis.
    let mut threads: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0 as f64))
        .collect();
    threads.sort_by(f64::total_cmp);
    threads.dedup();
    let (Some(&min_threads), Some(&max_threads)) = (threads.first(), threads.last()) else {
        return Err(fail(&"nothing to plot"));
    };
    let top = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let y_max = if top > 0.0 { top * 1.1 } else { 1.0 };

    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut context = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(90)
        .build_cartesian_2d(
            (min_threads * 0.8..max_threads * 1.25)
                .log_scale()
                .with_key_points(threads),
            0.0..y_max,
        )
        .map_err(|e| fail(&e))?;
    context
        .configure_mesh()
        .x_desc("threads")
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&|t| format!("{t:.0}"))
        .y_label_formatter(&|v| si(*v))
        .draw()
        .map_err(|e| fail(&e))?;
    for (index, series) in chart.series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()].to_rgba();
        let points: Vec<(f64, f64)> = series
            .points
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|&(t, v)| (t as f64, v))
            .collect();
        context
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(series.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        context
            .draw_series(
                points
                    .iter()
                    .map(|&point| Circle::new(point, 3, color.filled())),
            )
            .map_err(|e| fail(&e))?;
    }
    context
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

/// Line colours, distinct on white (Okabe-Ito's colour-blind-safe palette, then black).
const COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

/// `12.3M`, `450k`, `7`: the y axis' numbers.
fn si(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e9 {
        format!("{:.1}G", value / 1e9)
    } else if magnitude >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if magnitude >= 1e3 {
        format!("{:.0}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}
