//! The mechanism behind [`Delegate::delegate`](crate::Delegate): a closure runs under the lock,
//! on whichever thread holds it.
//!
//! A `delegate` caller that has to queue publishes its closure in its queue node
//! (`QNode::request`, the address of a [`Request`] on its stack) and waits as any waiter does.
//! A `delegate` caller that holds the lock after queueing is a **combiner**: where it would make
//! a waiter head (`raw::make_head`, the one place every lock hands headship over), it runs that
//! waiter's published closure instead ([`try_serve`]), owns the node's place in the queue as it
//! would own an abandoned node's, passes headship on from it, and releases the waiter with
//! `DONE` (`qnode::release_served`, called where an abandoned node would be recycled). The
//! waiter takes its result and returns without ever holding the lock. Combining stops at the
//! first waiter that called `lock()` (it is made head as always), at one of another NUMA node
//! (CnaMutex) or cache domain (HqMutex), and at the combiner's bound
//! (`tunables::delegate_batch` closures and `tunables::delegate_batch_time`).
//! docs/DESIGN.md, "Delegation", says why it is built this way.
//!
//! The state of a call lives in two thread-locals: the request to publish in the next queue
//! node (`qnode::pending`, beside the node it goes into), and [`State`]: the combining session
//! (`combine`) and the locks this thread is inside `delegate` of (`inside`, to turn a same-lock
//! call into a panic instead of a deadlock). While a served closure runs, the request and the
//! session are cleared, so locks it takes are plain acquisitions, and restored after.

use core::cell::{Cell, UnsafeCell};
use core::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::qnode::{self, QNode};
use crate::sync::{Ordering, now_ns, thread_local};

/// Whose published closures a combiner runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Locality {
    /// Every waiter's (McsMutex: one FIFO queue, no NUMA order to keep).
    Any,
    /// Those of the combiner's NUMA node (CnaMutex).
    Node,
    /// Those of the combiner's cache (L3) domain (HqMutex).
    Domain,
}

impl Locality {
    /// Whether a waiter at `theirs` is served by a combiner at `mine` ([`qnode::place`]s).
    #[inline]
    fn admits(self, mine: u64, theirs: u64) -> bool {
        match self {
            Locality::Any => true,
            Locality::Node => qnode::place_node(mine) == qnode::place_node(theirs),
            Locality::Domain => mine == theirs,
        }
    }
}

/// The raw side of a lock that supports `Delegate` (implemented by `impl_raw_mutex!`).
pub(crate) trait DelegateRaw: Sync {
    /// Whose closures its combiners run.
    const LOCALITY: Locality;
    /// The one-CAS fast path.
    fn try_lock_fast(&self) -> bool;
    /// The slow path, without a deadline: `true` once this thread holds the lock, `false` if a
    /// combiner ran the request this thread published (it never held the lock).
    fn lock_or_served(&self) -> bool;
    /// `unlock`.
    ///
    /// # Safety
    /// The lock must be held.
    unsafe fn unlock(&self);
}

/// A published closure and the slot for its result, on the waiter's stack. `run` is the only
/// field a combiner reads; it knows the rest through it.
#[repr(C)]
struct Request<F, R> {
    /// Runs the closure (the combiner calls it with the request's address); returns whether
    /// it panicked.
    run: unsafe fn(*const ()) -> bool,
    f: UnsafeCell<ManuallyDrop<F>>,
    out: UnsafeCell<Option<std::thread::Result<R>>>,
}

impl<F, R> Request<F, R> {
    /// The first and last line of the request (the same line for small closures), for the
    /// simulator's accounting (`sync::plain_read`). Never empty: `run` is a pointer.
    fn lines(&self) -> [*const u8; 2] {
        let first = core::ptr::from_ref(self).cast::<u8>();
        [first, first.wrapping_add(size_of::<Self>() - 1)]
    }
}

/// `Request::run` for `Request<F, R>`: takes the closure out, runs it, catching a panic, and
/// stores the outcome.
///
/// # Safety
/// `request` is the address of a live `Request<F, R>` whose closure has not been taken, and
/// the caller holds the lock (it is the combiner, or the request's own thread).
unsafe fn run_request<F: FnOnce() -> R, R>(request: *const ()) -> bool {
    // SAFETY: passed on from the caller; nobody else touches the request meanwhile (its
    // waiter waits for `DONE`).
    let request = unsafe { &*(request as *const Request<F, R>) };
    // The request is on the waiter's stack, in its cache: reading it moves its lines here.
    crate::sync::plain_read(&request.lines());
    // SAFETY: taken once (the caller's contract), never dropped in place afterwards.
    let f = unsafe { ManuallyDrop::take(&mut *request.f.get()) };
    let out = catch_unwind(AssertUnwindSafe(f));
    let panicked = out.is_err();
    // SAFETY: as above.
    unsafe { *request.out.get() = Some(out) };
    crate::sync::plain_write(&[request.out.get() as *const u8]);
    panicked
}

