//! The cluster index's rules, tested: rows and shards as published, sealed and opened (the view a
//! hub builds of the others: `cluster_view_tests.rs`).

use super::*;

/// The bytes of a whole index of `n` devices, as published.
fn index_bytes(n: u32) -> usize {
    let secret = HubSecret::from_bytes(&[7; 32]);
    let mut shards: Vec<Shard> = (0..SHARDS).map(|_| Shard { name: None, seq: 1, left_out: 0, rows: Vec::new() }).collect();
    for i in 0..n {
        let r = Row::new(&format!("0f:00:00:{:02x}:{:02x}:{:02x}", i >> 16, (i >> 8) & 0xff, i & 0xff), "websocket", "ready", 12, 1_764_000_000_000).unwrap();
        shards[usize::from(shard_of(&r.mac))].rows.push(r);
    }
    shards.iter().enumerate().map(|(k, s)| shard_text(&secret, "a1b2c3d4e5f6", k as u8, s).len()).sum()
}

#[test]
fn a_hub_whose_whole_index_changes_publishes_it_within_its_byte_budget() {
    // A small hub goes out every period, as before.
    assert_eq!(index_pause(index_bytes(1_000)), INDEX_PERIOD);
    // 20,000 devices that all changed (a fleet joining): one round, then a pause that keeps
    // the hub at its budget, not 2 rounds a second (~2 MB/s into the broker, times every hub
    // that reads it, as at 100,000 devices on 6 hubs).
    let big = index_bytes(20_000);
    let pause = index_pause(big);
    assert!(pause > Duration::from_secs(3) && pause < Duration::from_secs(6), "{big} bytes: pause {pause:?}");
    assert!(big as f64 / pause.as_secs_f64() <= INDEX_BYTES_PER_SEC as f64 + 1.0);
}

fn row(id: &str) -> Row {
    Row::new(id, "mqtt", "ready", 3, 7).unwrap()
}

#[test]
fn a_shard_round_trips_and_forged_or_hostile_ones_are_refused() {
    let secret = HubSecret::ephemeral();
    let r = row("aa:00:00:00:00:01");
    let n = shard_of(&r.mac);
    let s = Shard {
        name: None,
        seq: 9,
        left_out: 2,
        rows: vec![r],
    };
    let text = shard_text(&secret, "h1", n, &s);
    assert_eq!(open_shard(&secret, "h1", n, text.as_bytes()), Ok(s.clone()));
    assert!(
        open_shard(&HubSecret::ephemeral(), "h1", n, text.as_bytes())
            .unwrap_err()
            .contains("MAC"),
        "another secret"
    );
    assert!(
        open_shard(&secret, "h2", n, text.as_bytes()).is_err(),
        "filed under another hub"
    );
    assert!(
        open_shard(&secret, "h1", (n + 1) % SHARDS, text.as_bytes()).is_err(),
        "filed under another shard"
    );
    let forged = text.replacen("aa:00:00:00:00:01", "aa:00:00:00:00:02", 1);
    assert!(
        open_shard(&secret, "h1", n, forged.as_bytes()).is_err(),
        "an altered body"
    );
    // Hostile rows of an authenticated shard are dropped one by one.
    let body = format!(
        r#"{{"hub":"h1","shard":{n},"seq":1,"devices":[["<script>","mqtt","ready",1,1],["AA-00-00-00-00-01","mqtt","ready",1,1],"nope",[],["aa:00:00:00:00:01","x","yyyy",1]]}}"#
    );
    let signed = format!(
        "{}\n{body}",
        secret.mac(Purpose::ClusterIndex, body.as_bytes())
    );
    let rows = open_shard(&secret, "h1", n, signed.as_bytes())
        .unwrap()
        .rows;
    assert_eq!(
        rows.iter().map(Row::device_id).collect::<Vec<_>>(),
        ["aa:00:00:00:00:01"]
    );
    assert!(open_shard(&secret, "h1", n, b"not signed").is_err());
}

