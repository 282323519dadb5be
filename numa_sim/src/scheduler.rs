//! The shuttle schedulers: virtual time (smallest clock first), and a wrapper that lets
//! shuttle's own randomized schedulers drive a simulation.

use std::cell::RefCell;
use std::rc::Rc;

use shuttle_engine::scheduler::{Schedule, Scheduler, Task, TaskId};

use crate::engine::{Engine, mix};

/// Runs the task with the smallest `(virtual clock, task id)`; one execution.
///
/// Blocking is expressed in clocks rather than with shuttle primitives: a sleeping spinner or
/// a parked task stays runnable for shuttle, with its clock at its wake deadline (or `NEVER`),
/// and a waker lowers that clock. If the smallest clock is `NEVER`, nobody will ever wake
/// anybody: the engine records a deadlock report and the execution is stopped.
pub(crate) struct VirtualTimeScheduler {
    engine: Rc<RefCell<Engine>>,
    started: bool,
    rng: u64,
}

impl VirtualTimeScheduler {
    pub(crate) fn new(engine: Rc<RefCell<Engine>>, seed: u64) -> Self {
        VirtualTimeScheduler {
            engine,
            started: false,
            rng: seed,
        }
    }
}

impl Scheduler for VirtualTimeScheduler {
    fn new_execution(&mut self) -> Option<Schedule> {
        if std::mem::replace(&mut self.started, true) {
            return None;
        }
        let mut engine = self.engine.borrow_mut();
        engine.reset();
        Some(Schedule::new(engine.seed))
    }

    fn next_task(
        &mut self,
        runnable_tasks: &[&Task],
        _current_task: Option<TaskId>,
        _is_yielding: bool,
    ) -> Option<TaskId> {
        let mut engine = self.engine.borrow_mut();
        if engine.stopped {
            return None;
        }
        engine
            .choose(runnable_tasks.iter().map(|t| usize::from(t.id())))
            .map(TaskId::from)
    }

    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(1);
        mix(self.rng)
    }
}

/// Wraps shuttle's `RandomScheduler` / `PctScheduler` / `ReplayScheduler`: it decides; the
/// engine learns which task runs and starts afresh at every execution.
pub(crate) struct Randomized<S> {
    pub(crate) inner: S,
    pub(crate) engine: Rc<RefCell<Engine>>,
    pub(crate) executions: Rc<std::cell::Cell<usize>>,
}

impl<S: Scheduler> Scheduler for Randomized<S> {
    fn new_execution(&mut self) -> Option<Schedule> {
        let schedule = self.inner.new_execution()?;
        self.engine.borrow_mut().reset();
        self.executions.set(self.executions.get() + 1);
        Some(schedule)
    }

    fn next_task(
        &mut self,
        runnable_tasks: &[&Task],
        current_task: Option<TaskId>,
        is_yielding: bool,
    ) -> Option<TaskId> {
        let next = self
            .inner
            .next_task(runnable_tasks, current_task, is_yielding)?;
        let mut engine = self.engine.borrow_mut();
        engine.counters.decisions += 1;
        let id = usize::from(next);
        if id >= engine.tasks.len() {
            engine.register_unknown(id);
        }
        engine.current = id;
        Some(next)
    }

    fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }
}
