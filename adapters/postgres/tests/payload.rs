//! Payloads in SQL: JSON payloads are `jsonb` operators can query, every payload comes back
//! to workers byte for byte, and a version 2 store upgrades with its payloads intact.

mod common;

use std::time::Duration;

use fairq_postgres::{PgBackend, PgOptions, Producer};
use fairq_worker::{Backend, Failure, JobId, ListFilter, NewJob, ReviveTarget};
use proptest::prelude::*;
use serde_json::{json, Value};

const LEASE: Duration = Duration::from_secs(30);

/// The two payload columns of a job, wherever it is.
async fn columns(t: &common::TestStore, id: JobId) -> (Option<Vec<u8>>, Option<Value>) {
    let row = t
        .admin
        .query_one(
            &format!(
                "SELECT payload, payload_json FROM \"{0}\".jobs WHERE id = $1
                 UNION ALL SELECT payload, payload_json FROM \"{0}\".archive WHERE id = $1",
                t.schema
            ),
            &[&(id.0 as i64)],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_payloads_are_queryable_with_jsonb_operators() {
    let t = store_or_skip!("jsonq");
    // Canonical JSON (a serde_json value: keys in order) and a struct's field order.
    let canonical = t
        .store
        .enqueue(NewJob::json("mail", "welcome", &json!({"to": "ada", "user": 7})).unwrap())
        .await
        .unwrap();
    let struct_order = br#"{"user":8,"to":"grace","amount":12.5}"#.to_vec();
    let unordered = t
        .store
        .enqueue(NewJob::new("mail", "welcome", struct_order.clone()))
        .await
        .unwrap();
    let binary = t
        .store
        .enqueue(NewJob::new("mail", "welcome", vec![0xff, 0, 1]))
        .await
        .unwrap();

    let (bytes, value) = columns(&t, canonical).await;
    assert_eq!(bytes, None, "canonical JSON is stored once, as jsonb");
    assert_eq!(value, Some(json!({"to": "ada", "user": 7})));
    let (bytes, value) = columns(&t, unordered).await;
    assert_eq!(
        bytes.as_deref(),
        Some(&struct_order[..]),
        "field order is kept"
    );
    assert_eq!(
        value,
        Some(json!({"user": 8, "to": "grace", "amount": 12.5}))
    );
    assert_eq!(columns(&t, binary).await, (Some(vec![0xff, 0, 1]), None));

    // What an operator types.
    let rows = t
        .admin
        .query(
            &format!(
                "SELECT id, payload_json->>'to' FROM \"{}\".jobs
                 WHERE (payload_json->>'user')::int > 6 ORDER BY id",
                t.schema
            ),
            &[],
        )
        .await
        .unwrap();
    let found: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        found,
        vec![
            (canonical.0 as i64, "ada".to_string()),
            (unordered.0 as i64, "grace".to_string())
        ]
    );

    // Workers get the bytes that were enqueued; finished jobs stay queryable in the archive.
    let jobs = t.store.claim("mail", 10, LEASE).await.unwrap();
    let payloads: Vec<&[u8]> = jobs.iter().map(|j| &j.payload[..]).collect();
    assert_eq!(
        payloads,
        vec![
            &br#"{"to":"ada","user":7}"#[..],
            &struct_order[..],
            &[0xff, 0, 1][..]
        ]
    );
    for job in &jobs {
        t.store.complete(job.claim).await.unwrap();
    }
    let done: i64 = t
        .admin
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{}\".archive WHERE payload_json @> '{{\"to\": \"grace\"}}'",
                t.schema
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(done, 1);
    t.cleanup().await;
}

/// Payloads of every kind through every path that copies them: the insert (batched and in
/// the caller's transaction), claim, get, list, the archive, revival.
/// JSON larger than the store keeps as `jsonb` (1 MiB) is stored as its bytes only: `jsonb`
/// takes up to six times the text's size and refuses values beyond 255 MiB, so a valid JSON
/// payload of some tens of megabytes could not be enqueued at all. Here 3 MiB of `[1,1,...]`
/// (18 MiB as `jsonb`) goes in as bytes and comes back byte for byte, through an enqueue of
/// the store and through a producer's batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_json_payloads_are_stored_as_bytes_only() {
    let t = store_or_skip!("bigjson");
    let mut big = b"[1".to_vec();
    while big.len() < 3 << 20 {
        big.extend_from_slice(b",1");
    }
    big.push(b']');
    let one = t
        .store
        .enqueue(NewJob::new("q", "k", big.clone()))
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&common::url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let batch = t
        .store
        .producer()
        .enqueue_many(
            &client,
            vec![
                NewJob::new("q", "k", big.clone()),
                NewJob::new("q", "k", b"[1,2]".to_vec()),
            ],
        )
        .await
        .unwrap();
    for id in [one, batch[0]] {
        let (bytes, value) = columns(&t, id).await;
        assert!(value.is_none(), "a large payload is also kept as jsonb");
        assert!(
            bytes.as_deref() == Some(&big[..]),
            "the bytes are not the payload's"
        );
    }
    assert_eq!(columns(&t, batch[1]).await, (None, Some(json!([1, 2]))));
    let jobs = t.store.claim("q", 3, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 3);
    assert!(jobs[0].payload == big && jobs[1].payload == big);
    assert_eq!(jobs[2].payload, b"[1,2]");
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_payload_comes_back_byte_for_byte_on_every_path() {
    let t = store_or_skip!("exact");
    let payloads: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"plain text".to_vec(),
        vec![0, 159, 146, 150, 255],
        br#"{"b":1,"a":2}"#.to_vec(),
        br#"{"a":1,"a":2}"#.to_vec(),
        br#"{ "spaced" : [1, 2] }"#.to_vec(),
        br#""nul \u0000 inside""#.to_vec(),
        br#""\u00e9 escaped""#.to_vec(),
        b"1e5".to_vec(),
        b"1e-7".to_vec(),
        b"-0.0".to_vec(),
        b"1.50".to_vec(),
        b"123456789012345678901234567890".to_vec(),
        br#"{"k":"\u001f\n\t\\\"","z":[{},[],null,true,false]}"#.to_vec(),
        b"0.30000000000000004".to_vec(),
        "\"unicode \u{1F600} and \u{2028}\"".as_bytes().to_vec(),
        b"[1,2,3]   ".to_vec(),
    ];
    let (mut client, connection) = tokio_postgres::connect(&common::url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let tx = client.transaction().await.unwrap();
    let half = payloads.len() / 2;
    let mut ids = Producer::new(&t.schema)
        .unwrap()
        .enqueue_many(
            &tx,
            payloads[..half]
                .iter()
                .map(|p| NewJob::new("q", "k", p.clone()))
                .collect(),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    ids.extend(
        t.store
            .enqueue_many(
                payloads[half..]
                    .iter()
                    .map(|p| NewJob::new("q", "k", p.clone()))
                    .collect(),
            )
            .await
            .unwrap(),
    );
    let by_id = |id: JobId| &payloads[ids.iter().position(|i| *i == id).unwrap()];

    let listed = t
        .store
        .list(ListFilter::default().queue("q").limit(100))
        .await
        .unwrap();
    assert_eq!(listed.len(), payloads.len());
    for info in &listed {
        assert_eq!(&info.payload, by_id(info.id), "listed job {}", info.id);
    }
    let jobs = t.store.claim("q", 100, LEASE).await.unwrap();
    assert_eq!(jobs.len(), payloads.len());
    for job in &jobs {
        assert_eq!(
            &job.payload,
            by_id(job.claim.id),
            "claimed job {}",
            job.claim.id
        );
        t.store
            .fail(job, Failure::permanent("to the archive"))
            .await
            .unwrap();
    }
    for id in &ids {
        let info = t.store.get(*id).await.unwrap().unwrap();
        assert_eq!(&info.payload, by_id(*id), "archived job {id}");
    }
    let revived = t
        .store
        .revive(ReviveTarget::AllDead {
            queue: Some("q".into()),
        })
        .await
        .unwrap();
    assert_eq!(revived as usize, payloads.len());
    let again = t.store.claim("q", 100, LEASE).await.unwrap();
    assert_eq!(again.len(), payloads.len());
    for job in &again {
        assert_eq!(
            &job.payload,
            by_id(job.claim.id),
            "revived job {}",
            job.claim.id
        );
    }
    t.cleanup().await;
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
        "[\u{1}-\u{1f}\"\\\\/]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Random JSON, compact or pretty, round-trips through the real server: whatever the store
/// decided to keep as jsonb alone, jsonb's own text brings back the same bytes.
#[test]
fn random_json_round_trips_through_the_server() {
    if !common::available() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(t) = runtime.block_on(common::TestStore::new("jsonprop")) else {
        return;
    };
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 48,
        ..Default::default()
    });
    let batch = prop::collection::vec((json_value(), any::<bool>()), 1..8);
    let result = runner.run(&batch, |values| {
        let payloads: Vec<Vec<u8>> = values
            .iter()
            .map(|(v, pretty)| {
                if *pretty {
                    serde_json::to_vec_pretty(v).unwrap()
                } else {
                    serde_json::to_vec(v).unwrap()
                }
            })
            .collect();
        runtime.block_on(async {
            let ids = t
                .store
                .enqueue_many(
                    payloads
                        .iter()
                        .map(|p| NewJob::new("p", "k", p.clone()))
                        .collect(),
                )
                .await
                .unwrap();
            let jobs = t.store.claim("p", payloads.len(), LEASE).await.unwrap();
            for job in &jobs {
                let i = ids.iter().position(|id| *id == job.claim.id).unwrap();
                prop_assert_eq!(&job.payload, &payloads[i]);
                // jsonb holds the value serde_json (so a handler) reads from the payload,
                // compared by the server, exactly (numbers as numeric).
                let parsed: Value = serde_json::from_slice(&payloads[i]).unwrap();
                let same: bool = t
                    .admin
                    .query_one(
                        &format!(
                            "SELECT payload_json = $2::text::jsonb FROM \"{}\".jobs WHERE id = $1",
                            t.schema
                        ),
                        &[&(job.claim.id.0 as i64), &parsed.to_string()],
                    )
                    .await
                    .unwrap()
                    .get(0);
                prop_assert!(same, "jsonb differs from {}", parsed);
                t.store.complete(job.claim).await.unwrap();
            }
            prop_assert_eq!(jobs.len(), payloads.len());
            Ok(())
        })
    });
    runtime.block_on(t.cleanup());
    result.unwrap();
}

/// A version 2 store with jobs (live and archived, JSON and binary payloads) upgrades in
/// place: the payloads come back unchanged, and new JSON payloads are jsonb.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_schema_with_payloads_upgrades_in_place() {
    let Some(admin) = common::admin().await else {
        return;
    };
    let schema = common::unique_schema("upgrade3");
    for (_, sql) in &fairq_postgres::MIGRATIONS[..2] {
        admin
            .batch_execute(
                &sql.replace("fairq.", &format!("\"{schema}\"."))
                    .replace("EXISTS fairq;", &format!("EXISTS \"{schema}\";")),
            )
            .await
            .unwrap();
    }
    admin
        .batch_execute(&format!(
            "INSERT INTO \"{schema}\".jobs (id, queue, kind, key, payload, state, run_at, due_at,
                 due_seq, round, ready_seq, enqueued_at)
             VALUES (1, 'q', 'k', 'a', '\\x7b2261223a317d', 'scheduled', 0, 0, 1, 1, 1, 0),
                    (2, 'q', 'k', 'b', '\\x00ff', 'scheduled', 0, 0, 2, 1, 2, 0);
             INSERT INTO \"{schema}\".archive (id, queue, kind, key, payload, metadata, state,
                 has_dependents, attempts, token, enqueued_at, finished_at, failures, runs_ms)
             VALUES (3, 'q', 'k', NULL, '\\x5b315d', '{{}}', 'succeeded', false, 1, 1, 0, 10, 0,
                     '{{5}}');
             SELECT setval('\"{schema}\".job_ids', 3);"
        ))
        .await
        .unwrap();
    let store = PgBackend::connect(
        &common::url(),
        PgOptions::default()
            .schema(&schema)
            .clock(fairq_worker::ManualClock::new(1_000))
            .migrate(true),
    )
    .await
    .unwrap();
    let version: i32 = admin
        .query_one(
            &format!("SELECT max(version) FROM \"{schema}\".schema_version"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, fairq_postgres::SCHEMA_VERSION);
    let jobs = store.claim("q", 10, LEASE).await.unwrap();
    let got: Vec<(u64, Vec<u8>)> = jobs
        .iter()
        .map(|j| (j.claim.id.0, j.payload.clone()))
        .collect();
    assert_eq!(
        got,
        vec![(1, br#"{"a":1}"#.to_vec()), (2, vec![0, 0xff])],
        "live payloads survive the upgrade"
    );
    let archived = store.get(JobId(3)).await.unwrap().unwrap();
    assert_eq!(archived.payload, b"[1]");
    for job in &jobs {
        store.complete(job.claim).await.unwrap();
    }
    assert_eq!(
        store.get(JobId(1)).await.unwrap().unwrap().payload,
        br#"{"a":1}"#
    );
    // New jobs use the new column; the constraint refuses a row with no payload at all.
    let id = store
        .enqueue(NewJob::new("q", "k", br#"{"n":1}"#.to_vec()))
        .await
        .unwrap();
    let stored: Option<Value> = admin
        .query_one(
            &format!("SELECT payload_json FROM \"{schema}\".jobs WHERE id = $1"),
            &[&(id.0 as i64)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, Some(json!({"n": 1})));
    let refused = admin
        .batch_execute(&format!(
            "INSERT INTO \"{schema}\".jobs (queue, kind, state, enqueued_at)
             VALUES ('q', 'k', 'scheduled', 0)"
        ))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("jobs_payload_present")
            || format!("{refused:?}").contains("jobs_payload_present"),
        "{refused:?}"
    );
    drop(store);
    common::drop_schema(&admin, &schema).await;
}
