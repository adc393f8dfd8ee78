//! The binary's global allocator: mimalloc for a process that holds a fleet (`serve`, `sim`), the
//! system's allocator for every one-shot command.
//!
//! mimalloc keeps a hub's memory in proportion to its fleet (src/main.rs), but a process that
//! starts with it pays for it: the kernel zeroes the pages its first arena touches, about a fifth
//! of `mcpdev --version` (issue 46). A one-shot CLI call allocates little and exits, so it takes
//! glibc's malloc, whose first pages come from a `brk` already mapped.
//!
//! Rules:
//! - **One allocator a process, fixed at its first allocation and never changed.** Every block is
//!   freed, grown and shrunk by the allocator that made it, so mixing is impossible by
//!   construction: the choice is a single atomic that goes from undecided to one value, once.
//! - The choice is read from the command line as the C runtime hands it over (glibc passes
//!   `argc, argv` to `.init_array` functions, as the standard library itself relies on), before
//!   `main` and without allocating: the first word that is not an option, nor the value of a
//!   global option ([`VALUE_OPTIONS`]), is the command. `serve` and `sim` get mimalloc.
//! - `MCPDEV_ALLOCATOR=mimalloc` or `=system` in the environment overrides the choice (to
//!   compare the two, or to run a hub on glibc's); any other value is ignored.
//! - A wrong guess costs only speed or memory, never soundness (a tool named `serve` in
//!   `mcpdev call serve` gets mimalloc). If the arguments were not captured (another C runtime,
//!   an allocation before the capture) the process takes the system's allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{CStr, c_char, c_int};
use std::sync::atomic::{AtomicIsize, AtomicPtr, AtomicU8, Ordering};

/// Global options that take a value in the next word (`--color always`): that word is not the
/// command. `src/main.rs` checks this list against the clap definition.
pub const VALUE_OPTIONS: &[&str] = &["--color", "--ca-file", "--ca-fingerprint"];

/// The commands that hold a fleet and get mimalloc.
pub const FLEET_COMMANDS: &[&str] = &["serve", "sim"];

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

static ARGC: AtomicIsize = AtomicIsize::new(0);
static ARGV: AtomicPtr<*const c_char> = AtomicPtr::new(std::ptr::null_mut());
static ENVP: AtomicPtr<*const c_char> = AtomicPtr::new(std::ptr::null_mut());

/// The environment variable that overrides the choice: `mimalloc` or `system`.
pub const OVERRIDE_ENV: &str = "MCPDEV_ALLOCATOR";

/// Keeps the process's arguments and environment for the choice; registered in `.init_array` by
/// `src/main.rs`. It only stores three words: no allocation, no reading.
pub extern "C" fn capture_args(argc: c_int, argv: *const *const c_char, envp: *const *const c_char) {
    ARGC.store(argc as isize, Ordering::Relaxed);
    ARGV.store(argv.cast_mut(), Ordering::Relaxed);
    ENVP.store(envp.cast_mut(), Ordering::Relaxed);
}

/// What `MCPDEV_ALLOCATOR=…` asks for, given `NAME=value` entries: `Some(true)` mimalloc,
/// `Some(false)` the system's, `None` no (valid) override.
pub fn overridden<'a>(env: impl IntoIterator<Item = &'a [u8]>) -> Option<bool> {
    let value = env.into_iter().find_map(|e| e.strip_prefix(OVERRIDE_ENV.as_bytes())?.strip_prefix(b"="))?;
    match value {
        b"mimalloc" => Some(true),
        b"system" => Some(false),
        _ => None,
    }
}

/// Whether a command line (its words after the program's name) runs a fleet command.
pub fn is_fleet_command<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> bool {
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        if word == b"--" {
            return false;
        }
        if word.first() == Some(&b'-') {
            if VALUE_OPTIONS.iter().any(|o| o.as_bytes() == word) {
                words.next();
            }
            continue;
        }
        return FLEET_COMMANDS.iter().any(|c| c.as_bytes() == word);
    }
    false
}

