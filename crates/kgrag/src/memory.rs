//! Giving memory the allocator holds free back to the operating system between the stages of a build.
//!
//! glibc's allocator keeps the memory a finished stage freed: small blocks stay in its arenas, and the
//! next stage's allocations land between them, so the process's resident size keeps the high-water mark of
//! every stage stacked on the next. HiRAG's build frees tens of megabytes of graphs, hierarchies and report
//! inputs per thousand passages when it ends. `malloc_trim(0)` returns every whole free page (in the middle
//! of an arena too, since glibc 2.8) for one walk over the free lists. Measured on `cargo xtask scale`
//! (every method, 1,000 and 3,000 passages): 88.6 → 77.8 MB per 1,000 passages at the peak, in the same time.
//!
//! Within a stage the same happens: HiRAG's build frees its merge's maps and its base graph's copies while
//! the hierarchy allocates, and at 30,000 passages its resident size stood ~250 MB above its live heap.
//! [`return_freed_memory_in_background`] watches the resident size and trims each time it has grown by a
//! sixteenth (at least 16 MiB) since the last trim: a few dozen trims over a build (52 in LeanRAG's at
//! 30,000 passages), each a walk over the free lists.

/// Returns the allocator's free pages to the operating system (glibc's `malloc_trim`; nothing elsewhere).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_memory() {
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` takes no pointer and only releases pages glibc holds free; it takes the arenas'
    // locks itself, so it may run while other threads allocate.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns the allocator's free pages to the operating system (glibc's `malloc_trim`; nothing elsewhere).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}

/// Resident size of this process in bytes (`/proc/self/statm`), or `None` where it cannot be read.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    #[allow(unsafe_code)]
    // SAFETY: `sysconf` reads a constant of the system and takes no pointer.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages.saturating_mul(u64::try_from(page).ok()?))
}

/// Resident size of this process in bytes: `None` here (it is read on Linux with glibc).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn resident_bytes() -> Option<u64> {
    None
}

/// Starts (once per process) a thread that returns the allocator's free pages to the operating system
/// whenever the resident size has grown by a sixteenth, and at least 16 MiB, since the last time it did
/// (glibc's `malloc_trim`, checked every 100 ms; nothing on other platforms). A long-running build or
/// server calls it once at start: the resident size then follows the live heap instead of its high-water
/// mark. Measured on `cargo xtask scale` (HiRAG alone, LeanRAG alone, 10,000 and 30,000 passages) in
/// `docs/perf.md`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn return_freed_memory_in_background() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let Some(start) = resident_bytes() else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("kgrag-trim".to_owned())
            .spawn(move || {
                const MIN_STEP: u64 = 16 << 20;
                let mut base = start;
                loop {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    let Some(now) = resident_bytes() else {
                        return;
                    };
                    if now < base {
                        base = now;
                    } else if now - base >= (base / 16).max(MIN_STEP) {
                        release_free_memory();
                        base = resident_bytes().unwrap_or(now);
                    }
                }
            });
        // Without the thread the process only keeps more pages than it needs.
        drop(spawned);
    });
}

/// Starts (once per process) a thread that returns the allocator's free pages to the operating system
/// (glibc's `malloc_trim`; nothing on other platforms).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn return_freed_memory_in_background() {}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// The trimmer reads the resident size it acts on: pages touched show in it.
    #[test]
    fn the_resident_size_counts_touched_pages() {
        let before = resident_bytes();
        assert!(before.is_some_and(|b| b > 0));
        let block = vec![1u8; 64 << 20];
        let after = resident_bytes();
        assert!(block.iter().step_by(4096).all(|&b| b == 1));
        let grown = after
            .unwrap_or(0)
            .saturating_sub(before.unwrap_or(u64::MAX));
        assert!(grown >= 48 << 20, "grew by {grown} bytes only");
        drop(block);
        release_free_memory();
        return_freed_memory_in_background();
        return_freed_memory_in_background();
    }
}
