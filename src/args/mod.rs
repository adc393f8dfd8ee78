//! Tool arguments: `mcpdev call TOOL k=v ...` → a JSON arguments object, typed by the tool's
//! `inputSchema`, plus validation with friendly messages. Pure, no I/O.
//!
//! The point of this module: a value's JSON type comes from the **declared schema type**, never
//! from what the text happens to look like. `zip=01234` stays the string `"01234"` when `zip` is
//! a string, `name=true` stays `"true"`, and `volume=50` becomes the integer `50` when `volume`
//! is an integer. Other MCP CLIs JSON-parse first and consult the schema second (or never).
//!
//! # Words
//! - `k=v`: coerced by the schema of property `k` (see [`build_arguments`] for the rules).
//! - `k:=<json>`: raw JSON, no coercion (`opts:={"x":[1,2]}`, `name:=null`).
//! - `a.b=v`: nested object `{"a":{"b":v}}`, typed by `properties.a.properties.b`. A property
//!   whose own name contains dots (`"self.x"`) is matched literally first (longest match wins).
//! - `k=` (nothing after `=`): the empty string for string-typed properties, an error otherwise.
//!
//! # Two separate steps
//! [`build_arguments`] reports syntax and coercion problems (bad word, `50.5` for an integer,
//! unknown argument). [`validate`] runs the JSON Schema rules (`required`, ranges, lengths,
//! patterns, …) through the `jsonschema` crate and explains every failure, in the schema's
//! property order. The caller runs both.
//!
//! Property order is the order of the `serde_json::Map` the schema was parsed into: declaration
//! order only when serde_json's `preserve_order` feature is on, alphabetical otherwise.
//!
//! One job per file: [`build_arguments`] (words to an object) in `build`, value typing in
//! `coerce`, schema reading in `schema`, [`validate`] in `validate` (with its quick yes for the
//! schemas devices declare, [`quickly_accepts`], in `fast`), texts for people (and
//! [`signature`]) in `render`, [`suggest`] in `suggest`, [`ArgError`] in `error`.

mod build;
mod coerce;
mod error;
mod fast;
#[cfg(test)]
mod fast_tests;
mod render;
mod schema;
mod suggest;
#[cfg(test)]
mod test_schemas;
#[cfg(test)]
mod tests;
mod validate;
#[cfg(test)]
mod validate_tests;

pub use build::build_arguments;
pub use error::ArgError;
pub use fast::accepts as quickly_accepts;
pub use render::signature;
pub use suggest::suggest;
pub use validate::{validate, validate_object};
