//! A driver for instruction counts and CPU time of the journal's put and get paths, which
//! a noisy machine disturbs less than wall time: one contender runs a number of operations
//! and prints its wall time and the process's user and system CPU time per operation.
//!
//! ```sh
//! cargo build --release -p fairq-benches --example journal_ops
//! target/release/examples/journal_ops put 128 1000000
//! # Under valgrind, with rustix on the C library (its raw backend crashes valgrind):
//! RUSTFLAGS="--cfg rustix_use_libc" CARGO_TARGET_DIR=target/valgrind \
//!     cargo build --release -p fairq-benches --example journal_ops
//! valgrind --tool=callgrind target/valgrind/release/examples/journal_ops put 128 100000
//! valgrind --tool=callgrind target/valgrind/release/examples/journal_ops raw-write 128 100000
//! ```
//!
//! Arguments: contender, item size in bytes, operations. Contenders: `put` (`put` under
//! `SyncPolicy::Never`, one thread), `put-mapped` (the same with
//! `JournalConfig::mapped_writes`), `put-N` (the same puts split over N threads),
//! `raw-write` (one `write` per item), `yaque` (a yaque send with its default segment size,
//! as in the journal bench), `get` (get+commit of a queue filled beforehand), `raw-read`
//! (a length-prefixed file read 64 KiB at a time, each item copied into a `Vec`), `fan-out-N` (N readers of a filled queue, one thread
//! each, draining it at once; the count is deliveries), `raw-read-N` (N threads each
//! reading their own copy of the raw file), `mapped-append` (a design the journal does not
//! have, measured as its ceiling: each put's record, header and checksum as the journal
//! encodes them, copied into a shared memory map of a segment file allocated in advance; see
//! [`mapped_append`]). Filling is not timed; subtract a run with 0
//! operations to leave it out of instruction counts. `JOURNAL_OPS_SEGMENT` and
//! `JOURNAL_OPS_CACHE` set the queue's segment size and read cache (bytes), and
//! `JOURNAL_OPS_COALESCE` (`on`, `off`, else `auto`) its `Coalesce`.

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use fairq_journal::format::{encode_record_header, Record, RecordKind, RECORD_HEADER_LEN};
use fairq_journal::{Coalesce, JournalConfig, JournaledQueue, SyncPolicy};

/// User and system CPU time of the whole process so far.
fn cpu() -> (Duration, Duration) {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let d = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (d(u.ru_utime), d(u.ru_stime))
}

fn queue(dir: &Path) -> JournaledQueue {
    queue_with(dir, false)
}

fn queue_with(dir: &Path, mapped_writes: bool) -> JournaledQueue {
    let cfg = JournalConfig {
        sync: SyncPolicy::Never,
        mapped_writes,
        segment_size: std::env::var("JOURNAL_OPS_SEGMENT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(JournalConfig::default().segment_size),
        read_cache_bytes: std::env::var("JOURNAL_OPS_CACHE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(JournalConfig::default().read_cache_bytes),
        coalesce: match std::env::var("JOURNAL_OPS_COALESCE").as_deref() {
            Ok("on") => Coalesce::On,
            Ok("off") => Coalesce::Off,
            _ => Coalesce::Auto,
        },
        ..JournalConfig::default()
    };
    JournaledQueue::open(dir, "ops", cfg).expect("open")
}

fn filled(dir: &Path, size: usize, readers: usize, n: u64) -> JournaledQueue {
    let q = queue(dir);
    for r in 0..readers {
        q.reader(&format!("r{r}")).expect("reader");
    }
    let data = vec![0xA5u8; size];
    let items: Vec<&[u8]> = vec![&data[..]; 256];
    let mut left = n;
    while left > 0 {
        let k = left.min(256) as usize;
        q.put_many(&items[..k]).expect("put_many");
        left -= k as u64;
    }
    q
}

/// `n` puts of `data` the way a memory-mapped journal would append them: the record's
/// header (id, add time read from the clock, checksum over header and payload, exactly as
/// `encode_record_header` writes it) and the payload are copied into a `MAP_SHARED` mapping
/// of the segment file, with no system call per put. A put is then in the OS page cache
/// when it returns (a killed process loses nothing), which is what `SyncPolicy::Never`
/// promises. Each segment file (the journal's default segment size) is allocated in full
/// with `fallocate` before it is mapped, so that a store into it cannot meet a full disk
/// (that would be a `SIGBUS`, not an error), and is cut to the length of its records when
/// the next one starts, as rotation would.
fn mapped_append(dir: &Path, data: &[u8], n: u64) {
    let seg_len = JournalConfig::default().segment_size;
    let open = |seg: u64| {
        let file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(dir.join(format!("seg-{seg}")))
            .expect("create segment");
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, seg_len)
            .expect("fallocate");
        // SAFETY: the file was created by this process in a private temporary directory
        // and nothing else opens, truncates or writes it while it is mapped.
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }.expect("mmap");
        (file, map)
    };
    let (mut seg, mut at) = (0u64, 0usize);
    let (mut file, mut map) = open(seg);
    let len = RECORD_HEADER_LEN + data.len();
    for id in 0..n {
        if at + len > map.len() {
            drop(map);
            file.set_len(at as u64).expect("truncate");
            seg += 1;
            (file, map) = open(seg);
            at = 0;
        }
        let added_at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let record = Record {
            kind: RecordKind::Item,
            id,
            added_at_ms,
            expires_at_ms: None,
            payload: data,
        };
        let slot = &mut map[at..at + len];
        slot[..RECORD_HEADER_LEN].copy_from_slice(&encode_record_header(&record));
        slot[RECORD_HEADER_LEN..].copy_from_slice(data);
        at += len;
    }
    black_box(&map[..at]);
}

