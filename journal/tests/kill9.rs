//! Kill -9 harness on the real file system.
//!
//! The test binary re-invokes itself as a child process (selected by an environment
//! variable) that puts items as fast as it can under `Always`, `Group` or `Never` (with and
//! without `mapped_writes`) and prints the id of every acknowledged put (under `Never` a
//! put is acknowledged once the OS has it, which a killed process does not lose, whether
//! it was written or stored into a map; with 16 KiB segments the next segment is being
//! created ahead all the time). The parent kills it with SIGKILL at a random moment, reopens the
//! queue and checks that every acknowledged item is there, intact and in id order.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fairq_journal::{JournalConfig, JournaledQueue, SyncPolicy};

const CHILD_ENV: &str = "FAIRQ_JOURNAL_KILL9_CHILD";
const ROUNDS: u64 = 60;
/// Keeps the whole harness bounded even on a slow disk.
const TIME_BUDGET: Duration = Duration::from_secs(60);
/// A child that acknowledges nothing for this long is stuck: the test fails.
const ROUND_LIMIT: Duration = Duration::from_secs(30);

fn config(policy: &str) -> JournalConfig {
    JournalConfig {
        sync: match policy {
            "always" => SyncPolicy::Always,
            "never" | "mapped" => SyncPolicy::Never,
            _ => SyncPolicy::Group,
        },
        mapped_writes: policy == "mapped",
        segment_size: 16 * 1024,
        ..JournalConfig::default()
    }
}

fn payload(key: &str, seq: u64) -> Vec<u8> {
    let mut p = key.as_bytes().to_vec();
    p.push(b'|');
    p.extend((0..(seq * 37) % 700).map(|i| (i as u8) ^ (seq as u8)));
    p
}

/// The child: `dir|policy|threads|round`. Runs until killed.
#[test]
fn kill9_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return; // an ordinary test run: nothing to do
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (dir, policy, threads, round) = (parts[0], parts[1], parts[2], parts[3]);
    let threads: u64 = threads.parse().unwrap();
    let q = JournaledQueue::open(dir, "k9", config(policy)).unwrap();
    // Written straight to stdout (not through `println!`, which the test harness may capture).
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "READY").unwrap();
        out.flush().unwrap();
    }
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let q = q.clone();
            let round = round.to_string();
            std::thread::spawn(move || {
                for seq in 0.. {
                    let key = format!("{round}-{t}-{seq}");
                    let id = q.put(&payload(&key, seq)).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {} {} {}", id.0, key, seq).unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn verify_and_consume(dir: &Path, policy: &str, acked: &BTreeMap<u64, (String, u64)>) {
    let q = JournaledQueue::open(dir, "k9", config(policy))
        .unwrap_or_else(|e| panic!("reopen after kill -9 failed: {e}"));
    let r = q.reader("").unwrap();
    let mut found = BTreeMap::new();
    let mut last = 0;
    while let Some(item) = r.get().unwrap() {
        assert!(item.id.0 > last, "ids out of order");
        last = item.id.0;
        found.insert(item.id.0, item.data);
        r.commit(item.id).unwrap();
    }
    for (id, (key, seq)) in acked {
        let data = found
            .get(id)
            .unwrap_or_else(|| panic!("{policy}: acknowledged item {id} ({key}) lost"));
        assert_eq!(data, &payload(key, *seq), "{policy}: item {id} damaged");
    }
    q.close().unwrap();
}

#[test]
fn acknowledged_puts_survive_kill_9() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let dirs = [
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    ];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut total_acked = 0usize;
    let mut rounds = 0;
    for round in 0..ROUNDS {
        if started.elapsed() > TIME_BUDGET && rounds >= 50 {
            break;
        }
        let (policy, threads, d) = match round % 5 {
            0 => ("always", 1, 0),
            1 => ("always", 2, 0),
            2 => ("group", 4, 1),
            3 => ("never", 2, 2),
            _ => ("mapped", 2, 3),
        };
        let dir = dirs[d].path();
        let mut child = Command::new(&exe)
            .args(["--exact", "kill9_child", "--nocapture", "--test-threads=1"])
            .env(
                CHILD_ENV,
                format!("{}|{policy}|{threads}|{round}", dir.display()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Lines arrive through a channel so the parent can give up on a stuck child.
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Kill at a random moment: sometimes during open (recovery), else after some puts.
        let kill_after = match rng.below(6) {
            0 => None,
            _ => Some(rng.below(150)),
        };
        let mut acked = BTreeMap::new();
        let parse = |line: &str, acked: &mut BTreeMap<u64, (String, u64)>| {
            // The harness may print its own prefix ("test kill9_child ... ") on the same line.
            let Some(at) = line.find("ACK ") else { return };
            let mut f = line[at..].split_whitespace();
            if f.next() == Some("ACK") {
                let id: u64 = f.next().unwrap().parse().unwrap();
                let key = f.next().unwrap().to_string();
                let seq: u64 = f.next().unwrap().parse().unwrap();
                acked.insert(id, (key, seq));
            }
        };
        if let Some(n) = kill_after {
            // n == 0: kill as soon as the queue is open (READY or a first ACK).
            let deadline = Instant::now() + ROUND_LIMIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let Ok(line) = lines.recv_timeout(left) else {
                    child.kill().unwrap();
                    panic!("round {round}: the child stopped acknowledging puts");
                };
                parse(&line, &mut acked);
                if acked.len() as u64 >= n.max(1) || (n == 0 && line.ends_with("READY")) {
                    break;
                }
            }
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        reader.join().unwrap();
        // Every line the child finished printing before it died was acknowledged.
        for line in lines.try_iter() {
            parse(&line, &mut acked);
        }
        if acked.is_empty() && kill_after.is_some_and(|n| n > 0) {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("child acknowledged nothing (status {status}): {err}");
        }
        total_acked += acked.len();
        verify_and_consume(dir, policy, &acked);
        rounds += 1;
    }
    assert!(rounds >= 50, "only {rounds} rounds ran");
    assert!(
        total_acked > 100,
        "too few acknowledged puts: {total_acked}"
    );
    println!(
        "kill -9 harness: {rounds} rounds, {total_acked} acknowledged puts verified (seed {seed})"
    );
}
