//! The view a hub builds of the other hubs' indexes, tested (its rules: the module's opening).

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::mqtt::presence::SHARDS;

fn row(id: &str) -> Row {
    Row::new(id, "mqtt", "ready", 3, 7).unwrap()
}

fn shard(rows: &[&str]) -> Vec<(u8, Shard)> {
    let mut by: HashMap<u8, Vec<Row>> = HashMap::new();
    for r in rows {
        let r = row(r);
        by.entry(shard_of(&r.mac)).or_default().push(r);
    }
    by.into_iter()
        .map(|(n, mut rows)| {
            rows.sort_by_key(|r| r.mac);
            (
                n,
                Shard {
                    name: None,
                    seq: 1,
                    left_out: 0,
                    rows,
                },
            )
        })
        .collect()
}


fn index(v: &mut View, hub: &str, rows: &[&str]) {
    for n in 0..SHARDS {
        v.on_shard(hub, n, None);
    }
    for (n, s) in shard(rows) {
        v.on_shard(hub, n, Some(s));
    }
}


#[test]
fn a_replayed_older_shard_is_ignored() {
    let mut v = View::new("me");
    v.on_presence("b", true);
    let r = row("aa:00:00:00:00:01");
    let n = shard_of(&r.mac);
    assert!(v.on_shard(
        "b",
        n,
        Some(Shard {
            name: None,
            seq: 5,
            left_out: 0,
            rows: vec![r]
        })
    ));
    assert!(
        !v.on_shard(
            "b",
            n,
            Some(Shard {
                name: None,
                seq: 4,
                left_out: 0,
                rows: vec![]
            })
        ),
        "older: a replay"
    );
    assert!(v.row("aa:00:00:00:00:01").is_some());
    assert!(v.on_shard("b", n, None), "a cleared shard is always taken");
    assert!(v.row("aa:00:00:00:00:01").is_none());
}


#[test]
fn prefixes_map_to_mac_bounds() {
    assert_eq!(
        bounds("aa:b"),
        (
            [0xaa, 0xb0, 0, 0, 0, 0],
            [0xaa, 0xbf, 0xff, 0xff, 0xff, 0xff]
        )
    );
    assert_eq!(
        bounds("aa:bb:cc:dd:ee:ff"),
        (
            [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff],
            [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]
        )
    );
}