/// The captured environment's override, else the captured command line; the system's allocator
/// if glibc handed neither over.
fn captured_is_fleet() -> bool {
    let envp = ENVP.load(Ordering::Relaxed);
    if !envp.is_null() {
        // SAFETY: `envp` is the C runtime's NULL-terminated array of NUL-terminated strings as it
        // was at start, before any code of ours could change the environment.
        let entries = (0..).map(|i| unsafe { *envp.add(i) }).take_while(|e| !e.is_null()).map(|e| unsafe { CStr::from_ptr(e) }.to_bytes());
        if let Some(mimalloc) = overridden(entries) {
            return mimalloc;
        }
    }
    let argv = ARGV.load(Ordering::Relaxed);
    let argc = ARGC.load(Ordering::Relaxed);
    if argv.is_null() || argc < 1 {
        return false;
    }
    // SAFETY: `argv` is the C runtime's array of `argc` NUL-terminated strings, alive and
    // unchanged for the whole process (std's `args()` reads the same array).
    let words = (1..argc as usize).map(|i| unsafe { CStr::from_ptr(*argv.add(i)) }.to_bytes());
    is_fleet_command(words)
}

/// The global allocator: see the module's rules.
pub struct Dispatch {
    mode: AtomicU8,
    /// How the choice is made at the first allocation (tests give their own).
    choose: fn() -> bool,
}

impl Dispatch {
    /// The binary's allocator: chosen by the captured command line.
    pub const fn from_command_line() -> Self {
        Self { mode: AtomicU8::new(UNDECIDED), choose: captured_is_fleet }
    }

    /// An allocator whose choice, made at its first allocation, is `choose()` (true: mimalloc).
    pub const fn choosing(choose: fn() -> bool) -> Self {
        Self { mode: AtomicU8::new(UNDECIDED), choose }
    }

    #[inline]
    fn mode(&self) -> u8 {
        match self.mode.load(Ordering::Relaxed) {
            UNDECIDED => self.decide(),
            m => m,
        }
    }

    /// The first allocation fixes the choice; a racing one takes the winner's.
    #[cold]
    fn decide(&self) -> u8 {
        let want = if (self.choose)() { MIMALLOC } else { SYSTEM };
        match self.mode.compare_exchange(UNDECIDED, want, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => want,
            Err(fixed) => fixed,
        }
    }

    /// Which allocator serves this process (`None` before its first allocation).
    pub fn name(&self) -> Option<&'static str> {
        match self.mode.load(Ordering::Relaxed) {
            SYSTEM => Some("system"),
            MIMALLOC => Some("mimalloc"),
            _ => None,
        }
    }
}

// SAFETY: every method forwards to the one allocator fixed at the first allocation (the mode never
// changes once set), so each block is freed or resized by the allocator that made it, with the
// layout the caller vouches for.
unsafe impl GlobalAlloc for Dispatch {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.mode() == MIMALLOC { unsafe { mimalloc::MiMalloc.alloc(layout) } } else { unsafe { System.alloc(layout) } }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.mode() == MIMALLOC { unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) } } else { unsafe { System.alloc_zeroed(layout) } }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.mode() == MIMALLOC { unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) } } else { unsafe { System.dealloc(ptr, layout) } }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if self.mode() == MIMALLOC { unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) } } else { unsafe { System.realloc(ptr, layout, new_size) } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(line: &str) -> bool {
        is_fleet_command(line.split_whitespace().map(str::as_bytes))
    }

    #[test]
    fn the_command_is_the_first_word_that_is_no_option_nor_an_options_value() {
        for yes in ["serve", "sim --count 3", "--json serve", "-vv --quiet sim", "--color always serve", "--color=never serve", "--ca-file serve sim", "-q serve --demo"] {
            assert!(fleet(yes), "{yes}");
        }
        for no in ["", "call serve", "--version", "-V", "devices", "--ca-file serve call x", "--ca-fingerprint sim tools list", "-- serve", "servers", "tools list --stdio 'mcpdev serve'"] {
            assert!(!fleet(no), "{no}");
        }
    }

