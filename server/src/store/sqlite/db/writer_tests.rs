//! The writer's back-pressure and authentication's own reader.

mod auth_reader {
    use super::super::*;

    #[tokio::test]
    async fn authentication_does_not_wait_behind_the_listing_reader() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("a.db").display().to_string(), |_| Ok(())).unwrap();
        // A long listing holds the reader connection...
        let held = Arc::clone(&db.reader);
        let guard = std::thread::spawn(move || {
            let _g = super::super::lock(&held);
            std::thread::sleep(std::time::Duration::from_secs(30));
        });
        // ...and authentication still reads at once, on its own connection.
        let n: i64 = db
            .read_auth(|c| {
                Ok(c.query_row("SELECT COUNT(*) FROM idempotency_keys", [], |r| r.get(0))?)
            })
            .await
            .unwrap();
        assert_eq!(n, 0);
        drop(guard); // the sleeping thread is detached; the test does not wait for it
    }
}

mod back_pressure {
    use super::super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_write_queue_answers_busy_at_once() {
        let db = Arc::new(Db::open_with_queue(":memory:", |_| Ok(()), 1).unwrap());
        // The first job holds the writer until released.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let mut started_tx = Some(started_tx);
        let first = {
            let db = Arc::clone(&db);
            tokio::spawn(async move {
                db.write(Durability::Full, move |_| {
                    if let Some(tx) = started_tx.take() {
                        let _ = tx.send(());
                    }
                    let _ = held.recv();
                    Ok(())
                })
                .await
            })
        };
        started.await.unwrap();
        // Three more writers while the writer is held: one fits in the queue, the others are
        // refused (try_send: they never wait for the writer).
        let tasks: Vec<_> = (0..3)
            .map(|i| {
                let db = Arc::clone(&db);
                tokio::spawn(async move { db.write(Durability::Full, move |_| Ok(i)).await })
            })
            .collect();
        // Busy answers come back while the writer is still held (bounded wait, not a timing).
        for _ in 0..10_000 {
            if tasks.iter().filter(|t| t.is_finished()).count() >= 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let mut busy = 0;
        let mut queued = Vec::new();
        for t in tasks {
            if t.is_finished() {
                assert!(matches!(t.await.unwrap(), Err(DbError::Busy)));
                busy += 1;
            } else {
                queued.push(t);
            }
        }
        assert_eq!(busy, 2, "two writers refused while the writer was held");
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        let mut ran = 0;
        for t in queued {
            match t.await.unwrap() {
                Ok(_) => ran += 1,
                Err(DbError::Busy) => busy += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((ran, busy), (1, 2), "one queued and run, two refused");
    }
}
