//! The hub's own vision endpoint: a camera tool uploads a photo (multipart `question` + `file`),
//! the hub saves it to a folder and answers with a short description of it, so a camera can be
//! tried with no AI service.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::Hub;
use crate::wire::identity::bearer_token;

pub async fn explain(State(hub): State<Arc<Hub>>, headers: HeaderMap, mut form: Multipart) -> (StatusCode, Json<Value>) {
    let fail = |status: StatusCode, message: String| (status, Json(json!({"success": false, "message": message})));
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).map(bearer_token).unwrap_or_default();
    if token != hub.vision_token {
        return fail(StatusCode::UNAUTHORIZED, "missing or wrong vision token (Authorization: Bearer …)".into());
    }
    let device = headers.get("device-id").and_then(|v| v.to_str().ok()).unwrap_or("unknown").replace(':', "");
    let mut question = String::new();
    let mut photo: Option<(String, Vec<u8>)> = None;
    loop {
        match form.next_field().await {
            Ok(Some(field)) => {
                let name = field.name().unwrap_or_default().to_string();
                let file_name = field.file_name().unwrap_or("photo").to_string();
                match field.bytes().await {
                    Ok(bytes) if name == "question" => question = String::from_utf8_lossy(&bytes).into_owned(),
                    Ok(bytes) if name == "file" => photo = Some((file_name, bytes.to_vec())),
                    Ok(_) => {}
                    Err(e) => return fail(StatusCode::BAD_REQUEST, format!("cannot read the upload: {e}")),
                }
            }
            Ok(None) => break,
            Err(e) => return fail(StatusCode::BAD_REQUEST, format!("not a multipart upload: {e}")),
        }
    }
    let Some((file_name, bytes)) = photo else {
        return fail(StatusCode::BAD_REQUEST, "no `file` field in the upload".into());
    };
    let format = image_format(&bytes);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let path = hub.config.vision_dir.join(format!("{device}-{stamp}.{}", format.1));
    if let Err(e) = std::fs::create_dir_all(&hub.config.vision_dir).and_then(|_| std::fs::write(&path, &bytes)) {
        return fail(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot save the photo to {}: {e}", path.display()));
    }
    let text = format!(
        "mcpdev received {file_name} ({} bytes, {}) for the question {question:?} and saved it to {}. \
         No AI service is attached to this hub, so this is only a description of the upload.",
        bytes.len(),
        format.0,
        path.display()
    );
    (StatusCode::OK, Json(json!({"success": true, "text": text, "saved_to": path, "bytes": bytes.len()})))
}

fn image_format(b: &[u8]) -> (&'static str, &'static str) {
    match b {
        [0xff, 0xd8, 0xff, ..] => ("JPEG", "jpg"),
        [0x89, b'P', b'N', b'G', ..] => ("PNG", "png"),
        [b'G', b'I', b'F', b'8', ..] => ("GIF", "gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => ("WebP", "webp"),
        _ => ("unknown format", "bin"),
    }
}
