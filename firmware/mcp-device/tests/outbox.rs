//! The notification outbox: exact texts, order, and dropping the oldest when full.

use mcp_device::Outbox;
use serde_json::json;

#[test]
fn state_changed_has_the_documented_shape() {
    let mut o = Outbox::default();
    o.state_changed("audio_speaker.volume", json!(70), json!(30));
    o.state_changed("device", json!("connecting"), json!("idle"));
    assert_eq!(o.len(), 2);
    assert_eq!(
        o.pop().unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"newState":30,"oldState":70,"what":"audio_speaker.volume"}}"#
    );
    assert_eq!(
        o.pop().unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"newState":"idle","oldState":"connecting","what":"device"}}"#
    );
    assert_eq!(o.pop(), None);
    assert!(o.is_empty());
}

#[test]
fn state_changed_escapes_and_nests() {
    let mut o = Outbox::default();
    o.state_changed("a\"b\\", json!({"k": [1, true, null]}), json!(null));
    let text = o.pop().unwrap();
    assert_eq!(
        text,
        r#"{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"newState":null,"oldState":{"k":[1,true,null]},"what":"a\"b\\"}}"#
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["params"]["what"], "a\"b\\");
}

#[test]
fn notify_has_no_id() {
    let mut o = Outbox::default();
    o.notify("notifications/message", &json!({"level": "info"}));
    o.notify("m\"x", &json!([]));
    assert_eq!(o.pop().unwrap(), r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#);
    assert_eq!(o.pop().unwrap(), r#"{"jsonrpc":"2.0","method":"m\"x","params":[]}"#);
}

#[test]
fn a_full_outbox_drops_the_oldest_and_counts_it() {
    let mut o = Outbox::with_capacity(3);
    for i in 0..5 {
        o.notify("n", &json!(i));
    }
    assert_eq!(o.len(), 3);
    assert_eq!(o.dropped(), 2);
    let left: Vec<String> = std::iter::from_fn(|| o.pop()).collect();
    assert_eq!(
        left,
        [
            r#"{"jsonrpc":"2.0","method":"n","params":2}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":3}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":4}"#
        ]
    );
    // Draining does not reset the count; room is available again.
    o.notify("n", &json!(5));
    assert_eq!(o.dropped(), 2);
    assert_eq!(o.len(), 1);
}

#[test]
fn default_capacity_is_16_and_zero_means_one() {
    let mut o = Outbox::default();
    for i in 0..16 {
        o.notify("n", &json!(i));
    }
    assert_eq!((o.len(), o.dropped()), (16, 0));
    o.notify("n", &json!(16));
    assert_eq!((o.len(), o.dropped()), (16, 1));
    assert_eq!(o.pop().unwrap(), r#"{"jsonrpc":"2.0","method":"n","params":1}"#);

    let mut z = Outbox::with_capacity(0);
    z.notify("a", &json!(1));
    z.notify("b", &json!(2));
    assert_eq!((z.len(), z.dropped()), (1, 1));
    assert_eq!(z.pop().unwrap(), r#"{"jsonrpc":"2.0","method":"b","params":2}"#);
}
