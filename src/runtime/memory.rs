//! The allocator's memory: giving freed pages back to the system after an informer's list
//! (whose response bodies and decoded pages are garbage once the store holds the objects),
//! and jemalloc's counters and settings for `/debug/pprof/heap`.
//!
//! Without the `jemalloc` feature (or with `mimalloc`) these are no-ops: the calls still work
//! in a process whose global allocator is another one (tests), where they touch an unused
//! jemalloc.

#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
mod imp {
    use tikv_jemalloc_ctl::{Access, AsName, arenas, epoch, opt, stats};

    /// The default decay time of arenas (`arenas.dirty_decay_ms`): `opt.dirty_decay_ms`
    /// unless [`set_dirty_decay`] changed it.
    const ARENAS_DIRTY_DECAY_MS: &[u8] = b"arenas.dirty_decay_ms\0";

    /// Sets every arena's `dirty_decay_ms` to `decay`.
    fn set_each_arena(decay: isize) {
        let Ok(count) = arenas::narenas::read() else {
            return;
        };
        for arena in 0..count {
            let name = format!("arena.{arena}.dirty_decay_ms\0");
            let _ = name.as_bytes().name().write(decay);
        }
    }

    /// How long freed pages stay resident before jemalloc hands them back, for every arena
    /// now and later (jemalloc's default is 10 s).
    pub fn set_dirty_decay(decay: std::time::Duration) {
        let ms = isize::try_from(decay.as_millis()).unwrap_or(isize::MAX);
        if ARENAS_DIRTY_DECAY_MS.name().write(ms).is_ok() {
            set_each_arena(ms);
        }
    }

    /// Hands every arena's dirty pages (freed, still resident) back to the system now.
    /// jemalloc would do so itself only `dirty_decay_ms` later, and only when the process
    /// allocates again (kcm has no background purging thread); after a list of thousands of
    /// objects that is several MiB held for nothing. Setting an arena's decay time to 0
    /// purges it at once (jemalloc's `pac_decay_ms_set`); then the default
    /// (`arenas.dirty_decay_ms`) is set again, not the time read before, so two overlapping
    /// calls cannot leave an arena at 0. Arenas never used fail with EFAULT and are skipped.
    pub fn release_unused() {
        let Ok(decay): Result<isize, _> = ARENAS_DIRTY_DECAY_MS.name().read() else {
            return;
        };
        set_each_arena(0);
        set_each_arena(decay);
    }

    /// jemalloc's counters (bytes), refreshed first, and the settings that decide how much
    /// freed memory it keeps, in the `# name = value` lines of Go's `?debug=1` heap page.
    pub fn statistics() -> Result<String, String> {
        let failed = |err: tikv_jemalloc_ctl::Error| format!("jemalloc statistics: {err}");
        epoch::advance().map_err(failed)?;
        let mut lines = vec![
            (
                "allocated",
                stats::allocated::read().map_err(failed)?.to_string(),
            ),
            ("active", stats::active::read().map_err(failed)?.to_string()),
            (
                "resident",
                stats::resident::read().map_err(failed)?.to_string(),
            ),
            ("mapped", stats::mapped::read().map_err(failed)?.to_string()),
            (
                "retained",
                stats::retained::read().map_err(failed)?.to_string(),
            ),
            (
                "metadata",
                stats::metadata::read().map_err(failed)?.to_string(),
            ),
            (
                "opt.narenas",
                opt::narenas::read().map_err(failed)?.to_string(),
            ),
            (
                "arenas.narenas",
                arenas::narenas::read().map_err(failed)?.to_string(),
            ),
            (
                "opt.background_thread",
                opt::background_thread::read().map_err(failed)?.to_string(),
            ),
        ];
        for key in [
            "opt.dirty_decay_ms",
            "arenas.dirty_decay_ms",
            "opt.muzzy_decay_ms",
        ] {
            let name = format!("{key}\0");
            let value: isize = name.as_bytes().name().read().map_err(failed)?;
            lines.push((key, value.to_string()));
        }
        let mut text = String::from("heap profile: jemalloc statistics, in bytes\n");
        for (name, value) in lines {
            text.push_str(&format!("# {name} = {value}\n"));
        }
        Ok(text)
    }
}

#[cfg(not(all(feature = "jemalloc", not(feature = "mimalloc"))))]
mod imp {
    pub fn set_dirty_decay(_: std::time::Duration) {}

    pub fn release_unused() {}

    pub fn statistics() -> Result<String, String> {
        Err("heap statistics need kcm built with its default allocator, jemalloc".to_owned())
    }
}

pub use imp::{release_unused, set_dirty_decay, statistics};

#[cfg(all(test, feature = "jemalloc", not(feature = "mimalloc")))]
mod tests {
    use std::time::Duration;

    use tikv_jemalloc_ctl::{Access, AsName};

    fn arena_decay() -> isize {
        b"arena.0.dirty_decay_ms\0".name().read().unwrap()
    }

    /// One test, as the settings are the process's: jemalloc's defaults, then kcm's decay
    /// time for every arena, kept through a purge and shown on the heap page.
    #[test]
    fn decay_time_is_set_for_every_arena_and_kept_through_purges() {
        let text = super::statistics().unwrap();
        for line in [
            "# opt.narenas = ",
            "# opt.background_thread = false\n",
            "# opt.dirty_decay_ms = 10000\n",
            "# opt.muzzy_decay_ms = 0\n",
        ] {
            assert!(text.contains(line), "{line:?} not in {text}");
        }
        assert!(text.starts_with("heap profile: jemalloc statistics, in bytes\n# allocated = "));
        assert_eq!(arena_decay(), 10_000, "jemalloc's default");

        super::set_dirty_decay(Duration::from_secs(1));
        assert_eq!(arena_decay(), 1_000);
        super::release_unused();
        assert_eq!(arena_decay(), 1_000, "restored after the purge");
        let text = super::statistics().unwrap();
        assert!(text.contains("# arenas.dirty_decay_ms = 1000\n"), "{text}");
        assert!(text.contains("# opt.dirty_decay_ms = 10000\n"), "{text}");
    }
}
