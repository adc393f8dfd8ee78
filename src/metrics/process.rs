//! The standard `process_*` metrics every Prometheus client library exports (the names and
//! meanings of the Go and Python clients' process collectors), read from `/proc/self` at scrape
//! time, so the usual dashboards and alerts work unchanged.
//!
//! Rules: Linux only (elsewhere no `process_*` family is written rather than a wrong one); a file
//! that cannot be read leaves its family out; nothing is kept between scrapes.

use std::fmt::Write as _;

/// What `/proc/self` says now.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Process {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
}

/// Reads the figures now.
pub fn read() -> Process {
    // SAFETY: sysconf only reads constants.
    let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100) as f64;
    let page = u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096);
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    // Fields after the command name, which is in parentheses and may hold spaces: field 3 is [0].
    let fields: Vec<&str> = stat.as_deref().and_then(|s| s.rsplit_once(") ")).map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<u64>().ok()));
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    let max_fds = (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur);
    Process {
        cpu_seconds: field(14).zip(field(15)).map(|(u, s)| (u + s) as f64 / ticks),
        start_time_seconds: boot_time.zip(field(22)).map(|(boot, start)| boot as f64 + start as f64 / ticks),
        virtual_bytes: field(23),
        resident_bytes: field(24).map(|pages| pages * page),
        open_fds: std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64),
        max_fds,
    }
}

impl Process {
    /// The families in OpenMetrics text (as `prometheus-client` writes the rest): a counter's
    /// sample is `…_total`, its family name without it.
    pub fn write_open_metrics(&self, out: &mut String) {
        let mut family = |name: &str, kind: &str, unit: Option<&str>, help: &str, value: Option<String>| {
            let Some(value) = value else { return };
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            if let Some(unit) = unit {
                let _ = writeln!(out, "# UNIT {name} {unit}");
            }
            let sample = if kind == "counter" { format!("{name}_total") } else { name.to_string() };
            let _ = writeln!(out, "{sample} {value}");
        };
        family("process_cpu_seconds", "counter", Some("seconds"), "Total user and system CPU time spent in seconds.", self.cpu_seconds.map(|v| v.to_string()));
        family("process_resident_memory_bytes", "gauge", Some("bytes"), "Resident memory size in bytes.", self.resident_bytes.map(|v| v.to_string()));
        family("process_virtual_memory_bytes", "gauge", Some("bytes"), "Virtual memory size in bytes.", self.virtual_bytes.map(|v| v.to_string()));
        family("process_start_time_seconds", "gauge", Some("seconds"), "Start time of the process since unix epoch in seconds.", self.start_time_seconds.map(|v| v.to_string()));
        family("process_open_fds", "gauge", None, "Number of open file descriptors.", self.open_fds.map(|v| v.to_string()));
        family("process_max_fds", "gauge", None, "Maximum number of open file descriptors.", self.max_fds.map(|v| v.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_and_written_as_the_standard_families() {
        let p = read();
        assert!(p.resident_bytes.unwrap() > 1_000_000, "{p:?}");
        assert!(p.open_fds.unwrap() >= 3 && p.max_fds.unwrap() >= p.open_fds.unwrap(), "{p:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let started = p.start_time_seconds.unwrap();
        assert!(started <= now + 1.0 && started > now - 86_400.0, "started {started}, now {now}");
        let mut text = String::new();
        p.write_open_metrics(&mut text);
        assert!(text.contains("# TYPE process_cpu_seconds counter\n# UNIT process_cpu_seconds seconds\nprocess_cpu_seconds_total "), "{text}");
        assert!(text.contains("\nprocess_resident_memory_bytes ") && text.contains("\nprocess_max_fds "), "{text}");
        let mut none = String::new();
        Process::default().write_open_metrics(&mut none);
        assert_eq!(none, "", "a figure that could not be read is left out");
    }
}
