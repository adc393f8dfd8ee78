//! Reading a vision upload: which part of the multipart body is the photo, and which the question.
//!
//! Devices and pages name the photo's part differently: stock firmware, py-xiaozhi and
//! xiaozhi-sdk say `file`, xiaozhi-esp32-server's browser test page says `image`, and the
//! reference backend takes the parts by position. So the photo is the part that is a file,
//! whatever its name: one with a filename, or a content type that is not `text/*` (a part named
//! `file` counts too, for a sender that gives neither). The question is the part named
//! `question`, else the first part that is not a file.
//!
//! Rules it enforces (each refusal says what was wrong and how to send it):
//! - exactly one file part: none, or two, is a 400 that names the parts it saw;
//! - an empty photo is a 400;
//! - at most [`MAX_PARTS`] parts; the body as a whole is capped by the route's limit
//!   ([`super::vision::upload_limit`]), a larger one is a 413.

use axum::extract::Multipart;
use axum::http::StatusCode;

/// Most parts an upload may have (a device sends two).
pub const MAX_PARTS: usize = 16;
/// Characters of the question kept.
const QUESTION_CHARS: usize = 500;

/// What a device uploaded.
#[derive(Debug)]
pub struct Upload {
    pub question: String,
    /// The filename the sender gave (control characters removed, at most 80 characters), else `photo`.
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// Why an upload cannot be read: the status and a message for the sender.
pub type Refusal = (StatusCode, String);

/// Reads every part of `form` (bounded by the route's body limit, `limit` bytes, and [`MAX_PARTS`]).
pub async fn read(form: &mut Multipart, limit: usize) -> Result<Upload, Refusal> {
    let unreadable = |e: axum::extract::multipart::MultipartError, what: &str| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            (e.status(), format!("the upload is over this hub's limit of {limit} bytes: send a smaller photo (--vision-max-mb sets the limit)"))
        } else {
            (e.status(), format!("{what}: {}", e.body_text()))
        }
    };
    let mut question: Option<String> = None;
    let mut first_text: Option<String> = None;
    let mut photo: Option<(String, String, Vec<u8>)> = None;
    let mut parts = 0;
    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return Err(unreadable(e, "not a multipart upload")),
        };
        parts += 1;
        if parts > MAX_PARTS {
            return Err((StatusCode::BAD_REQUEST, format!("more than {MAX_PARTS} parts in the upload: send the photo and, if you like, a `question`")));
        }
        let name = shown(field.name().unwrap_or_default(), 40);
        let is_file = field.file_name().is_some() || field.content_type().is_some_and(|t| !t.starts_with("text/")) || name == "file";
        let file_name = field.file_name().map(|f| shown(f, 80)).filter(|f| !f.is_empty()).unwrap_or_else(|| "photo".to_string());
        let bytes = field.bytes().await.map_err(|e| unreadable(e, "cannot read the upload"))?;
        if is_file {
            if let Some((first, _, _)) = &photo {
                return Err((StatusCode::BAD_REQUEST, format!("two file parts (`{first}` and `{name}`): send one photo per upload")));
            }
            photo = Some((name, file_name, bytes.to_vec()));
        } else {
            let text: String = String::from_utf8_lossy(&bytes).chars().take(QUESTION_CHARS).collect();
            if name == "question" {
                question = Some(text);
            } else if first_text.is_none() {
                first_text = Some(text);
            }
        }
    }
    let Some((name, file_name, bytes)) = photo else {
        return Err((
            StatusCode::BAD_REQUEST,
            "no file part in the upload: send the photo as a part with a filename or an image content type (any field name; stock firmware uses `file`)".into(),
        ));
    };
    if bytes.is_empty() {
        return Err((StatusCode::BAD_REQUEST, format!("the file part `{name}` is empty: send the photo's bytes")));
    }
    Ok(Upload { question: question.or(first_text).unwrap_or_default(), file_name, bytes })
}

/// A sender's name as it may be shown: no control characters, at most `max` characters.
fn shown(s: &str, max: usize) -> String {
    s.chars().filter(|c| !c.is_control()).take(max).collect()
}