/// Issue 46.4: a row carries the device's name and its tools offered to hosts; a hostile name is
/// bounded and stays data; a shard of a hub of the previous version (no `about`) still reads, and
/// what a new hub sends still reads as rows for a hub of the previous version.
#[test]
fn a_row_describes_its_device_and_old_and_new_shards_read_both_ways() {
    let secret = HubSecret::ephemeral();
    let hostile = format!("\"}},\\u0000<script>alert(1)</script>\u{1b}[2J{}", "é".repeat(10_000));
    let named = |id: &str, name: &str| row(id).described(Some(2), Some(Arc::from(name)));
    let (a, b, c) = (named("aa:00:00:00:00:01", "mcpdev-sim"), named("aa:00:00:00:00:02", &hostile), row("aa:00:00:00:00:03"));
    for r in [a, b, c] {
        let n = shard_of(&r.mac);
        let s = Shard { name: None, seq: 1, left_out: 0, rows: vec![r.clone()] };
        let text = shard_text(&secret, "h1", n, &s);
        let back = open_shard(&secret, "h1", n, text.as_bytes()).unwrap().rows;
        assert_eq!(back, vec![r.clone()]);
        if let Some(name) = &r.name {
            assert_eq!(name.chars().count(), hostile.chars().count().min(crate::session::MAX_NAME_CHARS).min(name.chars().count()));
            assert!(name.chars().count() <= crate::session::MAX_NAME_CHARS, "bounded");
            // As data: the listing's JSON gives it back exactly, inside its string.
            let listed: serde_json::Value = serde_json::from_str(&r.listing_text("h1", None)).unwrap();
            assert_eq!(listed["name"].as_str(), Some(&**name));
            assert_eq!((listed["tool_count"].as_u64(), listed["host_tools"].as_u64()), (Some(3), Some(2)));
        }
        // A hub of the previous version reads the same rows (its reader: five fields, no `about`).
        let body = text.split_once('\n').unwrap().1;
        let old: serde_json::Value = serde_json::from_str(body).unwrap();
        let rows: Vec<(String, String, String, u64, u64)> = old["devices"].as_array().unwrap().iter().map(|d| serde_json::from_value(d.clone()).unwrap()).collect();
        assert_eq!(rows.len(), 1);
    }
    // The hostile name came back cut, not dropped: its start is intact.
    let cut = named("aa:00:00:00:00:02", &hostile).name.unwrap();
    assert!(hostile.starts_with(&*cut) && cut.chars().count() == crate::session::MAX_NAME_CHARS);
    // A shard of the previous version: no `about`, rows read undescribed; an `about` entry that
    // does not read leaves its row undescribed, not dropped.
    let n = shard_of(&row("aa:00:00:00:00:01").mac);
    for about in ["", r#","about":[[1,2,3]]"#, r#","about":"x""#] {
        let body = format!(r#"{{"hub":"h1","shard":{n},"seq":1,"devices":[["aa:00:00:00:00:01","mqtt","ready",3,7]]{about}}}"#);
        let signed = format!("{}\n{body}", secret.mac(Purpose::ClusterIndex, body.as_bytes()));
        let rows = open_shard(&secret, "h1", n, signed.as_bytes()).map(|s| s.rows);
        assert_eq!(rows, Ok(vec![row("aa:00:00:00:00:01")]), "{about}");
        let listed: serde_json::Value = serde_json::from_str(&rows.unwrap()[0].listing_text("h1", None)).unwrap();
        assert_eq!((listed["name"].clone(), listed["tool_count"].clone(), listed["host_tools"].clone()), (serde_json::Value::Null, 3.into(), serde_json::Value::Null));
    }
}


/// A hub keeps what it last sent of each shard as a digest (issue 46.3): any change of a row, its
/// description or what the shard left out is a new digest, so the shard goes out again.
#[test]
fn a_shard_that_changed_in_any_way_has_another_digest() {
    let s = |rows: Vec<Row>, left_out| Shard { name: None, seq: 1, left_out, rows };
    let base = vec![row("aa:00:00:00:00:01"), row("aa:00:00:00:00:02")];
    let d = digest(&s(base.clone(), 0));
    assert_eq!(d, digest(&Shard { seq: 9, ..s(base.clone(), 0) }), "the sequence number is not content");
    let mut ready = base.clone();
    ready[1] = Row::new("aa:00:00:00:00:02", "mqtt", "listing", 3, 7).unwrap();
    let mut named = base.clone();
    named[0] = named[0].clone().described(Some(3), Some(Arc::from("lamp")));
    let mut more_tools = base.clone();
    more_tools[0].tools += 1;
    for (what, other) in [("a phase", s(ready, 0)), ("a name", s(named, 0)), ("a tool count", s(more_tools, 0)), ("left out", s(base.clone(), 1)), ("a row fewer", s(base[..1].to_vec(), 0))] {
        assert_ne!(d, digest(&other), "{what}");
    }
}
