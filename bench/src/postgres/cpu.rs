//! Where the machine's CPU went during a load, from `/proc` (Linux): this process, the
//! PostgreSQL processes, the rest.

/// (busy, total) jiffies of all CPUs so far, from /proc/stat (Linux).
pub(super) fn cpu_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle + iowait are fields 4 and 5.
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// CPU jiffies so far of this process (server-mock and the load generator) and of every
/// `postgres` process (the backends, WAL writer, checkpointer), from /proc (Linux).
pub(super) fn process_jiffies() -> (u64, u64) {
    let of = |stat: &str| -> Option<(String, u64)> {
        let (head, rest) = stat.rsplit_once(") ")?;
        let comm = head.split_once(" (")?.1.to_string();
        let f: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime: fields 14 and 15 of stat, 12 and 13 after the comm.
        Some((
            comm,
            f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
        ))
    };
    let own = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| of(&s))
        .map_or(0, |(_, j)| j);
    let mut pg = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) {
            if let Some((comm, j)) = of(&stat) {
                if comm == "postgres" {
                    pg += j;
                }
            }
        }
    }
    (own, pg)
}

/// Where the machine's busy CPU went during a load: this process, PostgreSQL, the rest.
#[derive(Clone, Copy, Default)]
pub(super) struct CpuSplit {
    pub(super) own: f64,
    pub(super) postgres: f64,
    pub(super) other: f64,
}

impl CpuSplit {
    pub(super) fn between(
        before: ((u64, u64), (u64, u64)),
        after: ((u64, u64), (u64, u64)),
    ) -> Self {
        let busy = (after.0 .0 - before.0 .0).max(1) as f64;
        let own = after.1 .0.saturating_sub(before.1 .0) as f64 / busy;
        let postgres = after.1 .1.saturating_sub(before.1 .1) as f64 / busy;
        Self {
            own,
            postgres,
            other: (1.0 - own - postgres).max(0.0),
        }
    }

    /// `splits` averaged, as "own / postgres / other" percentages.
    pub(super) fn shares(splits: &[CpuSplit]) -> String {
        let n = splits.len().max(1) as f64;
        let avg = |f: fn(&CpuSplit) -> f64| splits.iter().map(f).sum::<f64>() / n * 100.0;
        format!(
            "server+load {:.0} % · postgres {:.0} % · other {:.0} %",
            avg(|c| c.own),
            avg(|c| c.postgres),
            avg(|c| c.other)
        )
    }
}
