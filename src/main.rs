//! The `spark-localizer` binary: the allocator, then [`spark_localizer::cmd::main`].

/// musl's malloc maps and unmaps every block over 128 KiB (hyper's read
/// buffers, the hasher's buffer): in the static build, mimalloc instead.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Memory freed is given back to the system at once, not 10 ms later: a
/// transfer's chunks come and go faster than that, and an init container's
/// peak RSS is what its memory limit must cover.
#[cfg(target_env = "musl")]
fn tune_allocator() {
    // `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (v2 and v3); the
    // Rust bindings do not name it.
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: sets a global option; mimalloc reads options with atomics.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
}

#[cfg(not(target_env = "musl"))]
fn tune_allocator() {}

fn main() {
    tune_allocator();
    std::process::exit(spark_localizer::cmd::main());
}
