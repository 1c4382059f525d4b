//! A simulated disk whose segment writes and syncs can be held inside their system calls, so
//! that a test decides exactly which puts meet: while a leader is held in its `write`, the
//! puts that arrive queue behind it; while a syncer is held in its `fdatasync`, the puts that
//! arrive wait for the next sync.
//!
//! Shared by the test files that need it (`mod gate;`); each uses part of it.
#![allow(dead_code)]

use std::io::{self, IoSlice};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use fairq_journal::sim::{ForwardWrite, SimDisk, WrapFiles};
use fairq_journal::storage::WriteFile;

/// How long a test waits for calls to reach the gate before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// One kind of call (writes or syncs) at the gate.
#[derive(Debug, Default)]
struct Door {
    /// Calls wait while this is set.
    closed: bool,
    /// Calls waiting at the closed door.
    held: usize,
    /// Calls that went through.
    passed: usize,
}

#[derive(Debug, Default)]
struct Doors {
    writes: Door,
    syncs: Door,
}

/// Holds segment writes and syncs while their door is closed. Both doors start open.
#[derive(Debug, Default)]
pub struct Gate {
    doors: Mutex<Doors>,
    cv: Condvar,
}

impl Gate {
    fn doors(&self) -> MutexGuard<'_, Doors> {
        self.doors.lock().unwrap()
    }

    /// Holds every write that arrives from now on.
    pub fn close_writes(&self) {
        self.doors().writes.closed = true;
    }

    /// Lets the held writes (and all later ones) through.
    pub fn open_writes(&self) {
        self.doors().writes.closed = false;
        self.cv.notify_all();
    }

    /// Holds every sync that arrives from now on.
    pub fn close_syncs(&self) {
        self.doors().syncs.closed = true;
    }

    /// Lets the held syncs (and all later ones) through.
    pub fn open_syncs(&self) {
        self.doors().syncs.closed = false;
        self.cv.notify_all();
    }

    /// Write calls that went through so far.
    pub fn writes(&self) -> usize {
        self.doors().writes.passed
    }

    /// Sync calls that went through so far.
    pub fn syncs(&self) -> usize {
        self.doors().syncs.passed
    }

    /// Waits until `n` writes are held; fails the test if they never come.
    pub fn await_writes_held(&self, n: usize) {
        self.await_held(n, |d| &d.writes, "writes");
    }

    /// Waits until `n` syncs are held; fails the test if they never come.
    pub fn await_syncs_held(&self, n: usize) {
        self.await_held(n, |d| &d.syncs, "syncs");
    }

    fn await_held(&self, n: usize, door: fn(&Doors) -> &Door, what: &str) {
        let (g, timeout) = self
            .cv
            .wait_timeout_while(self.doors(), PATIENCE, |d| door(d).held < n)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "only {} {what} reached the gate, {n} expected",
            door(&g).held
        );
    }

    /// A call of the kind `door` picks arrives: it waits while that door is closed.
    fn pass(&self, door: fn(&mut Doors) -> &mut Door) {
        let mut g = self.doors();
        door(&mut g).held += 1;
        self.cv.notify_all();
        let mut g = self.cv.wait_while(g, |d| door(d).closed).unwrap();
        let d = door(&mut g);
        d.held -= 1;
        d.passed += 1;
    }
}

/// A segment file whose writes and syncs pass through the gate.
#[derive(Debug)]
struct GatedFile(Box<dyn WriteFile>, Arc<Gate>);

impl ForwardWrite for GatedFile {
    fn inner(&self) -> &dyn WriteFile {
        self.0.as_ref()
    }
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.1.pass(|d| &mut d.writes);
        self.0.write(buf)
    }
    fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.1.pass(|d| &mut d.writes);
        self.0.write_vectored(bufs)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.1.pass(|d| &mut d.syncs);
        self.0.sync_data()
    }
}

/// `disk` with its file writes and syncs passing through `gate` (segment headers are written
/// while the gate is open, before a test closes it).
pub fn gated_disk(disk: &SimDisk, gate: &Arc<Gate>) -> WrapFiles {
    let gate = gate.clone();
    WrapFiles::new(disk.clone()).write_files(move |_, f| Box::new(GatedFile(f, gate.clone())))
}