fn raw_file(dir: &Path, size: usize, n: u64) -> std::path::PathBuf {
    let path = dir.join("raw");
    let mut f = std::io::BufWriter::new(File::create(&path).expect("create"));
    let data = vec![0xA5u8; size];
    for _ in 0..n {
        f.write_all(&(size as u32).to_le_bytes()).expect("write");
        f.write_all(&data).expect("write");
    }
    f.flush().expect("flush");
    path
}

fn raw_read(path: &Path, size: usize, n: u64) {
    let f = File::open(path).expect("open");
    let mut buf = vec![0u8; 64 * 1024];
    let (mut file_off, mut filled, mut at) = (0u64, 0usize, 0usize);
    for _ in 0..n {
        if filled - at < 4 + size {
            buf.copy_within(at..filled, 0);
            filled -= at;
            at = 0;
            let k = std::os::unix::fs::FileExt::read_at(&f, &mut buf[filled..], file_off)
                .expect("read");
            file_off += k as u64;
            filled += k;
        }
        let len = u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
        black_box(buf[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: journal_ops put|put-mapped|put-N|raw-write|yaque|mapped-append|get|raw-read|fan-out-N|raw-read-N SIZE OPS";
    let number = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{usage}"))
    };
    let (what, size, n) = (
        args.first().expect(usage).as_str(),
        number(1) as usize,
        number(2),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let data = vec![0xA5u8; size];
    let timed = |f: &dyn Fn()| {
        let c0 = cpu();
        let t0 = Instant::now();
        f();
        let wall = t0.elapsed();
        let c1 = cpu();
        (wall, c1.0 - c0.0, c1.1 - c0.1)
    };
    let (wall, user, sys) = match what {
        "put" => {
            let q = queue(dir.path());
            timed(&|| {
                for _ in 0..n {
                    q.put(&data).expect("put");
                }
            })
        }
        "raw-write" => {
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.path().join("raw"))
                .expect("open");
            let f = std::cell::RefCell::new(&mut f);
            timed(&|| {
                for _ in 0..n {
                    f.borrow_mut().write_all(&data).expect("write");
                }
            })
        }
        "yaque" => {
            let tx = yaque::Sender::open(dir.path().join("q")).expect("open");
            let tx = std::cell::RefCell::new(tx);
            timed(&|| {
                for _ in 0..n {
                    tx.borrow_mut().try_send(&data).expect("send");
                }
            })
        }
        "put-mapped" => {
            let q = queue_with(dir.path(), true);
            timed(&|| {
                for _ in 0..n {
                    q.put(&data).expect("put");
                }
            })
        }
        "mapped-append" => timed(&|| mapped_append(dir.path(), &data, n)),
        "get" => {
            let q = filled(dir.path(), size, 1, n);
            let r = q.reader("r0").expect("reader");
            timed(&|| {
                for _ in 0..n {
                    let item = r.get().expect("get").expect("an item");
                    r.commit(item.id).expect("commit");
                }
            })
        }
        "raw-read" => {
            let path = raw_file(dir.path(), size, n);
            timed(&|| raw_read(&path, size, n))
        }
        other => {
            let (kind, k) = other.rsplit_once('-').expect(usage);
            let k: usize = k.parse().expect(usage);
            let per = n.div_ceil(k as u64);
            match kind {
                "put" => {
                    let q = queue(dir.path());
                    timed(&|| {
                        std::thread::scope(|s| {
                            for _ in 0..k {
                                let (q, data) = (&q, &data);
                                s.spawn(move || {
                                    for _ in 0..per {
                                        q.put(data).expect("put");
                                    }
                                });
                            }
                        })
                    })
                }
                "fan-out" => {
                    let q = filled(dir.path(), size, k, per);
                    let readers: Vec<_> = (0..k)
                        .map(|i| q.reader(&format!("r{i}")).expect("reader"))
                        .collect();
                    timed(&|| {
                        std::thread::scope(|s| {
                            for r in &readers {
                                s.spawn(move || {
                                    for _ in 0..per {
                                        let item = r.get().expect("get").expect("an item");
                                        r.commit(item.id).expect("commit");
                                    }
                                });
                            }
                        })
                    })
                }
                "raw-read" => {
                    let paths: Vec<_> = (0..k)
                        .map(|i| {
                            let d = dir.path().join(format!("t{i}"));
                            std::fs::create_dir(&d).expect("mkdir");
                            raw_file(&d, size, per)
                        })
                        .collect();
                    timed(&|| {
                        std::thread::scope(|s| {
                            for p in &paths {
                                s.spawn(move || raw_read(p, size, per));
                            }
                        })
                    })
                }
                _ => panic!("{usage}"),
            }
        }
    };
    let per = |d: Duration| d.as_secs_f64() * 1e9 / n.max(1) as f64;
    println!(
        "{what} {size} B x {n}: {:.0} ops/s wall; per op: wall {:.0} ns, user {:.0} ns, sys {:.0} ns",
        n as f64 / wall.as_secs_f64().max(1e-12),
        per(wall),
        per(user),
        per(sys),
    );
}
