//! Listing (filters and cursor paging) and pruning.

use mcp_agent::{LedgerEntry, LedgerKind, RunFilter, RunRecord, RunStatus, RunSummary};
use serde_json::json;

use super::{lease, now_secs, run, Backend};

const STATUSES: [RunStatus; 5] = [
    RunStatus::Running,
    RunStatus::Suspended,
    RunStatus::Finished,
    RunStatus::Failed,
    RunStatus::Cancelled,
];

/// Every page of `filter`, following the cursors.
async fn all_pages(store: &dyn mcp_agent::RunStore, filter: RunFilter) -> Vec<Vec<RunSummary>> {
    let mut pages = Vec::new();
    let mut filter = filter;
    loop {
        let page = store.list(&filter).await.unwrap();
        assert!(
            page.runs.len() <= filter.page_size(),
            "a page holds at most its limit"
        );
        pages.push(page.runs);
        match page.next {
            Some(next) => filter = filter.cursor(next),
            None => return pages,
        }
    }
}

fn ids(runs: &[RunSummary]) -> Vec<&str> {
    runs.iter().map(|r| r.id.as_str()).collect()
}

/// `list` gives runs in id order, a page at a time (the cursor of a page starts the
/// next; the last has none), by status and by when they last changed.
pub(crate) async fn list_filters_and_pages(backend: &Backend) {
    let store = backend.open().await;
    let page = store.list(&RunFilter::new()).await.unwrap();
    assert!(page.runs.is_empty() && page.next.is_none());
    let start = now_secs();
    // 101 runs, saved out of id order, in every status.
    let mut order: Vec<usize> = (0..101).collect();
    order.reverse();
    order.swap(3, 70);
    for n in order {
        let status = STATUSES[n % 5];
        store
            .save(&RunRecord {
                suspension: (status == RunStatus::Suspended).then(|| format!("s-{n}")),
                lease: (status == RunStatus::Running).then(|| lease("a")),
                ..run(&format!("run-{n:03}"), status, json!({"n": n}))
            })
            .await
            .unwrap();
    }
    let end = now_secs();
    let every: Vec<String> = (0..101).map(|n| format!("run-{n:03}")).collect();
    // The default page is 100 runs; the next page has the last one.
    let pages = all_pages(store.as_ref(), RunFilter::new()).await;
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[0].len(), 100);
    assert_eq!(ids(&pages.concat()), every);
    // Pages of 10: 11 of them, every run once, in id order.
    let pages = all_pages(store.as_ref(), RunFilter::new().limit(10)).await;
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 1]
    );
    let runs = pages.concat();
    assert_eq!(ids(&runs), every);
    for (n, r) in runs.iter().enumerate() {
        let status = STATUSES[n % 5];
        assert_eq!(r.status, status, "{}", r.id);
        let suspension = (status == RunStatus::Suspended).then(|| format!("s-{n}"));
        assert_eq!(r.suspension, suspension, "{}", r.id);
        assert!(
            r.updated_at + 1 >= start && r.updated_at <= end + 1,
            "{r:?} not in {start}..{end}"
        );
    }
    // A last page that is full has no next.
    let pages = all_pages(
        store.as_ref(),
        RunFilter::new().status(RunStatus::Suspended).limit(7),
    )
    .await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [7, 7, 6]);
    let pages = all_pages(
        store.as_ref(),
        RunFilter::new().status(RunStatus::Failed).limit(4),
    )
    .await;
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [4, 4, 4, 4, 4]
    );
    // By status, paged.
    for status in STATUSES {
        let runs = all_pages(store.as_ref(), RunFilter::new().status(status).limit(3))
            .await
            .concat();
        let expected: Vec<&str> = every
            .iter()
            .enumerate()
            .filter(|(n, _)| STATUSES[n % 5] == status)
            .map(|(_, id)| id.as_str())
            .collect();
        assert_eq!(ids(&runs), expected, "{status:?}");
    }
    // A cursor that is no run's id: the runs after it.
    let page = store
        .list(&RunFilter::new().cursor("run-095x"))
        .await
        .unwrap();
    assert_eq!(
        ids(&page.runs),
        ["run-096", "run-097", "run-098", "run-099", "run-100"]
    );
    assert!(page.next.is_none());
    // By when they last changed.
    let all = |f: RunFilter| {
        let store = store.clone();
        async move { all_pages(store.as_ref(), f).await.concat().len() }
    };
    assert_eq!(all(RunFilter::new().after(start)).await, 101);
    assert_eq!(all(RunFilter::new().before(end + 2)).await, 101);
    assert_eq!(all(RunFilter::new().before(start)).await, 0);
    assert_eq!(all(RunFilter::new().after(end + 2)).await, 0);
    assert_eq!(
        all(RunFilter::new()
            .after(start)
            .before(end + 2)
            .status(RunStatus::Finished))
        .await,
        20
    );
}

/// `prune` forgets the runs that ended (finished or cancelled) before the time given,
/// with their events — never a run that waits, runs or failed, never a ledger — and
/// says how many.
pub(crate) async fn prune_forgets_only_runs_that_ended(backend: &Backend) {
    let store = backend.open().await;
    let start = now_secs();
    for (n, status) in STATUSES.into_iter().enumerate() {
        store
            .save(&RunRecord {
                events: vec![json!({"n": n})],
                ledger: vec![LedgerEntry::new(
                    LedgerKind::Sent,
                    format!("c{n}/0"),
                    None,
                    1,
                )],
                ..run(&format!("r{n}"), status, json!({}))
            })
            .await
            .unwrap();
    }
    // Nothing ended before the runs were saved.
    assert_eq!(store.prune(start.saturating_sub(1)).await.unwrap(), 0);
    assert_eq!(store.list(&RunFilter::new()).await.unwrap().runs.len(), 5);
    let later = now_secs() + 3600;
    assert_eq!(store.prune(later).await.unwrap(), 2);
    assert_eq!(store.prune(later).await.unwrap(), 0, "pruned once");
    let left = store.list(&RunFilter::new()).await.unwrap();
    assert_eq!(ids(&left.runs), ["r0", "r1", "r3"]);
    for (n, status) in STATUSES.into_iter().enumerate() {
        let id = format!("r{n}");
        let ended = matches!(status, RunStatus::Finished | RunStatus::Cancelled);
        assert_eq!(
            store.load(&id).await.unwrap().is_none(),
            ended,
            "{status:?}"
        );
        let events = store.events(&id).await.unwrap();
        assert_eq!(events.is_empty(), ended, "{status:?}: {events:?}");
        assert_eq!(
            store.ledger(&id).await.unwrap().len(),
            1,
            "the ledger stays"
        );
    }
}