#[test]
fn devices_are_located_on_live_hubs_and_moving_when_their_hub_died() {
    let mut v = View::new("me");
    for h in ["me", "b", "c"] {
        v.on_presence(h, true);
    }
    index(&mut v, "b", &["aa:00:00:00:00:01", "aa:00:00:00:01:02"]);
    index(&mut v, "c", &["bb:00:00:00:00:03"]);
    index(&mut v, "me", &["cc:00:00:00:00:04"]);
    let none = HashMap::new();
    assert_eq!(
        v.locate(Some("aa:00:00:00:00:01"), &none),
        Located::Remote {
            hub: "b".into(),
            device_id: "aa:00:00:00:00:01".into()
        }
    );
    assert_eq!(
        v.locate(Some("AA-00-00-00-00-01"), &none),
        Located::Remote {
            hub: "b".into(),
            device_id: "aa:00:00:00:00:01".into()
        }
    );
    assert_eq!(
        v.locate(Some("bb00"), &none),
        Located::Remote {
            hub: "c".into(),
            device_id: "bb:00:00:00:00:03".into()
        }
    );
    assert!(
        matches!(v.locate(Some("aa:00"), &none), Located::Ambiguous(ids) if ids.contains("aa:00:00:00:01:02"))
    );
    assert_eq!(
        v.locate(Some("cc:00:00:00:00:04"), &none),
        Located::Nowhere,
        "this hub's own devices are never remote"
    );
    assert_eq!(v.locate(Some("lamp"), &none), Located::Nowhere);
    let aliases = HashMap::from([("lamp".to_string(), "BB:00:00:00:00:03".to_string())]);
    assert_eq!(
        v.locate(Some("lamp"), &aliases),
        Located::Remote {
            hub: "c".into(),
            device_id: "bb:00:00:00:00:03".into()
        }
    );
    assert_eq!(v.remote_count(), 3);
    let page: Vec<String> = v.page(None, 2).into_iter().map(|(id, _, _)| id).collect();
    assert_eq!(page, ["aa:00:00:00:00:01", "aa:00:00:00:01:02"]);
    let page: Vec<String> = v
        .page(Some("aa:00:00:00:01:02"), 2)
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(page, ["bb:00:00:00:00:03"]);

    v.on_presence("b", false);
    assert_eq!(
        v.locate(Some("aa:00:00:00:00:01"), &none),
        Located::Moving {
            device_id: "aa:00:00:00:00:01".into()
        }
    );
    assert_eq!(
        v.locate(Some("aa0000000102"), &none),
        Located::Moving {
            device_id: "aa:00:00:00:01:02".into()
        }
    );
    assert_eq!(v.dead_indexes(), ["b"]);
    assert_eq!(v.remote_count(), 1, "a dead hub's devices are not listed");
    // Taken over by c, listed there before b's index is cleared: c is where it is.
    index(&mut v, "c", &["bb:00:00:00:00:03", "aa:00:00:00:00:01"]);
    index(&mut v, "b", &[]);
    assert_eq!(
        v.locate(Some("aa:00:00:00:00:01"), &none),
        Located::Remote {
            hub: "c".into(),
            device_id: "aa:00:00:00:00:01".into()
        }
    );
    assert_eq!(v.locate(Some("aa:00:00:00:01:02"), &none), Located::Nowhere);
    assert!(v.dead_indexes().is_empty(), "a cleared index is forgotten");
}


#[test]
fn what_a_hub_leaves_out_is_counted() {
    let mut v = View::new("me");
    v.on_presence("b", true);
    let r = row("aa:00:00:00:00:01");
    v.on_shard(
        "b",
        shard_of(&r.mac),
        Some(Shard {
            name: None,
            seq: 1,
            left_out: 40,
            rows: vec![r.clone()],
        }),
    );
    v.on_shard(
        "b",
        (shard_of(&r.mac) + 1) % SHARDS,
        Some(Shard {
            name: None,
            seq: 1,
            left_out: 2,
            rows: vec![],
        }),
    );
    assert_eq!(v.unlisted(), [("b".to_string(), 42)]);
    assert_eq!(v.remote_count(), 1);
}


/// This hub's broker connection comes back: the other hubs stay listed while the retained
/// presence records are replayed (a listing through a hub that had just reconnected showed
/// 43,905 of ~75,000 devices), and once the replay is complete a hub whose record did not come
/// back is gone, its devices moving.
#[test]
fn the_view_survives_a_reconnect_and_drops_only_hubs_not_replayed() {
    let mut v = View::new("me");
    let none = HashMap::new();
    for h in ["me", "b", "c"] {
        v.on_presence(h, true);
    }
    index(&mut v, "b", &["aa:00:00:00:00:01"]);
    index(&mut v, "c", &["bb:00:00:00:00:02"]);
    assert_eq!(v.remote_count(), 2);

    v.resync();
    assert_eq!(v.remote_count(), 2, "nothing replayed yet, nothing forgotten");
    assert_eq!(v.peers(), ["b", "c"]);
    assert!(matches!(v.locate(Some("bb:00:00:00:00:02"), &none), Located::Remote { .. }));
    // The replay brings b's record back, not c's (c died while this hub was away).
    v.on_presence("b", true);
    assert_eq!(v.remote_count(), 2, "still listed until the replay is complete");
    assert_eq!(v.reconcile(), ["c"], "not this hub, whose own record comes after the replay");
    assert_eq!(v.remote_count(), 1);
    assert_eq!(v.peers(), ["b"]);
    assert_eq!(v.locate(Some("bb:00:00:00:00:02"), &none), Located::Moving { device_id: "bb:00:00:00:00:02".into() });
    assert!(v.reconcile().is_empty(), "reconciled once");

    // A record cleared during the replay is gone at once; one that comes back is not dropped.
    v.resync();
    v.on_presence("b", false);
    v.on_presence("c", true);
    assert!(v.reconcile().is_empty());
    assert_eq!(v.peers(), ["c"]);
}

