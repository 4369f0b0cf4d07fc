//! The order an erasure's pieces of work may run in: each piece starts once every earlier piece
//! it conflicts with has landed, as many at once as the machine has cores.
//!
//! Two pieces conflict when one writes a table the other reads or writes (a read-after-write,
//! write-after-read or write-after-write hazard on that table); a piece that may read any
//! table (a pipeline whose inputs can't be told) conflicts with every piece that writes one.
//! Pieces are listed in the plan's order, and a piece only ever waits for earlier ones, so the
//! earliest piece not yet started can always start once what runs now has landed.
//!
//! Among the pieces free to start, the one heading the costliest chain starts first (its own
//! cost plus the costliest chain of the pieces that wait for it: list scheduling by "upward
//! rank", as HEFT does), ties in the plan's order. The cost is what the caller expects a piece
//! to take (an erasure gives the bytes of the files a step rewrites): the longest rewrite no
//! longer waits behind short ones for a core while the other core idles at the end.

use std::collections::BTreeSet;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

use crate::error::{Error, Result};

/// The tables a piece of work reads and the table it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Touch {
    /// The tables it reads (None: it may read any table).
    reads: Option<BTreeSet<String>>,
    /// The table it commits to, if any.
    writes: Option<String>,
}

impl Touch {
    /// A piece that reads and rewrites one table (a row step, a table's cleanup).
    pub(super) fn table(table: &str) -> Touch {
        Touch {
            reads: Some([table.to_string()].into()),
            writes: Some(table.to_string()),
        }
    }

    /// A piece that reads `reads` (None: any table) and writes `target`.
    pub(super) fn reading(reads: Option<BTreeSet<String>>, target: &str) -> Touch {
        Touch {
            reads: reads.map(|mut r| {
                r.insert(target.to_string());
                r
            }),
            writes: Some(target.to_string()),
        }
    }

    /// A piece that touches no table (a step with nothing to carry out).
    pub(super) fn nothing() -> Touch {
        Touch {
            reads: Some(BTreeSet::new()),
            writes: None,
        }
    }

    fn reads(&self, table: &str) -> bool {
        self.reads.as_ref().is_none_or(|r| r.contains(table))
    }

    /// Whether the piece may read or writes `table`.
    pub(super) fn touches(&self, table: &str) -> bool {
        self.reads(table) || self.writes.as_deref() == Some(table)
    }

    /// Whether `later` (listed after this piece) must wait for it.
    fn orders(&self, later: &Touch) -> bool {
        let writes_into = |a: &Touch, b: &Touch| {
            a.writes
                .as_deref()
                .is_some_and(|w| b.reads(w) || b.writes.as_deref() == Some(w))
        };
        writes_into(self, later) || writes_into(later, self)
    }
}

/// How many pieces run at once: the machine's cores (the copy-on-write rewrites and cleanups
/// of different tables are CPU work that one task would do on one core).
pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// For each piece, the earlier pieces it waits for.
pub(super) fn waits(touches: &[Touch]) -> Vec<Vec<usize>> {
    (0..touches.len())
        .map(|j| (0..j).filter(|&i| touches[i].orders(&touches[j])).collect())
        .collect()
}

/// Each piece's upward rank: its cost plus the largest rank of the pieces that wait for it.
pub(super) fn ranks(waits: &[Vec<usize>], costs: &[u64]) -> Vec<u64> {
    let mut rank: Vec<u64> = (0..waits.len())
        .map(|j| costs.get(j).copied().unwrap_or(0))
        .collect();
    // A piece waits only for earlier ones: from the last piece back, every waiter is final.
    for j in (0..waits.len()).rev() {
        for &i in &waits[j] {
            rank[i] = rank[i].max(costs.get(i).copied().unwrap_or(0).saturating_add(rank[j]));
        }
    }
    rank
}

