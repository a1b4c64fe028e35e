//! The loader's view of the wheels' libraries, handed from the loop to an apt install that
//! began before it was known: the install waits at the one step that needs it (writing
//! `ld.so.cache`), while the wheel jobs that produce it still run. Set once; a build that
//! stops wakes the waiter with nothing.

use std::sync::{Arc, Condvar, Mutex};

use crate::plan::Loader;

#[derive(Default)]
pub(super) struct Gate {
    state: Mutex<(Option<Arc<Loader>>, bool)>,
    changed: Condvar,
}

impl Gate {
    /// The loader is known.
    pub fn set(&self, loader: Arc<Loader>) {
        if let Ok(mut s) = self.state.lock() {
            s.0 = Some(loader);
        }
        self.changed.notify_all();
    }

    /// The build stopped: waiters get nothing.
    pub fn stop(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.1 = true;
        }
        self.changed.notify_all();
    }

    /// Wait until the loader is known (or the build stopped: `None`).
    pub fn wait(&self) -> Option<Arc<Loader>> {
        let mut s = self.state.lock().ok()?;
        loop {
            if let Some(l) = &s.0 {
                return Some(l.clone());
            }
            if s.1 {
                return None;
            }
            s = self.changed.wait(s).ok()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_gets_the_loader_once_set_and_nothing_once_stopped() {
        let g = Arc::new(Gate::default());
        let waiter = {
            let g = g.clone();
            std::thread::spawn(move || g.wait().map(|l| l.dirs.clone()))
        };
        let loader = Loader {
            dirs: vec!["usr/lib/x".into()],
            ..Loader::default()
        };
        g.set(Arc::new(loader));
        assert_eq!(waiter.join().unwrap(), Some(vec!["usr/lib/x".to_string()]));
        let stopped = Arc::new(Gate::default());
        let waiter = {
            let s = stopped.clone();
            std::thread::spawn(move || s.wait().is_none())
        };
        stopped.stop();
        assert!(waiter.join().unwrap());
    }
}