/// A combining session: a `delegate` caller that queued and may come to hold the lock.
#[derive(Clone, Copy)]
struct Combine {
    locality: Locality,
    /// The combiner's place (`qnode::place`), read when it queued.
    place: u64,
    /// Closures run for others so far.
    served: u32,
    /// When the first of them started (ns; 0 before).
    since: u64,
    /// The bounds, `tunables::delegate_bounds`, read when it queued.
    max: u64,
    max_ns: u64,
}

/// The calling thread's delegation state (see the module docs).
struct State {
    combine: Cell<Option<Combine>>,
    /// Set by [`keeping_turn`] around a handoff to a waiter of the holder's local queue while
    /// another node waits: a combiner then serves that waiter only if someone is queued behind
    /// it.
    keep_turn: Cell<bool>,
    /// The locks this thread is inside `delegate` of ([`Inside`]).
    inside: Cell<Inside>,
}

thread_local! {
    static STATE: State = const {
        State {
            combine: Cell::new(None),
            keep_turn: Cell::new(false),
            inside: Cell::new(Inside::NONE),
        }
    };
}

/// The locks this thread is inside `delegate` of, innermost first: none (`0`), one lock (its
/// address with bit 0 set), or several: the address of the innermost call's [`Nested`] entry,
/// a linked list through the callers' stack frames. The common case, one lock, costs a single
/// thread-local store on the way in and one on the way out, where a list entry cost three
/// before the fast path's CAS (docs/DESIGN.md, "Decision record: one store marks a delegate
/// call").
#[derive(Clone, Copy, PartialEq, Eq)]
struct Inside(usize);

impl Inside {
    const NONE: Inside = Inside(0);

    /// Inside `lock`'s `delegate` only. Lock addresses are even: every raw lock holds an atomic
    /// word.
    #[inline]
    fn one(lock: usize) -> Inside {
        Inside(lock | 1)
    }

    /// Whether `lock` is among these locks.
    fn contains(self, lock: usize) -> bool {
        let mut walk = self;
        loop {
            match walk.0 {
                0 => return false,
                one if one & 1 == 1 => return one & !1 == lock,
                entry => {
                    // SAFETY: an even, non-zero value is the address of a `Nested` entry in
                    // the frame of an enclosing `run` on this thread (`Leave` unlinks it
                    // before the frame ends).
                    let entry = unsafe { &*(entry as *const Nested) };
                    if entry.lock == lock {
                        return true;
                    }
                    walk = entry.outer;
                }
            }
        }
    }
}

/// A nested `delegate` call's entry in [`State::inside`]: its lock and the enclosing calls'.
struct Nested {
    lock: usize,
    outer: Inside,
}

/// Whether the calling thread is a `delegate` caller that may combine: as queue head it
/// reserves the lock at once where heads may mark (`LockWord::acquire_as_head`), since it does
/// not mark the successors it will serve.
#[inline]
pub(crate) fn combining() -> bool {
    STATE
        .try_with(|s| s.combine.get().is_some())
        .unwrap_or(false)
}

/// The closure `next`'s waiter published, if the combiner of session `c` may run it: one of
/// its locality (the count and time bounds aside). `keep_turn` ([`keeping_turn`]): `next` is
/// the holder's local successor while another node waits; it is served only if a waiter is
/// linked behind it, since serving a node's last waiter ends the node's turn (it queues again
/// only after the lock has left), where making it head keeps the turn while the node's
/// threads come back (docs/DESIGN.md, "Decision record: a combiner keeps its node's turn").
#[inline]
fn servable(c: &Combine, next: &QNode, keep_turn: bool) -> Option<u64> {
    let request = next.request();
    // Relaxed: as `QNode::request`. `next.next` Relaxed: a hint; a waiter that links itself
    // behind `next` just after we looked simply follows it once it is head.
    (request != 0
        && c.locality
            .admits(c.place, next.numa.load(Ordering::Relaxed))
        && !(keep_turn && next.next.load(Ordering::Relaxed) == 0))
        .then_some(request)
}

