//! Why a request to the device got no answer ([`Silence`]): its deadline passed, or the device
//! was gone. Every transport of a check (`--listen`, `--mqtt`, through a hub) says it the same way.
//!
//! Rules it enforces: a reason that the device was gone starts with [`GONE`], so
//! [`super::Results`] counts every failure that says it as one missing answer.

/// How a reason says the device was gone ([`Silence::Gone`]): [`super::Results`] counts every
/// failure that says it as one missing answer.
pub const GONE: &str = "the device disconnected";

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Silence {
    Timeout,
    Gone(String),
}

impl std::fmt::Display for Silence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Silence::Timeout => write!(f, "no answer within the timeout"),
            Silence::Gone(why) => write!(f, "{GONE} ({why})"),
        }
    }
}