/// Issue 46.3: the view holds each shard as it came (sorted MACs and a compact record each), and
/// finds what the one map sorted by MAC found: a page in Device-Id order across every hub and
/// shard, each device once however many hubs list it (a live hub's row, of two live ones the row
/// of the shard that came last), rows as they were sent, names shared within a shard.
#[test]
fn the_compact_view_pages_in_order_and_shows_a_device_once() {
    let mut v = View::new("me");
    for h in ["me", "b", "c", "d"] {
        v.on_presence(h, true);
    }
    let ids = |from: u32, n: u32| (from..from + n).map(|i| format!("aa:00:00:{:02x}:{:02x}:{:02x}", i >> 16, (i >> 8) & 0xff, i & 0xff)).collect::<Vec<_>>();
    let (b, c) = (ids(0, 300), ids(300, 200));
    index(&mut v, "b", &b.iter().map(String::as_str).collect::<Vec<_>>());
    index(&mut v, "c", &c.iter().map(String::as_str).collect::<Vec<_>>());
    // d lists one of b's devices (it moved) and one of c's, named and described.
    let moved = row(&b[7]).described(Some(2), Some(Arc::from("lamp")));
    let named = row(&c[3]).described(None, Some(Arc::from("lamp")));
    let mut by: HashMap<u8, Vec<Row>> = HashMap::new();
    for r in [moved.clone(), named.clone()] {
        by.entry(shard_of(&r.mac)).or_default().push(r);
    }
    for (n, rows) in by {
        v.on_shard("d", n, Some(Shard { name: None, seq: 1, left_out: 0, rows }));
    }
    assert_eq!(v.remote_count(), 502, "each hub's count is what it lists");
    let mut all = Vec::new();
    let mut after = None::<String>;
    loop {
        let page = v.page(after.as_deref(), 64);
        let Some(last) = page.last() else { break };
        after = Some(last.0.clone());
        all.extend(page);
    }
    let listed: Vec<&str> = all.iter().map(|(id, _, _)| id.as_str()).collect();
    let expected: Vec<&str> = b.iter().chain(&c).map(String::as_str).collect();
    assert_eq!(listed, expected, "every device once, in Device-Id order");
    let (_, hub, r) = &all[7];
    assert_eq!((&**hub, r), ("d", &moved), "the later shard's row, as sent");
    assert_eq!(v.row(&c[3]), Some((Arc::from("d"), named.clone())));
    assert_eq!(v.row(&c[4]).map(|(h, r)| (h.to_string(), r)), Some(("c".to_string(), row(&c[4]))));
    assert_eq!(v.locate(Some(&b[7]), &HashMap::new()), Located::Remote { hub: "d".into(), device_id: b[7].clone() });
    // d dies: its rows are not shown while b and c, alive, list the same devices.
    v.on_presence("d", false);
    assert_eq!(v.row(&b[7]).map(|(h, _)| h.to_string()), Some("b".to_string()));
    assert_eq!(v.page(Some(&b[6]), 1)[0].1.as_ref(), "b");
    assert_eq!(v.locate(Some(&b[7]), &HashMap::new()), Located::Remote { hub: "b".into(), device_id: b[7].clone() });
    assert_eq!(v.remote_ready(1_000).len(), 500);
    assert!(v.remote_ready(499).is_empty(), "more ready than offered at once: none");
}