/// Runs `handoff` (a handoff by HqMutex's holder) with [`State::keep_turn`] set if `on`.
#[inline]
pub(crate) fn keeping_turn<T>(on: bool, handoff: impl FnOnce() -> T) -> T {
    if !on {
        return handoff();
    }
    let Ok(state) = STATE.try_with(|s| s as *const State) else {
        return handoff();
    };
    // SAFETY: as in `run`: the thread-local outlives this call.
    let state = unsafe { &*state };
    let outer = state.keep_turn.replace(true);
    let out = handoff();
    state.keep_turn.set(outer);
    out
}

/// Whether [`try_serve`] would run `next`'s published closure now (so its head must not mark
/// it: `raw::mark_next`). The time bound is left to `try_serve`, which then makes `next` head.
#[inline]
pub(crate) fn would_serve(next: &QNode) -> bool {
    let Ok(Some(c)) = STATE.try_with(|s| s.combine.get()) else {
        return false;
    };
    u64::from(c.served) < c.max && servable(&c, next, false).is_some()
}

/// Called by `make_head` before it makes `next` head. If the calling thread is a combiner and
/// `next`'s waiter published a closure it may run (its locality, within the bound), runs it
/// and returns `true`: the caller then owns `next`'s place as it would an abandoned node's, and
/// its `qnode::recycle` of it ends with `qnode::release_served`. `false` otherwise (`next` is
/// made head as usual).
#[inline]
pub(crate) fn try_serve(next: &QNode) -> bool {
    let Ok((Some(mut c), keep_turn)) = STATE.try_with(|s| (s.combine.get(), s.keep_turn.get()))
    else {
        return false;
    };
    let Some(request) = servable(&c, next, keep_turn) else {
        // Counted only where `keep_turn` alone stopped the serving.
        #[cfg(loom)]
        if keep_turn && servable(&c, next, false).is_some() {
            crate::sync::loom_probe::kept_turn();
        }
        return false;
    };
    if u64::from(c.served) >= c.max
        || (c.served > 0 && now_ns().saturating_sub(c.since) >= c.max_ns)
    {
        #[cfg(loom)]
        crate::sync::loom_probe::batch_bound();
        return false;
    }
    if c.served == 0 {
        c.since = now_ns();
    }
    c.served += 1;
    // The closure runs as a plain critical section: no request to publish, no combining, for
    // the locks it takes; our own state comes back after it.
    STATE.with(|s| s.combine.set(None));
    let pending = qnode::replace_pending(0);
    // SAFETY: `request` is the address of the waiter's live `Request` (it waits for `DONE`,
    // which only our `qnode::release_served` writes, and only we serve it: we hold the lock,
    // and its place in the queue is ours to pass on); its `run` is its first field
    // (`repr(C)`). We hold the lock: a combiner serves only from its own handoffs, made while
    // it holds it.
    let panicked = unsafe {
        let run = *(request as usize as *const unsafe fn(*const ()) -> bool);
        run(request as usize as *const ())
    };
    #[cfg(loom)]
    if panicked {
        crate::sync::loom_probe::served_panic();
    }
    #[cfg(not(loom))]
    let _ = panicked;
    STATE.with(|s| s.combine.set(Some(c)));
    qnode::replace_pending(pending);
    #[cfg(loom)]
    crate::sync::loom_probe::served();
    true
}

/// Restores [`State::inside`] to the enclosing call's entry when dropped (also when the
/// closure unwinds).
struct Leave<'a> {
    state: &'a State,
    outer: Inside,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.state.inside.set(self.outer);
    }
}

/// Releases the lock when dropped (also when the caller's own closure unwinds).
struct Unlock<'a, L: DelegateRaw> {
    raw: &'a L,
}

impl<L: DelegateRaw> Drop for Unlock<'_, L> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this thread holds the lock (`run` made the guard only then).
        unsafe { self.raw.unlock() };
    }
}

/// [`Unlock`] with the combining session `combine` on for the release, then off.
struct CombiningUnlock<'a, L: DelegateRaw> {
    raw: &'a L,
    state: &'a State,
    combine: Option<Combine>,
}

impl<L: DelegateRaw> Drop for CombiningUnlock<'_, L> {
    fn drop(&mut self) {
        self.state.combine.set(self.combine);
        // SAFETY: this thread holds the lock (`run_queued` made the guard only then).
        unsafe { self.raw.unlock() };
        self.state.combine.set(None);
    }
}

