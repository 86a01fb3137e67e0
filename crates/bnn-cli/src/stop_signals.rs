//! The signals that stop sampling between draws with every chain checkpointed: Ctrl-C (SIGINT), and SIGTERM / SIGUSR1, which schedulers send before a time limit or a preemption.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

/// Exit code of a run that a scheduler's SIGTERM or SIGUSR1 stopped after checkpointing every
/// chain (EX_TEMPFAIL: "try again"); a job script requeues on it and the rerun resumes.
pub const EXIT_REQUEUE: u8 = 75;

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Installs the handlers and returns the stop flag they raise.
pub fn install() -> Arc<AtomicBool> {
    let stop = STOP
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    #[cfg(unix)]
    for signal in [libc::SIGTERM, libc::SIGUSR1] {
        // SAFETY: the handler only stores to atomics (async-signal-safe); `sigaction` gets a
        // zeroed struct with the handler and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_scheduler_signal as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    stop
}

#[cfg(unix)]
extern "C" fn on_scheduler_signal(signal: libc::c_int) {
    SIGNAL.store(signal, Ordering::Relaxed);
    if let Some(stop) = STOP.get() {
        stop.store(true, Ordering::Relaxed);
    }
}

/// The name of the scheduler signal that stopped the run, if one did.
pub fn scheduler_signal() -> Option<&'static str> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        #[cfg(unix)]
        s if s == libc::SIGTERM => Some("SIGTERM"),
        #[cfg(unix)]
        s if s == libc::SIGUSR1 => Some("SIGUSR1"),
        _ => Some("a signal"),
    }
}
