//! A gate for event callbacks: callbacks pass only while it is open, and closing it waits
//! until every callback already inside has left, so their data can then be reset or freed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Counts callbacks in flight.
pub struct Gate {
    open: AtomicBool,
    inside: AtomicUsize,
}

/// Proof that a callback is inside the gate; leaving happens on drop.
pub struct Pass<'a>(&'a Gate);

impl Gate {
    /// A closed gate.
    pub const fn new() -> Gate {
        Gate {
            open: AtomicBool::new(false),
            inside: AtomicUsize::new(0),
        }
    }

    /// Lets callbacks in.
    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
    }

    /// Enters, unless the gate is closed.
    pub fn enter(&self) -> Option<Pass<'_>> {
        // Count first, then check: close() sets the flag first, then waits for the count, so
        // a callback either sees the gate closed or is counted before close() waits.
        self.inside.fetch_add(1, Ordering::SeqCst);
        if self.open.load(Ordering::SeqCst) {
            Some(Pass(self))
        } else {
            self.inside.fetch_sub(1, Ordering::SeqCst);
            None
        }
    }

    /// Closes the gate and waits up to `timeout` for callbacks inside to leave. Returns how
    /// many were still inside at the deadline (0 when drained).
    pub fn close_and_drain(&self, timeout: Duration) -> usize {
        self.open.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        loop {
            let inside = self.inside.load(Ordering::SeqCst);
            if inside == 0 || Instant::now() >= deadline {
                return inside;
            }
            thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.0.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn closing_waits_for_callbacks_inside() {
        use std::sync::Barrier;
        let gate = Arc::new(Gate::new());
        assert!(gate.enter().is_none(), "a new gate is closed");
        gate.open();
        let inside = Arc::new(Barrier::new(2));
        let left = Arc::new(AtomicBool::new(false));
        let pass_holder = {
            let (gate, inside, left) = (gate.clone(), inside.clone(), left.clone());
            thread::spawn(move || {
                let pass = gate.enter().expect("open");
                inside.wait();
                thread::sleep(Duration::from_millis(20));
                left.store(true, Ordering::SeqCst);
                drop(pass);
            })
        };
        inside.wait();
        assert_eq!(gate.close_and_drain(Duration::from_secs(60)), 0);
        assert!(
            left.load(Ordering::SeqCst),
            "returned before the callback left"
        );
        assert!(gate.enter().is_none());
        pass_holder.join().unwrap();
    }

    #[test]
    fn draining_gives_up_at_the_deadline() {
        let gate = Gate::new();
        gate.open();
        let _stuck = gate.enter().unwrap();
        assert_eq!(gate.close_and_drain(Duration::from_millis(5)), 1);
    }
}
