//! Mutex locking that survives a poisoned lock.
//!
//! A panic while a lock is held (a worker panic, which the queue recovers from) must not take
//! every later user of the lock down with it: the guarded state is caches and bookkeeping that
//! stay consistent between statements, so the lock is taken over as it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering it when a panic poisoned it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
