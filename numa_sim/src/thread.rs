//! Simulated threads pinned to hardware threads.

use crate::engine;

/// Spawns a simulated thread pinned to hardware thread `hw` of the simulated machine. It
/// starts at its spawner's virtual time.
///
/// ```
/// use numa_sim::{Machine, Simulation, thread};
///
/// Simulation::new(Machine::by_name("2s-generic").unwrap()).run(|| {
///     let t = thread::spawn_on(3, || numa_sim::current_hw_thread());
///     assert_eq!(t.join(), Some(3));
/// });
/// ```
///
/// # Panics
///
/// Outside a simulation; if `hw` does not exist on the machine; if another live simulated
/// thread is pinned to `hw`.
pub fn spawn_on<F, T>(hw: usize, f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let cell = engine::active().expect(
        "numa_sim::thread::spawn_on must be called inside a simulation (Simulation::run, \
         check_random, check_pct)",
    );
    cell.borrow_mut().claim_hw(hw);
    let inner = shuttle::thread::spawn(move || {
        if let Some(cell) = engine::active() {
            cell.borrow_mut().set_thread(shuttle::thread::current());
        }
        let result = f();
        if let Some(cell) = engine::context() {
            cell.borrow_mut().finish_current();
        }
        result
    });
    let id = usize::from(inner.thread().id());
    cell.borrow_mut().register_spawned(id, hw);
    JoinHandle { inner, id, hw }
}

/// Owns a simulated thread; [`join`](JoinHandle::join) waits for it.
#[derive(Debug)]
pub struct JoinHandle<T> {
    inner: shuttle::thread::JoinHandle<T>,
    id: usize,
    hw: usize,
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to finish and returns its result. The caller's virtual clock
    /// catches up with the thread's end.
    ///
    /// # Panics
    ///
    /// If the thread panicked (with its payload).
    pub fn join(self) -> T {
        let result = self.inner.join();
        if let Some(cell) = engine::active() {
            cell.borrow_mut().joined(self.id);
        }
        match result {
            Ok(value) => value,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// The hardware thread it is pinned to.
    pub fn hw_thread(&self) -> usize {
        self.hw
    }
}