/// `Delegate::delegate` on a raw lock: runs `f` under `raw`, on this thread or on a combiner's.
#[inline]
pub(crate) fn run<L: DelegateRaw, R: Send, F: FnOnce() -> R + Send>(raw: &L, f: F) -> R {
    let lock = raw as *const L as usize;
    // Outside a thread-local (a lock taken in a thread-local destructor), delegate is lock():
    // nothing is published, so the slow path always ends holding the lock.
    let Ok(state) = STATE.try_with(|s| s as *const State) else {
        if !raw.try_lock_fast() {
            let holds = raw.lock_or_served();
            debug_assert!(holds);
        }
        let _unlock = Unlock { raw };
        return f();
    };
    // SAFETY: the thread-local outlives this call (it is not being destroyed: `try_with`
    // succeeded, and we are inside the thread's own code).
    let state = unsafe { &*state };
    let outer = state.inside.get();
    if outer != Inside::NONE {
        return run_nested(raw, f, state, outer);
    }
    // `Inside::one` tags the address with its bit 0.
    const { assert!(align_of::<L>() >= 2) };
    if raw.try_lock_fast() {
        // Entered after the CAS and left before the release, so that the release's RMW, not
        // the next acquisition's CAS, waits for both stores (`_leave` drops first).
        let _unlock = Unlock { raw };
        state.inside.set(Inside::one(lock));
        let _leave = Leave { state, outer };
        return f();
    }
    state.inside.set(Inside::one(lock));
    let _leave = Leave { state, outer };
    run_queued(raw, f, state)
}

/// [`run`] with this thread already inside `delegate` of `outer`: panics if `raw` is among
/// them, else links an entry for `raw` in front of them and runs `f`.
#[cold]
#[inline(never)]
fn run_nested<L: DelegateRaw, R: Send, F: FnOnce() -> R + Send>(
    raw: &L,
    f: F,
    state: &State,
    outer: Inside,
) -> R {
    let lock = raw as *const L as usize;
    if outer.contains(lock) {
        panic!(
            "numa_locks: delegate called on a lock from inside a closure already running under \
             that lock (it would wait for itself)"
        );
    }
    let entry = Nested { lock, outer };
    state
        .inside
        .set(Inside(core::ptr::from_ref(&entry) as usize));
    let _leave = Leave { state, outer };
    if raw.try_lock_fast() {
        let _unlock = Unlock { raw };
        return f();
    }
    run_queued(raw, f, state)
}

/// [`run`]'s slow path: publish `f`, queue, and either take the lock (and combine) or take the
/// result a combiner left.
#[cold]
#[inline(never)]
fn run_queued<L: DelegateRaw, R: Send, F: FnOnce() -> R + Send>(raw: &L, f: F, state: &State) -> R {
    let request = Request {
        run: run_request::<F, R>,
        f: UnsafeCell::new(ManuallyDrop::new(f)),
        out: UnsafeCell::new(None),
    };
    let (max, max_ns) = crate::tunables::delegate_bounds();
    let combine = Combine {
        locality: L::LOCALITY,
        place: if L::LOCALITY == Locality::Any {
            0
        } else {
            qnode::current_place()
        },
        served: 0,
        since: 0,
        max,
        max_ns,
    };
    // The closure moved into the request: the stores the combiner's reads will pay for.
    crate::sync::plain_write(&request.lines());
    qnode::replace_pending(core::ptr::from_ref(&request) as usize as u64);
    state.combine.set(Some(combine));
    let holds = raw.lock_or_served();
    let combine = state.combine.take();
    qnode::replace_pending(0);
    if holds {
        // SAFETY: nobody ran the request (we were made head, or never queued), so the closure
        // is still in it; we take it once, and the request is not used again.
        let f = unsafe { ManuallyDrop::take(&mut *request.f.get()) };
        // The release with the combining session on: CnaMutex and HqMutex may make the handoff
        // they deferred there, and we serve from it as from our acquisition's.
        let _unlock = CombiningUnlock {
            raw,
            state,
            combine,
        };
        return f();
    }
    // Served: the combiner stored the outcome before its Release swap of `DONE`, which our
    // wait read with Acquire. Its line comes back from the combiner's cache.
    crate::sync::plain_read(&[request.out.get() as *const u8]);
    match request.out.into_inner() {
        Some(Ok(value)) => value,
        Some(Err(panic)) => resume_unwind(panic),
        None => unreachable!("a served delegate request without an outcome"),
    }
}
