//! Vision uploads over the hub's real device listener: the photo is the part that is a file,
//! whatever its field name (stock firmware says `file`, xiaozhi-esp32-server's test page
//! `image`), within the existing caps. The adversary sends two files, no file at all, an empty
//! one, a flood of parts, or a body over the cap: each gets a clear 4xx and nothing is saved.

mod common;

use common::HubProcess;
use common::vision::{Part, photo, post_parts, text, vision_of};

const DEVICE: &str = "aa:00:00:00:00:2e";
const JPEG: [u8; 8] = [0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4];

fn saved(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

#[tokio::test]
async fn the_photo_is_taken_whatever_its_field_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&["--vision-dir", dir.path().to_str().unwrap()], &[]).await;
    let (_dev, url, token) = vision_of(&hub, DEVICE).await;
    // `image` (the digital-human page), `file` (stock firmware), any other name; the question
    // first or after the photo; a photo part with only a content type, no filename.
    let no_filename = Part { name: "snapshot", filename: None, content_type: Some("application/octet-stream"), body: &JPEG };
    let cases: Vec<(&str, Vec<Part>)> = vec![
        ("image", vec![text("question", "what is this?"), photo("image", &JPEG)]),
        ("file", vec![text("question", "what is this?"), photo("file", &JPEG)]),
        ("another name, question last", vec![photo("upload-7", &JPEG), text("question", "what is this?")]),
        ("a content type, no filename", vec![text("question", "what is this?"), no_filename]),
    ];
    for (what, parts) in cases {
        let before = saved(dir.path()).len();
        let (status, body) = post_parts(&url, DEVICE, &token, &parts).await;
        assert_eq!(status, 200, "{what}: {body}");
        assert!(body["text"].as_str().unwrap().contains("\"what is this?\""), "{what}: the question is read: {body}");
        let file = dir.path().join(body["file"].as_str().unwrap());
        assert_eq!(std::fs::read(&file).unwrap(), JPEG, "{what}: the photo's bytes are saved");
        assert_eq!(saved(dir.path()).len(), before + 1, "{what}");
    }
    // A page that posts the question by position, under another name, is understood too.
    let (status, body) = post_parts(&url, DEVICE, &token, &[text("q", "by position"), photo("image", &JPEG)]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["text"].as_str().unwrap().contains("\"by position\""), "{body}");
}

#[tokio::test]
async fn hostile_uploads_get_a_clear_refusal_and_save_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&["--vision-dir", dir.path().to_str().unwrap(), "--vision-max-mb", "1"], &[]).await;
    let (_dev, url, token) = vision_of(&hub, DEVICE).await;
    let huge = vec![0xffu8; 2 * 1024 * 1024];
    let many: Vec<Part> = (0..40).map(|_| text("noise", "x")).collect();
    let cases: Vec<(&str, Vec<Part>, u16, &str)> = vec![
        ("two files", vec![photo("image", &JPEG), photo("file", &JPEG)], 400, "two file parts (`image` and `file`)"),
        ("no file part", vec![text("question", "q"), text("image", "not a file")], 400, "no file part"),
        ("an empty photo", vec![text("question", "q"), photo("image", b"")], 400, "is empty"),
        ("40 parts", many, 400, "more than 16 parts"),
        ("over the cap", vec![text("question", "q"), photo("image", &huge)], 413, "over this hub's limit of 1114112 bytes"),
    ];
    for (what, parts, want, says) in cases {
        let (status, body) = post_parts(&url, DEVICE, &token, &parts).await;
        assert_eq!(status, want, "{what}: {body}");
        assert_eq!(body["success"], false, "{what}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(says) && !message.is_empty(), "{what}: the refusal says what was wrong: {message:?}");
    }
    assert!(saved(dir.path()).is_empty(), "refused uploads saved {:?}", saved(dir.path()));
    // The same device's honest upload still goes through afterwards.
    let (status, body) = post_parts(&url, DEVICE, &token, &[text("question", "q"), photo("image", &JPEG)]).await;
    assert_eq!(status, 200, "{body}");
}