/// Runs the pieces `touches` lists, each as a task of its own started by `start` once every
/// piece it waits for ([`waits`]) has landed and been recorded, at most `cores` at once, the
/// ready piece of the highest [`ranks`] by `costs` first (a missing cost is 0; ties in list
/// order); `record` is called here, one piece at a time, as each lands — after the core the
/// piece held has gone to a piece already free to start, unless a piece waiting for it ranks
/// higher than every free one (an erasure's `record` saves its journal, a sync on the disk:
/// the other pieces need not wait for it, the costliest chain does).
///
/// After a piece fails (or `record` does) nothing more starts; the pieces running then run to
/// their end and those that land are recorded; the first error is returned. A panic in a piece
/// is resumed here.
pub(super) async fn run_ordered<T: Send + 'static>(
    touches: &[Touch],
    costs: &[u64],
    cores: usize,
    mut start: impl FnMut(usize) -> Result<BoxFuture<'static, Result<T>>>,
    mut record: impl FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    let waits = waits(touches);
    let rank = ranks(&waits, costs);
    let mut order: Vec<usize> = (0..touches.len()).collect();
    order.sort_by_key(|&j| (std::cmp::Reverse(rank[j]), j));
    let mut landed = vec![false; touches.len()];
    let mut started = vec![false; touches.len()];
    let mut running = FuturesUnordered::new();
    let mut failed: Option<Error> = None;
    // A piece that landed, recorded once its core has gone to a piece already free to start
    // (`false`), or before anything starts (`true`: a piece waiting for it ranks highest).
    let mut to_record: Option<(usize, T, bool)> = None;
    loop {
        let record_first = matches!(to_record, Some((_, _, true)));
        if failed.is_none() && !record_first {
            for &j in &order {
                if running.len() >= cores.max(1) {
                    break;
                }
                if started[j] || !waits[j].iter().all(|&i| landed[i]) {
                    continue;
                }
                match start(j) {
                    Ok(piece) => {
                        started[j] = true;
                        let task = tokio::spawn(piece);
                        running.push(async move { (j, task.await) });
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
        }
        if let Some((j, t, _)) = to_record.take() {
            match record(j, t) {
                Ok(()) => landed[j] = true,
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
            // Then the pieces that waited for it.
            continue;
        }
        let Some((j, done)) = running.next().await else {
            break;
        };
        let done = match done {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Internal(format!("a task of the erasure ended: {e}"))),
        };
        match done {
            Ok(t) => {
                let ready = |k: usize, also: Option<usize>| {
                    !started[k] && waits[k].iter().all(|&i| landed[i] || Some(i) == also)
                };
                let n = touches.len();
                let free = (0..n).filter(|&k| ready(k, None)).map(|k| rank[k]).max();
                let waiting = (0..n)
                    .filter(|&k| !ready(k, None) && ready(k, Some(j)))
                    .map(|k| rank[k])
                    .max();
                let first = waiting.is_some_and(|w| free.is_none_or(|f| w > f));
                to_record = Some((j, t, first));
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None if landed.iter().all(|&l| l) => Ok(()),
        None => Err(Error::Internal("an erasure piece never started".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn reads(tables: &[&str], target: &str) -> Touch {
        Touch::reading(Some(tables.iter().map(|t| t.to_string()).collect()), target)
    }

    #[test]
    fn a_piece_waits_only_for_the_earlier_pieces_that_touch_what_it_touches() {
        // DELETE a, DELETE b, RECOMPUTE c from a, DELETE a again, then each table's cleanup.
        let touches = [
            Touch::table("a"),
            Touch::table("b"),
            reads(&["a"], "c"),
            Touch::table("a"),
            Touch::nothing(),
            Touch::table("a"),
            Touch::table("b"),
            Touch::table("c"),
        ];
        assert_eq!(
            waits(&touches),
            vec![
                vec![],
                vec![],
                vec![0],       // reads what the first DELETE wrote
                vec![0, 2],    // writes what the RECOMPUTE read, after the first DELETE
                vec![],        // touches nothing
                vec![0, 2, 3], // a's cleanup: after everything that read or wrote a
                vec![1],       // b's: after b's DELETE only, beside the RECOMPUTE
                vec![2],       // c's: after the RECOMPUTE wrote it
            ]
        );
    }

    #[test]
    fn a_piece_that_may_read_anything_waits_for_every_write_and_holds_back_every_later_one() {
        let touches = [
            Touch::table("a"),
            Touch::nothing(),
            Touch::reading(None, "c"),
            Touch::table("b"),
            Touch::nothing(),
        ];
        assert_eq!(
            waits(&touches),
            vec![vec![], vec![], vec![0], vec![2], vec![]]
        );
    }

    /// Pieces that sleep and log when they start and end.
    async fn logged_run(
        touches: &[Touch],
        cores: usize,
        fail: Option<usize>,
    ) -> (Result<()>, Vec<String>, Vec<usize>) {
        costed_run(touches, &[], cores, fail).await
    }

    /// [`logged_run`] with costs for the schedule.
    async fn costed_run(
        touches: &[Touch],
        costs: &[u64],
        cores: usize,
        fail: Option<usize>,
    ) -> (Result<()>, Vec<String>, Vec<usize>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut recorded = Vec::new();
        let l = log.clone();
        let r = run_ordered(
            touches,
            costs,
            cores,
            move |j| {
                let log = l.clone();
                Ok(Box::pin(async move {
                    log.lock().unwrap().push(format!("start {j}"));
                    tokio::time::sleep(Duration::from_millis(if j == 0 { 60 } else { 10 })).await;
                    log.lock().unwrap().push(format!("end {j}"));
                    if fail == Some(j) {
                        return Err(Error::invalid(format!("piece {j} failed")));
                    }
                    Ok(j)
                }) as BoxFuture<'static, Result<usize>>)
            },
            |j, t| {
                assert_eq!(j, t);
                recorded.push(j);
                Ok(())
            },
        )
        .await;
        let log = log.lock().unwrap().clone();
        (r, log, recorded)
    }

    fn at(log: &[String], what: &str) -> usize {
        log.iter()
            .position(|l| l == what)
            .unwrap_or_else(|| panic!("{what} not in {log:?}"))
    }

    #[tokio::test]
    async fn independent_pieces_run_beside_a_long_one_and_waiting_ones_start_after_it() {
        // 0 (long) writes a; 1 writes b; 2 reads b; 3 reads a.
        let touches = [
            Touch::table("a"),
            Touch::table("b"),
            reads(&["b"], "c"),
            reads(&["a"], "d"),
        ];
        let (r, log, recorded) = logged_run(&touches, 2, None).await;
        r.unwrap();
        assert!(at(&log, "start 2") < at(&log, "end 0"), "{log:?}");
        assert!(at(&log, "start 2") > at(&log, "end 1"), "{log:?}");
        assert!(at(&log, "start 3") > at(&log, "end 0"), "{log:?}");
        recorded.iter().for_each(|j| assert!(*j < 4));
        assert_eq!(recorded.len(), 4);
        assert_eq!(recorded.first(), Some(&1), "recorded as they land");
    }

    #[tokio::test]
    async fn no_more_than_cores_run_at_once() {
        let touches: Vec<Touch> = ["a", "b", "c", "d"]
            .iter()
            .map(|t| Touch::table(t))
            .collect();
        let (r, log, _) = logged_run(&touches, 1, None).await;
        r.unwrap();
        for w in log.chunks(2) {
            assert_eq!(w[0].replace("start", "end"), w[1], "one at a time: {log:?}");
        }
    }

    #[tokio::test]
    async fn after_a_failure_nothing_starts_and_what_ran_beside_it_is_recorded() {
        // 1 fails while 0 (long) runs; 2 waits for 1, 3 would be free but must not start.
        let touches = [
            Touch::table("a"),
            Touch::table("b"),
            reads(&["b"], "c"),
            Touch::table("d"),
        ];
        let (r, log, recorded) = logged_run(&touches, 2, Some(1)).await;
        let e = r.unwrap_err().to_string();
        assert!(e.contains("piece 1 failed"), "{e}");
        assert_eq!(
            recorded,
            vec![0],
            "the piece beside it landed and was recorded"
        );
        assert!(
            !log.iter().any(|l| l == "start 2" || l == "start 3"),
            "{log:?}"
        );
    }

    #[test]
    fn a_piece_ranks_by_its_cost_and_the_costliest_chain_waiting_for_it() {
        // 0 writes a (cost 1), 1 reads a into c (10), 2 writes b (5), 3 nothing (0).
        let touches = [
            Touch::table("a"),
            reads(&["a"], "c"),
            Touch::table("b"),
            Touch::nothing(),
        ];
        assert_eq!(ranks(&waits(&touches), &[1, 10, 5, 0]), vec![11, 10, 5, 0]);
        // Without costs, every rank is 0: the plan's order.
        assert_eq!(ranks(&waits(&touches), &[]), vec![0, 0, 0, 0]);
    }

    #[tokio::test]
    async fn the_costliest_ready_piece_starts_first_and_a_chain_counts_whole() {
        // One core. 0 and 1 are cheap, 2 is costly: 2 starts first, then in the plan's order.
        let touches = [Touch::table("a"), Touch::table("b"), Touch::table("c")];
        let (r, log, _) = costed_run(&touches, &[1, 1, 10], 1, None).await;
        r.unwrap();
        let starts: Vec<&String> = log.iter().filter(|l| l.starts_with("start")).collect();
        assert_eq!(starts, ["start 2", "start 0", "start 1"], "{log:?}");
        // 1 (cost 3) heads a chain to 2 (cost 10): it starts before 0 (cost 5), and 2, ready
        // once 1 landed, before 0 too.
        let touches = [Touch::table("a"), Touch::table("b"), reads(&["b"], "c")];
        let (r, log, _) = costed_run(&touches, &[5, 3, 10], 1, None).await;
        r.unwrap();
        let starts: Vec<&String> = log.iter().filter(|l| l.starts_with("start")).collect();
        assert_eq!(starts, ["start 1", "start 2", "start 0"], "{log:?}");
    }

    /// A piece that lands gives its core to a piece already free to start before it is
    /// recorded (an erasure's record is a journal save); a piece waiting for it starts only
    /// once it is recorded (and first, when it ranks higher: see the two tests above).
    #[tokio::test]
    async fn a_free_piece_starts_before_a_landed_one_is_recorded_and_a_waiting_one_after() {
        // 0 writes a, 1 writes b, 2 reads a; one core.
        let touches = [Touch::table("a"), Touch::table("b"), reads(&["a"], "c")];
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let (l, r) = (log.clone(), log.clone());
        run_ordered(
            &touches,
            &[],
            1,
            move |j| {
                l.lock().unwrap().push(format!("start {j}"));
                Ok(Box::pin(async move { Ok(j) }) as BoxFuture<'static, Result<usize>>)
            },
            move |j, t| {
                assert_eq!(j, t);
                r.lock().unwrap().push(format!("record {j}"));
                Ok(())
            },
        )
        .await
        .unwrap();
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            [
                "start 0", "start 1", "record 0", "start 2", "record 1", "record 2"
            ],
            "{log:?}"
        );
    }

    /// An erasure's RECOMPUTE costs more than the steps it waits for (it reads what they
    /// removed and added, then its query reads again): a DELETE (10) whose RECOMPUTE follows
    /// starts before a longer DELETE (25) of another table, and the RECOMPUTE before it too.
    /// As the DELETE's cost alone, the RECOMPUTE came last and ran alone at the end.
    #[tokio::test]
    async fn an_erasures_recompute_ranks_above_the_steps_it_reads() {
        let touches = [Touch::table("a"), reads(&["a"], "c"), Touch::table("b")];
        let recompute = super::super::recompute_cost([10].into_iter());
        assert!(recompute > 25, "{recompute}");
        let (r, log, _) = costed_run(&touches, &[10, recompute, 25], 1, None).await;
        r.unwrap();
        let starts: Vec<&String> = log.iter().filter(|l| l.starts_with("start")).collect();
        assert_eq!(starts, ["start 0", "start 1", "start 2"], "{log:?}");
    }

    /// Small steps a RECOMPUTE waits for rank above one larger step of another table once each
    /// step's commit is counted (the demo at scale 1: `learning.events` rewrites 761 KiB,
    /// `learning.enrollments` 172 KiB and `learning.reviews` 31 KiB, and the RECOMPUTE reading
    /// the latter two took longer than the events DELETE): on two cores, enrollments and reviews
    /// start first and the RECOMPUTE runs beside the events DELETE instead of after it. By bytes
    /// alone, the events DELETE outranked the reviews DELETE.
    #[test]
    fn a_recomputes_small_inputs_rank_above_a_larger_step_once_commits_count() {
        use super::super::{recompute_cost, step_cost};
        let touches = [
            Touch::table("events"),
            Touch::table("enrollments"),
            Touch::table("reviews"),
            reads(&["enrollments", "reviews"], "course_performance"),
        ];
        let waits = waits(&touches);
        let kib = |n: u64| n * 1024;
        let costs = |step: &dyn Fn(u64) -> u64| {
            let (ev, en, re) = (step(kib(761)), step(kib(172)), step(kib(31)));
            vec![ev, en, re, recompute_cost([en, re].into_iter())]
        };
        let bytes_only = ranks(&waits, &costs(&|b| b));
        assert!(bytes_only[0] > bytes_only[2], "{bytes_only:?}");
        let rank = ranks(&waits, &costs(&step_cost));
        assert!(rank[1] > rank[0] && rank[2] > rank[0], "{rank:?}");
    }
}