    #[test]
    fn the_environment_overrides_only_with_a_known_value() {
        let env = |entries: &[&str]| overridden(entries.iter().map(|e| e.as_bytes()));
        assert_eq!(env(&["HOME=/root", "MCPDEV_ALLOCATOR=mimalloc"]), Some(true));
        assert_eq!(env(&["MCPDEV_ALLOCATOR=system", "PATH=/bin"]), Some(false));
        assert_eq!(env(&["MCPDEV_ALLOCATOR=jemalloc"]), None);
        assert_eq!(env(&["MCPDEV_ALLOCATORS=system", "XMCPDEV_ALLOCATOR=system", "MCPDEV_ALLOCATOR"]), None);
        assert_eq!(env(&[]), None);
    }

    unsafe extern "C" {
        fn mi_is_in_heap_region(p: *const std::ffi::c_void) -> bool;
    }

    /// A block from each mode is the chosen allocator's, and goes back to it, through every
    /// method (alloc, zeroed, grown, shrunk, freed).
    fn exercise(a: &Dispatch, mimalloc: bool) {
        unsafe {
            let small = Layout::from_size_align(24, 8).unwrap();
            let p = a.alloc(small);
            assert!(!p.is_null());
            assert_eq!(mi_is_in_heap_region(p.cast()), mimalloc);
            p.write_bytes(7, 24);
            let grown = a.realloc(p, small, 1 << 20);
            assert_eq!(*grown.add(23), 7);
            assert_eq!(mi_is_in_heap_region(grown.cast()), mimalloc);
            let shrunk = a.realloc(grown, Layout::from_size_align(1 << 20, 8).unwrap(), 16);
            assert_eq!(*shrunk.add(15), 7);
            a.dealloc(shrunk, Layout::from_size_align(16, 8).unwrap());
            let big = Layout::from_size_align(3 << 20, 64).unwrap();
            let z = a.alloc_zeroed(big);
            assert_eq!(z as usize % 64, 0);
            assert!(std::slice::from_raw_parts(z, 3 << 20).iter().all(|&b| b == 0));
            assert_eq!(mi_is_in_heap_region(z.cast()), mimalloc);
            a.dealloc(z, big);
        }
    }

    #[test]
    fn the_first_allocation_fixes_the_allocator_for_good() {
        static FLEET: Dispatch = Dispatch::choosing(|| true);
        static CLI: Dispatch = Dispatch::choosing(|| false);
        assert_eq!(FLEET.name(), None);
        exercise(&FLEET, true);
        assert_eq!(FLEET.name(), Some("mimalloc"));
        exercise(&CLI, false);
        assert_eq!(CLI.name(), Some("system"));
        // Whatever the command line says later, the choice stays.
        static FLIPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
        static FLIPPING: Dispatch = Dispatch::choosing(|| FLIPS.fetch_xor(true, Ordering::Relaxed));
        exercise(&FLIPPING, true);
        exercise(&FLIPPING, true);
        assert_eq!(FLIPPING.name(), Some("mimalloc"));
    }

    #[test]
    fn threads_racing_to_the_first_allocation_share_one_choice() {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        // Every other chooser says the opposite: only one answer may ever be used.
        static RACED: Dispatch = Dispatch::choosing(|| CALLS.fetch_add(1, Ordering::Relaxed) % 2 == 0);
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    barrier.wait();
                    let mimalloc = unsafe {
                        let layout = Layout::from_size_align(64, 8).unwrap();
                        let p = RACED.alloc(layout);
                        let m = mi_is_in_heap_region(p.cast());
                        RACED.dealloc(p, layout);
                        m
                    };
                    assert_eq!(mimalloc, RACED.name() == Some("mimalloc"));
                });
            }
        });
        assert!(RACED.name().is_some());
    }
}
